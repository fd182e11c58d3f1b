"""How long a model call made for a query may take: no longer than the query has left.

A stage reads the query's record (:func:`shared.query.state.live_record`) before it
calls the model; that read notes the query's deadline for the rest of the
delivery, and a provider cuts its own per-call timeout to :func:`query_time_left`.
Without it, two slow replies held both transformer workers of ``ragbus serve``
past the deadline of their queries while later queries waited behind them, and
a ``Retry-After`` was waited out on a query that could no longer use the reply.

The note lives in a context variable: the delivery runs in a copy of the
context (:mod:`shared.runtime.dispatch`), so it never outlives its message.
"""

from __future__ import annotations

import contextvars
import time
from datetime import datetime

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("query_deadline", default=None)


def note_query_deadline(deadline: str, now: datetime) -> None:
    """The query being worked on ends at ``deadline`` (ISO 8601, as stored), ``now`` by the stage's clock."""
    try:
        left = (datetime.fromisoformat(deadline) - now).total_seconds()
    except (TypeError, ValueError):
        return
    _deadline.set(time.monotonic() + left)


def query_time_left() -> float | None:
    """Seconds the current query has left; None when no query is noted or its time is already
    up (a stage does not call the model for an overdue query, so such a note is stale)."""
    deadline = _deadline.get()
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    return left if left > 0 else None
