"""How many questions this gateway has queued: at most ``RAGBUS_MAX_QUEUED_QUERIES`` submitted and not yet ended.

Each query is bounded by its deadline, but nothing else bounded how many a client may queue: a burst
of submissions filled the bus with work that would mostly end ``timed_out``. Past the cap a question
is refused at once (REST and chat completions: 429 with ``Retry-After``; MCP: a tool error), and the
queries already queued keep their time. The count is kept in this gateway instance's memory (behind a
load balancer each instance counts its own), and a query leaves it when it ends or its deadline passes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import datetime

from shared.contract.deps import Deps
from shared.contract.errors import RetryableError
from shared.query.api import get_query
from shared.query.record import QueryRecord

#: Seconds between two reads of the queued queries' records while the backlog is full (a flood of
#: refused submissions costs one read per queued query a second, not one per submission).
RECHECK_S = 1.0
#: The longest Retry-After sent: queries usually end well before their deadline.
MAX_RETRY_AFTER_S = 5


class BacklogFull(RetryableError):
    """The backlog is at its cap; ``retry_after_s`` is when to try again."""

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{limit} questions are already queued or running here, the most this server takes "
                         f"(RAGBUS_MAX_QUEUED_QUERIES); nothing was queued: try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class QueryBacklog:
    """The queries this gateway submitted that have not ended, at most ``limit`` of them."""

    def __init__(self, deps: Deps, limit: int | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.deps = deps
        self.limit = deps.settings.max_queued_queries if limit is None else limit
        self.monotonic = monotonic
        self._open: dict[str, datetime] = {}  # query id -> its deadline
        self._starting = 0  # admitted, submit_query still running
        self._checked_at = -math.inf
        self._lock = threading.Lock()
        self._recheck_lock = threading.Lock()  # held while the queued queries' records are read

    def submit(self, start: Callable[[], QueryRecord]) -> QueryRecord:
        """Call ``start`` (a ``submit_query``) when a place is free and count its query; raise
        :class:`BacklogFull` (nothing submitted) when none is."""
        self._admit()
        try:
            record = start()
        except BaseException:
            with self._lock:
                self._starting -= 1
            raise
        with self._lock:  # one step: between two, a rival admission would count this query nowhere
            self._starting -= 1
            self._open[record.id] = _deadline(record.deadline, self.deps.clock.now())
        return record

    def _admit(self) -> None:
        if self._take():
            return
        # One recheck at a time, and a rival waits for it to end, then tries again: a rival that found the
        # recheck just begun was refused at once, though the queries it would free had all ended (after a
        # burst, one of four concurrent questions was answered 429 with nothing queued or running).
        with self._recheck_lock:
            if self._take():
                return
            if self.monotonic() - self._checked_at >= RECHECK_S:  # full: drop the queries that ended meanwhile
                self._checked_at = self.monotonic()
                with self._lock:
                    queued = list(self._open)
                ended = [qid for qid in queued if (record := get_query(self.deps, qid)) is None or record.ended]
                with self._lock:
                    for qid in ended:
                        self._open.pop(qid, None)
                if self._take():
                    return
        with self._lock:
            soonest = min(self._open.values(), default=None)
        wait = (soonest - self.deps.clock.now()).total_seconds() if soonest else 1.0
        raise BacklogFull(self.limit, max(1, min(MAX_RETRY_AFTER_S, math.ceil(wait))))

    def _take(self) -> bool:
        now = self.deps.clock.now()
        with self._lock:
            for qid in [qid for qid, deadline in self._open.items() if deadline <= now]:
                del self._open[qid]  # past its deadline: it ends timed_out, whoever reads it
            if len(self._open) + self._starting >= self.limit:
                return False
            self._starting += 1
            return True


def _deadline(value: str, now: datetime) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return now  # no usable deadline: overdue, as QueryRecord.deadline_passed counts it
