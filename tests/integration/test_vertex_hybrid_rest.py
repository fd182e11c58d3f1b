"""VertexVectorSearchIndex over the real REST client against the Vector Search stand-in's HTTP server:
hybrid queries (dense + sparse, RRF) in the v1 REST shapes, end to end."""

from __future__ import annotations

import numpy as np
import pytest

from shared.adapters.gcp.vector_search_rest import VectorSearchRest
from shared.adapters.gcp.vertex_index import VertexVectorSearchIndex
from shared.contract.errors import PermanentError, RetryableError
from shared.contract.ports import Chunk
from tests.fake_vector_search import FakeMatchingEngine, FakeVectorSearchServer
from tests.fakes import InMemoryStateStore

pytestmark = pytest.mark.integration

DIM = 8
INDEX = "projects/p/locations/europe-west4/indexes/123"
ENDPOINT = "projects/p/locations/europe-west4/indexEndpoints/456"


@pytest.fixture
def served():
    engine = FakeMatchingEngine(dimension=DIM)
    with FakeVectorSearchServer(engine, index=INDEX, endpoint=ENDPOINT) as server:
        rest = VectorSearchRest(INDEX, ENDPOINT, api_base=server.url, token=lambda: "token-1")
        yield server, VertexVectorSearchIndex(rest, engine.deployed_index_id, InMemoryStateStore(), dimension=DIM)
        rest.close()


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_a_hybrid_query_travels_as_rest_and_finds_what_only_keywords_find(served):
    server, index = served
    rng = np.random.default_rng(4)
    for n in range(30):
        text = "zstd level 19 is slow" if n == 7 else f"compression notes, part {n}"
        index.upsert(f"d{n}", [Chunk(chunk_id=f"d{n}:0", document_id=f"d{n}", ordinal=0, text=text, title="notes")],
                     _unit(rng.normal(size=DIM)).reshape(1, -1))
    hits = index.search("zstd", _unit(rng.normal(size=DIM)), 3, mode="bm25")
    assert [h.chunk.chunk_id for h in hits] == ["d7:0"]
    hybrid = index.search("how slow is zstd", _unit(rng.normal(size=DIM)), 30, mode="hybrid")
    assert "d7:0" in [h.chunk.chunk_id for h in hybrid]
    # what went over the wire: the v1 paths and bodies, the token, the endpoint's domain read once
    posts = [(path, body) for method, path, body, _ in server.requests if method == "POST"]
    assert posts[0][0] == f"/v1/{INDEX}:upsertDatapoints"
    point = posts[0][1]["datapoints"][0]
    assert set(point) >= {"datapointId", "featureVector", "sparseEmbedding", "restricts"}
    finds = [body for path, body in posts if path == f"/v1/{ENDPOINT}:findNeighbors"]
    assert finds[-1]["deployedIndexId"] == "ragbus_deployed"
    (query,) = finds[-1]["queries"]
    assert query["rrf"] == {"alpha": 0.5} and query["neighborCount"] == 150  # max(50, 5k) for k=30
    assert set(query["datapoint"]) >= {"featureVector", "sparseEmbedding"}
    assert [m for m, p, _, _ in server.requests if m == "GET"] == ["GET"]  # publicEndpointDomainName, once
    assert all(h.get("Authorization") == "Bearer token-1" for _, _, _, h in server.requests)


def test_the_service_refusing_a_body_is_permanent_and_an_unreachable_one_retryable(served):
    server, index = served
    index.upsert("d", [Chunk(chunk_id="d:0", document_id="d", ordinal=0, text="a b c words", title="t")],
                 _unit(np.ones(DIM)).reshape(1, -1))
    index.dimension = DIM + 1  # the index was built for another dimension: the service answers 400
    with pytest.raises(PermanentError, match="InvalidArgument|400"):
        index.search("words", _unit(np.ones(DIM + 1)), 3, mode="dense")
    index.dimension = DIM
    rest = VectorSearchRest(INDEX, ENDPOINT, api_base="http://127.0.0.1:9", token=lambda: None,
                            query_base="http://127.0.0.1:9")
    offline = VertexVectorSearchIndex(rest, "ragbus_deployed", InMemoryStateStore(), dimension=DIM)
    with pytest.raises(RetryableError, match="Vector Search"):
        offline.search("words", _unit(np.ones(DIM)), 3, mode="dense")
    rest.close()
