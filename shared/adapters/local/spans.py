"""The embedded runtime's span store: finished spans in SQLite, read by `ragbus trace`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from shared.adapters.local.sqlite import SqliteDatabase

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
  trace_id TEXT NOT NULL,
  span_id TEXT NOT NULL,
  parent_id TEXT,
  name TEXT NOT NULL,
  kind TEXT NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  status TEXT NOT NULL,
  status_message TEXT,
  attributes TEXT NOT NULL,
  events TEXT NOT NULL,
  query_id TEXT,
  PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS spans_query ON spans(query_id);
"""


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


class SqliteSpanStore(SpanExporter):
    """An OpenTelemetry exporter writing to SQLite, and the queries that read it back."""

    def __init__(self, path: Path | str) -> None:
        self._db = SqliteDatabase(path, _SCHEMA)

    # -------------------------------------------------------------- export

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        rows = []
        for span in spans:
            ctx = span.get_span_context()
            attributes = {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()}
            if span.resource is not None and "service.name" in span.resource.attributes:
                attributes.setdefault("service.name", span.resource.attributes["service.name"])
            rows.append((
                _hex(ctx.trace_id, 32),
                _hex(ctx.span_id, 16),
                _hex(span.parent.span_id, 16) if span.parent else None,
                span.name,
                span.kind.name,
                span.start_time or 0,
                span.end_time or 0,
                span.status.status_code.name,
                span.status.description,
                json.dumps(attributes, default=str),
                json.dumps([{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events], default=str),
                attributes.get("rag.query_id"),
            ))
        try:
            with self._db.transaction() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows
                )
        except Exception:  # noqa: BLE001 - losing spans must never break the pipeline
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._db.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # ---------------------------------------------------------------- read

    def delete_ended_before(self, cutoff_ns: int) -> int:
        """Delete the spans that ended before ``cutoff_ns`` (nanoseconds since the epoch). A cutoff
        past what SQLite's 64-bit integers hold (a clock set beyond the year 2262) is every span."""
        cutoff_ns = max(-(2**63), min(cutoff_ns, 2**63 - 1))
        with self._db.transaction() as conn:
            return conn.execute("DELETE FROM spans WHERE end_ns < ?", (cutoff_ns,)).rowcount

    def delete_older_than(self, days: int, now_s: float) -> int:
        """Delete the spans that ended more than ``days`` before ``now_s`` (seconds since the epoch): the
        retention of RAGBUS_TRACE_RETENTION_DAYS, wherever a span store is held to it."""
        return self.delete_ended_before(int((now_s - days * 86400) * 1e9))

    def spans_of_trace(self, trace_id: str) -> list[dict[str, Any]]:
        rows = self._db.connection().execute(
            "SELECT * FROM spans WHERE trace_id = ? ORDER BY start_ns", (trace_id,)
        ).fetchall()
        return [self._row(r) for r in rows]

    def trace_of_query(self, query_id: str) -> str | None:
        row = self._db.connection().execute(
            "SELECT trace_id FROM spans WHERE query_id = ? ORDER BY start_ns LIMIT 1", (query_id,)
        ).fetchone()
        return row[0] if row else None

    def slowest_queries(self, limit: int = 10, *, order: str = "duration") -> list[dict[str, Any]]:
        """Traces that carry a query id, by wall time (first start to last end) or most recent."""
        order_by = "(MAX(s.end_ns) - MIN(s.start_ns)) DESC" if order == "duration" else "MIN(s.start_ns) DESC"
        rows = self._db.connection().execute(
            "SELECT s.trace_id, MIN(s.query_id) AS query_id, MIN(s.start_ns) AS start_ns, "
            "MAX(s.end_ns) AS end_ns, COUNT(*) AS spans FROM spans s "
            "WHERE s.trace_id IN (SELECT trace_id FROM spans WHERE query_id IS NOT NULL) "
            f"GROUP BY s.trace_id ORDER BY {order_by} LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            {"trace_id": r["trace_id"], "query_id": r["query_id"], "spans": r["spans"],
             "duration_ms": (r["end_ns"] - r["start_ns"]) / 1e6, "start_ns": r["start_ns"]}
            for r in rows
        ]

    @staticmethod
    def _row(r: Any) -> dict[str, Any]:
        return {
            "trace_id": r["trace_id"], "span_id": r["span_id"], "parent_id": r["parent_id"],
            "name": r["name"], "kind": r["kind"], "start_ns": r["start_ns"], "end_ns": r["end_ns"],
            "duration_ms": (r["end_ns"] - r["start_ns"]) / 1e6, "status": r["status"],
            "status_message": r["status_message"], "attributes": json.loads(r["attributes"]),
            "events": json.loads(r["events"]),
        }
