"""Retention under attack (issue 35's own campaign): a sweep with the clock far in the future (past
what 64-bit nanoseconds hold, and at the year 9999), sweeps running beside an ingest and beside a
query, a conversation expiring between two of its turns, and a query asked with the clock at 9999.
Nothing a sweep may not delete is lost, and what it may is refused clearly, never a 500."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.gateway.server import serve
from shared.adapters.local.spans import SqliteSpanStore
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.runtime.bootstrap import build_local
from shared.runtime.retention import sweep
from tests.hostile.crash import census, start_captured, write_corpus
from tests.support import run_cli

pytestmark = pytest.mark.hostile


class FixedClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _system(home, **env):
    return build_local(load_settings({"RAGBUS_HOME": str(home), **env}))


def _span(store: SqliteSpanStore, trace_id: str, end_ns: int) -> None:
    with store._db.transaction() as conn:  # a span as the exporter writes it
        conn.execute("INSERT INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (trace_id, "0" * 16, None, "gateway.submit", "SERVER", end_ns - 1000, end_ns, "OK", None,
                      "{}", "[]", None))


@pytest.mark.parametrize("future", [datetime(2262, 12, 1, tzinfo=UTC), datetime(2300, 1, 1, tzinfo=UTC),
                                    datetime(9999, 12, 31, 23, 59, tzinfo=UTC)], ids=["2262", "2300", "9999"])
def test_a_sweep_with_the_clock_far_in_the_future_deletes_what_expires_and_keeps_every_document(tmp_path, future):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 3)
    run_cli(home, "ingest", str(docs))
    before = census(home)
    system = _system(home)
    state = system.deps.state
    state.put(state_collections.QUERIES, "q", {"id": "q", "expire_at": "2026-12-28T12:00:00+00:00"})
    state.put(state_collections.CONVERSATIONS, "c", {"turns": ["q"], "expire_at": "2026-12-28T12:00:00+00:00"})
    spans = SqliteSpanStore(system.settings.traces_path)
    _span(spans, "a" * 32, time.time_ns())
    spans.shutdown()

    swept = sweep(system.settings, system.bus, state, future)  # raised OverflowError past 2262

    assert swept.records == 2 and swept.spans >= 1
    spans = SqliteSpanStore(system.settings.traces_path)
    assert spans.spans_of_trace("a" * 32) == []
    spans.shutdown()
    assert census(home) == before and state.count(state_collections.DEAD_LETTERS) == 0
    assert json.loads(run_cli(home, "search", "subject1 report", "--json").stdout)
    assert sweep(system.settings, system.bus, state, future) == type(swept)()  # nothing more, no error


def test_a_query_asked_with_the_clock_at_the_year_9999_is_accepted_not_a_500(tmp_path):
    system = _system(tmp_path / "home")
    system.deps.override("clock", FixedClock(datetime(9999, 12, 31, 12, tzinfo=UTC)))
    server = serve(system.deps, "127.0.0.1", 0)
    try:
        asked = httpx.post(server.url + "/v1/queries", json={"question": "what is basalt?"}, timeout=30)
        assert asked.status_code == 202, asked.text  # was 500: OverflowError computing its expiry
        record = system.deps.state.get(state_collections.QUERIES, asked.json()["id"])
        assert record["expire_at"].startswith("9999-12-31T23:59:59")
        conversation = system.deps.state.get(state_collections.CONVERSATIONS, asked.json()["conversation_id"])
        assert conversation["turns"] == [asked.json()["id"]]
    finally:
        server.stop()


def test_a_conversation_that_expires_between_two_turns_refuses_the_second_and_keeps_the_first(tmp_path):
    system = _system(tmp_path / "home")
    start = datetime.now(UTC)
    system.deps.override("clock", FixedClock(start))
    server = serve(system.deps, "127.0.0.1", 0)
    try:
        first = httpx.post(server.url + "/v1/queries", json={"question": "what is basalt?"}, timeout=30).json()
        conversation_id = first["conversation_id"]
        # the user comes back after the retention period: the clock has moved past the expiry
        system.deps.override("clock", FixedClock(start + timedelta(days=system.settings.query_ttl_days + 1)))
        second = httpx.post(server.url + "/v1/queries", json={"question": "and its density?",
                                                               "conversation_id": conversation_id}, timeout=30)
        assert second.status_code == 404 and "expired" in second.json()["error"], second.text
        stored = system.deps.state.get(state_collections.CONVERSATIONS, conversation_id)
        assert stored["turns"] == [first["id"]]  # not continued, not lost before a sweep
        assert system.deps.state.count(state_collections.QUERIES) == 1
        # a new dialogue starts at once, and a sweep then deletes only the expired one
        third = httpx.post(server.url + "/v1/queries", json={"question": "what is granite?"}, timeout=30)
        assert third.status_code == 202 and third.json()["conversation_id"] != conversation_id
        sweep(system.settings, system.bus, system.deps.state, system.deps.clock.now())
        assert system.deps.state.get(state_collections.CONVERSATIONS, conversation_id) is None
        assert system.deps.state.get(state_collections.CONVERSATIONS, third.json()["conversation_id"])
    finally:
        server.stop()


def test_sweeps_beside_an_ingest_lose_and_duplicate_nothing(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 40)
    (home).mkdir()
    ingest = start_captured(home, "ingest", str(docs), RAGBUS_BUS_RETENTION_S="0.001")
    system = _system(home, RAGBUS_BUS_RETENTION_S="0.001")
    sweeps = 0
    try:
        while ingest.poll() is None:
            if (home / "ragbus.db").exists():
                sweep(system.settings, system.bus, system.deps.state, datetime(2200, 1, 1, tzinfo=UTC))
                sweeps += 1
            time.sleep(0.02)
        out, err = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert sweeps > 3
    assert ingest.returncode == 0 and "Traceback" not in err, err
    assert "40 document(s) submitted" in out
    found = census(home)
    assert found["documents"] == 40 and found["duplicates"] == 0


def test_sweeps_beside_a_running_query_let_it_answer(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 5)
    run_cli(home, "ingest", str(docs))
    system = _system(home, RAGBUS_BUS_RETENTION_S="0.001")  # every delivered message purged at once
    ask = start_captured(home, "ask", "what does the subject1 report describe?", "--json")
    try:
        while ask.poll() is None:
            sweep(system.settings, system.bus, system.deps.state, datetime.now(UTC))
            time.sleep(0.02)
        out, err = ask.communicate(timeout=300)
    finally:
        if ask.poll() is None:
            ask.kill()
    assert ask.returncode == 0 and "Traceback" not in err, err
    record = json.loads(out)
    assert record["status"] == "answered" and record["answer"], record
    assert system.deps.state.get(state_collections.QUERIES, record["id"])
