"""OpenTelemetry across message hops: one trace per query and per ingested item.

Publishing opens a PRODUCER span ``"<topic> publish"`` and writes the W3C trace
context into the message's attributes with an explicit setter (we do not rely
on the Pub/Sub client's experimental tracing flag). Receiving opens a CONSUMER
span ``"<subscription> process"`` whose parent is the context read back from
the attributes, so every stage of every iteration hangs off the request that
started it. A redelivery is a second CONSUMER span under the same PRODUCER
span, marked ``rag.retry=true`` with its delivery attempt: a retry, not a new
tree. Model calls get spans named by the OpenTelemetry GenAI conventions.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from shared.contract.messages import Message
from shared.contract.ports import (
    Answer,
    ConversationTurn,
    Grade,
    LanguageModel,
    NumberedContext,
    Publisher,
    RefineRequest,
    Transformation,
)
from shared.contract.redaction import redact

TRACER_NAME = "ragbus"


class _AttributeSetter(Setter[dict[str, str]]):
    def set(self, carrier: dict[str, str], key: str, value: str) -> None:
        carrier[key] = value


class _AttributeGetter(Getter[Mapping[str, str]]):
    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return [value] if value is not None else None

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return list(carrier.keys())


_NAMESPACES = ("rag.", "gen_ai.", "messaging.", "error.", "http.", "server.")

SETTER = _AttributeSetter()
GETTER = _AttributeGetter()


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def inject_context(attributes: dict[str, str]) -> dict[str, str]:
    """Write the current trace context (``traceparent``, ``tracestate``) into ``attributes``."""
    propagate.inject(attributes, setter=SETTER)
    return attributes


def extract_context(attributes: Mapping[str, str]) -> otel_context.Context:
    return propagate.extract(attributes, getter=GETTER)


def message_span_attributes(message: Message) -> dict[str, Any]:
    """``rag.*`` attributes every span about ``message`` carries."""
    out: dict[str, Any] = {"rag.message_type": type(message).__name__}
    for field, attr in (("query_id", "rag.query_id"), ("iteration", "rag.iteration"),
                        ("document_id", "rag.document_id")):
        value = getattr(message, field, None)
        if value is not None:
            out[attr] = value
    return out


def current_trace_id() -> str | None:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def annotate(**attributes: Any) -> None:
    """Add attributes to the current span (``rag.`` is prefixed unless the name already
    has an OpenTelemetry namespace such as ``gen_ai.`` or ``messaging.``)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    for key, value in attributes.items():
        if value is None:
            continue
        name = key if key.startswith(_NAMESPACES) else f"rag.{key}"
        if isinstance(value, (list, tuple)):
            value = [str(v) for v in value]
        elif not isinstance(value, (str, bool, int, float)):
            value = str(value)
        span.set_attribute(name, value)


