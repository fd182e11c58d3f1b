"""Cloud Functions entry points for Cloud Storage object events (Eventarc CloudEvents):
``--target=gcs_finalized`` (google.cloud.storage.object.v1.finalized) and
``--target=gcs_deleted`` (google.cloud.storage.object.v1.deleted).

Thin: the event's data is the object's metadata; the handler turns it into a
message. A retryable failure raises (the platform redelivers); bad input is
logged and acknowledged.
"""

import logging

import functions_framework

from services.gcs_ingest.handler import on_object_deleted, on_object_finalized
from shared.errors import PermanentError
from shared.runtime.functions import function_deps
from shared.telemetry import flush_telemetry

log = logging.getLogger("ragbus.gcs_ingest")


def _run(handler, event) -> None:
    deps = function_deps()
    try:
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
