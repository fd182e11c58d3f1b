"""What every Pub/Sub-triggered Cloud Function shares, so each ``main.py`` stays thin.

A stage's entry point receives a CloudEvent: either Eventarc's
``google.cloud.pubsub.topic.v1.messagePublished`` or a raw Pub/Sub push
envelope that functions-framework converted into one. Both carry
``data.message`` with base64 ``data``, ``attributes`` and ``messageId``.
The outcome maps onto the platform's delivery semantics: RETRY raises (the
platform answers 500 and redelivers with backoff), DEAD records the dead
letter with its reason and returns (acknowledged), and an event older than the
cutoff is dropped so a poison message cannot retry forever.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.messages import MESSAGE_TYPES
from shared.runtime.deps import Deps
from shared.runtime.dispatch import Outcome, handle_delivery, record_dead_letter
from shared.runtime.stages import Consumer, consumers_of
from shared.telemetry import flush_telemetry

log = logging.getLogger("ragbus.functions")

_deps: Deps | None = None
_deps_lock = threading.Lock()


def function_deps() -> Deps:
    """This instance's dependencies, built on first use and reused across invocations."""
    global _deps
    if _deps is None:
        with _deps_lock:
            if _deps is None:
                from shared.config import load_settings
                from shared.logs import configure_logging
                from shared.runtime.bootstrap import build_deps

                configure_logging("INFO")
                _deps = build_deps(load_settings())
    return _deps


def consumer_for(stage: str, attributes: dict[str, str]) -> Consumer:
    """The stage's consumer of the topic that carries this message type."""
    consumers = consumers_of(stage)
    cls = MESSAGE_TYPES.get(attributes.get("type", ""))
    for consumer in consumers:
        if cls is not None and consumer.topic == cls.TOPIC:
            return consumer
    return consumers[0]  # unknown type: the dispatcher dead-letters it with the reason


def _event_time(event: Any, message: dict[str, Any]) -> datetime | None:
    raw = message.get("publishTime") or message.get("publish_time")
    if not raw and hasattr(event, "get"):
        raw = event.get("time")
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None


def pubsub_entry_point(stage: str, deps: Callable[[], Deps] = function_deps) -> Callable[[Any], None]:
    """The body of a stage's ``@functions_framework.cloud_event`` function."""
    max_age = timedelta(seconds=float(os.environ.get("RAGBUS_EVENT_MAX_AGE_S", "86400")))

    def handle_event(event: Any) -> None:
        try:
            _handle_event(event)
        finally:
            flush_telemetry()  # before returning: after the response the CPU is throttled

    def _handle_event(event: Any) -> None:
        envelope: dict[str, Any] = event.data or {}
        message: dict[str, Any] = envelope.get("message") or {}
        data = base64.b64decode(message.get("data") or b"")
        attributes = {str(k): str(v) for k, v in (message.get("attributes") or {}).items()}
        message_id = str(message.get("messageId") or message.get("message_id") or "")
        attempt = int(envelope.get("deliveryAttempt") or message.get("deliveryAttempt") or 1)
        consumer = consumer_for(stage, attributes)
        published = _event_time(event, message)
        if published is not None and datetime.now(UTC) - published > max_age:
            log.warning("%s: dropping %s published at %s (older than %s)", consumer.subscription,
                        message_id, published.isoformat(), max_age)
            return
        result = handle_delivery(consumer, data, attributes, deps(), attempt=attempt, message_id=message_id)
        if result.outcome is Outcome.RETRY:
            raise RuntimeError(f"{consumer.subscription}: {result.error}; the platform will redeliver")
        if result.outcome is Outcome.DEAD:
            record_dead_letter(deps(), consumer, data, attributes, result.error or "",
                               attempts=attempt, message_id=message_id)

    handle_event.__name__ = stage
    return handle_event
