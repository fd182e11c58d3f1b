"""Trace context crosses the bus: PRODUCER span -> attributes -> CONSUMER span."""

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.contract import topics
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import QuerySubmitted
from shared.observability.tracing import TracingPublisher, add_exporter, tracer
from shared.runtime.dispatch import handle_delivery
from shared.runtime.stages import Consumer
from tests.fakes import FakeClock, InMemoryStateStore

EXPORTER = InMemorySpanExporter()
add_exporter(EXPORTER, batch=False)
ATTEMPTS = {"n": 0}


def flaky_handler(message, deps):
    ATTEMPTS["n"] += 1
    if ATTEMPTS["n"] == 1:
        raise RuntimeError("first try fails")
    deps.publisher.publish(QuerySubmitted(query_id=message.query_id + "-next"))


FLAKY = Consumer("probe", topics.QUERY_SUBMITTED, "tests.unit.test_tracing:flaky_handler")


@pytest.fixture(autouse=True)
def _clear():
    EXPORTER.clear()
    ATTEMPTS["n"] = 0


def test_one_trace_from_request_through_a_retried_delivery(tmp_path):
    bus = SqliteBus(tmp_path / "bus.db", {FLAKY.subscription: FLAKY.topic}, RetrySettings(min_backoff_s=0, max_backoff_s=0))
    deps = Deps(Settings(home=tmp_path), publisher=TracingPublisher(bus), state=InMemoryStateStore(), clock=FakeClock())
    with tracer().start_as_current_span("POST /v1/queries") as root:
        deps.publisher.publish(QuerySubmitted(query_id="q1"))
    for _ in range(2):
        (d,) = bus.pull(FLAKY.subscription)
        result = handle_delivery(FLAKY, d.data, d.attributes, deps, attempt=d.attempt, message_id=d.message_id)
        if result.disposition.value == "retry":
            bus.nack(d, result.error)
        else:
            bus.ack(d)

    spans = {(s.name, s.attributes.get("rag.retry")): s for s in EXPORTER.get_finished_spans()}
    trace_ids = {s.context.trace_id for s in EXPORTER.get_finished_spans()}
    assert trace_ids == {root.get_span_context().trace_id}

    (publish,) = [s for s in EXPORTER.get_finished_spans()
                  if s.name == "query-submitted publish" and s.attributes["rag.query_id"] == "q1"]
    first = spans[("probe.query-submitted process", False)]
    retry = spans[("probe.query-submitted process", True)]
    assert publish.kind is SpanKind.PRODUCER and publish.parent.span_id == root.get_span_context().span_id
    # both deliveries hang off the same PRODUCER span: a retry, not a second tree
    assert first.kind is SpanKind.CONSUMER and first.parent.span_id == publish.context.span_id
    assert retry.parent.span_id == publish.context.span_id
    assert first.status.status_code is StatusCode.ERROR and first.events[0].name == "exception"
    assert retry.attributes["messaging.gcp_pubsub.message.delivery_attempt"] == 2
    assert retry.attributes["rag.query_id"] == "q1"
    # what the handler published continues the same trace under the retry's span
    (next_publish,) = [s for s in EXPORTER.get_finished_spans()
                       if s.name == "query-submitted publish" and s.attributes["rag.query_id"] == "q1-next"]
    assert next_publish.parent.span_id == retry.context.span_id


def test_an_item_trace_shows_a_feed_address_s_query_credential_redacted():
    """An item's trace carried its feed's address and its guid as given: a private feed's ?feed_token= reached every
    span exporter (Cloud Trace, Phoenix, traces.db). Text attributes are redacted; the others are kept as they are."""
    from shared.observability.tracing import item_trace

    token = "feedtok-0123456789abcdef"
    with item_trace("feed item", document_id="d1", feed_url=f"https://feeds.example/p.atom?feed_token={token}",
                    guid=f"https://feeds.example/items/1?sig={token}", attempt=2):
        pass
    (span,) = [s for s in EXPORTER.get_finished_spans() if s.name == "feed item"]
    assert span.attributes["rag.feed_url"] == "https://feeds.example/p.atom?feed_token=[redacted]"
    assert span.attributes["rag.guid"] == "https://feeds.example/items/1?sig=[redacted]"
    assert span.attributes["rag.document_id"] == "d1" and span.attributes["rag.attempt"] == 2
