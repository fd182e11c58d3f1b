"""Structured logs: one JSON object per line in the cloud, readable text in a terminal.

JSON is chosen when ``RAGBUS_LOG_FORMAT=json`` or when running on Cloud
Functions / Cloud Run (``K_SERVICE`` is set). Trace correlation fields are
added by the tracing layer through ``logging`` record attributes.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    """Cloud Logging's structured shape: severity, message, time, plus extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "severity": record.levelname,
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        for key in ("logging.googleapis.com/trace", "logging.googleapis.com/spanId", "stage", "query_id"):
            value = getattr(record, key.replace("/", "_").replace(".", "_"), None)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: int | str = "WARNING") -> None:
    """Install one handler on the root logger (idempotent)."""
    root = logging.getLogger()
    as_json = os.environ.get("RAGBUS_LOG_FORMAT", "").lower() == "json" or "K_SERVICE" in os.environ
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if as_json else logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
    )
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("RAGBUS_LOG_LEVEL", level))
