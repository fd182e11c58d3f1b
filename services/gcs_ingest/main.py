"""Cloud Functions entry points for Cloud Storage object events (Eventarc CloudEvents):
``--target=gcs_finalized`` (google.cloud.storage.object.v1.finalized) and
``--target=gcs_deleted`` (google.cloud.storage.object.v1.deleted).

Thin: the event's data is the object's metadata; the handler turns it into a
message. A retryable failure raises (the platform redelivers); bad input is
logged and acknowledged. Eventarc retries a failing event with backoff for up to
24 hours: an event older than ``RAGBUS_EVENT_MAX_AGE_S`` (default 86400 s, by the
CloudEvent's ``time``) is logged and acknowledged unhandled, so a poison event
stops retrying (the pattern of Google's "retrying event-driven functions" samples).
"""

import logging

import functions_framework

from services.gcs_ingest.handler import on_object_deleted, on_object_finalized
from shared.contract.errors import PermanentError
from shared.runtime.functions import event_max_age, event_too_old, function_deps
from shared.runtime.telemetry import flush_telemetry

log = logging.getLogger("ragbus.gcs_ingest")

_max_age = event_max_age()


def _run(handler, event) -> None:
    try:
        if event_too_old(event, _max_age):
            log.warning("dropping %s event %s of %s: older than %s", event["type"], event["id"],
                        event.get("time"), _max_age)
            return
        deps = function_deps()
        handler(event.data or {}, state=deps.state, publisher=deps.publisher, clock=deps.clock)
    except PermanentError as exc:
        log.error("dropping %s event %s: %s", event["type"], event["id"], exc)
    finally:
        flush_telemetry()  # before returning: after the response the CPU is throttled


@functions_framework.cloud_event
def gcs_finalized(event) -> None:
    _run(on_object_finalized, event)


@functions_framework.cloud_event
def gcs_deleted(event) -> None:
    _run(on_object_deleted, event)
