"""The query record: its shape and the transactions that change it.

One document per query in the ``queries`` collection. Every change goes
through :meth:`StateStore.update` so concurrent stages never lose each
other's writes, and every change is idempotent per (query, iteration, stage).
"""

from __future__ import annotations

from datetime import datetime

from shared import collections
from shared.ports import Doc, StateStore

TERMINAL = {"answered", "failed", "timed_out"}


def fail_query(state: StateStore, query_id: str, reason: str, now: datetime) -> Doc | None:
    """End a query that has not ended yet as failed, keeping the reason."""

    def change(doc: Doc | None) -> Doc | None:
        if doc is None or doc.get("status") in TERMINAL:
            return None
        doc = dict(doc)
        doc["status"] = "failed"
        doc["outcome"] = "failed"
        doc["error"] = reason
        doc["updated_at"] = now.isoformat()
        doc.setdefault("events", []).append(
            {"stage": "runtime", "type": "failed", "at": now.isoformat(), "detail": reason}
        )
        return doc

    return state.update(collections.QUERIES, query_id, change)


def new_query_record(
    query_id: str,
    query: str,
    *,
    top_k: int,
    max_iterations: int,
    max_model_calls: int,
    now: datetime,
    timeout_s: float,
    trace_id: str | None = None,
) -> Doc:
    """The record the gateway creates; stages fill it in.

    Shape (the contract the gateway, CLI, MCP and web page read):
    ``id, status (pending|running|answered|failed|timed_out), outcome (null until
    the end; then answered|answered_with_caveat|not_answerable|failed|timed_out),
    original_query, current_query, iteration, top_k, max_iterations,
    model_calls, max_model_calls, created_at, updated_at, deadline,
    iterations[] ({iteration, query, sub_queries, contexts[], grade{}, decision,
    timings{stage: ms}}), best_iteration, answer, citations[] ({id, title, url,
    document_id, chunk_id}), trace_id, error, events[] ({stage, type, at,
    iteration, detail})``.
    """
    from datetime import timedelta

    return {
        "id": query_id,
        "status": "pending",
        "outcome": None,
        "original_query": query,
        "current_query": query,
        "iteration": 0,
        "top_k": top_k,
        "max_iterations": max_iterations,
        "model_calls": 0,
        "max_model_calls": max_model_calls,
        "created_at": now.isoformat(),
        "updated_at": now.isoformat(),
        "deadline": (now + timedelta(seconds=timeout_s)).isoformat(),
        "iterations": [],
        "best_iteration": None,
        "answer": None,
        "citations": [],
        "trace_id": trace_id,
        "error": None,
        "events": [{"stage": "gateway", "type": "submitted", "at": now.isoformat(), "iteration": 0}],
    }


def expire_if_overdue(state: StateStore, query_id: str, now: datetime) -> Doc | None:
    """Mark a query past its deadline as timed out (readers call this, so none hangs)."""

    def change(doc: Doc | None) -> Doc | None:
        if doc is None or doc.get("status") in TERMINAL:
            return None
        if datetime.fromisoformat(doc["deadline"]) > now:
            return None
        doc = dict(doc)
        doc["status"] = "timed_out"
        doc["outcome"] = "timed_out"
        doc["error"] = f"no answer before the deadline {doc['deadline']}"
        doc["updated_at"] = now.isoformat()
        doc.setdefault("events", []).append(
            {"stage": "runtime", "type": "timed_out", "at": now.isoformat(), "detail": doc["error"]}
        )
        return doc

    return state.update(collections.QUERIES, query_id, change)
