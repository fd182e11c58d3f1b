"""The query record: its shape and the transactions that change it.

One document per query in the ``queries`` collection. Every change goes
through :meth:`StateStore.update` so concurrent stages never lose each
other's writes, and every change is idempotent per (query, iteration, stage).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared import collections
from shared.ports import Doc, StateStore

TERMINAL = {"answered", "failed", "timed_out"}

# The stages of the query loop, as recorded in ``stages_done`` and ``events``.
TRANSFORM = "transformer"
RETRIEVE = "retriever"
GRADE = "grader"
SYNTHESIZE = "synthesizer"


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
    retention_days: int = 30,
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

    Fields the query-loop stages add (see :func:`apply_stage`): ``stages_done``
    (``"<iteration>/<stage>"`` keys, the idempotency record), ``model_fallbacks``
    (model replies that could not be used), ``language``, ``answer_sentences``
    ([{text, citations[]}]), ``answer_provider``; each iteration may also hold
    ``sub_queries_used``, ``transform_source`` (model|fallback), ``grade_source``
    (model|fallback|none), ``should_refine`` and ``failed_thresholds``.
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
        # when the record may be deleted (Firestore TTL in gcp; see infra/firestore.tf)
        "expire_at": (now + timedelta(days=retention_days)).isoformat(),
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


# ------------------------------------------------------------ stage updates


def is_terminal(doc: Doc | None) -> bool:
    return doc is not None and doc.get("status") in TERMINAL


def stage_key(iteration: int, stage: str) -> str:
    """The idempotency key of one stage's work on one iteration."""
    return f"{iteration}/{stage}"


def stage_done(doc: Doc, iteration: int, stage: str) -> bool:
    return stage_key(iteration, stage) in doc.get("stages_done", [])


def iteration_entry(doc: Doc, iteration: int) -> dict[str, Any] | None:
    """The ``iterations[]`` entry of ``iteration`` (None if not recorded yet)."""
    for entry in doc.get("iterations", []):
        if entry.get("iteration") == iteration:
            return entry
    return None


def ensure_iteration(doc: Doc, iteration: int) -> dict[str, Any]:
    """The ``iterations[]`` entry of ``iteration``, created empty if absent (mutates ``doc``)."""
    entry = iteration_entry(doc, iteration)
    if entry is None:
        entry = {
            "iteration": iteration,
            "query": None,
            "sub_queries": [],
            "contexts": [],
            "grade": None,
            "decision": None,
            "timings": {},
        }
        doc.setdefault("iterations", []).append(entry)
        doc["iterations"].sort(key=lambda e: e["iteration"])
    return entry


@dataclass(frozen=True)
class StageResult:
    """What :func:`apply_stage` did: ``applied`` is False for a duplicate or an ended query."""

    doc: Doc | None
    applied: bool
    reason: str = ""


def apply_stage(
    state: StateStore,
    query_id: str,
    *,
    iteration: int,
    stage: str,
    event_type: str,
    detail: str,
    now: datetime,
    change: Callable[[Doc], None],
    model_calls: int = 0,
    elapsed_ms: float | None = None,
) -> StageResult:
    """Record one stage's work on one iteration, exactly once.

    In one transaction: do nothing if the query ended or this (iteration,
    stage) was already recorded; otherwise copy the record, let ``change``
    mutate the copy, add ``model_calls`` to the count, store the stage's
    timing, mark the stage done, append one event, and save. ``change`` must
    be pure (the store may call it again under contention).
    """
    outcome: dict[str, Any] = {}

    def tx(current: Doc | None) -> Doc | None:
        outcome.clear()
        if current is None:
            outcome["reason"] = "no such query"
            return None
        if current.get("status") in TERMINAL:
            outcome["reason"] = f"query already {current['status']}"
            return None
        if stage_done(current, iteration, stage):
            outcome["reason"] = "already recorded"
            return None
        doc = copy.deepcopy(current)
        change(doc)
        if doc.get("status") == "pending":
            doc["status"] = "running"
        doc["model_calls"] = int(doc.get("model_calls") or 0) + model_calls
        if elapsed_ms is not None:
            ensure_iteration(doc, iteration)["timings"][stage] = round(elapsed_ms, 3)
        doc.setdefault("stages_done", []).append(stage_key(iteration, stage))
        doc["updated_at"] = now.isoformat()
        doc.setdefault("events", []).append(
            {"stage": stage, "type": event_type, "at": now.isoformat(), "iteration": iteration, "detail": detail}
        )
        outcome["applied"] = True
        return doc

    doc = state.update(collections.QUERIES, query_id, tx)
    return StageResult(doc=doc, applied=bool(outcome.get("applied")), reason=outcome.get("reason", ""))


def live_record(state: StateStore, query_id: str, now: datetime) -> Doc | None:
    """The query's record if it may still be worked on, else None.

    A query past its deadline is ended as timed out here, so a stage that
    finds it late stops the loop instead of spending more work on it.
    """
    doc = state.get(collections.QUERIES, query_id)
    if doc is None or doc.get("status") in TERMINAL:
        return None
    if datetime.fromisoformat(doc["deadline"]) <= now:
        expire_if_overdue(state, query_id, now)
        return None
    return doc


def best_of(doc: Doc) -> int | None:
    """The iteration with the highest grade score (the earlier one on a tie)."""
    best: tuple[float, int] | None = None
    for entry in doc.get("iterations", []):
        grade = entry.get("grade")
        if not grade:
            continue
        key = (float(grade.get("score", 0.0)), -int(entry["iteration"]))
        if best is None or key > best:
            best = key
    return None if best is None else -best[1]
