"""Structured logs: one JSON object per line in the cloud, readable text in a terminal.

JSON is chosen when ``RAGBUS_LOG_FORMAT=json`` or when running on Cloud
Functions / Cloud Run (``K_SERVICE`` is set). Every record logged inside a span
carries its trace and span ids, in JSON under the field names Cloud Logging uses
to link a log line to its trace (``logging.googleapis.com/trace`` as
``projects/<project>/traces/<trace id>``, ``logging.googleapis.com/spanId``,
``logging.googleapis.com/trace_sampled``), in text as ``trace=<id>``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime

from opentelemetry import trace

from shared.contract.config import json_logs_setting, log_level_setting
from shared.contract.redaction import redact
from shared.observability.terminal_text import plain


class TraceContextFilter(logging.Filter):
    """Copies the current span's ids onto each record (``otel_trace_id``, ``otel_span_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            record.otel_trace_id = format(ctx.trace_id, "032x")
            record.otel_span_id = format(ctx.span_id, "016x")
            record.otel_sampled = ctx.trace_flags.sampled
        return True


class JsonFormatter(logging.Formatter):
    """Cloud Logging's structured shape: severity, message, time, trace fields."""

    def __init__(self, project: str | None = None) -> None:
        super().__init__()
        self.project = project

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "severity": record.levelname,
            "message": redact(record.getMessage()),  # a URL's ?token=, a key a server echoed
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        trace_id = getattr(record, "otel_trace_id", None)
        if trace_id:
            entry["logging.googleapis.com/trace"] = (
                f"projects/{self.project}/traces/{trace_id}" if self.project else trace_id
            )
            entry["logging.googleapis.com/spanId"] = record.otel_span_id
            entry["logging.googleapis.com/trace_sampled"] = bool(record.otel_sampled)
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """One line per record for a terminal. An exception's traceback is shown only when
    ``tracebacks`` (debugging); otherwise its type and message end the line, which
    already names the URL or input and the reason."""

    def __init__(self, *, tracebacks: bool = True) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if not self.tracebacks and (record.exc_info or record.exc_text):
            exc = record.exc_info[1] if record.exc_info else None
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None})
            if exc is not None and str(exc) not in record.getMessage():
                record.msg, record.args = f"{record.getMessage()} ({type(exc).__name__}: {exc})", None
        # a logged URL or error text comes from outside: no escape sequence reaches the terminal
        # (and no credential: a feed address's ?token=, a key a server echoed)
        line = plain(redact(super().format(record)))
        trace_id = getattr(record, "otel_trace_id", None)
        return f"{line}  trace={trace_id}" if trace_id else line


def log_level(default: int | str = "WARNING") -> str:
    """``RAGBUS_LOG_LEVEL`` (any case), else ``default``."""
    level = log_level_setting() or default
    return logging.getLevelName(level) if isinstance(level, int) else level.strip().upper()


def debugging() -> bool:
    return log_level() == "DEBUG"


def configure_logging(level: int | str = "WARNING", *, tracebacks: bool | None = True) -> None:
    """Install one handler on the root logger (idempotent). ``tracebacks=None``: text logs
    carry tracebacks only at debug level (the CLI: ``RAGBUS_LOG_LEVEL=debug`` or
    ``ragbus --debug``); JSON logs always do."""
    root = logging.getLogger()
    as_json = json_logs_setting()
    chosen = log_level(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(os.environ.get("GOOGLE_CLOUD_PROJECT")) if as_json
                         else TextFormatter(tracebacks=chosen == "DEBUG" if tracebacks is None else tracebacks))
    handler.addFilter(TraceContextFilter())
    root.handlers[:] = [handler]
    root.setLevel(chosen)
