"""What every Pub/Sub-triggered Cloud Function shares: its target is made here from the registry.

A stage's entry point receives a CloudEvent: either Eventarc's
``google.cloud.pubsub.topic.v1.messagePublished`` or a raw Pub/Sub push
envelope that functions-framework converted into one. Both carry
``data.message`` with base64 ``data``, ``attributes`` and ``messageId``.

functions-framework's conversion of a raw push envelope keeps only the
message: the envelope's ``deliveryAttempt`` and ``subscription`` are dropped
(``event_conversion.marshal_background_event_data``). The function still runs
inside the Flask request, so :func:`push_envelope` reads them from the raw body.

The disposition maps onto the platform's delivery semantics: RETRY raises (the
platform answers 500 and redelivers with backoff) until the last attempt the
subscription allows, where the failure is recorded as a dead letter with its
real error and the query it belongs to ends ``failed`` (Pub/Sub's own
dead-lettering would keep the message but not the error); DEAD records the dead
letter with its reason and returns (acknowledged); and an event older than the
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

from shared.contract.deps import Deps
from shared.contract.messages import MESSAGE_TYPES
from shared.runtime.dispatch import Disposition, handle_delivery, record_dead_letter
from shared.runtime.stages import STAGE_BY_NAME, Consumer, consumers_of
from shared.runtime.telemetry import flush_telemetry

log = logging.getLogger("ragbus.functions")

_deps: Deps | None = None
_deps_lock = threading.Lock()


def function_deps() -> Deps:
    """This instance's dependencies, built on first use and reused across invocations."""
    global _deps
    if _deps is None:
        with _deps_lock:
            if _deps is None:
                from shared.contract.config import load_settings
                from shared.observability.logs import configure_logging
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


def event_time(event: Any, message: dict[str, Any]) -> datetime | None:
    raw = message.get("publishTime") or message.get("publish_time")
    if not raw and hasattr(event, "get"):
        raw = event.get("time")
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None


def event_too_old(event: Any, max_age: timedelta, message: dict[str, Any] | None = None) -> bool:
    """Whether the event (its message's publishTime, else the CloudEvent ``time``) is older
    than ``max_age``: such an event is acknowledged unhandled, so a poison one stops retrying."""
    published = event_time(event, message or {})
    return published is not None and datetime.now(UTC) - published > max_age


def push_envelope() -> dict[str, Any]:
    """The raw body of the Pub/Sub push being handled, or {} outside an HTTP request."""
    try:
        import flask
    except ImportError:  # pragma: no cover - functions-framework depends on flask
        return {}
    if not flask.has_request_context():
        return {}
    body = flask.request.get_json(silent=True)
    return body if isinstance(body, dict) else {}


def delivery_attempt(event: Any) -> int:
    """Which delivery of the message this is (1 when nobody says): the raw push body first.

    Pub/Sub sets ``deliveryAttempt`` on pushes of a subscription with a dead-letter
    policy; the CloudEvent functions-framework makes of the push no longer has it.
    """
    envelope = push_envelope()
    data = event.data if isinstance(getattr(event, "data", None), dict) else {}
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    for raw in (envelope.get("deliveryAttempt"), data.get("deliveryAttempt"), message.get("deliveryAttempt")):
        try:
            if raw is not None and int(raw) >= 1:
                return int(raw)
        except (TypeError, ValueError):
            continue
    return 1


def push_subscription(event: Any) -> str:
    """The short name of the subscription that pushed this event ("" when unknown)."""
    data = event.data if isinstance(getattr(event, "data", None), dict) else {}
    name = str(push_envelope().get("subscription") or data.get("subscription") or "")
    return name.rsplit("/", 1)[-1]


def event_max_age(deps: Deps | None = None) -> timedelta:
    """RAGBUS_EVENT_MAX_AGE_S (default one day): older events are acknowledged unhandled."""
    from shared.contract.config import load_settings

    settings = deps.settings if deps is not None else load_settings()
    return timedelta(seconds=settings.event_max_age_s)


def check_function_at_start(stage: str, env: dict[str, str] | None = None) -> None:
    """Refuse to start a function serving ``stage`` when the stage cannot do its work
    (:mod:`shared.runtime.readiness`): the process exits with the reason.

    The one root main.py may be imported by any function (and tests import several
    entry points), so only the stage being served is checked: functions-framework sets ``FUNCTION_TARGET`` to its ``--target``
    before it imports the source (``create_app`` -> ``get_function_target``), and Cloud
    Functions sets it too. Exiting is how a function says it is not ready: the instance
    never takes a message (Pub/Sub keeps redelivering them), a deploy fails instead of
    every query, and the log's last line says why. ``SystemExit`` passes functions-framework's
    ``except Exception`` around the import, so the reason is printed without a traceback.
    """
    env = os.environ if env is None else env
    if env.get("FUNCTION_TARGET") != stage or not STAGE_BY_NAME[stage].needs:
        return  # another function's entry point, or a stage with nothing to check: start as before
    from shared.contract.config import load_settings
    from shared.contract.errors import ConfigError
    from shared.runtime.readiness import unready_stages

    try:
        reason = unready_stages(load_settings(dict(env)), (stage,)).get(stage)
    except ConfigError as exc:  # a setting the checks read is invalid: every message would fail on it too
        reason = str(exc)
    if reason:
        raise SystemExit(f"ragbus {stage} function is not ready: {reason}")


def pubsub_target(stage: str) -> Callable[[Any], None]:
    """The functions-framework target of a Pub/Sub stage, made from the registry: a CloudEvent
    function named after the stage (functions-framework registers a target's signature type by
    its ``__name__`` when the decorator runs, and looks the target up by that name)."""
    import functions_framework

    handle = pubsub_entry_point(stage)

    def target(event: Any) -> None:
        handle(event)

    target.__name__ = target.__qualname__ = stage
    target.__doc__ = f"Cloud Function entry point of the {stage} (Pub/Sub push as a CloudEvent)."
    return functions_framework.cloud_event(target)


def pubsub_entry_point(stage: str, deps: Callable[[], Deps] = function_deps) -> Callable[[Any], None]:
    """The body of a stage's ``@functions_framework.cloud_event`` function (checked at start-up when
    it is the function being served: :func:`check_function_at_start`)."""
    check_function_at_start(stage)

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
        attempt = delivery_attempt(event)
        consumer = consumer_for(stage, attributes)
        published = event_time(event, message)
        max_age = event_max_age(deps())
        if published is not None and datetime.now(UTC) - published > max_age:
            log.warning("%s: dropping %s published at %s (older than %s)", consumer.subscription,
                        message_id, published.isoformat(), max_age)
            return
        result = handle_delivery(consumer, data, attributes, deps(), attempt=attempt, message_id=message_id)
        if result.disposition is Disposition.RETRY:
            allowed = deps().settings.max_delivery_attempts
            if attempt < allowed:
                raise RuntimeError(f"{consumer.subscription}: {result.error}; the platform will redeliver")
            # The last delivery the subscription allows: Pub/Sub would dead-letter the
            # message without the error, so record it here and acknowledge.
            log.error("%s: giving up on %s after %d delivery attempts: %s", consumer.subscription,
                      message_id, attempt, result.error)
            record_dead_letter(deps(), consumer, data, attributes,
                               f"{result.error} (delivery attempt {attempt} of {allowed})",
                               attempts=attempt, message_id=message_id)
            return
        if result.disposition is Disposition.DEAD:
            record_dead_letter(deps(), consumer, data, attributes, result.error or "",
                               attempts=attempt, message_id=message_id)

    handle_event.__name__ = stage
    return handle_event
