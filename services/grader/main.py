"""Cloud Functions entry point of the grader (Pub/Sub push as a CloudEvent).

Thin on purpose: decode the CloudEvent, hand the delivery to the shared
dispatcher with this instance's lazily built dependencies, and raise when the
outcome is RETRY so the platform redelivers with backoff.
"""

from __future__ import annotations

import base64
import threading

import functions_framework

from shared.messages import MESSAGE_TYPES
from shared.runtime.dispatch import Outcome, handle_delivery
from shared.runtime.stages import consumers_of

_STAGE = "grader"
_deps = None
_deps_lock = threading.Lock()


def _get_deps():
    # Built once per instance, on first use (clients are costly; see python-docs-samples).
    global _deps
    if _deps is None:
        with _deps_lock:
            if _deps is None:
                from shared.config import load_settings
                from shared.runtime.bootstrap import build_deps

                _deps = build_deps(load_settings())
    return _deps


def _consumer_for(attributes: dict[str, str]):
    """The consumer whose topic carries this message type (the stage may read several topics)."""
    consumers = consumers_of(_STAGE)
    cls = MESSAGE_TYPES.get(attributes.get("type", ""))
    for consumer in consumers:
        if cls is not None and consumer.topic == cls.TOPIC:
            return consumer
    return consumers[0]


@functions_framework.cloud_event
def grader(event) -> None:
    message = event.data["message"]
    data = base64.b64decode(message.get("data", ""))
    attributes = dict(message.get("attributes") or {})
    consumer = _consumer_for(attributes)
    result = handle_delivery(consumer, data, attributes, _get_deps(), message_id=message.get("messageId", ""))
    if result.outcome is Outcome.RETRY:
        raise RuntimeError(f"{_STAGE}: {result.error}; the platform will redeliver")
