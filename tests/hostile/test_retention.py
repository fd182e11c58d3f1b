"""Retention of the embedded runtime (issue 35, problem 8): delivered bus messages, expired query
records and conversations, and old spans are deleted; an expired conversation is refused though its
document is still stored; `ragbus stats` shows the data directory's size."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.gateway.server import serve
from shared.adapters.local.spans import SqliteSpanStore
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.contract.messages import DocumentDeleted, QuerySubmitted
from shared.query.conversation import ConversationNotFound, conversation_turns, join_conversation
from shared.query.record import QueryRecord
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from shared.runtime.retention import sweep
from tests.support import cli_json

pytestmark = pytest.mark.hostile

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _system(tmp_path, **env):
    return build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home"), **env}))


def _messages(settings) -> int:
    with sqlite3.connect(settings.bus_path) as db:
        return db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


def _span(store: SqliteSpanStore, trace_id: str, ended: datetime) -> None:
    end_ns = int(ended.timestamp() * 1e9)
    with store._db.transaction() as conn:  # a span as the exporter writes it, at a chosen time
        conn.execute("INSERT INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     (trace_id, "0" * 16, None, "gateway.submit", "SERVER", end_ns - 1000, end_ns, "OK", None,
                      "{}", "[]", None))


def test_a_sweep_deletes_what_is_past_its_time_and_keeps_the_rest(tmp_path):
    system = _system(tmp_path, RAGBUS_BUS_RETENTION_S="0.001")
    settings, bus, state = system.settings, system.bus, system.deps.state
    bus.publish(QuerySubmitted(query_id="delivered"))
    for delivery in bus.pull("transformer.query-submitted", max_messages=10):
        bus.ack(delivery)
    bus.publish(QuerySubmitted(query_id="waiting"))  # not delivered yet: kept whatever its age
    state.put(state_collections.QUERIES, "old", {"id": "old", "expire_at": (NOW - timedelta(days=1)).isoformat()})
    state.put(state_collections.QUERIES, "new", {"id": "new", "expire_at": (NOW + timedelta(days=29)).isoformat()})
    state.put(state_collections.CONVERSATIONS, "c-old", {"turns": ["old"], "expire_at": "2020-01-01T00:00:00+00:00"})
    state.put(state_collections.DOCUMENTS, "doc", {"document_id": "doc"})  # no expire_at: never swept
    spans = SqliteSpanStore(settings.traces_path)
    _span(spans, "a" * 32, NOW - timedelta(days=settings.trace_retention_days + 1))
    _span(spans, "b" * 32, NOW - timedelta(hours=1))
    spans.shutdown()
    time.sleep(0.01)  # the delivered message is older than 1 ms

    swept = sweep(settings, bus, state, NOW)

    assert (swept.records, swept.spans) == (2, 1) and swept.messages >= 1
    assert state.get(state_collections.QUERIES, "old") is None and state.get(state_collections.QUERIES, "new")
    assert state.get(state_collections.CONVERSATIONS, "c-old") is None
    assert state.get(state_collections.DOCUMENTS, "doc") is not None
    assert [d.message_id for d in bus.pull("transformer.query-submitted", max_messages=10)]  # "waiting" is kept
    spans = SqliteSpanStore(settings.traces_path)
    assert spans.spans_of_trace("a" * 32) == [] and spans.spans_of_trace("b" * 32)
    spans.shutdown()
    assert sweep(settings, bus, state, NOW).records == 0  # a second sweep finds nothing more


def test_a_sweep_purges_old_tombstones_that_nothing_can_still_need(tmp_path):
    # every delete (and every item a feed pages out) left a ledger record forever, listed by each poll
    from shared.ingest import processed_items

    system = _system(tmp_path)
    settings, bus, state = system.settings, system.bus, system.deps.state
    old = NOW - timedelta(days=settings.tombstone_retention_days + 1)
    for document_id in ("old", "lettered", "queued", "owed", "recent", "again"):
        processed_items.bury(state, document_id, now=old, reason="file deleted", fields={"source": "file"})
    processed_items.bury(state, "recent", now=NOW - timedelta(days=1), reason="file deleted")
    state.update(state_collections.PROCESSED_ITEMS, "owed", lambda d: {**d, "unannounced": ""})  # delete not sent
    state.put(state_collections.DEAD_LETTERS, "cleaner:1", {"data": '{"document_id": "lettered", "revision": 1}'})
    assert processed_items.claim(state, "again", "h2", now=NOW, fields={}).kind == "new"  # ingested anew: live
    bus.publish(DocumentDeleted(document_id="queued", reason="file deleted", requested_at=old))  # not delivered

    swept = sweep(settings, bus, state, NOW)

    assert swept.tombstones == 1 and state.get(state_collections.PROCESSED_ITEMS, "old") is None
    # a retried dead letter (or a message still queued) of a deleted document is dropped while its tombstone
    # stays; a delete a crash left
    # unsent is still found by the next delete of its folder; a recent one may still meet a run begun before it
    for kept in ("lettered", "queued", "owed", "recent"):
        assert processed_items.stale(state, kept, content_hash="h", revision=0), kept
    assert processed_items.records(state, {}) == [state.get(state_collections.PROCESSED_ITEMS, "again")]
    assert sweep(settings, bus, state, NOW).tombstones == 0


def test_the_runtime_sweeps_when_it_starts(tmp_path):
    system = _system(tmp_path, RAGBUS_BUS_RETENTION_S="0.001")
    system.deps.state.put(state_collections.QUERIES, "old", {"id": "old", "expire_at": "2020-01-01T00:00:00+00:00"})
    system.bus.publish(QuerySubmitted(query_id="x"))
    for delivery in system.bus.pull("transformer.query-submitted", max_messages=10):
        system.bus.ack(delivery)
    before = _messages(system.settings)
    time.sleep(0.01)
    with LocalRuntime(system.deps, system.bus, consumers=()):
        deadline = time.monotonic() + 30
        while system.deps.state.get(state_collections.QUERIES, "old") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    assert system.deps.state.get(state_collections.QUERIES, "old") is None
    assert _messages(system.settings) < before


def test_an_expired_conversation_is_refused_though_still_stored(tmp_path):
    state = _system(tmp_path).deps.state
    state.put(state_collections.CONVERSATIONS, "c1", {"conversation_id": "c1", "turns": [],
                                                      "expire_at": "2020-01-01T00:00:00+00:00"})
    with pytest.raises(ConversationNotFound, match="expired"):
        join_conversation(state, "c1", "q2", now=NOW, retention_days=30)
    with pytest.raises(ConversationNotFound, match="expired"):
        conversation_turns(state, "c1", NOW)
    assert state.get(state_collections.CONVERSATIONS, "c1")["turns"] == []  # not continued


def test_the_api_refuses_to_continue_an_expired_conversation(tmp_path):
    system = _system(tmp_path)
    system.deps.state.put(state_collections.CONVERSATIONS, "c1", {"conversation_id": "c1", "turns": [],
                                                                  "expire_at": "2020-01-01T00:00:00+00:00"})
    server = serve(system.deps, "127.0.0.1", 0)
    try:
        asked = httpx.post(server.url + "/v1/queries", json={"question": "and its maximum?", "conversation_id": "c1"},
                           timeout=30)
        assert asked.status_code == 404 and "expired" in asked.json()["error"]
        assert httpx.get(server.url + "/v1/conversations/c1", timeout=30).status_code == 404
        assert system.deps.state.count(state_collections.QUERIES) == 0
    finally:
        server.stop()


def test_stats_shows_the_data_directorys_size(tmp_path):
    home = tmp_path / "home"
    result = cli_json(home, "stats")
    assert result["data_dir"] == str(home) and result["data_dir_bytes"] > 0


def _answered_record(expire_at: str) -> dict:
    record = QueryRecord.new("q-old", "What is BM25?", top_k=5, max_iterations=3, max_model_calls=8,
                             now=NOW - timedelta(days=40), timeout_s=60)
    record.status, record.outcome, record.answer = "answered", "answered", "A ranking function [1]."
    record.citations = [{"id": 1, "source": "file:///notes/bm25.md", "document_id": "d", "chunk_id": "c"}]
    record.expire_at = expire_at
    return record.to_doc()


def test_an_expired_query_is_neither_served_nor_rated_though_still_stored(tmp_path):
    """Between its expire_at and the sweep (an hour here, a day or so for Firestore's TTL), a query's
    record is still stored: it is gone for every reader all the same."""
    system = _system(tmp_path)
    system.deps.state.put(state_collections.QUERIES, "q-old", _answered_record("2020-01-01T00:00:00+00:00"))
    system.deps.state.put(state_collections.QUERIES, "q-kept", {**_answered_record("2999-01-01T00:00:00+00:00"),
                                                               "id": "q-kept"})
    server = serve(system.deps, "127.0.0.1", 0)
    try:
        read = httpx.get(server.url + "/v1/queries/q-old", timeout=30)
        assert read.status_code == 404 and "q-old" in read.json()["error"]
        rated = httpx.post(server.url + "/v1/queries/q-old/feedback", json={"rating": "down"}, timeout=30)
        assert rated.status_code == 404
        assert httpx.get(server.url + "/v1/queries/q-kept", timeout=30).json()["outcome"] == "answered"
        assert httpx.post(server.url + "/v1/queries/q-kept/feedback", json={"rating": "up"},
                          timeout=30).status_code == 200
    finally:
        server.stop()
    assert not system.deps.state.get(state_collections.QUERIES, "q-old").get("feedback")  # not rated


def test_the_span_stores_earlier_topologies_left_are_held_to_the_span_retention(tmp_path):
    # every `ragbus up` set the earlier topology's span store aside as topology/traces-until-<time>.db and none
    # was ever deleted: they piled up outside RAGBUS_TRACE_RETENTION_DAYS. Now one whose last change is past it
    # goes whole (its write-ahead log too); from the others, the spans past it
    import os

    from shared.tools import topology

    home, days = tmp_path / "home", 7
    store = topology.data_home(home) / "traces.db"
    store.parent.mkdir(parents=True)
    set_aside = []
    for age_days, trace in ((30, "a"), (days + 1, "b"), (2, "c"), (2, "d")):
        spans = SqliteSpanStore(store)
        _span(spans, trace * 32, NOW - timedelta(days=age_days))
        _span(spans, "e" * 32 if trace == "c" else trace.upper() * 32, NOW - timedelta(days=age_days + 6))
        spans.shutdown()
        last = (NOW - timedelta(days=age_days)).timestamp()
        os.utime(store, (last, last))
        set_aside.append(topology.set_aside_earlier_spans(home))
    assert set_aside[3].name == set_aside[2].name.replace("Z.db", "Z-2.db")  # the same second: a second name
    set_aside[0].with_name(set_aside[0].name + "-wal").write_bytes(b"")  # a log left beside one

    deleted = topology.expire_set_aside_spans(home, days, NOW.timestamp())

    assert sorted(deleted) == sorted(set_aside[:2])
    assert sorted(p.name for p in store.parent.iterdir()) == sorted(p.name for p in set_aside[2:])
    kept = SqliteSpanStore(set_aside[2])
    # 2 days old kept; 8 days old (past 7) deleted, though its store's newest span is kept
    assert kept.spans_of_trace("c" * 32) and kept.spans_of_trace("e" * 32) == []
    kept.shutdown()
    assert topology.expire_set_aside_spans(home, days, NOW.timestamp()) == []  # nothing more to delete
    later = (NOW + timedelta(days=days - 2, seconds=1)).timestamp()  # the others' newest spans past 7 days
    assert sorted(topology.expire_set_aside_spans(home, days, later)) == sorted(set_aside[2:])  # none kept for good
    assert list(store.parent.iterdir()) == []


def test_the_topologys_own_span_store_is_swept_while_it_runs(tmp_path, monkeypatch):
    # the embedded runtime sweeps its traces.db; a process of `ragbus up` (on the emulators) wrote to
    # topology/traces.db and nothing deleted a span however old: a topology left up piled them up
    import threading

    from shared.runtime import telemetry

    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    monkeypatch.setattr(telemetry, "_span_stores", {})
    monkeypatch.setattr(telemetry, "add_exporter", lambda store: None)  # this test process's spans go nowhere new
    monkeypatch.setattr(telemetry, "_sweeps_end", threading.Event())
    monkeypatch.setattr(telemetry, "_sweep_locks", [])
    monkeypatch.setattr(telemetry, "SPAN_SWEEP_INTERVAL_S", 0.05)
    settings = load_settings({"RAGBUS_HOME": str(tmp_path / "topology"), "RAGBUS_TRACE_RETENTION_DAYS": "7"})
    now = datetime.now(UTC)
    store = SqliteSpanStore(settings.traces_path)
    _span(store, "a" * 32, now - timedelta(days=8))
    _span(store, "b" * 32, now - timedelta(days=6))
    store.shutdown()
    try:
        installed = telemetry.install_local_span_store(settings)
        deadline = time.monotonic() + 10
        while installed.spans_of_trace("a" * 32) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert installed.spans_of_trace("a" * 32) == [] and installed.spans_of_trace("b" * 32)  # at its start
        _span(installed, "c" * 32, now - timedelta(days=30))  # and while it runs
        while installed.spans_of_trace("c" * 32) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert installed.spans_of_trace("c" * 32) == [] and installed.spans_of_trace("b" * 32)
    finally:
        telemetry._sweeps_end.set()
        for lock in telemetry._sweep_locks:
            lock.close()


def test_one_process_of_a_topology_sweeps_its_span_store(tmp_path, monkeypatch):
    # every stage server of `ragbus up` (and every `ragbus` command run on it) installs the one topology/traces.db:
    # each started its own sweeper, each deleting the same old spans every hour; the first to lock it sweeps
    from shared.runtime import telemetry

    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    monkeypatch.setattr(telemetry, "add_exporter", lambda store: None)
    monkeypatch.setattr(telemetry, "_sweep_locks", [])
    swept = []
    monkeypatch.setattr(telemetry, "_sweep_spans", lambda store, days, end: swept.append(store))
    settings = load_settings({"RAGBUS_HOME": str(tmp_path / "topology")})
    stores = []
    try:
        for _ in range(3):  # three processes of one topology (each its own open store and lock file)
            monkeypatch.setattr(telemetry, "_span_stores", {})
            stores.append(telemetry.install_local_span_store(settings))
        deadline = time.monotonic() + 10
        while not swept and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert swept == stores[:1]
        telemetry._sweep_locks.pop().close()  # the sweeping process ends: the next one to start sweeps
        monkeypatch.setattr(telemetry, "_span_stores", {})
        stores.append(telemetry.install_local_span_store(settings))
        while len(swept) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert swept == [stores[0], stores[3]]
    finally:
        for lock in telemetry._sweep_locks:
            lock.close()
        for store in stores:
            store.shutdown()


def test_a_span_store_lock_that_cannot_be_made_stops_neither_the_command_nor_the_sweep(tmp_path, monkeypatch):
    # fcntl was imported at the top of telemetry (every command, Windows too), and the lock file was opened
    # outside the try: a home whose lock file cannot be created stopped the command that installed the store
    from shared.runtime import telemetry

    monkeypatch.setattr(telemetry, "_sweep_locks", [])
    (tmp_path / "traces.sweep.lock").mkdir()  # a directory where the lock file goes: open() raises
    assert telemetry._sweeper_of(tmp_path / "traces.db") is True  # swept as before the lock: never by nobody
    monkeypatch.setattr(telemetry, "fcntl", None)  # not POSIX: each process sweeps, as before the lock
    assert telemetry._sweeper_of(tmp_path / "traces.db") is True
