import sqlite3
import threading

import pytest

from shared.adapters.local import sqlite as local_sqlite
from shared.adapters.local.sqlite import SqliteDatabase

_SCHEMA = "CREATE TABLE IF NOT EXISTS t (n INTEGER);"


def _held_elsewhere(lock) -> bool:
    """True when another thread holds ``lock`` (an RLock re-enters for its owner)."""
    out: list[bool] = []

    def probe() -> None:
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        out.append(not got)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return out[0]


def test_threads_of_one_process_share_one_write_lock_per_file(tmp_path):
    a = SqliteDatabase(tmp_path / "x.db", _SCHEMA)
    b = SqliteDatabase(tmp_path / "x.db", _SCHEMA)
    other = SqliteDatabase(tmp_path / "y.db", _SCHEMA)
    assert a._write_lock is b._write_lock
    assert a._write_lock is not other._write_lock
    with a.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        assert _held_elsewhere(b._write_lock)
        assert not _held_elsewhere(other._write_lock)
    assert not _held_elsewhere(a._write_lock)


def test_the_write_lock_is_released_after_a_failed_transaction(tmp_path):
    db = SqliteDatabase(tmp_path / "x.db", _SCHEMA)
    with pytest.raises(ValueError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raise ValueError("boom")
    assert not _held_elsewhere(db._write_lock)
    assert db.connection().execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0  # rolled back


def test_concurrent_read_modify_write_transactions_lose_no_update(tmp_path):
    db = SqliteDatabase(tmp_path / "x.db", _SCHEMA)
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (0)")

    def bump() -> None:
        for _ in range(50):
            with db.transaction() as conn:
                (n,) = conn.execute("SELECT n FROM t").fetchone()
                conn.execute("UPDATE t SET n = ?", (n + 1,))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.connection().execute("SELECT n FROM t").fetchone()[0] == 200


def test_a_writer_stuck_past_the_busy_timeout_is_an_error_naming_the_file(tmp_path, monkeypatch):
    db = SqliteDatabase(tmp_path / "x.db", _SCHEMA)
    monkeypatch.setattr(local_sqlite, "BUSY_TIMEOUT_S", 0.01)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.transaction():
            holding.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    try:
        with pytest.raises(sqlite3.OperationalError, match=r"database is locked.*x\.db"), db.transaction():
            pass
    finally:
        release.set()
        holder.join()
