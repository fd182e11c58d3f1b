"""The gateway's HTTP API against a real SQLite state store, with the loop's stages
played by a scripted thread (tests/scripted_loop.py): validation, 200 vs 202,
Server-Sent Events over a real uvicorn server, OpenAPI, and the Cloud Function entry."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest
from starlette.testclient import TestClient

from services.gateway import create_app, serve
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from tests.scripted_loop import ANSWER, CONTEXTS, ContextsIndex, ScriptedLoop, WordEmbedder
from tests.support import cpu_ratio

STAGES = ["gateway", *["transformer", "retriever", "grader"] * 2, "synthesizer"]


def make_deps(tmp_path: Path, settings: Settings | None = None, **loop_options) -> Deps:
    state = SqliteStateStore(tmp_path / "state.db")
    clock = SystemClock()
    loop = ScriptedLoop(state, clock, **{"step_s": 0.02, **loop_options})
    return Deps(
        settings or Settings(home=tmp_path),
        publisher=loop,
        state=state,
        clock=clock,
        embedder=WordEmbedder(),
        index=ContextsIndex(),
    )


@pytest.fixture
def deps(tmp_path) -> Deps:
    return make_deps(tmp_path)


@pytest.fixture
def client(deps) -> Iterator[TestClient]:
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        yield client


# -------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"query": ""}, "'query' is empty; send a question of 1 to 2000 characters"),
        ({"query": "x" * 10_000}, "has 10000 characters, more than the limit of 2000"),
        ({"query": "ring the bell \x07 now"}, "control character U+0007"),
        ({"query": "escape \x1b[2J"}, "control character U+001B"),
        ({"query": 12}, "'query' must be a string, got a number"),
        ({"query": {"text": "q"}}, "'query' must be a string, got an object"),
        ({"top_k": 3}, "missing 'question'"),
        ({"question": ""}, "'question' is empty; send a question of 1 to 2000 characters"),
        ({"question": "q", "query": "q"}, "send 'question' only: 'query' is its old name"),
        ({"query": "q", "top_k": 0}, "'top_k' is 0; send a whole number from 1 to 50"),
        ({"query": "q", "top_k": 51}, "'top_k' is 51; send a whole number from 1 to 50"),
        ({"query": "q", "top_k": "10"}, "'top_k' must be a whole number from 1 to 50, got a string"),
        ({"query": "q", "max_iterations": 6}, "'max_iterations' is 6; send a whole number from 0 to 5"),
        ({"query": "q", "max_iterations": -1}, "'max_iterations' is -1"),
        ({"query": "q", "max_iterations": None}, None),  # null means the default: accepted
        ({"query": "q", "wait_s": -1}, "'wait_s' is -1; send 0 (return at once) up to 60"),
        ({"query": "q", "wait_s": "soon"}, "'wait_s' must be a number of seconds"),
        ({"query": "q", "topk": 3}, "unknown field(s) 'topk'; send only question, top_k, max_iterations, wait_s"),
        # what was sent named as JSON names it: it said "got bool", "got list", "got int"
        ({"question": "q", "conversation_id": True}, "'conversation_id' must be a string (the id an earlier answer "
                                                     "returned), got a boolean"),
        ({"question": "q", "conversation_id": ["c"]}, "returned), got a list"),
        ({"question": "q", "conversation_id": 5}, "returned), got a number"),
    ],
)
def test_bad_fields_get_400_saying_what_to_send(client, deps, body, expected):
    response = client.post("/v1/queries", json=body)
    if expected is None:
        assert response.status_code == 202
        return
    assert response.status_code == 400, response.text
    assert expected in response.json()["error"]
    assert deps.state.count(state_collections.QUERIES) == 0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"query": "unterminated', "the body is not valid JSON"),
        (b"", "the body is empty"),
        (b'["what is bm25"]', "the body must be a JSON object"),
        (b'"what is bm25"', "the body must be a JSON object"),
        (b"\xff\xfe{}", "the body is not UTF-8"),
    ],
)
def test_malformed_bodies_get_400(client, content, expected):
    response = client.post("/v1/queries", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert expected in response.json()["error"]
    assert "send" in response.json()["error"]


@pytest.mark.parametrize(("content", "key"), [
    (b'{"question": "What is BM25?", "question": "Ignore that; what is k1?"}', "question"),
    (b'{"question": "What is BM25?", "filters": {"source": "/a", "source": "/b"}}', "source"),  # nested too
])
def test_a_key_sent_twice_is_refused_naming_it(client, deps, content, key):
    # json.loads kept the last "question" silently: the client got an answer to one of the two it sent
    response = client.post("/v1/queries", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert f"names the key '{key}' twice" in response.json()["error"]
    assert deps.state.count(state_collections.QUERIES) == 0
    # the same keys in two objects are no duplicate
    same = b'{"question": "What is BM25?", "filters": {"where": {"question": "x"}}}'
    assert "twice" not in client.post("/v1/queries", content=same,
                                      headers={"Content-Type": "application/json"}).text


def test_an_oversized_body_is_refused_before_parsing(client):
    response = client.post("/v1/queries", content=b'{"query": "' + b"x" * 70_000 + b'"}',
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "larger than 65536 bytes" in response.json()["error"]


@pytest.mark.parametrize("path, declared", [("/v1/queries", 70_000), ("/v1/queries/q1/feedback", 70_000),
                                            ("/v1/chat/completions", 2_000_000)])
def test_a_body_declared_past_the_bound_is_refused_at_once_not_waited_for(server, path, declared):
    # the two bytes sent stop short of the Content-Length: the body was waited for until the 30 s read timeout (408)
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {declared}\r\n\r\n{{}}".encode())
        head = connection.recv(200)  # (before, the 10 s socket timeout ran out first: 408 came after 30 s)
    assert head.startswith(b"HTTP/1.1 413"), head


# ----------------------------------------------------------- 200 vs 202


def test_a_query_that_ends_within_wait_s_returns_200_with_the_record(client):
    response = client.post("/v1/queries", json={"query": "what is bm25", "top_k": 5, "wait_s": 10})
    assert response.status_code == 200
    record = response.json()
    assert (record["status"], record["outcome"], record["answer"]) == ("answered", "answered", ANSWER)
    assert record["top_k"] == 5
    assert [c["id"] for c in record["citations"]] == [1, 2, 3]
    assert [e["stage"] for e in record["events"]] == STAGES


def test_without_wait_the_query_is_accepted_with_where_to_follow_it(client):
    response = client.post("/v1/queries", json={"query": "what is bm25"})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending"
    assert body["status_url"] == f"/v1/queries/{body['id']}"
    assert body["events_url"] == f"/v1/queries/{body['id']}/events"
    assert response.headers["location"] == body["status_url"]
    followed = client.get(body["status_url"])
    assert followed.status_code == 200
    assert followed.json()["id"] == body["id"]


def test_a_query_still_running_when_wait_s_elapses_returns_202(tmp_path):
    deps = make_deps(tmp_path, hang=True)
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        response = client.post("/v1/queries", json={"query": "nobody answers", "wait_s": 0.3})
        assert response.status_code == 202
        assert client.get(response.headers["location"]).json()["status"] == "pending"


def test_a_long_wait_is_capped_and_still_ends_with_the_query_deadline(tmp_path):
    deps = make_deps(tmp_path, Settings(home=tmp_path, query_timeout_s=1.0), hang=True)
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        response = client.post("/v1/queries", json={"query": "nobody answers", "wait_s": 10_000})
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["outcome"]) == ("timed_out", "timed_out")


def test_unknown_query_is_404_with_a_message(client):
    response = client.get("/v1/queries/0123456789abcdef")
    assert response.status_code == 404
    assert response.json() == {
        "error": "no query with id '0123456789abcdef'; submit one with POST /v1/queries"
    }
    assert client.get("/v1/queries/0123456789abcdef/events").status_code == 404


def test_a_bus_that_refuses_the_message_is_503(tmp_path):
    deps = make_deps(tmp_path, fail_publish=RetryableError("bus.db is locked"))
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        response = client.post("/v1/queries", json={"query": "q"})
    assert response.status_code == 503
    assert "bus.db is locked" in response.json()["error"]
    assert response.headers["retry-after"] == "2"
    [record] = deps.state.list(state_collections.QUERIES)
    assert record["status"] == "failed"


def test_unknown_routes_and_methods_answer_in_the_error_shape(client):
    missing = client.get("/v2/queries")
    assert missing.status_code == 404
    assert "see /openapi.json" in missing.json()["error"]
    wrong = client.put("/v1/queries", json={})
    assert wrong.status_code == 405
    assert wrong.json()["error"].startswith("PUT is not allowed on /v1/queries")


def test_health(client):
    assert client.get("/healthz").json() == {"status": "ok", "runtime": "local"}


# ------------------------------------------------------------------ search


def test_search_returns_chunks_best_first(client):
    response = client.get("/v1/search", params={"q": "dense retrieval embeds queries", "k": 2})
    assert response.status_code == 200
    body = response.json()
    assert (body["query"], body["k"]) == ("dense retrieval embeds queries", 2)
    assert body["results"][0]["chunk_id"] == CONTEXTS[1]["chunk_id"]
    assert [r["rank"] for r in body["results"]] == [1, 2]
    assert body["results"][0]["score"] >= body["results"][1]["score"]
    # the query echoed is the one searched: no bidirectional override shows it reordered
    assert client.get("/v1/search", params={"q": "dense \u202eretrieval\u202c"}).json()["query"] == "dense retrieval"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "missing 'q'"),
        ({"q": ""}, "'q' is empty"),
        ({"q": "bm25", "k": "ten"}, "'k' must be a whole number, got 'ten'"),
        ({"q": "bm25", "k": "0"}, "'k' is 0; send a whole number from 1 to 50"),
        ({"q": "bm25", "k": "51"}, "'k' is 51"),
        ({"q": "bm25", "k": "\u0665"}, "'k' must be a whole number, got '\u0665'"),  # int() read Arabic-Indic 5
        ({"q": "bm25", "k": "1_0"}, "'k' must be a whole number, got '1_0'"),
    ],
)
def test_search_refuses_bad_parameters(client, params, expected):
    response = client.get("/v1/search", params=params)
    assert response.status_code == 400
    assert expected in response.json()["error"]


# ----------------------------------------------------------------- OpenAPI


def test_openapi_document_describes_every_route_and_validates_real_responses(client, deps):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    doc = json.loads(response.text)
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {
        "/v1/queries", "/v1/queries/{query_id}", "/v1/queries/{query_id}/events", "/v1/queries/{query_id}/trace",
        "/v1/queries/{query_id}/feedback", "/v1/search", "/healthz", "/readyz", "/openapi.json", "/v1/dead-letters", "/v1/dead-letters/retry",
        "/v1/dead-letters/{letter_id}", "/v1/dead-letters/{letter_id}/retry",
        "/v1/conversations/{conversation_id}", "/v1/models", "/v1/models/{model_id}", "/v1/chat/completions",
    }
    assert set(doc["paths"]["/v1/queries"]["post"]["responses"]) >= {"200", "202", "400"}
    schemas = doc["components"]["schemas"]
    for schema in schemas.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    # every $ref points at a schema that exists
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert refs and all(ref.removeprefix("#/components/schemas/") in schemas for ref in refs)

    def check(instance, name):
        schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        jsonschema.Draft202012Validator(schema).validate(instance)

    check({"query": "q", "top_k": 3, "max_iterations": 1, "wait_s": 2}, "QueryRequest")
    check({"question": "q", "top_k": 3}, "QueryRequest")
    for bad in ({"query": "q", "top_k": 0}, {"top_k": 3}, {"question": "q", "query": "q"}):
        with pytest.raises(jsonschema.ValidationError):
            check(bad, "QueryRequest")
    check(client.post("/v1/queries", json={"query": "what is bm25", "wait_s": 10}).json(), "QueryRecord")
    asked = client.post("/v1/queries", json={"question": "what is bm25", "wait_s": 10}).json()
    check(asked, "QueryRecord")
    assert asked["original_query"] == "what is bm25" and asked["status"] == "answered"
    # the scripted loop has no transformer: the time reading is the real transformer's, on the real clock
    from services.transformer.handler import question_time_filter
    from shared.query.record import QueryRecord

    timed = QueryRecord.from_doc({**asked, "original_query": "what is the latest on bm25",
                                  "standalone_question": None, "filters": None})
    timed.filters, timed.time_filter = question_time_filter(timed, deps.clock.now())
    timed.time_filter["widened"] = ["since 2026-05-30", "any date"]
    check(timed.to_doc(), "QueryRecord")
    with pytest.raises(jsonschema.ValidationError):
        check({**timed.to_doc(), "time_filter": {**timed.time_filter, "widened": "any date"}}, "QueryRecord")
    check(client.post("/v1/queries", json={"query": "what is bm25"}).json(), "QueryAccepted")
    check(client.post("/v1/queries", json={"query": ""}).json(), "Error")
    check(client.get("/v1/search", params={"q": "bm25"}).json(), "SearchResponse")
    check(client.get("/healthz").json(), "Health")
    check(client.get("/readyz").json(), "Readiness")
    assert doc["paths"]["/v1/queries"]["post"]["requestBody"]["content"]["application/json"]["schema"][
        "$ref"
    ].endswith("QueryRequest")
    assert schemas["QueryRequest"]["properties"]["query"]["maxLength"] == deps.settings.max_query_chars


# -------------------------------------------------------------------- SSE


def read_sse(response: httpx.Response) -> list[tuple[str | None, str, dict]]:
    """(id, event, data) of every event in the stream, until it closes."""
    events, fields = [], {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                events.append((fields.get("id"), fields.get("event", "message"), json.loads(fields["data"])))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    return events


@pytest.fixture
def server(deps):
    handle = serve(deps, "127.0.0.1", 0)
    yield handle
    handle.stop()


def test_events_arrive_in_order_and_end_with_the_final_record(server, deps):
    deps.publisher.step_s = 0.05  # slow enough that the stream sees the stages happen
    with httpx.Client(base_url=server.url, timeout=20) as http:
        accepted = http.post("/v1/queries", json={"query": "what is bm25"}).json()
        with http.stream("GET", accepted["events_url"]) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            events = read_sse(response)
    names = [name for _, name, _ in events]
    assert names == [*STAGES, "end"]
    assert [event_id for event_id, _, _ in events[:-1]] == [str(n) for n in range(len(STAGES))]
    assert [data["type"] for _, _, data in events[:-1]] == [
        "submitted", *["transformed", "retrieved", "graded"] * 2, "answered",
    ]
    assert [data["iteration"] for _, _, data in events[1:-1]] == [0, 0, 0, 1, 1, 1, 1]
    final = events[-1][2]
    assert (final["id"], final["status"], final["answer"]) == (accepted["id"], "answered", ANSWER)
    assert len(final["events"]) == len(STAGES)


def test_a_reconnecting_client_resumes_after_its_last_event(server):
    with httpx.Client(base_url=server.url, timeout=20) as http:
        record = http.post("/v1/queries", json={"query": "what is bm25", "wait_s": 10}).json()
        assert record["status"] == "answered"
        url = f"/v1/queries/{record['id']}/events"
        with http.stream("GET", url, headers={"Last-Event-ID": "5"}) as response:
            events = read_sse(response)
        assert [(i, name) for i, name, _ in events] == [("6", "grader"), ("7", "synthesizer"), (None, "end")]
        bad = http.get(url, headers={"Last-Event-ID": "abc"})
        assert bad.status_code == 400


def test_a_streams_numbers_are_ascii_digits():
    # float() and int() took '1_0' and '\u0663' (Arabic-Indic 3) as a timeout and a Last-Event-ID (newcomer16)
    from services.gateway.queries import _resume_index, _stream_seconds

    assert (_resume_index("4"), _resume_index("-2"), _stream_seconds("0.5", None), _stream_seconds("1e2", None)) \
        == (5, 0, 0.5, 100.0)
    for raw in ("1_0", "\u0663", " 2", "0x1"):
        with pytest.raises(InvalidInput, match="is not an event index"):
            _resume_index(raw)
        with pytest.raises(InvalidInput, match="must be a number of seconds"):
            _stream_seconds(raw, None)


def test_a_long_timeout_is_refused_in_linear_time():
    # '[0-9]+\.?[0-9]*' split a digit run every way before failing: 'timeout_s=111...1x' (16,000 digits) held the
    # event loop 7.9 s (review of 6dd6d4f); the pattern is linear, and a value past 32 characters is not matched
    from services.gateway.queries import _DECIMAL, _stream_seconds

    texts = {n: "1" * n + "x" for n in (500, 4000)}
    assert cpu_ratio(lambda n: _DECIMAL.fullmatch(texts[n]), 500, 4000) < 24  # linear: about 8; quadratic: about 64
    assert [bool(_DECIMAL.fullmatch(raw)) for raw in ("1", "1.", ".5", "1e3", "-2.5E-1", "1_0", "\u0665", "inf", ".")] \
        == [True] * 5 + [False] * 4
    assert _stream_seconds("0.5" + "0" * 29, None) == 0.5
    with pytest.raises(InvalidInput, match="must be a number of seconds"):
        _stream_seconds("0.5" + "0" * 30, None)


def test_the_stream_ends_by_itself_when_the_query_does_not(tmp_path):
    deps = make_deps(tmp_path, hang=True)
    handle = serve(deps, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=handle.url, timeout=20) as http:
            accepted = http.post("/v1/queries", json={"query": "nobody answers"}).json()
            with http.stream("GET", accepted["events_url"], params={"timeout_s": "0.5"}) as response:
                events = read_sse(response)
            assert [name for _, name, _ in events] == ["gateway", "end"]
            assert events[-1][2]["status"] == "pending"
            assert http.get(accepted["events_url"], params={"timeout_s": "0"}).status_code == 400
    finally:
        handle.stop()


def test_a_hung_query_times_out_and_the_stream_reports_it(tmp_path):
    deps = make_deps(tmp_path, Settings(home=tmp_path, query_timeout_s=1.0), hang=True)
    handle = serve(deps, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=handle.url, timeout=20) as http:
            accepted = http.post("/v1/queries", json={"query": "nobody answers"}).json()
            with http.stream("GET", accepted["events_url"]) as response:
                events = read_sse(response)
    finally:
        handle.stop()
    assert [(name, data.get("type")) for _, name, data in events[:-1]] == [
        ("gateway", "submitted"), ("runtime", "timed_out"),
    ]
    assert events[-1][2]["status"] == "timed_out"


def test_serve_reports_a_port_it_cannot_take(server, deps):
    with pytest.raises(InvalidInput, match=f"cannot listen on 127.0.0.1:{server.port}: Address already in use"):
        serve(deps, "127.0.0.1", server.port)
    with pytest.raises(InvalidInput, match="port 65536 is not a TCP port"):
        serve(deps, "127.0.0.1", 65536)


# ---------------------------------------------------- Cloud Function entry


def test_the_cloud_function_entry_serves_the_whole_gateway(tmp_path, monkeypatch):
    import functions_framework

    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGBUS_TRACING", "0")
    source = Path(__file__).resolve().parents[2] / "services" / "gateway" / "main.py"
    app = functions_framework.create_app(target="gateway", source=str(source))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/healthz").json() == {"status": "ok", "runtime": "local"}
        accepted = client.post("/v1/queries", json={"query": "what is bm25?"})
        assert accepted.status_code == 202
        # nothing runs the loop here: the record waits in the real SQLite state
        record = client.get(accepted.headers["location"]).json()
        assert (record["status"], record["original_query"]) == ("pending", "what is bm25?")
        assert client.post("/v1/queries", json={"query": ""}).status_code == 400
        assert client.get("/").headers["content-type"].startswith("text/html")
        assert "/v1/queries" in client.get("/openapi.json").json()["paths"]
        # the MCP session manager only answers when the app's lifespan was started
        initialize = client.post(
            "/mcp",
            headers={"Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}},
        )
        assert initialize.status_code == 200, initialize.text
        assert '"serverInfo"' in initialize.text and '"ragbus"' in initialize.text
    assert (tmp_path / "home" / "ragbus.db").exists()


def test_the_trace_of_a_query_is_served_as_waterfall_rows(tmp_path):
    """Spans stored by the local span store come back depth-first with offsets and labels."""
    from opentelemetry import trace as otel_trace

    from services.gateway.app import create_app
    from shared.contract.config import load_settings
    from shared.observability.tracing import tracer
    from shared.query.api import submit_query
    from shared.runtime.bootstrap import build_local

    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path)}))
    with tracer().start_as_current_span("outer request"):
        record = submit_query(local.deps, "what is a trace?").to_doc()
        with tracer().start_as_current_span("grader.contexts-retrieved process") as span:
            span.set_attribute("rag.iteration", 0)
            span.set_attribute("rag.grade.score", 0.5)
    otel_trace.get_tracer_provider().force_flush()
    with TestClient(create_app(local.deps), base_url="http://127.0.0.1") as client:
        body = client.get(f"/v1/queries/{record['id']}/trace").json()
        assert body["trace_id"] == record["trace_id"]
        names = [r["name"] for r in body["rows"]]
        assert names[0] == "outer request" and "gateway submit" in names
        (graded,) = [r for r in body["rows"] if r["name"] == "grader.contexts-retrieved process"]
        assert graded["depth"] == 1 and "score 0.50" in graded["label"] and graded["offset_ms"] >= 0
        assert client.get("/v1/queries/nope/trace").status_code == 404


def test_the_sample_corpus_is_served_where_the_demo_citations_point(deps):
    """`ragbus demo` feeds /sample/feed.xml from its gateway; `ragbus serve` keeps those URLs alive."""
    server = serve(deps, "127.0.0.1", 0)
    try:
        feed = httpx.get(f"{server.url}/sample/feed.xml")
        assert feed.status_code == 200 and "rss" in feed.headers["content-type"]
        assert "{{BASE}}" not in feed.text
        links = [line.split("<link>")[1].split("</link>")[0] for line in feed.text.splitlines() if "<link>" in line]
        articles = [link for link in links if "/articles/" in link]
        assert articles and all(link.startswith(f"{server.url}/sample/articles/") for link in articles)
        page = httpx.get(articles[0])
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        index = httpx.get(f"{server.url}/sample/")  # the site's root lists what it serves, each link opening
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert f'href="{server.url}/sample/feed.xml"' in index.text and articles[0] in index.text
        for escape in ("/sample/../../shared/config.py", "/sample/%2e%2e/%2e%2e/README.md", "/sample/nope.html"):
            assert httpx.get(f"{server.url}{escape}").status_code == 404, escape
    finally:
        server.stop()


def test_questions_past_the_queue_cap_are_refused_with_retry_after_until_one_ends(tmp_path, monkeypatch):
    """RAGBUS_MAX_QUEUED_QUERIES bounds the backlog: one more question is refused at once (429, Retry-After,
    on REST and chat completions alike), nothing queued for it; once a queued query ends, one is taken again."""
    monkeypatch.setattr("services.gateway.backlog.RECHECK_S", 0.0)
    deps = make_deps(tmp_path, Settings(home=tmp_path, max_queued_queries=2), hang=True)
    handle = serve(deps, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=handle.url, timeout=20) as http:
            queued = [http.post("/v1/queries", json={"question": f"what is queued {n}?"}) for n in range(2)]
            assert [r.status_code for r in queued] == [202, 202]
            refused = http.post("/v1/queries", json={"question": "one too many?"})
            assert refused.status_code == 429
            assert 1 <= int(refused.headers["Retry-After"]) <= 5
            assert "2 questions are already queued or running here" in refused.json()["error"]
            assert "RAGBUS_MAX_QUEUED_QUERIES" in refused.json()["error"]
            chat = http.post("/v1/chat/completions", json={"model": "ragbus", "messages": [
                {"role": "user", "content": "one too many?"}]})
            assert chat.status_code == 429 and "Retry-After" in chat.headers
            assert chat.json()["error"]["type"] == "rate_limit_exceeded" and chat.json()["error"]["code"] == "queue_full"
            assert len(deps.publisher.messages) == 2  # nothing was queued for the refused ones

            def answered(doc):
                return {**doc, "status": "answered", "outcome": "answered", "answer": "done"}

            deps.state.update(state_collections.QUERIES, queued[0].json()["id"], answered)
            assert http.post("/v1/queries", json={"question": "taken now?"}).status_code == 202
    finally:
        handle.stop()
