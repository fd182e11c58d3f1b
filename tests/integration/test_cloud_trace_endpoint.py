"""GET /v1/queries/{id}/trace on Google Cloud reads the trace from Cloud Trace.

A loopback server speaks the Cloud Trace API v1 ``projects.traces.get`` as documented
(``GET /v1/projects/{projectId}/traces/{traceId}`` answering a ``Trace`` with
``TraceSpan``s: decimal span ids, RFC 3339 nanosecond times, string labels; Google's
error JSON otherwise) and checks the bearer token the reader sends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials
from starlette.testclient import TestClient

from services.gateway import create_app
from services.gateway import traces as gateway_traces
from shared.adapters.gcp.cloud_trace import CloudTraceReader, TraceUnavailable, _nanos, trace_spans
from shared.contract.config import Settings
from shared.observability.tracing import tracer_provider
from tests.integration.test_gateway_http import make_deps

PROJECT = "proj-trace"
TOKEN = "ya29.trace-reader"


def _trace(trace_id: str) -> dict[str, Any]:
    return {"projectId": PROJECT, "traceId": trace_id, "spans": [
        {"spanId": "1311768467294899695", "kind": "RPC_SERVER", "name": "gateway submit",
         "startTime": "2026-11-26T05:00:00.000000000Z", "endTime": "2026-11-26T05:00:02.500000000Z",
         "labels": {"rag.query_id": "q"}},
        {"spanId": "81985529216486895", "parentSpanId": "1311768467294899695", "kind": "RPC_CLIENT",
         "name": "grader.contexts-retrieved process",
         "startTime": "2026-11-26T05:00:01.000000001Z", "endTime": "2026-11-26T05:00:01.250000001Z",
         "labels": {"rag.iteration": "0", "rag.grade.score": "0.5", "rag.decision": "accept"}},
        {"spanId": "42", "parentSpanId": "1311768467294899695", "name": "synthesizer.query-graded process",
         "startTime": "2026-11-26T05:00:02Z", "endTime": "2026-11-26T05:00:02.4Z",
         "labels": {"/error/message": "model refused"}},
    ]}


@pytest.fixture
def cloud_trace() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            seen.append({"path": self.path, "authorization": self.headers.get("Authorization", "")})
            parts = self.path.split("/")  # ['', 'v1', 'projects', P, 'traces', T]
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._reply(401, {"error": {"code": 401, "message": "Request had invalid authentication "
                                            "credentials.", "status": "UNAUTHENTICATED"}})
            elif len(parts) != 6 or parts[1:3] != ["v1", "projects"] or parts[4] != "traces":
                self._reply(404, {"error": {"code": 404, "message": "Not Found", "status": "NOT_FOUND"}})
            elif parts[3] != PROJECT:
                self._reply(403, {"error": {"code": 403, "message": "The caller does not have permission",
                                            "status": "PERMISSION_DENIED"}})
            elif parts[5].startswith("0000"):
                self._reply(404, {"error": {"code": 404, "message": "Trace not found", "status": "NOT_FOUND"}})
            else:
                self._reply(200, _trace(parts[5]))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gcp_gateway(tmp_path, cloud_trace, monkeypatch):
    url, _ = cloud_trace
    for name in ("PUBSUB_EMULATOR_HOST", "FIRESTORE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)

    def reader(project: str) -> CloudTraceReader:
        return CloudTraceReader(project, AuthorizedSession(Credentials(token=TOKEN)), base_url=url)

    monkeypatch.setattr(gateway_traces, "cloud_trace_reader", reader)
    tracer_provider()  # an SDK provider, as every ragbus process has: submitted queries get a trace id
    deps = make_deps(tmp_path, Settings(home=tmp_path, runtime="gcp", gcp_project=PROJECT))
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        yield client, deps


def _submit(client: TestClient) -> dict[str, Any]:
    accepted = client.post("/v1/queries", json={"question": "what is bm25?"})
    assert accepted.status_code == 202, accepted.text
    return client.get(accepted.headers["location"]).json()


def test_on_google_cloud_the_trace_is_read_from_cloud_trace(gcp_gateway, cloud_trace):
    client, _ = gcp_gateway
    _, seen = cloud_trace
    record = _submit(client)
    assert record["trace_id"], "the gateway records the query's trace id"
    body = client.get(f"/v1/queries/{record['id']}/trace").json()

    assert seen[-1] == {"path": f"/v1/projects/{PROJECT}/traces/{record['trace_id']}",
                        "authorization": f"Bearer {TOKEN}"}
    assert body["trace_id"] == record["trace_id"] and body["duration_ms"] == 2500.0
    assert [(r["name"], r["depth"]) for r in body["rows"]] == [
        ("gateway submit", 0), ("grader.contexts-retrieved process", 1), ("synthesizer.query-graded process", 1)]
    graded, synthesized = body["rows"][1], body["rows"][2]
    assert "iter 1" in graded["label"] and "score 0.50" in graded["label"] and "accept" in graded["label"]
    assert graded["offset_ms"] == 1000.0 and graded["duration_ms"] == 250.0
    assert graded["parent_id"] == body["rows"][0]["span_id"] == f"{1311768467294899695:016x}"
    assert synthesized["status"] == "ERROR" and "model refused" in synthesized["label"]
    assert body["console_url"] == (f"https://console.cloud.google.com/traces/explorer;"
                                   f"traceId={record['trace_id']}?project={PROJECT}")


def test_a_trace_cloud_trace_does_not_have_yet_answers_with_the_console_link(gcp_gateway):
    from shared.query.record import QueryRecord

    client, deps = gcp_gateway
    doc = _submit(client)
    doc["trace_id"] = "0000" + doc["trace_id"][4:]  # a trace the server does not hold
    body = gateway_traces.cloud_query_trace(deps.settings, QueryRecord.from_doc(doc))
    assert body["rows"] == [] and body["trace_id"] == doc["trace_id"]
    assert "no trace" in body["note"] and body["console_url"] in body["note"]


def test_a_gateway_without_permission_says_which_role_it_needs(tmp_path, cloud_trace, monkeypatch):
    url, _ = cloud_trace
    reader = CloudTraceReader("other-project", AuthorizedSession(Credentials(token=TOKEN)), base_url=url)
    with pytest.raises(TraceUnavailable, match="roles/cloudtrace.user"):
        reader.spans_of_trace("0af7651916cd43dd8448eb211c80319c")
    with pytest.raises(TraceUnavailable, match="not a trace id"):
        reader.spans_of_trace("../../other")


def test_on_the_emulators_the_local_span_store_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    assert not gateway_traces.cloud_traces(Settings(home=tmp_path, runtime="gcp", gcp_project=PROJECT))
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    monkeypatch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)
    assert gateway_traces.cloud_traces(Settings(home=tmp_path, runtime="gcp", gcp_project=PROJECT))
    assert not gateway_traces.cloud_traces(Settings(home=tmp_path))


def test_span_times_keep_their_nanoseconds_and_bad_ones_are_refused():
    assert _nanos("2026-11-26T05:00:01.000000001Z") - _nanos("2026-11-26T05:00:01Z") == 1
    assert _nanos("2026-11-26T06:00:00+01:00") == _nanos("2026-11-26T05:00:00Z")
    with pytest.raises(TraceUnavailable, match="not RFC 3339"):
        trace_spans({"spans": [{"spanId": "1", "startTime": "yesterday", "endTime": "today"}]})
