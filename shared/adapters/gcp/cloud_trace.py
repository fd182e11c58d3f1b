"""A query's trace read back from Cloud Trace, as the span rows the waterfall draws.

On Google Cloud the stages' spans go to the Telemetry API (OTLP) and are stored by
Cloud Trace, not in a local ``traces.db``; the gateway's ``GET /v1/queries/{id}/trace``
reads them with the Cloud Trace API v1 ``projects.traces.get``
(``GET https://cloudtrace.googleapis.com/v1/projects/{projectId}/traces/{traceId}``,
cloud.google.com/trace/docs/reference/v1/rest/v1/projects.traces/get). Its answer is a
``Trace``: ``projectId``, ``traceId`` and ``spans[]`` of ``TraceSpan`` (``spanId`` and
``parentSpanId`` as decimal uint64 strings, ``kind``, ``name``, ``startTime`` and
``endTime`` as RFC 3339 with up to nanoseconds, ``labels`` as string pairs). Reading
needs ``roles/cloudtrace.user`` (``infra/iam.tf`` grants it to the gateway).

The answer is bounded while it is read (size and time); what cannot be read is a
:class:`TraceUnavailable` saying why, and the gateway then links to the Trace console.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

CLOUD_TRACE_URL = "https://cloudtrace.googleapis.com"
MAX_TRACE_BYTES = 8 << 20  # a query's trace is tens of spans; anything near this is not ours
CONNECT_TIMEOUT_S = 5.0
READ_DEADLINE_S = 10.0
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
# Labels whose presence marks a failed span, as OpenTelemetry spans land in Cloud Trace.
_ERROR_LABELS = ("/error/message", "error.message", "exception.message")


class TraceUnavailable(Exception):
    """The trace cannot be read from Cloud Trace; the message says why (one line)."""


class TraceNotFound(TraceUnavailable):
    """Cloud Trace has no trace with this id (yet: spans arrive some seconds after they end)."""


def console_url(project: str, trace_id: str) -> str:
    """The trace in the Cloud console's Trace Explorer."""
    return (f"https://console.cloud.google.com/traces/explorer;traceId={quote(trace_id, safe='')}"
            f"?project={quote(project, safe='')}")


def _nanos(value: str) -> int:
    """RFC 3339 (``2014-10-02T15:01:23.045123456Z``) as nanoseconds since the epoch, keeping the nanoseconds."""
    match = _RFC3339.match(value or "")
    if not match:
        raise TraceUnavailable(f"Cloud Trace sent a span time that is not RFC 3339: {str(value)[:60]!r}")
    whole, fraction, zone = match.groups()
    stamp = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).astimezone(UTC)
    return int(stamp.timestamp()) * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


def _span_id(value: Any) -> str | None:
    """A v1 span id (decimal uint64) as OpenTelemetry writes span ids (16 hex digits)."""
    if value in (None, "", "0", 0):
        return None
    try:
        return f"{int(str(value)):016x}"
    except ValueError:
        return str(value)


def _label_value(value: str) -> Any:
    """Labels are strings in v1; the waterfall formats numbers and flags, so read them back."""
    if value in ("true", "false"):
        return value == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def trace_spans(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A v1 ``Trace`` as span rows (the local span store's shape: ids, times in ns, attributes)."""
    spans = trace.get("spans")
    if not isinstance(spans, list):
        raise TraceUnavailable("Cloud Trace answered without a 'spans' list")
    rows = []
    for span in spans:
        if not isinstance(span, dict):
            raise TraceUnavailable("Cloud Trace sent a span that is not an object")
        labels = span.get("labels") if isinstance(span.get("labels"), dict) else {}
        start, end = _nanos(span.get("startTime", "")), _nanos(span.get("endTime", ""))
        error = next((str(labels[k]) for k in _ERROR_LABELS if labels.get(k)), None)
        failed = error is not None or str(labels.get("otel.status_code", "")).upper() == "ERROR"
        rows.append({
            "trace_id": str(trace.get("traceId") or ""),
            "span_id": _span_id(span.get("spanId")) or "",
            "parent_id": _span_id(span.get("parentSpanId")),
            "name": str(span.get("name") or ""),
            "kind": str(span.get("kind") or "SPAN_KIND_UNSPECIFIED"),
            "start_ns": start,
            "end_ns": end,
            "duration_ms": max(0, end - start) / 1e6,
            "status": "ERROR" if failed else "OK",
            "status_message": error or str(labels.get("otel.status_description") or "") or None,
            "attributes": {str(k): _label_value(str(v)) for k, v in labels.items()},
            "events": [],
        })
    return rows


class CloudTraceReader:
    """Reads one trace at a time with ``projects.traces.get``.

    ``session`` is a ``requests``-style session that adds credentials (an
    ``AuthorizedSession`` on Google Cloud); ``base_url`` is the API's root.
    """

    def __init__(self, project: str, session: Any, base_url: str = CLOUD_TRACE_URL) -> None:
        self.project = project
        self.session = session
        self.base_url = base_url.rstrip("/")

    def spans_of_trace(self, trace_id: str) -> list[dict[str, Any]]:
        if not _TRACE_ID.match(trace_id or ""):
            raise TraceUnavailable(f"{trace_id!r} is not a trace id (32 lower-case hex digits)")
        url = f"{self.base_url}/v1/projects/{quote(self.project, safe='')}/traces/{trace_id}"
        try:
            response = self.session.get(url, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_DEADLINE_S),
                                        headers={"Accept": "application/json"})
        except Exception as exc:  # noqa: BLE001 - any transport failure is "cannot read it now"
            raise TraceUnavailable(f"Cloud Trace did not answer: {type(exc).__name__}: {str(exc)[:200]}") from exc
        with response:
            body = self._bounded_body(response)
            status = response.status_code
        if status == 404:
            raise TraceNotFound(f"Cloud Trace has no trace {trace_id} in project {self.project} (yet)")
        if status in (401, 403):
            raise TraceUnavailable(f"Cloud Trace refused to read trace {trace_id} (HTTP {status}): the gateway's "
                                   "service account needs roles/cloudtrace.user on the project")
        if status != 200:
            raise TraceUnavailable(f"Cloud Trace answered HTTP {status} for trace {trace_id}")
        try:
            trace = json.loads(body)
        except ValueError as exc:
            raise TraceUnavailable("Cloud Trace answered with something that is not JSON") from exc
        if not isinstance(trace, dict):
            raise TraceUnavailable("Cloud Trace answered with JSON that is not a Trace object")
        if not trace.get("spans"):
            raise TraceNotFound(f"Cloud Trace holds no spans of trace {trace_id} (yet)")
        return trace_spans(trace)

    @staticmethod
    def _bounded_body(response: Any) -> bytes:
        deadline = time.monotonic() + READ_DEADLINE_S
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_content(chunk_size=64 * 1024):
            size += len(chunk)
            if size > MAX_TRACE_BYTES:
                raise TraceUnavailable(f"Cloud Trace's answer is larger than {MAX_TRACE_BYTES} bytes")
            if time.monotonic() > deadline:
                raise TraceUnavailable(f"Cloud Trace's answer took longer than {READ_DEADLINE_S:.0f} s to read")
            chunks.append(chunk)
        return b"".join(chunks)
