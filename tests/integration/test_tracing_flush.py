"""A Cloud Functions invocation exports its spans and metrics before it returns.

Cloud Run throttles an instance's CPU once the response is sent, so spans left
to the background export thread arrive late or die with the instance. Here the
grader's real functions-framework app handles a CloudEvent while the only
exporters are batched with an interval far longer than the test: whatever they
hold when the response comes back was flushed by the invocation itself.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import functions_framework
import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import QuerySubmitted, encode
from shared.observability.tracing import tracer_provider
from shared.runtime import functions
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

ROOT = Path(__file__).resolve().parents[2]
NEVER_MS = 600_000  # no periodic export happens during the test


class RecordingSpanExporter(SpanExporter):
    def __init__(self) -> None:
        self.received: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def export(self, spans):
        with self._lock:
            self.received.extend((time.monotonic(), s.name) for s in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class RecordingMetricExporter(MetricExporter):
    def __init__(self) -> None:
        super().__init__()
        self.received: list[str] = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        for rm in metrics_data.resource_metrics:
            for sm in rm.scope_metrics:
                self.received.extend(m.name for m in sm.metrics)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        pass


SPANS = RecordingSpanExporter()
tracer_provider().add_span_processor(BatchSpanProcessor(SPANS, schedule_delay_millis=NEVER_MS))


@pytest.fixture
def meter_exporter(monkeypatch):
    exporter = RecordingMetricExporter()
    provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=NEVER_MS)])
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: provider)
    yield exporter, provider
    provider.shutdown(timeout_millis=1_000)


def _cloud_event(message) -> dict:
    data, attributes = encode(message)
    return {
        "specversion": "1.0",
        "type": "google.cloud.pubsub.topic.v1.messagePublished",
        "source": "//pubsub.googleapis.com/projects/p/topics/query-submitted",
        "id": "m-flush-1",
        "datacontenttype": "application/json",
        "data": {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes,
                             "messageId": "m-flush-1"}},
    }


def test_an_invocation_exports_its_spans_and_metrics_before_it_returns(monkeypatch, meter_exporter):
    exporter, provider = meter_exporter
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", deps)
    handled: list[float] = []
    counter = provider.get_meter("test").create_counter("test.invocations")

    def handler(message, deps):
        counter.add(1)
        handled.append(time.monotonic())

    consumer = functions.consumer_for("transformer", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: handler))
    app = functions_framework.create_app(target="transformer", source=str(ROOT / "main.py"))
    client = app.test_client()
    SPANS.received.clear()

    response = client.post("/", data=json.dumps(_cloud_event(QuerySubmitted(query_id="q-flush"))),
                           headers={"Content-Type": "application/cloudevents+json"})
    returned = time.monotonic()

    assert response.status_code == 200, response.get_data(as_text=True)
    assert handled, "the stage's handler did not run"
    names = [name for at, name in SPANS.received if at <= returned]
    assert f"{consumer.subscription} process" in names
    assert "test.invocations" in exporter.received


def test_a_failing_invocation_still_flushes_before_the_platform_sees_the_error(monkeypatch, meter_exporter):
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", deps)

    def handler(message, deps):
        raise ConnectionError("firestore unavailable")

    consumer = functions.consumer_for("transformer", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: handler))
    app = functions_framework.create_app(target="transformer", source=str(ROOT / "main.py"))
    SPANS.received.clear()
    response = app.test_client().post(
        "/", data=json.dumps(_cloud_event(QuerySubmitted(query_id="q-flush"))),
        headers={"Content-Type": "application/cloudevents+json"})
    assert response.status_code == 500  # redelivered by the platform
    assert f"{consumer.subscription} process" in [name for _, name in SPANS.received]


def test_a_gateway_request_exports_its_spans_before_the_response_ends(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local

    monkeypatch.setattr(functions, "_deps", build_local(load_settings({"RAGBUS_HOME": str(tmp_path)})).deps)
    app = functions_framework.create_app(target="gateway", source=str(ROOT / "services" / "gateway" / "main.py"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        SPANS.received.clear()
        accepted = client.post("/v1/queries", json={"query": "what is bm25?"})
        returned = time.monotonic()
        assert accepted.status_code == 202
        assert "gateway submit" in [name for at, name in SPANS.received if at <= returned]


class CountingMetricExporter(RecordingMetricExporter):
    """Each export call as one write, with the cumulative sum of ``test.invocations`` it carried."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[float] = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs):
        total = 0.0
        for rm in metrics_data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == "test.invocations":
                        total += sum(p.value for p in m.data.data_points)
        self.writes.append(total)
        return MetricExportResult.SUCCESS


def test_metrics_are_written_at_most_once_per_10_s_per_instance_not_per_invocation(monkeypatch):
    """Cloud Monitoring refuses points written to a series faster than its sampling period:
    30 invocations within 10 s make one write; the next one after 10 s carries all of them."""
    from shared.runtime.telemetry import metric_reader

    now = [1000.0]
    exporter = CountingMetricExporter()
    provider = MeterProvider(metric_readers=[metric_reader(exporter, interval_s=NEVER_MS / 1000,
                                                           clock=lambda: now[0])])
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: provider)
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", deps)
    counter = provider.get_meter("test").create_counter("test.invocations")

    consumer = functions.consumer_for("transformer", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: lambda message, deps: counter.add(1)))
    client = functions_framework.create_app(target="transformer", source=str(ROOT / "main.py")).test_client()

    def invoke() -> None:
        response = client.post("/", data=json.dumps(_cloud_event(QuerySubmitted(query_id="q-metrics"))),
                               headers={"Content-Type": "application/cloudevents+json"})
        assert response.status_code == 200, response.get_data(as_text=True)

    try:
        for _ in range(30):  # one every 0.3 s: 9 s in all
            invoke()
            now[0] += 0.3
        assert exporter.writes == [1.0], "one write for the first invocation, none for the next 29"
        now[0] = 1000.0 + 10.0
        invoke()
        assert exporter.writes == [1.0, 31.0], "the next write carries every invocation since (cumulative)"
    finally:
        provider.shutdown(timeout_millis=1_000)