class TracingPublisher:
    """A Publisher that opens a PRODUCER span and carries the context in attributes."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        topic = type(message).TOPIC
        with tracer().start_as_current_span(
            f"{topic} publish",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "gcp_pubsub",
                "messaging.operation.type": "send",
                "messaging.destination.name": topic,
                **message_span_attributes(message),
            },
        ) as span:
            attrs = inject_context(dict(attributes or {}))
            message_id = self.inner.publish(message, attrs)
            span.set_attribute("messaging.message.id", message_id)
            return message_id

    def __getattr__(self, name: str) -> Any:  # the bus's other methods stay reachable
        return getattr(self.inner, name)


@contextmanager
def consumer_span(
    subscription: str, topic: str, attributes: Mapping[str, str], *, attempt: int, message_id: str
) -> Iterator[trace.Span]:
    """The CONSUMER span of one delivery, parented by the producer's context."""
    with tracer().start_as_current_span(
        f"{subscription} process",
        context=extract_context(attributes),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "gcp_pubsub",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.destination.subscription.name": subscription,
            "messaging.message.id": message_id,
            "messaging.gcp_pubsub.message.delivery_attempt": attempt,
            "rag.stage": subscription.split(".", 1)[0],
            "rag.retry": attempt > 1,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


@contextmanager
def item_trace(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """Start a new trace for one item, linked to the current span.

    A poll or a folder ingest covers many items; each item's journey from
    fetch to index is its own trace, so one slow or failing item reads as one
    tree. The link keeps the way back to the request that found it. A text attribute is redacted
    (:func:`~shared.contract.redaction.redact`): a feed's address, an item's link, may carry a ``?token=``.
    """
    parent = trace.get_current_span().get_span_context()
    with tracer().start_as_current_span(
        name,
        context=otel_context.Context(),
        links=[trace.Link(parent)] if parent.is_valid else [],
        kind=SpanKind.INTERNAL,
        attributes={k if k.startswith(_NAMESPACES) else f"rag.{k}": redact(v) if isinstance(v, str) else v
                    for k, v in attributes.items() if v is not None},
    ) as span:
        yield span


def mark_error(span: trace.Span, exc: BaseException) -> None:
    """``exc`` on ``span``, without a credential its message names (a feed address's ?token=)."""
    shown = redact(str(exc))
    span.record_exception(exc, attributes={"exception.message": shown, "exception.stacktrace": redact(
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))})
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {shown}"))


@contextmanager
def model_call_span(operation: str, provider: str, model: str, **extra: Any) -> Iterator[trace.Span]:
    """A GenAI span: ``"{operation} {model}"`` with gen_ai.* attributes."""
    with tracer().start_as_current_span(
        f"{operation} {model}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": operation,
            "gen_ai.system": provider,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            **{k if k.startswith(_NAMESPACES) else f"rag.{k}": v for k, v in extra.items() if v is not None},
        },
    ) as span:
        started = time.perf_counter()
        try:
            yield span
        except Exception as exc:
            mark_error(span, exc)
            raise
        finally:
            span.set_attribute("rag.model_latency_ms", round((time.perf_counter() - started) * 1000, 3))


class TracingLanguageModel:
    """Wraps a LanguageModel so every call is a GenAI span (providers add token counts)."""

    def __init__(self, inner: LanguageModel) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model

    def transform(self, query: str, *, today: date) -> Transformation:
        with model_call_span("transform", self.provider, self.model):
            return self.inner.transform(query, today=today)

    def refine(self, request: RefineRequest, *, today: date) -> str:
        with model_call_span("refine", self.provider, self.model):
            return self.inner.refine(request, today=today)

    def standalone(self, question: str, history: Sequence[ConversationTurn], *, today: date) -> str:
        with model_call_span("standalone", self.provider, self.model, history_turns=len(history)):
            return self.inner.standalone(question, history, today=today)

    def grade(self, query: str, contexts: Sequence[NumberedContext]) -> Grade:
        with model_call_span("grade", self.provider, self.model, context_count=len(contexts)):
            return self.inner.grade(query, contexts)

    def synthesize(self, query: str, contexts: Sequence[NumberedContext], *, language: str) -> Answer:
        with model_call_span("synthesize", self.provider, self.model, context_count=len(contexts)):
            return self.inner.synthesize(query, contexts, language=language)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


# ------------------------------------------------------------------ set-up

_provider_lock = threading.Lock()
_installed: set[int] = set()


def process_resource(service_name: str = "ragbus", env: Mapping[str, str] | None = None) -> Resource:
    """What this process's spans say about where they come from: the service (the Cloud Run
    service on Google Cloud) and, when known, the project: the Telemetry (OTLP) API files
    spans under the resource's ``gcp.project_id`` (Google's OTLP migration guide sets it)."""
    env = os.environ if env is None else env
    attributes = {"service.name": env.get("OTEL_SERVICE_NAME") or env.get("K_SERVICE") or service_name}
    if env.get("GOOGLE_CLOUD_PROJECT"):
        attributes["gcp.project_id"] = env["GOOGLE_CLOUD_PROJECT"]
    return Resource.create(attributes)


def tracer_provider(service_name: str = "ragbus") -> TracerProvider:
    """The process's SDK TracerProvider, installed once."""
    with _provider_lock:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            return current
        provider = TracerProvider(resource=process_resource(service_name))
        trace.set_tracer_provider(provider)
        return provider


def add_exporter(exporter: SpanExporter, *, batch: bool = True) -> SpanProcessor:
    """Send spans to ``exporter`` (once per exporter object)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = tracer_provider()
    processor: SpanProcessor = BatchSpanProcessor(exporter, schedule_delay_millis=200) if batch else SimpleSpanProcessor(exporter)
    with _provider_lock:
        if id(exporter) not in _installed:
            provider.add_span_processor(processor)
            _installed.add(id(exporter))
    return processor
