"""Cloud Function entry point of the dead-letter recorder (``--target=dead_letters``).

Thin: decodes the push, names the dead-letter topic it came from (the push
endpoint's ``/projects/<p>/topics/<topic>`` path, which functions-framework
turns into the event's source, or the push subscription's name), and lets
:mod:`services.dead_letters.handler` record it. A failure to record raises, so
Pub/Sub redelivers the dead letter (its subscription has no dead-letter policy
of its own: nothing is dropped).
"""

import base64
import logging
from datetime import UTC, datetime

import functions_framework

from services.dead_letters.handler import DEAD_LETTER_SUFFIX, record
from shared.runtime.functions import event_max_age, event_time, function_deps, push_subscription
from shared.runtime.telemetry import flush_telemetry

log = logging.getLogger("ragbus.dead_letters")

def _dead_letter_topic(event) -> str:
    source = str(event.get("source") or "") if hasattr(event, "get") else ""
    topic = source.rsplit("/topics/", 1)[-1] if "/topics/" in source else ""
    if topic.endswith(DEAD_LETTER_SUFFIX):
        return topic
    # dead_letters.<topic>-dead-letter
    return push_subscription(event).partition(".")[2]


@functions_framework.cloud_event
def dead_letters(event) -> None:
    try:
        _record(event)
    finally:
        flush_telemetry()  # before returning: after the response the CPU is throttled


def _record(event) -> None:
    message = (event.data or {}).get("message") or {}
    attributes = {str(k): str(v) for k, v in (message.get("attributes") or {}).items()}
    message_id = str(message.get("messageId") or message.get("message_id") or "")
    try:
        record(base64.b64decode(message.get("data") or b""), attributes,
               dead_letter_topic=_dead_letter_topic(event), message_id=message_id, deps=function_deps())
    except Exception:
        # A dead letter is worth recording however late it comes; the age cutoff only
        # stops one that cannot be recorded from being redelivered for days.
        published = event_time(event, message)
        max_age = event_max_age(function_deps())
        if published is not None and datetime.now(UTC) - published > max_age:
            log.exception("dropping dead letter %s published at %s (older than %s): recording failed",
                          message_id, published.isoformat(), max_age)
            return
        raise
