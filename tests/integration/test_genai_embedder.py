"""GenAiEmbedder against a local server speaking the Gemini / Vertex AI embedding REST API.

The real google-genai client does the HTTP; the server checks what arrives
(model, texts, task type, dimension, batch sizes) and answers with vectors that
are deterministic functions of the text and deliberately not unit length.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from google import genai
from google.genai import types

from shared.adapters.gcp.genai_embedder import GenAiEmbedder
from shared.contract.config import Settings, load_settings
from shared.contract.errors import ConfigError, InvalidInput, PermanentError, RetryableError
from shared.contract.ports import Embedder
from tests.integration.fake_genai_embed import FakeEmbeddingServer, text_vector

DIM = 16


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer() as fake:
        yield fake


def api_key_client(server: FakeEmbeddingServer) -> genai.Client:
    return genai.Client(api_key="test", http_options=types.HttpOptions(base_url=server.url))


def vertex_client(server: FakeEmbeddingServer) -> genai.Client:
    return vertex_client_at(server, "europe-west4")


def vertex_client_at(server: FakeEmbeddingServer, location: str) -> genai.Client:
    from google.oauth2.credentials import Credentials

    return genai.Client(
        enterprise=True,
        project="ragbus-test",
        location=location,
        credentials=Credentials(token="test-token"),
        http_options=types.HttpOptions(base_url=server.url),
    )


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def embedder(server: FakeEmbeddingServer, sleeps: Sleeps) -> GenAiEmbedder:
    return GenAiEmbedder(api_key_client(server), dimension=DIM, sleep=sleeps)


def expected(text: str) -> np.ndarray:
    v = text_vector(text, DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


# ------------------------------------------------------------ the port


def test_it_satisfies_the_port(embedder: GenAiEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert (embedder.model_name, embedder.dimension, embedder.max_tokens) == (
        "gemini-embedding-001",
        DIM,
        2048,
    )


def test_request_shape_in_api_key_mode(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder
) -> None:
    texts = ["Glaciers retreat.", "Qubits decohere.", "Feeds are polled."]
    embedder.embed(texts)
    (request,) = server.requests
    assert request.path in {"/v1beta/models/gemini-embedding-001:batchEmbedContents",
                            "/v1/models/gemini-embedding-001:batchEmbedContents"}
    assert request.headers.get("x-goog-api-key") == "test"
    assert request.texts == texts
    assert request.task_types == ["RETRIEVAL_DOCUMENT"] * 3
    assert request.dimensions == [DIM] * 3
    assert {r["model"] for r in request.body["requests"]} == {"models/gemini-embedding-001"}


def test_queries_are_embedded_as_queries_and_documents_as_documents(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder
) -> None:
    from services.retriever.handler import search_all
    from shared.contract.ports import embed_queries

    embed_queries(embedder, ["why do glaciers retreat?"])
    embedder.embed(["Glaciers retreat."])
    assert [r.task_types for r in server.requests] == [["RETRIEVAL_QUERY"], ["RETRIEVAL_DOCUMENT"]]

    class NoIndex:
        def search(self, query, vector, k, mode="hybrid"):
            return []

    server.requests.clear()
    search_all([("main", "glacier retreat"), ("sub", "ice sheets")], embedder=embedder, index=NoIndex(), k=3)
    (request,) = server.requests  # the retriever's one batch for every (sub-)query
    assert request.task_types == ["RETRIEVAL_QUERY"] * 2


def test_vectors_are_the_models_normalised_and_in_order(embedder: GenAiEmbedder) -> None:
    texts = [f"text number {i}" for i in range(7)]
    vectors = embedder.embed(texts)
    assert vectors.shape == (7, DIM) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vector, expected(text), rtol=1e-5, atol=1e-6)
    assert embedder.embed([]).shape == (0, DIM)


def test_batches_stay_under_the_text_cap(server: FakeEmbeddingServer, sleeps: Sleeps) -> None:
    embedder = GenAiEmbedder(api_key_client(server), dimension=DIM, sleep=sleeps)
    texts = [f"chunk {i}" for i in range(230)]
    vectors = embedder.embed(texts)
    # the batches go out together, so they arrive in any order
    assert sorted(len(r.texts) for r in server.requests) == [30, 100, 100]
    assert sorted(t for r in server.requests for t in r.texts) == sorted(texts)
    np.testing.assert_allclose(vectors[229], expected("chunk 229"), rtol=1e-5, atol=1e-6)


def test_batches_stay_under_the_token_cap(server: FakeEmbeddingServer, sleeps: Sleeps) -> None:
    embedder = GenAiEmbedder(
        api_key_client(server), dimension=DIM, max_tokens=100, max_batch_tokens=250, sleep=sleeps
    )
    text = " ".join(["word"] * 45)  # 45 words of 4 letters: 90 estimated tokens
    assert embedder.count_tokens(text) == 90
    embedder.embed([text] * 5)
    assert sorted(len(r.texts) for r in server.requests) == [1, 2, 2]


def test_a_500_is_retried_then_succeeds(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder, sleeps: Sleeps
) -> None:
    server.fail(500)
    vectors = embedder.embed(["after a hiccup"])
    np.testing.assert_allclose(vectors[0], expected("after a hiccup"), rtol=1e-5, atol=1e-6)
    assert len(server.requests) == 2
    assert sleeps == [1.0]


def test_persistent_429_becomes_retryable_after_every_attempt(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder, sleeps: Sleeps
) -> None:
    server.fail(429, times=10)
    with pytest.raises(RetryableError, match="failed 4 times.*HTTP 429"):
        embedder.embed(["rate limited"])
    assert len(server.requests) == 4
    assert sleeps == [1.0, 2.0, 4.0]


def test_a_400_is_permanent_and_not_retried(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder
) -> None:
    server.fail(400)
    with pytest.raises(PermanentError, match="HTTP 400"):
        embedder.embed(["bad request"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        "this is not JSON",
        '{"embeddings": [{"values": "not numbers"}]}',
        '{"embeddings": []}',
        '{"embeddings": [{"values": []}]}',
        '{"embeddings": [{"values": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}]}',
        '{"something": "else"}',
    ],
)
def test_a_malformed_reply_is_retryable(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder, body: str
) -> None:
    server.reply_raw(body)
    with pytest.raises(RetryableError):
        embedder.embed(["one text"])


def test_vectors_of_the_wrong_size_are_a_config_error(sleeps: Sleeps) -> None:
    with FakeEmbeddingServer(dimension_override=DIM + 1) as server:
        embedder = GenAiEmbedder(api_key_client(server), dimension=DIM, sleep=sleeps)
        with pytest.raises(ConfigError, match="17-dimensional"):
            embedder.embed(["too wide"])


def test_an_unreachable_service_is_retryable(sleeps: Sleeps) -> None:
    with FakeEmbeddingServer() as server:
        url = server.url
    client = genai.Client(api_key="test", http_options=types.HttpOptions(base_url=url))
    embedder = GenAiEmbedder(client, dimension=DIM, attempts=2, sleep=sleeps)
    with pytest.raises(RetryableError, match="failed 2 times"):
        embedder.embed(["nobody listens"])
    assert sleeps == [1.0]


# ------------------------------------------------------ never truncated


def test_a_text_over_the_limit_is_refused_before_any_request(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder
) -> None:
    long_text = "tokenisation " * 700  # 12 letters: 4 estimated tokens a word, 2800 in all
    with pytest.raises(
        InvalidInput, match="text 1 .* about 2800 tokens.*refused rather than truncated"
    ):
        embedder.embed(["short", long_text])
    with pytest.raises(InvalidInput, match="empty"):
        embedder.embed(["fine", "   "])
    assert server.requests == []


def test_chunks_cut_with_its_token_spans_are_all_accepted(
    server: FakeEmbeddingServer, embedder: GenAiEmbedder
) -> None:
    from services.indexer.chunking import chunk_text

    text = Path("shared/corpus/docs/grading-retrieved-contexts.md").read_text() * 3
    small = GenAiEmbedder(embedder.client, dimension=DIM, max_tokens=300)
    pieces = chunk_text(text, small.token_spans, small.max_tokens)
    assert len(pieces) > 5
    assert all(small.count_tokens(p) <= 300 for p in pieces)
    assert small.embed(pieces).shape == (len(pieces), DIM)


def test_token_spans_over_estimate_a_real_subword_tokenizer() -> None:
    """On the project's corpus the estimate is at or above MiniLM's WordPiece count for every file.

    WordPiece's 30k vocabulary splits text into more pieces than Gemini's far
    larger one, so staying above it is a margin, not a measurement of Gemini.
    """
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    wordpiece = OnnxMiniLMEmbedder()
    estimator = GenAiEmbedder(client=None)
    files = [p for p in Path("shared/corpus").rglob("*") if p.suffix in {".md", ".txt", ".html"}]
    assert len(files) >= 10
    for path in files:
        text = path.read_text()
        estimate = estimator.count_tokens(text)
        assert estimate == len(estimator.token_spans(text))
        assert estimate >= wordpiece.count_tokens(text), path.name


def test_token_spans_shape() -> None:
    estimator = GenAiEmbedder(client=None)
    text = "Tokenisation of 2025's café data!"
    spans = estimator.token_spans(text)
    assert [text[a:b] for a, b in spans] == [
        "Tok",
        "eni",
        "sat",
        "ion",
        "of",
        "2",
        "0",
        "2",
        "5",
        "'",
        "s",
        "caf",
        "é",
        "dat",
        "a",
        "!",
    ]
    assert all(a < b for a, b in spans) and all(
        b <= c for (_, b), (c, _) in zip(spans, spans[1:], strict=False)
    )
    assert estimator.token_spans("   ") == []


# ------------------------------------------------------------ Vertex AI


def test_vertex_mode_posts_predict_and_refuses_truncation(
    server: FakeEmbeddingServer, sleeps: Sleeps
) -> None:
    embedder = GenAiEmbedder(
        vertex_client(server),
        "text-embedding-005",
        dimension=DIM,
        task_type="SEMANTIC_SIMILARITY",
        sleep=sleeps,
    )
    texts = [f"vertex text {i}" for i in range(260)]
    vectors = embedder.embed(texts)
    assert sorted(len(r.texts) for r in server.requests) == [10, 250]
    (first,) = [r for r in server.requests if len(r.texts) == 250]
    assert first.path == (
        "/v1beta1/projects/ragbus-test/locations/europe-west4/publishers/google/models/"
        "text-embedding-005:predict"
    )
    assert first.headers.get("Authorization") == "Bearer test-token"
    assert first.body["parameters"] == {"outputDimensionality": DIM, "autoTruncate": False}
    assert set(first.task_types) == {"SEMANTIC_SIMILARITY"}
    np.testing.assert_allclose(vectors[255], expected("vertex text 255"), rtol=1e-5, atol=1e-6)


def test_gemini_embedding_on_vertex_goes_one_text_per_call(
    server: FakeEmbeddingServer, sleeps: Sleeps
) -> None:
    embedder = GenAiEmbedder(vertex_client(server), dimension=DIM, sleep=sleeps)
    vectors = embedder.embed(["one", "two", "three"])
    assert sorted(r.texts for r in server.requests) == [["one"], ["three"], ["two"]]
    # google-genai 2.x posts :predict, 3.x :embedContent; the fake refuses more than one text either way
    assert all(r.model == "gemini-embedding-001" and r.method in {"predict", "embedContent"} for r in server.requests)
    assert all(r.auto_truncate == [False] and r.task_types == ["RETRIEVAL_DOCUMENT"] for r in server.requests)
    np.testing.assert_allclose(vectors[2], expected("three"), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------- from_settings

_EMBED_SETTINGS = ("embed_model", "embed_dimension", "embed_concurrency", "embed_timeout_s", "embed_location")


def _from_settings(settings: Settings, env: dict[str, str]) -> GenAiEmbedder:
    """As a function builds it: RAGBUS_EMBED_* read by the settings from ``env``, the API key from ``env``."""
    read = load_settings(env)
    return GenAiEmbedder.from_settings(settings.with_(**{n: getattr(read, n) for n in _EMBED_SETTINGS}), env=env)


def test_from_settings_needs_a_key_or_a_project() -> None:
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY"):
        _from_settings(Settings(), env={})
    with pytest.raises(ConfigError, match="RAGBUS_EMBED_DIMENSION"):
        _from_settings(
            Settings(), env={"GOOGLE_API_KEY": "k", "RAGBUS_EMBED_DIMENSION": "wide"}
        )


def test_from_settings_reads_model_and_dimension() -> None:
    api = _from_settings(
        Settings(),
        env={
            "GEMINI_API_KEY": "k",
            "RAGBUS_EMBED_MODEL": "text-embedding-004",
            "RAGBUS_EMBED_DIMENSION": "256",
        },
    )
    assert (api.model_name, api.dimension, api.vertexai, api.max_batch_texts) == (
        "text-embedding-004",
        256,
        False,
        100,
    )


def test_from_settings_places_each_model_where_vertex_serves_it() -> None:
    regional = _from_settings(Settings(gcp_project="p", gcp_location="europe-west4"), env={})
    assert regional.client._api_client.location == "europe-west4" and regional.max_batch_texts == 1
    second = _from_settings(  # served from global/us/eu only: Gemini's location
        Settings(gcp_project="p", gcp_location="europe-west4", gemini_location="eu"),
        env={"RAGBUS_EMBED_MODEL": "gemini-embedding-2"})
    assert second.client._api_client.location == "eu" and second.client.vertexai
    chosen = _from_settings(
        Settings(gcp_project="p", gcp_location="europe-west4"),
        env={"RAGBUS_EMBED_LOCATION": "us", "RAGBUS_EMBED_CONCURRENCY": "3"})
    assert chosen.client._api_client.location == "us" and chosen.concurrency == 3
    with pytest.raises(ConfigError, match="gemini-embedding-2 only from eu, global, us, not 'europe-west4'"):
        _from_settings(Settings(gcp_project="p"), env={
            "RAGBUS_EMBED_MODEL": "gemini-embedding-2", "RAGBUS_EMBED_LOCATION": "europe-west4"})
    with pytest.raises(ConfigError, match="RAGBUS_EMBED_LOCATION='moon'"):
        _from_settings(Settings(gcp_project="p"), env={"RAGBUS_EMBED_LOCATION": "moon"})
    with pytest.raises(ConfigError, match="RAGBUS_EMBED_CONCURRENCY"):
        _from_settings(Settings(), env={"GOOGLE_API_KEY": "k", "RAGBUS_EMBED_CONCURRENCY": "many"})
    with pytest.raises(ConfigError, match="at least 1"):
        _from_settings(Settings(), env={"GOOGLE_API_KEY": "k", "RAGBUS_EMBED_CONCURRENCY": "0"})


# ------------------------------------------------------- in parallel, bounded


def test_one_text_per_call_goes_out_in_parallel_up_to_the_bound(sleeps: Sleeps) -> None:
    texts = [f"chunk {i}" for i in range(48)]
    with FakeEmbeddingServer(delay_s=0.02) as server:
        embedder = GenAiEmbedder(vertex_client(server), dimension=DIM, concurrency=6, sleep=sleeps)
        vectors = embedder.embed(texts)
        assert len(server.requests) == 48 and 1 < server.max_in_flight <= 6
    for text, vector in zip(texts, vectors, strict=True):  # in the order given, whatever the arrival
        np.testing.assert_allclose(vector, expected(text), rtol=1e-5, atol=1e-6)
    with FakeEmbeddingServer(delay_s=0.01) as server:
        GenAiEmbedder(vertex_client(server), dimension=DIM, concurrency=1, sleep=sleeps).embed(texts[:8])
        assert server.max_in_flight == 1


def test_one_refused_batch_fails_the_call_and_the_rest_are_not_sent(sleeps: Sleeps) -> None:
    with FakeEmbeddingServer(delay_s=0.02) as server:
        server.fail(400)
        embedder = GenAiEmbedder(vertex_client(server), dimension=DIM, concurrency=2, sleep=sleeps)
        with pytest.raises(PermanentError, match="HTTP 400"):
            embedder.embed([f"chunk {i}" for i in range(40)])
        assert len(server.requests) < 40


def test_a_retried_batch_does_not_hold_up_the_others(sleeps: Sleeps) -> None:
    with FakeEmbeddingServer() as server:
        server.fail(503)
        embedder = GenAiEmbedder(vertex_client(server), dimension=DIM, concurrency=4, sleep=sleeps)
        vectors = embedder.embed([f"chunk {i}" for i in range(12)])
        assert len(server.requests) == 13 and sleeps == [1.0]
        np.testing.assert_allclose(vectors[11], expected("chunk 11"), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------- gemini-embedding-2


@pytest.mark.parametrize("vertex", [False, True])
def test_gemini_embedding_2_gets_its_task_written_into_the_text(vertex: bool, sleeps: Sleeps) -> None:
    with FakeEmbeddingServer() as server:
        client = vertex_client_at(server, "global") if vertex else api_key_client(server)
        embedder = GenAiEmbedder(client, "gemini-embedding-2", dimension=DIM, sleep=sleeps)
        documents = embedder.embed(["Glaciers retreat.", "Qubits decohere."])
        queries = embedder.embed_queries(["why do glaciers retreat?"])
        sent = sorted(t for r in server.requests for t in r.texts)
        assert sent == ["task: search result | query: why do glaciers retreat?",
                        "title: none | text: Glaciers retreat.", "title: none | text: Qubits decohere."]
        assert not any(t for r in server.requests for t in r.task_types)  # the model takes no task_type
        if vertex:
            assert {r.location for r in server.requests} == {"global"}
            assert all(len(r.texts) == 1 for r in server.requests)
    np.testing.assert_allclose(documents[0], expected("title: none | text: Glaciers retreat."), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(queries[0], expected("task: search result | query: why do glaciers retreat?"),
                               rtol=1e-5, atol=1e-6)


def test_gemini_embedding_2_at_a_regional_endpoint_is_refused_by_the_service(sleeps: Sleeps) -> None:
    with FakeEmbeddingServer() as server:
        embedder = GenAiEmbedder(vertex_client(server), "gemini-embedding-2", dimension=DIM, sleep=sleeps)
        with pytest.raises(PermanentError, match="404.*Publisher Model"):
            embedder.embed(["Glaciers retreat."])


def test_gemini_embedding_2_takes_longer_texts_and_counts_its_instruction() -> None:
    long = GenAiEmbedder(None, "gemini-embedding-2", max_tokens=8000)
    assert long.spec.input_tokens == 8192
    with pytest.raises(ConfigError, match="between 1 and gemini-embedding-001's 2048"):
        GenAiEmbedder(None, max_tokens=8000)
    full = GenAiEmbedder(None, "gemini-embedding-2", max_tokens=8192)
    text = "tok " * 8190  # 8190 estimated tokens: within max_tokens, not with "title: none | text: "
    assert full.count_tokens(text) == 8190 and full.count_tokens("title: none | text: ") == 9
    with pytest.raises(InvalidInput, match="8199 tokens with its task instruction, over gemini-embedding-2's 8192"):
        full.embed([text])
    with pytest.raises(ConfigError, match="task type 'RETRIEVAL_EVERYTHING'"):
        GenAiEmbedder(None, "gemini-embedding-2", task_type="RETRIEVAL_EVERYTHING")


# ------------------------------------------------- the retry budget fits the function


def test_every_attempt_of_a_batch_ends_before_the_function_does() -> None:
    """The old 60 s x 4 attempts + backoff (247 s) outlasted the retriever's 120 s."""
    default = _from_settings(Settings(runtime="gcp", function_timeout_s=120.0), env={"GOOGLE_API_KEY": "k"})
    assert default.client._api_client._http_options.timeout == 20_000
    assert default.retry_budget_s(20.0) == 4 * 20 + 1 + 2 + 4 == 87
    assert GenAiEmbedder(None).retry_budget_s(60.0) == 247
    with pytest.raises(ConfigError, match=r"RAGBUS_EMBEDDER=genai: .*247 s .*RAGBUS_EMBED_TIMEOUT_S=60.*120 s"):
        _from_settings(Settings(runtime="gcp", function_timeout_s=120.0),
                                    env={"GOOGLE_API_KEY": "k", "RAGBUS_EMBED_TIMEOUT_S": "60"})
    with pytest.raises(ConfigError, match="RAGBUS_EMBED_TIMEOUT_S='0'"):
        _from_settings(Settings(), env={"GOOGLE_API_KEY": "k", "RAGBUS_EMBED_TIMEOUT_S": "0"})
