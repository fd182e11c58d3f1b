"""One way to open SQLite for concurrent use by threads and processes."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_S = 60.0

# One write lock per database file for every thread of this process. SQLite's own busy
# handler, which a writer meets when another connection holds the write lock, sleeps
# 1, 2, 5, 10 ... ms between retries: the stages of one query, each a thread writing the
# same bus and state files, lost milliseconds per hop to those sleeps. Threads queue on this
# lock instead and are handed the file the moment it is free; other processes still meet
# SQLite's busy handler (busy_timeout).
_WRITE_LOCKS: dict[Path, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.RLock:
    key = path.resolve()
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = threading.RLock()
        return lock


class SqliteDatabase:
    """A SQLite file shared by threads (one connection each) and processes (WAL)."""

    def __init__(self, path: Path | str, schema: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._schema = schema
        self._write_lock = _write_lock(self.path)
        # executescript manages its own transaction (it commits first), so no BEGIN here
        with self._write_lock:
            self.connection().executescript(schema)

    def connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT: a write lock taken up front, so read-modify-write is safe.

        Threads of this process wait for each other on a process-wide lock per file (see
        ``_WRITE_LOCKS``), for at most the busy timeout, as SQLite would make them wait."""
        conn = self.connection()
        if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_S):
            raise sqlite3.OperationalError(
                f"database is locked: the write lock of {self.path} was not free within {BUSY_TIMEOUT_S:g} s; "
                "another thread of this process held it (a handler hung inside a transaction, or one itself "
                "waiting for another process's write lock)"
            )
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
        finally:
            self._write_lock.release()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
