"""Spans go to the Telemetry (OTLP) API with Google credentials: a loopback server
speaking OTLP/HTTP (protobuf, POST /v1/traces, as telemetry.googleapis.com does)
receives what the exporter sends and checks the bearer token and the project."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.oauth2.credentials import Credentials
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from shared.observability.tracing import process_resource
from shared.runtime.telemetry import google_otlp_span_exporter


@pytest.fixture
def telemetry_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "request": request})
            if not self.headers.get("Authorization", "").startswith("Bearer "):
                self.send_response(401)
                self.end_headers()
                return
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_the_telemetry_api_with_a_google_token_and_the_project(telemetry_api):
    url, received = telemetry_api
    exporter = google_otlp_span_exporter(url, credentials=Credentials(token="ya29.test-token"))
    resource = process_resource(env={"GOOGLE_CLOUD_PROJECT": "proj-otlp", "K_SERVICE": "rb-grader"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("ragbus").start_as_current_span("grader.contexts-retrieved process"):
        pass
    provider.shutdown()

    (call,) = received
    assert call["path"] == "/v1/traces"
    assert call["headers"]["authorization"] == "Bearer ya29.test-token"
    assert call["headers"]["content-type"] == "application/x-protobuf"
    (spans,) = call["request"].resource_spans
    attributes = {a.key: a.value.string_value for a in spans.resource.attributes}
    assert attributes["gcp.project_id"] == "proj-otlp" and attributes["service.name"] == "rb-grader"
    assert [s.name for ss in spans.scope_spans for s in ss.spans] == ["grader.contexts-retrieved process"]


def test_a_resource_without_a_project_names_none():
    assert "gcp.project_id" not in process_resource(env={}).attributes


SETUP_PROBE = """
import json, sys
import google.auth
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials

# Application Default Credentials as on Cloud Run (the metadata server is not reachable here)
google.auth.default = lambda scopes=None, **kw: (Credentials(token="ya29.adc"), "proj-setup")

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from shared.contract.config import load_settings
from shared.runtime.telemetry import TELEMETRY_TRACES_URL, setup_telemetry

setup_telemetry(load_settings())
processors = trace.get_tracer_provider()._active_span_processor._span_processors
exporters = [p.span_exporter for p in processors if hasattr(p, "span_exporter")]
otlp = [e for e in exporters if isinstance(e, OTLPSpanExporter)]
print(json.dumps({
    "exporters": sorted(type(e).__name__ for e in exporters),
    "otlp_endpoints": [e._endpoint for e in otlp],
    "signed": [isinstance(e._client._transport._session, AuthorizedSession) for e in otlp],
    "resource": dict(trace.get_tracer_provider().resource.attributes),
}))
"""


def test_the_gcp_runtime_sends_traces_to_the_telemetry_api_signed_with_google_credentials(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from tests.support import REPO

    env = {k: v for k, v in os.environ.items() if not k.endswith("_EMULATOR_HOST") and not k.startswith("OTEL_")}
    env.update({"RAGBUS_HOME": str(tmp_path), "RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "proj-setup",
                "RAGBUS_BUCKET": "b", "PYTHONPATH": str(REPO)})
    done = subprocess.run([sys.executable, "-c", SETUP_PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["exporters"] == ["OTLPSpanExporter"], "no Cloud Trace exporter, no local span store"
    assert seen["otlp_endpoints"] == ["https://telemetry.googleapis.com/v1/traces"]
    assert seen["signed"] == [True]
    assert seen["resource"]["gcp.project_id"] == "proj-setup"
