"""From a delivery (bytes + attributes) to a handler call, in both runtimes.

The disposition tells the transport what to do: ``ACK`` (done, or a duplicate),
``RETRY`` (raise / 5xx / nack with backoff) or ``DEAD`` (permanent: record the
reason and stop delivering). Recording a dead letter is done here, in the
state store, so ``ragbus stats`` sees dead letters of either runtime; a dead
letter that belongs to a query also ends that query with the reason, so a
query never waits on a message nobody will handle.
"""

from __future__ import annotations

import contextvars
import enum
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import DataFileError, PermanentError, RagbusError
from shared.contract.messages import Message, decode
from shared.contract.redaction import redact
from shared.observability import metrics
from shared.observability.tracing import consumer_span, mark_error, message_span_attributes
from shared.runtime.stages import Consumer

log = logging.getLogger("ragbus.dispatch")


class Disposition(enum.Enum):
    """What becomes of a delivery: acknowledged, redelivered later, or dead-lettered."""

    ACK = "ack"
    RETRY = "retry"
    DEAD = "dead"


@dataclass(frozen=True)
class Result:
    disposition: Disposition
    error: str | None = None
    message: Message | None = None
    # This process cannot go on (its disk is full, a data file broke): the delivery is left
    # unsettled for a later run, never dead-lettered, and the local runtime stops pulling.
    halt: bool = False


def handle_delivery(
    consumer: Consumer,
    data: bytes,
    attributes: dict[str, str],
    deps: Deps,
    *,
    attempt: int = 1,
    message_id: str = "",
) -> Result:
    """Decode and handle one delivery inside its CONSUMER span; never raises."""
    started = time.perf_counter()
    result = _handle(consumer, data, attributes, deps, attempt=attempt, message_id=message_id)
    metrics.stage_handled(consumer.stage, (time.perf_counter() - started) * 1000, result.disposition.value)
    return result


def _handle(
    consumer: Consumer, data: bytes, attributes: dict[str, str], deps: Deps, *, attempt: int, message_id: str
) -> Result:
    with consumer_span(
        consumer.subscription, consumer.topic, attributes, attempt=attempt, message_id=message_id
    ) as span:
        try:
            message = decode(data, attributes)
        except PermanentError as exc:
            mark_error(span, exc)
            span.set_attribute("rag.delivery", Disposition.DEAD.value)
            return Result(Disposition.DEAD, f"{type(exc).__name__}: {exc}")
        for key, value in message_span_attributes(message).items():
            span.set_attribute(key, value)
        try:
            # in a copy of the context, so what a delivery notes (its query's deadline) ends with it
            contextvars.copy_context().run(consumer.handler, message, deps)
        except DataFileError as exc:
            mark_error(span, exc)
            span.set_attribute("rag.delivery", Disposition.RETRY.value)
            return Result(Disposition.RETRY, f"{type(exc).__name__}: {exc}", message, halt=True)
        except PermanentError as exc:
            log.warning("%s: permanent error on %s: %s", consumer.subscription, message_id, exc)
            mark_error(span, exc)
            span.set_attribute("rag.delivery", Disposition.DEAD.value)
            return Result(Disposition.DEAD, f"{type(exc).__name__}: {exc}", message)
        except Exception as exc:  # noqa: BLE001 - anything else may be transient: retry, then dead-letter
            # A RagbusError is a condition the handler diagnosed (its message names the URL or
            # input and the reason): a traceback adds nothing. Anything else is unexpected.
            log.warning(
                "%s: attempt %d failed on %s: %s", consumer.subscription, attempt, message_id, exc,
                exc_info=attempt == 1 and not isinstance(exc, RagbusError),
            )
            mark_error(span, exc)
            span.set_attribute("rag.delivery", Disposition.RETRY.value)
            return Result(Disposition.RETRY, f"{type(exc).__name__}: {exc}", message)
        span.set_attribute("rag.delivery", Disposition.ACK.value)
        return Result(Disposition.ACK, None, message)


def record_dead_letter(
    deps: Deps,
    consumer: Consumer,
    data: bytes,
    attributes: dict[str, str],
    error: str,
    *,
    attempts: int,
    message_id: str,
) -> None:
    """Keep the dead letter with its reason, and end its query if it had one."""
    keep_dead_letter(deps, subscription=consumer.subscription, topic=consumer.topic, stage=consumer.stage,
                     data=data, attributes=attributes, error=error, attempts=attempts, message_id=message_id)


def keep_dead_letter(
    deps: Deps,
    *,
    subscription: str,
    topic: str,
    stage: str,
    data: bytes,
    attributes: dict[str, str],
    error: str,
    attempts: int,
    message_id: str,
) -> None:
    """Store one dead letter (idempotent per subscription and message) and fail its query."""
    metrics.dead_lettered(subscription)
    key = f"{subscription}:{message_id or attributes.get('idempotency_key', '')}"
    document_id = _field_of(data, "document_id")
    deps.state.put(
        state_collections.DEAD_LETTERS,
        key,
        {
            "subscription": subscription,
            "topic": topic,
            "message_id": message_id,
            "type": attributes.get("type"),
            "schema_version": attributes.get("schema_version"),
            "idempotency_key": attributes.get("idempotency_key"),
            "attempts": attempts,
            "error": redact(error),  # the data keeps what a retry needs; the reason is shown and logged
            "data": data.decode("utf-8", "replace")[:4000],
            "at": deps.clock.now().isoformat(),
            **({"document_id": document_id} if document_id else {}),
        },
    )
    if document_id:  # stored first, then named: its tombstone does not expire while the letter may be retried
        from shared.ingest.processed_items import keep_for_letter

        keep_for_letter(deps.state, document_id)
    query_id = _field_of(data, "query_id")
    if query_id:
        from shared.query.state import fail_query

        fail_query(deps.state, query_id, f"{stage} gave up: {error}", deps.clock.now())


def _field_of(data: bytes, name: str) -> str | None:
    """The text field ``name`` of a message body (a query's id, a document's), or None."""
    try:
        body: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) and value else None
