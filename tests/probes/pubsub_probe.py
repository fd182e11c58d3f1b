"""functions-framework targets used by tests and benchmarks to observe push delivery.

Launched as ``python -m functions_framework --source=tests/probes/pubsub_probe.py
--target=<name> --signature-type=cloudevent``. Each delivery is appended as one
JSON line to ``$PROBE_LOG`` (arrival time, message id, attributes, and the
envelope keys functions-framework kept), so a test can count deliveries and a
benchmark can time publish -> handler start.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import functions_framework

_lock = threading.Lock()


def _record(event: Any) -> dict[str, Any]:
    arrived = time.time()
    envelope = event.data or {}
    message = envelope.get("message") or {}
    line = {
        "arrived": arrived,
        "message_id": message.get("messageId"),
        "attributes": message.get("attributes") or {},
        "envelope_keys": sorted(envelope),
        "delivery_attempt": envelope.get("deliveryAttempt"),
    }
    with _lock, open(os.environ["PROBE_LOG"], "a") as log:
        log.write(json.dumps(line) + "\n")
    return line


@functions_framework.cloud_event
def arrival(event: Any) -> None:
    """Record the delivery and acknowledge it."""
    _record(event)


@functions_framework.cloud_event
def always_failing(event: Any) -> None:
    """Record the delivery, then fail it (HTTP 500), so Pub/Sub redelivers and dead-letters it."""
    line = _record(event)
    raise RuntimeError(f"probe: failing delivery of {line['message_id']} on purpose")


@functions_framework.cloud_event
def busy(event: Any) -> None:
    """Work ``$PROBE_WORK_S`` seconds (a stage handling a message), record the delivery as done and
    acknowledge it: the function behind the capacity front of tests/probes/burst.py."""
    time.sleep(float(os.environ.get("PROBE_WORK_S", "0")))
    _record(event)


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        with open(path) as log:
            return [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []
