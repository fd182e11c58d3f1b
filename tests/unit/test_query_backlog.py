"""The gateway's bounded queue of questions (services/gateway/backlog.py) at its edges: no admission slips
in while a submitted query moves from "starting" to "queued", and a submission that fails frees its place."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from services.gateway.backlog import BacklogFull, QueryBacklog


def _backlog(limit: int) -> QueryBacklog:
    deps = SimpleNamespace(settings=SimpleNamespace(max_queued_queries=limit),
                           clock=SimpleNamespace(now=lambda: datetime.now(UTC)))
    return QueryBacklog(deps)  # type: ignore[arg-type]


def _record(query_id: str) -> SimpleNamespace:
    return SimpleNamespace(id=query_id, deadline=(datetime.now(UTC) + timedelta(seconds=60)).isoformat())


class _WatchedLock:
    """A lock that lets a rival admission run each time it is released, once armed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rival = None

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
        rival, self.rival = self.rival, None
        if rival is not None:
            rival()


def test_no_rival_is_admitted_while_a_submitted_query_becomes_queued(monkeypatch):
    monkeypatch.setattr("services.gateway.backlog.get_query", lambda deps, query_id: SimpleNamespace(ended=False))
    backlog = _backlog(1)
    backlog._lock = lock = _WatchedLock()
    admitted: list[bool] = []

    def start() -> SimpleNamespace:
        # the first release after this returns is where a rival could find the place free
        lock.rival = lambda: admitted.append(backlog._take())
        return _record("q1")

    backlog.submit(start)
    assert admitted == [False]  # the one place is taken by q1 throughout
    with pytest.raises(BacklogFull):
        backlog.submit(lambda: _record("q2"))


def test_a_submission_that_fails_frees_its_place():
    backlog = _backlog(1)

    def refused() -> SimpleNamespace:
        raise ValueError("bad question")

    with pytest.raises(ValueError):
        backlog.submit(refused)
    assert backlog.submit(lambda: _record("q1")).id == "q1"
