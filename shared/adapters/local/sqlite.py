"""One way to open SQLite for concurrent use by threads and processes.

A data file that cannot serve is refused when it is opened, by name, with the way
out (:class:`~shared.contract.errors.DataFileError`): one that is not a database or
is damaged, one that is empty where a database stood (a zero-length file is
otherwise silently a new, empty store), a directory that cannot be written, a disk
with no room left. A full disk met later, inside a transaction, is the same error,
so a worker fails at once with the file's name instead of retrying for its timeout.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.contract.errors import DataFileError

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


def damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the file itself is broken (not busy, not full)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text)


def _full(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "disk is full" in text or "no space left" in text or getattr(exc, "errno", None) == 28


def _no_room(path: Path) -> bool:
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


def explain(path: Path, exc: BaseException, way_out: str = "") -> DataFileError:
    """The :class:`DataFileError` for ``exc`` met on the database file ``path``."""
    # SQLite says "disk I/O error" when a full disk stops it growing the WAL or the shared memory file
    if _full(exc) or ("disk i/o error" in str(exc).lower() and _no_room(path)):
        return DataFileError(
            f"{path}: the disk is full ({exc}); free space on the disk holding {path.parent} and run the command "
            "again (what was stored is kept; unfinished work is redone)", "full")
    if damage(exc):
        return DataFileError(f"{path} is damaged ({exc}); {way_out or _MOVE_ASIDE.format(path=path)}", "damaged")
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text or "unable to open" in text or isinstance(exc, PermissionError):
        return DataFileError(
            f"{path} cannot be written ({exc}): {_unwritable(path)}; make it writable or point RAGBUS_HOME at a "
            "writable directory", "unwritable")
    return DataFileError(f"{path}: {exc}")


_MOVE_ASIDE = "move it aside (mv {path} {path}.broken) and run the command again"


def _unwritable(path: Path) -> str:
    for candidate in (path, path.parent):
        if candidate.exists() and not os.access(candidate, os.W_OK):
            return f"{candidate} is not writable"
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return f"{path.parent} is on a read-only file system"
    except OSError:
        pass
    return f"{path.parent} is not writable"


def _left_empty(path: Path) -> bool:
    """A zero-length file where a database stood (truncated, or emptied by hand): a database
    is created beside its path and linked in with its schema (:func:`_create`), so one that
    is being created is never seen empty."""
    try:
        size = path.stat().st_size
    except OSError:
        return False
    wal = path.with_name(path.name + "-wal")
    return size == 0 and (not wal.exists() or wal.stat().st_size == 0)


_HEADER = b"SQLite format 3\x00"
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)", re.IGNORECASE)


def opened_here(path: Path) -> bool:
    """Whether this process has opened the database at ``path`` (through this module)."""
    with _WRITE_LOCKS_GUARD:
        return path.resolve() in _WRITE_LOCKS


def file_lost(path: Path) -> bool:
    """Whether the database at ``path`` is missing, empty or visibly broken (a look at its header,
    no SQLite call; the database itself checks properly when it opens)."""
    try:
        return path.stat().st_size == 0 or shortfall(path) is not None
    except FileNotFoundError:
        return True


def shortfall(path: Path) -> str | None:
    """Why the file at ``path`` is visibly not a whole SQLite database, from its 100-byte header
    alone (no SQLite call): not one at all, or shorter than the pages its header counts (a
    truncated copy). None when it looks whole, or when a write-ahead log may hold the rest.

    Never called on a file this process has open: closing any descriptor of a file drops every
    POSIX lock the process holds on it, SQLite's included (sqlite.org/howtocorrupt.html, 2.2),
    which corrupted bus.db when a second opening of it read the header."""
    if opened_here(path):
        return None
    try:
        with path.open("rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError:
        return None
    if not header:
        return None
    if not header.startswith(_HEADER) or len(header) < 100:
        return "file is not a database"
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the header's page count is valid only when the change counter (offset 24) equals the
    # version-valid-for number (offset 92): sqlite.org/fileformat2.html, "In-header database size"
    if pages and header[24:28] == header[92:96] and pages * page_size > size:
        return f"truncated: {size} bytes of the {pages * page_size} its header counts"
    return None


def _create(path: Path, schema: str) -> None:
    """A new database at ``path``, whole: written under a private name, then linked in (a
    process that created it at the same moment wins and this copy is dropped)."""
    fresh = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        conn = sqlite3.connect(fresh, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(schema)
        finally:
            conn.close()
        try:
            os.link(fresh, path)
        except FileExistsError:
            pass
    finally:
        for leftover in (fresh, fresh.with_name(fresh.name + "-wal"), fresh.with_name(fresh.name + "-shm")):
            leftover.unlink(missing_ok=True)


def suspect_marker(path: Path) -> Path:
    """The file that says ``path`` met a "malformed" error: its next opening checks it whole."""
    return path.with_name(path.name + ".suspect")


def quick_check(conn: sqlite3.Connection) -> str | None:
    """SQLite's ``PRAGMA quick_check`` (every page and record read, no index cross-check): its first
    complaint, or None when the file is sound. Zeroed pages inside a file are found only so."""
    row = conn.execute("PRAGMA quick_check(1)").fetchone()
    first = str(row[0]) if row else "ok"
    return None if first == "ok" else " ".join(first.split())


class SqliteDatabase:
    """A SQLite file shared by threads (one connection each) and processes (WAL).

    ``way_out``: what to do when the file is damaged or empty (the default: move it aside).
    ``check_below_bytes``: a file up to this size is checked whole when opened (:func:`quick_check`,
    about a second per few hundred MB), as is one that met a "malformed" error before (its
    :func:`suspect_marker`); 0 checks none. ``damaged`` holds the error once one was met.
    """

    def __init__(self, path: Path | str, schema: str, *, way_out: str = "", check_below_bytes: int = 0) -> None:
        self.path = Path(path)
        self.damaged: DataFileError | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise explain(self.path, exc) from None
        if not self.path.exists():
            try:
                _create(self.path, schema)
            except (sqlite3.DatabaseError, OSError) as exc:
                raise explain(self.path, exc) from None
        elif _left_empty(self.path):
            raise DataFileError(
                f"{self.path} is empty (0 bytes) where a database stood, so it would be read as a new, empty "
                f"one; {way_out or _MOVE_ASIDE.format(path=self.path)}", "empty")
        elif (short := shortfall(self.path)) is not None:
            raise DataFileError(f"{self.path} is damaged ({short}); {way_out or _MOVE_ASIDE.format(path=self.path)}",
                                "damaged")
        self._local = threading.local()
        self._schema = schema
        self._write_lock = _write_lock(self.path)
        # executescript manages its own transaction (it commits first), so no BEGIN here
        try:
            with self._write_lock:
                self._refuse_foreign(schema, way_out)
                self._check_whole(check_below_bytes, way_out)
                self.connection().executescript(schema)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise explain(self.path, exc, way_out) from None

    def _refuse_foreign(self, schema: str, way_out: str) -> None:
        """A SQLite file holding tables, none of them this schema's, is another database put in
        this one's place (a copy of bus.db as ragbus.db): using it would silently start an empty store."""
        ours = set(_TABLE.findall(schema))
        theirs = {row[0] for row in self.connection().execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        if theirs and not theirs & ours:
            raise DataFileError(
                f"{self.path} is another database (it holds the tables {', '.join(sorted(theirs))}, none of "
                f"{', '.join(sorted(ours))}); {way_out or _MOVE_ASIDE.format(path=self.path)}", "damaged")

    def _check_whole(self, below: int, way_out: str) -> None:
        marker = suspect_marker(self.path)
        if not below or (self.path.stat().st_size > below and not marker.exists()):
            return
        problem = quick_check(self.connection())
        if problem is not None:
            raise DataFileError(f"{self.path} is damaged (integrity check: {problem}); "
                                f"{way_out or _MOVE_ASIDE.format(path=self.path)}", "damaged")
        marker.unlink(missing_ok=True)

    @contextmanager
    def checked(self) -> Iterator[None]:
        """Reads inside: a damaged file, a full disk or an I/O error raise :func:`explain`'s
        :class:`DataFileError` naming the file, and damage is noted (``damaged``, and the
        :func:`suspect_marker` so the next opening checks the file whole)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self._explained(exc) from exc

    def _explained(self, exc: sqlite3.DatabaseError) -> BaseException:
        if not (_full(exc) or damage(exc) or "disk i/o error" in str(exc).lower()):
            return exc
        error = explain(self.path, exc)
        if error.kind == "damaged":
            self.damaged = error
            try:
                suspect_marker(self.path).touch()
            except OSError:
                pass
        return error

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
                if conn.in_transaction:  # SQLite rolls back by itself after some errors (a full disk)
                    conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            error = self._explained(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            self._write_lock.release()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
