"""The transactions that change a query record.

One document per query in the ``queries`` collection; its shape and its typed
form live in :mod:`shared.query.record`. Every change goes through
:meth:`StateStore.update` so concurrent stages never lose each other's writes,
and every change is idempotent per (query, iteration, stage).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.contract import state_collections
from shared.contract.ports import Doc, StateStore
from shared.query.call_deadline import note_query_deadline
from shared.query.record import TERMINAL, QueryRecord, stage_key

__all__ = [
    "TERMINAL",
    "StageResult",
    "StageVerdict",
    "apply_stage",
    "expire_if_overdue",
    "fail_query",
    "live_record",
    "new_query_record",
    "read_record",
    "stage_key",
    "still_live",
]


def new_query_record(query_id: str, query: str, **fields: Any) -> Doc:
    """The stored document of a new query (see :meth:`QueryRecord.new` for the fields)."""
    return QueryRecord.new(query_id, query, **fields).to_doc()


def read_record(state: StateStore, query_id: str) -> QueryRecord | None:
    """The stored record of ``query_id``, typed, or None."""
    doc = state.get(state_collections.QUERIES, query_id)
    return None if doc is None else QueryRecord.from_doc(doc)


def _change_record(
    state: StateStore, query_id: str, fn: Callable[[QueryRecord], bool]
) -> QueryRecord | None:
    """Run ``fn`` on the typed record inside the store's transaction; ``fn`` returns False to
    leave it unchanged. Returns the record as stored afterwards (None when there is none)."""

    def tx(doc: Doc | None) -> Doc | None:
        if doc is None:
            return None
        record = QueryRecord.from_doc(doc)
        return record.to_doc() if fn(record) else None

    stored = state.update(state_collections.QUERIES, query_id, tx)
    return None if stored is None else QueryRecord.from_doc(stored)


def fail_query(state: StateStore, query_id: str, reason: str, now: datetime) -> QueryRecord | None:
    """End a query that has not ended yet as failed, keeping the reason."""

    def change(record: QueryRecord) -> bool:
        if record.ended:
            return False
        record.end("failed", reason, now)
        return True

    return _change_record(state, query_id, change)


def expire_if_overdue(state: StateStore, query_id: str, now: datetime) -> QueryRecord | None:
    """Mark a query past its deadline as timed out (readers call this, so none hangs)."""

    def change(record: QueryRecord) -> bool:
        if record.ended or datetime.fromisoformat(record.deadline) > now:
            return False
        record.end("timed_out", f"no answer before the deadline {record.deadline}", now)
        return True

    return _change_record(state, query_id, change)


# ------------------------------------------------------------ stage updates


class StageVerdict(enum.Enum):
    """What a stage does after :func:`apply_stage`."""

    RECORDED = "recorded"  # this delivery did the work: publish the next message
    DUPLICATE = "duplicate"  # an earlier delivery did it: publish again (that publish may be lost)
    ENDED = "ended"  # no such query, or it has ended: stop here


@dataclass(frozen=True)
class StageResult:
    """What :func:`apply_stage` did, the record as stored after it, and why when nothing changed."""

    record: QueryRecord | None
    verdict: StageVerdict
    reason: str = ""

    @property
    def applied(self) -> bool:
        return self.verdict is StageVerdict.RECORDED

    @property
    def publish(self) -> bool:
        """True when the stage's next message should go out (again, for a duplicate)."""
        return self.verdict is not StageVerdict.ENDED and self.record is not None


def apply_stage(
    state: StateStore,
    query_id: str,
    *,
    iteration: int,
    stage: str,
    event_type: str,
    detail: str,
    now: datetime,
    change: Callable[[QueryRecord], None],
    model_calls: int = 0,
    elapsed_ms: float | None = None,
) -> StageResult:
    """Record one stage's work on one iteration, exactly once.

    In one transaction: do nothing if the query ended or this (iteration,
    stage) was already recorded; otherwise let ``change`` change a fresh copy
    of the record, add ``model_calls`` to the count, store the stage's timing,
    mark the stage done, append one event, and save. ``change`` must be pure
    (the store may call it again under contention).
    """
    outcome: dict[str, object] = {}

    def tx(record: QueryRecord) -> bool:
        outcome.clear()
        if record.ended:
            outcome.update(verdict=StageVerdict.ENDED, reason=f"query already {record.status}")
            return False
        if record.stage_done(iteration, stage):
            outcome.update(verdict=StageVerdict.DUPLICATE, reason="already recorded")
            return False
        change(record)
        if record.status == "pending":
            record.status = "running"
        record.model_calls += model_calls
        entry = record.entry(iteration)  # a refinement that brought nothing new added no iteration to time
        if elapsed_ms is not None and entry is not None:
            entry.timings[stage] = round(elapsed_ms, 3)
        record.stages_done.append(stage_key(iteration, stage))
        record.updated_at = now.isoformat()
        record.add_event(stage, event_type, now, iteration=iteration, detail=detail)
        outcome.update(verdict=StageVerdict.RECORDED)
        return True

    record = _change_record(state, query_id, tx)
    if record is None:
        return StageResult(None, StageVerdict.ENDED, "no such query")
    return StageResult(record, outcome["verdict"], str(outcome.get("reason", "")))  # type: ignore[arg-type]


def live_record(state: StateStore, query_id: str, now: datetime) -> QueryRecord | None:
    """The query's record if it may still be worked on, else None (see :func:`still_live`)."""
    return still_live(state, read_record(state, query_id), now)


def still_live(state: StateStore, record: QueryRecord | None, now: datetime) -> QueryRecord | None:
    """``record`` if its query may still be worked on, else None.

    A query past its deadline is ended as timed out here, so a stage that
    finds it late stops the loop instead of spending more work on it.
    """
    if record is None or record.ended:
        return None
    if datetime.fromisoformat(record.deadline) <= now:
        expire_if_overdue(state, record.id, now)
        return None
    note_query_deadline(record.deadline, now)  # a model call for it waits no longer than this
    return record
