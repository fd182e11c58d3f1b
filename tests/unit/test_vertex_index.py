"""VertexVectorSearchIndex beyond the shared contract: what it sends to Vector Search,
in which order relative to the state store, and how an interrupted upsert is repaired.

Vector Search is the in-memory :class:`FakeMatchingEngine`, which takes the REST API's JSON
bodies (IndexDatapoint, FindNeighborsRequest.Query) and refuses malformed ones as the service does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from google.api_core import exceptions as gexc

from shared.adapters.gcp.vertex_index import (
    CHUNKS,
    DOCUMENTS,
    VertexVectorSearchIndex,
    decode_vector,
)
from shared.contract.errors import ConfigError, PermanentError, RetryableError
from shared.contract.ports import Chunk, Doc
from tests.fake_vector_search import FakeMatchingEngine
from tests.fakes import InMemoryStateStore

DIM = 4


class LoggedState(InMemoryStateStore):
    """The in-memory store, logging chunk-record writes into a shared event list."""

    def __init__(self, log: list[tuple[str, str]]) -> None:
        super().__init__()
        self.log = log

    def put(self, collection: str, key: str, doc: Doc) -> None:
        self.log.append(("put " + collection, key))
        super().put(collection, key, doc)

    def delete(self, collection: str, key: str) -> bool:
        self.log.append(("delete " + collection, key))
        return super().delete(collection, key)

    def update(
        self, collection: str, key: str, fn: Callable[[Doc | None], Doc | None]
    ) -> Doc | None:
        self.log.append(("update " + collection, key))
        return super().update(collection, key, fn)

    def list(
        self, collection: str, where: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> list[Doc]:
        return super().list(collection, where, limit)

    def get(self, collection: str, key: str) -> Doc | None:
        self.log.append(("get " + collection, key))
        return super().get(collection, key)

    def get_many(self, collection: str, keys) -> dict[str, Doc]:  # type: ignore[no-untyped-def]
        self.log.append(("get_many " + collection, ",".join(keys)))
        return super().get_many(collection, keys)


class LoggedEngine(FakeMatchingEngine):
    log: list[tuple[str, str]]
    outcomes: list[bool]  # scripted upsert calls, in order: True fails that call

    def upsert_datapoints(self, datapoints):  # type: ignore[no-untyped-def]
        if self.outcomes and self.outcomes.pop(0):
            raise gexc.ServiceUnavailable("vector search is busy")
        for point in datapoints:
            self.log.append(("upsert_datapoints", point["datapointId"]))
        return super().upsert_datapoints(datapoints)

    def remove_datapoints(self, datapoint_ids):  # type: ignore[no-untyped-def]
        for datapoint_id in datapoint_ids:
            self.log.append(("remove_datapoints", datapoint_id))
        return super().remove_datapoints(datapoint_ids)


@pytest.fixture
def log() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def engine(log: list[tuple[str, str]]) -> LoggedEngine:
    fake = LoggedEngine(dimension=DIM)
    fake.log = log
    fake.outcomes = []
    return fake


@pytest.fixture
def state(log: list[tuple[str, str]]) -> LoggedState:
    return LoggedState(log)


@pytest.fixture
def index(engine: LoggedEngine, state: LoggedState) -> VertexVectorSearchIndex:
    return VertexVectorSearchIndex(engine, engine.deployed_index_id, state, dimension=DIM, datapoints_per_request=2)


def chunks(document_id: str, version: str, n: int) -> list[Chunk]:
    return [
        Chunk(
            chunk_id=f"{document_id}:{version}:{i}",
            document_id=document_id,
            ordinal=i,
            text=f"{version} chunk {i} of {document_id}",
            title=document_id,
        )
        for i in range(n)
    ]


def vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_datapoints_are_rest_index_datapoints_with_a_document_restrict_and_a_sparse_embedding(
    index: VertexVectorSearchIndex, engine: LoggedEngine
) -> None:
    vecs = vectors(3)
    index.upsert("doc-a", chunks("doc-a", "v1", 3), vecs)
    sent = [p for call in engine.of("upsert_datapoints") for p in call.kwargs["datapoints"]]
    assert [p["datapointId"] for p in sent] == ["doc-a:v1:0", "doc-a:v1:1", "doc-a:v1:2"]
    np.testing.assert_allclose([p["featureVector"] for p in sent], vecs, rtol=1e-6)
    for p in sent:
        assert p["restricts"] == [{"namespace": "document_id", "allowList": ["doc-a"]}]
        # BM25 term weights of the chunk's own words, one dimension per term, made at indexing
        sparse = p["sparseEmbedding"]
        assert len(sparse["dimensions"]) == len(sparse["values"]) == len({"v1", "chunk", p["datapointId"][-1:],
                                                                         "doc"}) or len(sparse["dimensions"]) >= 3
        assert sparse["dimensions"] == sorted(sparse["dimensions"]) and all(v > 0 for v in sparse["values"])
    json.dumps(sent)  # the REST body as sent


def test_requests_are_batched(index: VertexVectorSearchIndex, engine: LoggedEngine) -> None:
    index.upsert("doc-a", chunks("doc-a", "v1", 5), vectors(5))
    assert [len(c.kwargs["datapoints"]) for c in engine.of("upsert_datapoints")] == [2, 2, 1]
    index.upsert("doc-a", chunks("doc-a", "v2", 1), vectors(1))
    assert [len(c.kwargs["datapoint_ids"]) for c in engine.of("remove_datapoints")] == [2, 2, 1]


def test_records_exist_before_their_datapoints_and_outlive_them(
    index: VertexVectorSearchIndex, log: list[tuple[str, str]]
) -> None:
    index.upsert("doc-a", chunks("doc-a", "v1", 2), vectors(2))
    index.upsert("doc-a", chunks("doc-a", "v2", 2), vectors(2, seed=1))
    for chunk_id in ["doc-a:v1:0", "doc-a:v1:1", "doc-a:v2:0", "doc-a:v2:1"]:
        written = log.index(("put " + CHUNKS, chunk_id))
        assert written < log.index(("upsert_datapoints", chunk_id))
    for chunk_id in ["doc-a:v1:0", "doc-a:v1:1"]:
        assert log.index(("remove_datapoints", chunk_id)) < log.index(
            ("delete " + CHUNKS, chunk_id)
        )
    # The stale version goes only after the record names the new one.
    last_update = max(i for i, e in enumerate(log) if e == ("update " + DOCUMENTS, "doc-a"))
    assert last_update < log.index(("remove_datapoints", "doc-a:v1:0"))


def test_an_interrupted_upsert_is_repaired_by_the_next_one(
    index: VertexVectorSearchIndex, engine: LoggedEngine, state: LoggedState
) -> None:
    index.upsert("doc-a", chunks("doc-a", "v1", 2), vectors(2))
    engine.outcomes = [False, True]  # v2's second request fails: its first two datapoints are in
    with pytest.raises(RetryableError, match="ServiceUnavailable"):
        index.upsert("doc-a", chunks("doc-a", "v2", 3), vectors(3, seed=2))
    assert {"doc-a:v2:0", "doc-a:v2:1"} <= set(engine.datapoints)
    record = state.get(DOCUMENTS, "doc-a")
    assert record["chunk_ids"] == ["doc-a:v1:0", "doc-a:v1:1"]  # v1 is still the document
    assert record["pending"] == ["doc-a:v2:0", "doc-a:v2:1", "doc-a:v2:2"]
    assert index.document_chunk_ids("doc-a") == ["doc-a:v1:0", "doc-a:v1:1"]

    # The redelivered message carries newer content (v3): v1 and the half-written v2 both go.
    index.upsert("doc-a", chunks("doc-a", "v3", 1), vectors(1, seed=3))
    assert sorted(engine.datapoints) == ["doc-a:v3:0"]
    assert sorted(state.docs[CHUNKS]) == ["doc-a:v3:0"]
    assert state.get(DOCUMENTS, "doc-a")["pending"] == []
    assert (index.count_chunks(), index.count_documents()) == (1, 1)


def test_delete_after_an_interrupted_first_upsert_removes_the_pending_chunks(
    index: VertexVectorSearchIndex, engine: LoggedEngine, state: LoggedState
) -> None:
    engine.outcomes = [True]
    with pytest.raises(RetryableError):
        index.upsert("doc-b", chunks("doc-b", "v1", 2), vectors(2))
    assert index.count_documents() == 0  # never committed: not counted
    assert index.delete_document("doc-b") == 2  # the two chunk records written before the failure
    assert state.docs[CHUNKS] == {} and engine.datapoints == {}
    assert state.get(DOCUMENTS, "doc-b") is None


def test_search_skips_neighbours_without_a_record_and_rescores_exactly(
    index: VertexVectorSearchIndex, engine: LoggedEngine, state: LoggedState
) -> None:
    vecs = vectors(4, seed=5)
    index.upsert("doc-a", chunks("doc-a", "v1", 4), vecs)
    state.docs[CHUNKS].pop("doc-a:v1:0")  # as if its removal were in flight
    hits = index.search("", vecs[0], 3, mode="dense")
    assert "doc-a:v1:0" not in [h.chunk.chunk_id for h in hits]
    assert len(hits) == 3
    for hit in hits:
        exact = float(decode_vector(state.get(CHUNKS, hit.chunk.chunk_id)["vector"]) @ vecs[0])
        assert hit.dense_score == pytest.approx(exact, abs=1e-6)


def test_search_reads_every_neighbours_record_in_one_batch(
    index: VertexVectorSearchIndex, state: LoggedState, log: list[tuple[str, str]]
) -> None:
    vecs = vectors(6, seed=3)
    index.upsert("doc-a", chunks("doc-a", "v1", 6), vecs)
    log.clear()
    hits = index.search("chunk", vecs[0], 4, mode="hybrid")
    assert len(hits) == 4
    reads = [entry for entry in log if entry[0].startswith("get")]
    assert [kind for kind, _ in reads] == [f"get_many {CHUNKS}"]  # not one get per neighbour
    assert len(reads[0][1].split(",")) == 6
    log.clear()
    got = index.get_chunks(["doc-a:v1:2", "nope", "doc-a:v1:0"])
    assert [c.chunk_id for c in got] == ["doc-a:v1:2", "doc-a:v1:0"]
    assert [kind for kind, _ in log] == [f"get_many {CHUNKS}"]


@pytest.mark.parametrize(
    ("mode", "k", "pool"),
    [
        ("dense", 3, 11),
        ("hybrid", 3, 50),
        ("hybrid", 20, 100),
        ("bm25", 3, 100),
        ("bm25", 150, 1000),
    ],
)
def test_find_neighbors_gets_the_deployed_index_and_the_pool(
    index: VertexVectorSearchIndex, engine: LoggedEngine, mode: str, k: int, pool: int
) -> None:
    index.upsert("doc-a", chunks("doc-a", "v1", 2), vectors(2))
    query = vectors(1, seed=9)[0]
    index.search("chunk", query, k, mode=mode)  # type: ignore[arg-type]
    (call,) = engine.of("find_neighbors")
    assert call.kwargs["deployed_index_id"] == "ragbus_deployed"
    (sent,) = call.kwargs["queries"]
    assert sent["neighborCount"] == pool
    point = sent["datapoint"]
    if mode == "bm25":  # sparse only
        assert "featureVector" not in point and "rrf" not in sent
    else:
        np.testing.assert_allclose(point["featureVector"], query, rtol=1e-6)
        assert all(isinstance(x, float) for x in point["featureVector"])
    if mode == "dense":
        assert "sparseEmbedding" not in point and "rrf" not in sent
    else:  # "chunk" is in both chunks: its IDF is the query's one sparse weight
        assert len(point["sparseEmbedding"]["dimensions"]) == 1
    if mode == "hybrid":
        assert sent["rrf"] == {"alpha": 0.5}


def test_a_hybrid_query_finds_a_chunk_only_its_words_match(engine: LoggedEngine, state: LoggedState) -> None:
    """The identifier case: the chunk naming the error code is far from the query's vector, outside any
    dense pool, and still found, because the sparse side of the hybrid query searches every chunk."""
    index = VertexVectorSearchIndex(engine, engine.deployed_index_id, state, dimension=DIM, max_neighbors=50)
    rng = np.random.default_rng(11)
    query = np.array([1.0, 0, 0, 0], dtype=np.float32)
    for n in range(200):
        v = rng.normal(size=DIM).astype(np.float32)
        v[0] = abs(v[0]) + 3.0  # every filler chunk is nearer the query than the one that names the code
        if n == 137:
            v = np.array([-1.0, 0.2, 0.1, 0.0], dtype=np.float32)
        text = f"retry backoff settings for delivery {n}" if n != 137 else "error ERR_QUOTA_7731 means the quota ran out"
        index.upsert(f"d{n}", [Chunk(chunk_id=f"d{n}:0", document_id=f"d{n}", ordinal=0, text=text, title="t")],
                     (v / np.linalg.norm(v)).reshape(1, -1))
    question = "what does ERR_QUOTA_7731 mean"
    dense = index.search(question, query, 10, mode="dense")
    assert "d137:0" not in [h.chunk.chunk_id for h in dense]
    # the hybrid query's sparse side brings it into the candidates from anywhere in the corpus; the
    # final order is the local index's fusion (dense-led), so it is scored, not pushed to the top
    hybrid = {h.chunk.chunk_id: h for h in index.search(question, query, 10, mode="hybrid")}
    (call,) = engine.of("find_neighbors")[-1:]
    returned = [n["datapoint"]["datapointId"] for n in engine._answer(call.kwargs["queries"][0])]
    assert "d137:0" in returned[:2]  # first of the sparse ranking, fused at alpha 0.5
    scored = {h.chunk.chunk_id: h for h in index.search(question, query, 50, mode="hybrid")}
    assert scored["d137:0"].bm25_score > 0 and all(h.bm25_score == 0 for i, h in scored.items() if i != "d137:0")
    assert len(hybrid) == 10
    assert [h.chunk.chunk_id for h in index.search("ERR_QUOTA_7731", query, 3, mode="bm25")] == ["d137:0"]
    # a word no chunk holds sends no sparse part, and a bm25 search for it asks nothing
    calls = len(engine.of("find_neighbors"))
    assert index.search("zyzzyva", query, 3, mode="bm25") == [] and len(engine.of("find_neighbors")) == calls


def test_document_frequencies_are_counted_corpus_wide(index: VertexVectorSearchIndex) -> None:
    index.upsert("doc-a", chunks("doc-a", "v1", 3), vectors(3))
    index.upsert("doc-b", chunks("doc-b", "v1", 2), vectors(2, seed=1))
    assert index.document_frequency(["chunk", "doc", "zyzzyva"]) == {"chunk": 5, "doc": 5, "zyzzyva": 0}
    assert index.document_frequency(["0"]) == {"0": 0}  # one-character words are not BM25 terms


def test_refusals_are_permanent_and_outages_retryable(
    index: VertexVectorSearchIndex, engine: LoggedEngine
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise gexc.InvalidArgument("dimension mismatch")

    def outage(*args: Any, **kwargs: Any) -> Any:
        raise gexc.DeadlineExceeded("slow")

    engine.find_neighbors = refuse  # type: ignore[method-assign]
    with pytest.raises(PermanentError, match="dimension"):
        index.search("x", vectors(1)[0], 3)
    engine.find_neighbors = outage  # type: ignore[method-assign]
    with pytest.raises(RetryableError, match="DeadlineExceeded"):
        index.search("x", vectors(1)[0], 3)


def test_configuration_is_checked(engine: LoggedEngine, state: LoggedState) -> None:
    with pytest.raises(ConfigError, match="deployed index id"):
        VertexVectorSearchIndex(engine, "", state, dimension=DIM)
    with pytest.raises(ConfigError, match="dense_weight"):
        VertexVectorSearchIndex(engine, "d", state, dimension=DIM, dense_weight=2.0)


# ---------------------------------------------------------------- filters


def test_filters_become_restricts_that_vector_search_applies_before_ranking():
    from datetime import UTC, datetime

    from shared.contract.filters import Filters

    now = datetime(2026, 11, 26, tzinfo=UTC)
    engine = FakeMatchingEngine(DIM)
    index = VertexVectorSearchIndex(engine, engine.deployed_index_id, InMemoryStateStore(),
                                    dimension=DIM, max_neighbors=6)
    rng = np.random.default_rng(3)
    for n in range(40):
        feed = f"https://feed{n % 4}.example/rss"
        chunk = Chunk(chunk_id=f"d{n}:0", document_id=f"d{n}", ordinal=0, text=f"GPU note {n}",
                      url=f"https://feed{n % 4}.example/p/{n}", published=f"{2025 + n % 2}-0{n % 9 + 1}-10",
                      source="feed" if n % 5 else "sitemap", origin=feed,
                      metadata={"team": "a" if n % 3 else "b", "tag": ["gpu", f"t{n % 2}"]})
        vector = rng.normal(size=DIM).astype(np.float32)
        index.upsert(f"d{n}", [chunk], (vector / np.linalg.norm(vector)).reshape(1, -1))
    point = engine.datapoints["d1:0"]
    assert {r["namespace"]: r["allowList"] for r in point["restricts"]}["source"] == [
        "https://feed1.example", "https://feed1.example/", "https://feed1.example/p", "https://feed1.example/p/",
        "https://feed1.example/p/1", "https://feed1.example/rss"]
    assert point["numericRestricts"] == [{"namespace": "published",
                                          "valueInt": int(datetime(2026, 2, 10, tzinfo=UTC).timestamp())}]
    # a key with several values (a feed item's categories) is one namespace allowing each of them
    assert {r["namespace"]: r["allowList"] for r in point["restricts"]}["meta.tag"] == ["gpu", "t1"]
    odd = index.search("GPU", np.ones(DIM, dtype=np.float32) / 2, 5, mode="dense",
                       filters=Filters.parse(now=now, where=["tag=t1"]))
    assert len(odd) == 5 and all(int(h.chunk.document_id[1:]) % 2 == 1 for h in odd)

    f = Filters.parse(now=now, source="https://feed1.example/rss", since="2026-01-01", kind="feed", where=["team=a"])
    admitted = {c for c in (f"d{n}" for n in range(40))
                if f.matches(index.get_chunks([f"{c}:0"])[0].fields())}
    assert len(admitted) == 5
    hits = index.search("GPU", np.ones(DIM, dtype=np.float32) / 2, 5, mode="dense", filters=f)
    # A pool of 6 neighbours out of 40 datapoints: only a pre-filter finds all five.
    assert {h.chunk.document_id for h in hits} == admitted
    sent = engine.of("find_neighbors")[-1].kwargs["queries"][0]["datapoint"]
    assert [(ns["namespace"], ns["allowList"]) for ns in sent["restricts"]] == [
        ("kind", ["feed"]), ("source", ["https://feed1.example/rss"]), ("meta.team", ["a"])]
    assert [(ns["namespace"], ns["op"]) for ns in sent["numericRestricts"]] == [("published", "GREATER_EQUAL")]
    assert index.search("GPU", np.ones(DIM, dtype=np.float32) / 2, 4,
                        filters=Filters.parse(now=now, source="https://nowhere.example/")) == []
    # A Cloud Storage-style prefix that ends mid-name is restricted to its folder and checked exactly.
    assert Filters.parse(now=now, source="gs://b/rep").source == "gs://b/rep"
    assert VertexVectorSearchIndex.restricts(Filters.parse(now=now, source="gs://b/rep"))["restricts"][0][
        "allowList"] == ["gs://b/"]
    # Unfiltered searches send no restricts at all.
    index.search("GPU", np.ones(DIM, dtype=np.float32) / 2, 4)
    assert "restricts" not in engine.of("find_neighbors")[-1].kwargs["queries"][0]["datapoint"]


def test_document_frequencies_are_counted_once_per_interval_but_an_absent_term_every_time(
    index: VertexVectorSearchIndex, state: LoggedState
) -> None:
    counts: list[Mapping[str, Any] | None] = []
    real = state.count
    state.count = lambda collection, where=None: counts.append(where) or real(collection, where)  # type: ignore[method-assign]
    index.upsert("doc-a", chunks("doc-a", "v1", 2), vectors(2))
    index.search("chunk zyzzyva", vectors(1)[0], 2)
    first = len(counts)
    assert first == 3  # two terms and the corpus size
    index.search("chunk zyzzyva", vectors(1)[0], 2)
    assert len(counts) == first + 1  # only the term no chunk held is counted again
    index.upsert("doc-b", [Chunk(chunk_id="b:0", document_id="doc-b", ordinal=0, text="zyzzyva", title="b")],
                 vectors(1, seed=4))
    hits = index.search("zyzzyva", vectors(1)[0], 2, mode="bm25")
    assert [h.chunk.chunk_id for h in hits] == ["b:0"]  # found at once, not after the interval
