"""Cloud Function entry point of the feed poller (``functions-framework --target=feed_poller``).

Triggered by Pub/Sub (push, as a CloudEvent) on ``feed-poll-requested``. It only
decodes the event and hands the delivery to the shared dispatcher; the logic is
in :mod:`services.feed_poller.handler`. Raising makes the platform redeliver
(RETRY); a permanent failure is recorded as a dead letter and acknowledged.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any

import functions_framework
from cloudevents.http import CloudEvent

from shared.runtime.deps import Deps
from shared.runtime.dispatch import Outcome, handle_delivery, record_dead_letter
from shared.runtime.stages import consumers_of

log = logging.getLogger("ragbus.feed_poller")

_CONSUMER = consumers_of("feed_poller")[0]
_deps: Deps | None = None
_deps_lock = threading.Lock()


def deps() -> Deps:
    """This instance's Deps, built on first use and reused across invocations."""
    global _deps
    if _deps is None:
        with _deps_lock:
            if _deps is None:
                from shared.config import load_settings
                from shared.runtime.bootstrap import build_local

                # The gcp wiring (Firestore, GCS, Pub/Sub publisher) replaces this
                # in the cloud-wiring issue; the contract of this entry point stays.
                _deps = build_local(load_settings()).deps
    return _deps


@functions_framework.cloud_event
def feed_poller(event: CloudEvent) -> None:
    """Handle one Pub/Sub push delivery of ``FeedPollRequested``."""
    envelope: dict[str, Any] = event.data or {}
    message = envelope.get("message") or {}
    data = base64.b64decode(message.get("data") or b"")
    attributes = dict(message.get("attributes") or {})
    message_id = str(message.get("messageId") or message.get("message_id") or "")
    attempt = int(envelope.get("deliveryAttempt") or message.get("deliveryAttempt") or 1)
    result = handle_delivery(
        _CONSUMER, data, attributes, deps(), attempt=attempt, message_id=message_id
    )
    if result.outcome is Outcome.RETRY:
        raise RuntimeError(f"feed_poller will be retried: {result.error}")
    if result.outcome is Outcome.DEAD:
        record_dead_letter(
            deps(),
            _CONSUMER,
            data,
            attributes,
            result.error or "",
            attempts=attempt,
            message_id=message_id,
        )
        log.warning("feed_poller dead-lettered %s: %s", message_id, result.error)
