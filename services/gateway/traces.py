"""A query's trace as waterfall rows: from the local span store, or from Cloud Trace on Google Cloud."""

from __future__ import annotations

import functools
from typing import Any

from shared.query.record import QueryRecord


@functools.lru_cache(maxsize=4)
def _span_store(path: str) -> Any:
    """One reader per span store file, reused across requests (not one per request)."""
    from shared.adapters.local.spans import SqliteSpanStore

    return SqliteSpanStore(path)


def query_trace(settings: Any, record: QueryRecord) -> dict[str, Any] | None:
    """``{trace_id, duration_ms, rows}`` of the query's trace, or None when none is stored here."""
    from shared.observability.waterfall import rows

    if not settings.traces_path.exists():
        return None
    store = _span_store(str(settings.traces_path))
    trace_id = record.trace_id or store.trace_of_query(record.id)
    spans = store.spans_of_trace(trace_id) if trace_id else []
    if not spans:
        return None
    drawn = rows(spans)
    end = max(r["offset_ms"] + r["duration_ms"] for r in drawn)
    return {"trace_id": trace_id, "duration_ms": round(end, 3), "rows": drawn}


def cloud_traces(settings: Any) -> bool:
    """Whether this gateway's spans go to Cloud Trace (the gcp runtime, not on the emulators)."""
    from shared.runtime.telemetry import on_emulators

    return settings.runtime == "gcp" and settings.tracing and not on_emulators()


@functools.lru_cache(maxsize=2)
def cloud_trace_reader(project: str) -> Any:
    """One Cloud Trace reader per project, with the instance's Google credentials."""
    from shared.adapters.gcp.cloud_trace import CloudTraceReader
    from shared.runtime.telemetry import google_session

    return CloudTraceReader(project, google_session())


def cloud_query_trace(settings: Any, record: QueryRecord) -> dict[str, Any]:
    """The query's trace read from Cloud Trace, or a note saying why not and where to look."""
    from shared.adapters.gcp.cloud_trace import TraceUnavailable, console_url
    from shared.observability.waterfall import rows

    if not record.trace_id:
        return {"trace_id": None, "duration_ms": 0.0, "rows": [],
                "note": "this query has no trace id (it was submitted with tracing off)"}
    link = console_url(settings.gcp_project or "", record.trace_id)
    try:
        drawn = rows(cloud_trace_reader(settings.gcp_project or "").spans_of_trace(record.trace_id))
    except TraceUnavailable as exc:
        return {"trace_id": record.trace_id, "duration_ms": 0.0, "rows": [], "console_url": link,
                "note": f"{exc}; open the trace in the Cloud console: {link}"}
    except Exception as exc:  # noqa: BLE001 - credentials missing or broken: the link still helps
        return {"trace_id": record.trace_id, "duration_ms": 0.0, "rows": [], "console_url": link,
                "note": f"Cloud Trace cannot be read from here ({type(exc).__name__}: {str(exc)[:200]}); "
                        f"open the trace in the Cloud console: {link}"}
    end = max(r["offset_ms"] + r["duration_ms"] for r in drawn)
    return {"trace_id": record.trace_id, "duration_ms": round(end, 3), "rows": drawn, "console_url": link}
