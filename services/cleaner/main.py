"""Cloud Functions entry point of the cleaner (Pub/Sub push of ``document-fetched``).

Thin on purpose: decode the CloudEvent, hand the delivery to the shared
dispatcher with this instance's lazily built dependencies, record a permanent
failure as a dead letter and acknowledge it, and raise on RETRY so the platform
redelivers with backoff.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

import functions_framework

from shared.runtime.dispatch import Outcome, handle_delivery, record_dead_letter
from shared.runtime.stages import consumers_of

_STAGE = "cleaner"
_deps: Any = None
_deps_lock = threading.Lock()


def _get_deps() -> Any:
    # Built once per instance on first use, then reused (clients are costly).
    global _deps
    if _deps is None:
        with _deps_lock:
            if _deps is None:
                from shared.config import load_settings
                from shared.runtime.bootstrap import build_local

                # Cloud wiring (build for settings.runtime == "gcp") is completed separately.
                _deps = build_local(load_settings()).deps
    return _deps


@functions_framework.cloud_event
def cleaner(event: Any) -> None:
    message = event.data["message"]
    data = base64.b64decode(message.get("data", ""))
    attributes = dict(message.get("attributes") or {})
    message_id = message.get("messageId", "")
    attempt = int(event.data.get("deliveryAttempt") or 1)
    (consumer,) = consumers_of(_STAGE)
    deps = _get_deps()
    result = handle_delivery(consumer, data, attributes, deps, attempt=attempt, message_id=message_id)
    if result.outcome is Outcome.RETRY:
        raise RuntimeError(f"{_STAGE}: {result.error}; the platform will redeliver")
    if result.outcome is Outcome.DEAD:
        record_dead_letter(deps, consumer, data, attributes, result.error or "", attempts=attempt,
                           message_id=message_id)
