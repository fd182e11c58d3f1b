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


def test_a_rival_that_finds_the_recheck_under_way_waits_for_it_and_is_admitted(monkeypatch):
    """After a burst the backlog is full of queries that have ended; the first submission past it reads their
    records and frees their places. A rival arriving while it read found the recheck done "within the last
    second" and was refused (429: "64 questions are already queued or running here") with nothing queued or
    running: after a flood, one of four concurrent questions over REST."""
    reading, release = threading.Event(), threading.Event()

    def get_query(deps, query_id):
        reading.set()
        release.wait(5)
        return SimpleNamespace(ended=True)

    monkeypatch.setattr("services.gateway.backlog.get_query", get_query)
    backlog = _backlog(2)
    backlog.submit(lambda: _record("q0"))
    backlog.submit(lambda: _record("q1"))  # both end (get_query says so) but still hold the two places
    outcomes: dict[str, object] = {}

    def submit(query_id: str) -> None:
        try:
            outcomes[query_id] = backlog.submit(lambda: _record(query_id)).id
        except BacklogFull as exc:
            outcomes[query_id] = exc

    first = threading.Thread(target=submit, args=("q2",))
    first.start()
    assert reading.wait(5)  # q2's recheck is reading the records
    rival = threading.Thread(target=submit, args=("q3",))
    rival.start()
    rival.join(0.3)
    release.set()
    first.join(5)
    rival.join(5)
    assert outcomes == {"q2": "q2", "q3": "q3"}, outcomes  # the two ended queries' places, one each
    with pytest.raises(BacklogFull):  # and the cap still holds
        backlog.submit(lambda: _record("q4"))
