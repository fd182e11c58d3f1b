"""The local index's source of truth: ``chunks.db`` (SQLite, WAL).

Every chunk (text, metadata, float32 vector and the generation that wrote it), the
tombstones of replaced and deleted chunks, the generation counter and the manifest (which
segments make up the index). Every upsert or delete bumps the generation in the same
transaction as the change, so a crash never leaves half a document, and a reader that
reads the rows, the tombstones and the manifest in one transaction sees one generation.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.sqlite import SqliteDatabase
from shared.contract.errors import ConfigError, DataFileError
from shared.contract.ports import Chunk, checked_vectors

log = logging.getLogger("ragbus.index")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
  chunk_id TEXT PRIMARY KEY,
  document_id TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  text TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  url TEXT NOT NULL DEFAULT '',
  published TEXT,
  source TEXT NOT NULL DEFAULT '',
  vector BLOB NOT NULL,
  origin TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  gen INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks(document_id, ordinal);
CREATE TABLE IF NOT EXISTS tombstones (chunk_id TEXT NOT NULL, gen INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tombstones_by_gen ON tombstones(gen);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
INSERT OR IGNORE INTO meta(key, value) VALUES ('manifest', '[]');
INSERT OR IGNORE INTO meta(key, value) VALUES ('manifest_previous', '[]');
INSERT OR IGNORE INTO meta(key, value) VALUES ('manifest_version', '0');
"""

_CHUNK_COLUMNS = "chunk_id, document_id, ordinal, text, title, url, published, source, origin, metadata, position, heading"
# Columns added after the first release, with their definitions: an older chunks.db gains them on open.
# ``gen`` is the generation that wrote the row: rows of older indexes get 0 and are found by the
# first refresh (and flushed into a segment by the first maintenance).
_ADDED_COLUMNS = {"origin": "TEXT NOT NULL DEFAULT ''", "metadata": "TEXT NOT NULL DEFAULT '{}'",
                  "gen": "INTEGER NOT NULL DEFAULT 0", "position": "TEXT NOT NULL DEFAULT ''",
                  "heading": "TEXT NOT NULL DEFAULT ''"}
_NOT_FIELDS = frozenset({"vector", "gen", "text"})  # columns a filter never reads
# chunks.db up to this size is checked whole (PRAGMA quick_check) when opened: zeroed pages inside it
# are otherwise found by no error at all (a search for one document returned another). Above it, the
# check runs at the next opening after a "malformed" error. quick_check read a 165 MB file (40k rows of
# text and a 1.5 kB vector) in 0.51 s at load 16 (2 cores, page cache warm): about 0.8 s at the bound.
CHECK_BELOW_BYTES = 256 << 20


class ChunkStore:
    """``chunks.db`` under ``path``: the rows, tombstones, generation and manifest of one index."""

    def __init__(self, path: Path, dimension: int) -> None:
        self.path = path
        self.dimension = dimension
        self.set_aside: Path | None = None  # where a damaged chunks.db was moved, when it was
        self.unreadable: dict[str, str] = {}  # meta rows found unreadable (key -> why), until rewritten
        self.db = self._open()
        self._migrate()
        self.started_new = self._check_dimension()

    def connection(self) -> Any:
        return self.db.connection()

    @contextmanager
    def read(self) -> Iterator[Any]:
        """One read transaction: rows, tombstones, manifest and generation agree. A damaged file
        is a :class:`DataFileError` naming chunks.db (and noted: see :meth:`damage`)."""
        with self.db.checked():
            conn = self.db.connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def damage(self) -> dict[str, dict[str, Any]]:
        """What is found wrong with chunks.db and not yet repaired (for ``/readyz``): file, reason, and
        whether searches still answer (a manifest read around) or fail (a malformed file)."""
        out: dict[str, dict[str, Any]] = {}
        if self.db.damaged is not None:  # searches fail until the next start sets it aside
            out[str(self.db.path)] = {"file": str(self.db.path), "reason": str(self.db.damaged), "set_aside": "",
                                      "answering": False}
        for key, why in list(self.unreadable.items()):
            out[f"{self.db.path}#{key}"] = {"file": str(self.db.path), "reason": why, "set_aside": "",
                                            "answering": True}
        return out

    def _migrate(self) -> None:
        with self.db.transaction() as conn:
            present = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
            for name, definition in _ADDED_COLUMNS.items():
                if name not in present:
                    conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {definition}")
            conn.execute("CREATE INDEX IF NOT EXISTS chunks_by_gen ON chunks(gen)")

    def _open(self) -> SqliteDatabase:
        """chunks.db; a damaged or emptied one is moved aside (kept, for a look) and a new one
        started: the index is derived data, rebuilt from the documents (see ``started_new``)."""
        chunks = self.path / "chunks.db"
        try:
            return SqliteDatabase(chunks, _SCHEMA, way_out="the index is derived data: set aside, and started anew",
                                  check_below_bytes=CHECK_BELOW_BYTES)
        except DataFileError as exc:
            if exc.kind not in ("damaged", "empty"):
                raise
            stamp = time.strftime("%Y%m%dT%H%M%S")
            self.set_aside = chunks.with_name(f"chunks.db.damaged-{stamp}")
            for suffix in ("", "-wal", "-shm", ".suspect"):
                try:
                    chunks.with_name(chunks.name + suffix).rename(self.set_aside.with_name(self.set_aside.name + suffix))
                except FileNotFoundError:  # another process moved it first
                    pass
            log.warning("%s (kept as %s)", exc, self.set_aside)
            return SqliteDatabase(chunks, _SCHEMA)

    def _check_dimension(self) -> bool:
        """Check the vectors' dimension; True when this index was created just now."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta(key, value) VALUES ('dimension', ?)", (str(self.dimension),))
                # segments of an index that stood here before belong to its generations, which this
                # one's would otherwise reuse by name
                shutil.rmtree(self.path / "cache", ignore_errors=True)
                shutil.rmtree(self.path / "segments", ignore_errors=True)
                return conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None
            elif int(row[0]) != self.dimension:
                raise ConfigError(
                    f"the index at {self.path} holds {row[0]}-dimensional vectors but the embedder makes "
                    f"{self.dimension}; point RAGBUS_HOME elsewhere or delete {self.path} and re-ingest"
                )
        return False

    # ------------------------------------------------------------ writes

    # ------------------------------------------------------------ writes

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` in one transaction."""
        vectors = checked_vectors(document_id, chunks, vectors, self.dimension)
        with self.db.transaction() as conn:
            generation = self._bump(conn)
            rows = [
                (c.chunk_id, document_id, c.ordinal, c.text, c.title, c.url, c.published, c.source,
                 c.origin, json.dumps(dict(c.metadata), sort_keys=True), c.position, c.heading,
                 np.ascontiguousarray(v).tobytes(), generation)
                for c, v in zip(chunks, vectors, strict=True)
            ]
            gone = [r[0] for r in conn.execute("SELECT chunk_id FROM chunks WHERE document_id = ?", (document_id,))]
            new_ids = [c.chunk_id for c in chunks]
            for start in range(0, len(new_ids), 500):  # ids taken over from another document
                part = new_ids[start : start + 500]
                marks = ",".join("?" * len(part))
                gone += [r[0] for r in conn.execute(
                    f"SELECT chunk_id FROM chunks WHERE chunk_id IN ({marks}) AND document_id != ?",
                    (*part, document_id))]
            conn.executemany("INSERT INTO tombstones(chunk_id, gen) VALUES (?, ?)",
                             [(i, generation) for i in gone])
            conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
            conn.executemany(
                f"INSERT OR REPLACE INTO chunks({_CHUNK_COLUMNS}, vector, gen) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows
            )

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks; 0 when it had none (deleting twice is fine)."""
        with self.db.transaction() as conn:
            gone = [r[0] for r in conn.execute("SELECT chunk_id FROM chunks WHERE document_id = ?", (document_id,))]
            if gone:
                generation = self._bump(conn)
                conn.executemany("INSERT INTO tombstones(chunk_id, gen) VALUES (?, ?)",
                                 [(i, generation) for i in gone])
                conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
        return len(gone)

    @staticmethod
    def _bump(conn: Any) -> int:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
        return int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    # ------------------------------------------------------------- reads

    # ------------------------------------------------------------- reads

    @property
    def generation(self) -> int:
        with self.db.checked():
            row = self.db.connection().execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0])

    def versions(self, conn: Any | None = None) -> tuple[int, int]:
        with self.db.checked():
            conn = conn or self.db.connection()
            values = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('generation', 'manifest_version')"))
        return int(values["generation"]), int(values.get("manifest_version", 0))

    def count_chunks(self) -> int:
        with self.db.checked():
            return int(self.db.connection().execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def count_documents(self) -> int:
        with self.db.checked():
            return int(self.db.connection().execute("SELECT COUNT(DISTINCT document_id) FROM chunks").fetchone()[0])

    def document_chunk_ids(self, document_id: str) -> list[str]:
        with self.db.checked():
            rows = self.db.connection().execute(
                "SELECT chunk_id FROM chunks WHERE document_id = ? ORDER BY ordinal", (document_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        found: dict[str, Chunk] = {}
        conn = self.db.connection()
        ids = list(dict.fromkeys(chunk_ids))
        with self.db.checked():
            for start in range(0, len(ids), 500):  # stay under SQLite's variable limit
                part = ids[start : start + 500]
                marks = ",".join("?" * len(part))
                for row in conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE chunk_id IN ({marks})", part):
                    found[row["chunk_id"]] = Chunk(
                        chunk_id=row["chunk_id"], document_id=row["document_id"], ordinal=row["ordinal"],
                        text=row["text"], title=row["title"], url=row["url"], published=row["published"],
                        source=row["source"], origin=row["origin"],
                        metadata=self._metadata(row["chunk_id"], row["metadata"]),
                        position=row["position"], heading=row["heading"],
                    )
        return [found[i] for i in chunk_ids if i in found]

    def _metadata(self, chunk_id: str, value: str | None) -> dict[str, Any]:
        """A row's metadata; a row whose JSON is unreadable is named (file and chunk) and read without it."""
        try:
            data = json.loads(value or "{}")
        except ValueError as exc:
            data = exc
        if isinstance(data, dict):
            return data
        log.warning("%s: the metadata of chunk %s is not a JSON object (%s); read without it", self.db.path,
                    chunk_id, data if isinstance(data, ValueError) else type(data).__name__)
        return {}

    def get_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each known chunk id (computed once, at indexing)."""
        out: dict[str, np.ndarray] = {}
        conn = self.db.connection()
        ids = list(dict.fromkeys(chunk_ids))
        with self.db.checked():
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ",".join("?" * len(part))
                for chunk_id, blob in conn.execute(
                    f"SELECT chunk_id, vector FROM chunks WHERE chunk_id IN ({marks})", part
                ):
                    out[chunk_id] = np.frombuffer(blob, dtype=np.float32)
        return out

    def manifest(self, conn: Any, key: str = "manifest") -> list[dict[str, Any]]:
        """The segments ``key`` (the manifest, or the previous one) names. An unreadable one is named
        with the file and read as naming none: every row is then searched from chunks.db, and the
        next flush writes a segment of them and a whole manifest (the old folders are collected)."""
        with self.db.checked():
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if not row:
            return []
        try:
            value = json.loads(row[0])
            if not isinstance(value, list) or not all(
                    isinstance(d, dict) and isinstance(d.get("name"), str)
                    and all(isinstance(d.get(f), int) for f in ("lo", "hi", "built_at", "rows")) for d in value):
                raise ValueError("not a list of segments (name, lo, hi, built_at, rows)")
        except ValueError as exc:
            why = f"the {key!r} row of its meta table is unreadable ({exc}); its segments are rebuilt from the rows"
            if self.unreadable.get(key) != why:
                log.error("%s: %s", self.db.path, why)
                self.unreadable[key] = why
            return []
        self.unreadable.pop(key, None)
        return value

    @staticmethod
    def tombstones(conn: Any, after: int) -> list[tuple[str, int]]:
        return [(r[0], int(r[1])) for r in conn.execute("SELECT chunk_id, gen FROM tombstones WHERE gen > ?", (after,))]

    @staticmethod
    def count_rows(conn: Any, lo: int, hi: int) -> int:
        """Rows written in generations (lo, hi] still present (an indexed count)."""
        return int(conn.execute("SELECT COUNT(*) FROM chunks WHERE gen > ? AND gen <= ?", (lo, hi)).fetchone()[0])

    def rows(self, conn: Any, lo: int, hi: int) -> Iterator[tuple[str, str, str, bytes, dict[str, Any]]]:
        """(chunk id, title, text, vector, stored fields) of the rows of generations (lo, hi], by
        chunk id; the fields are those :meth:`stored_fields` gives."""
        columns = self._field_columns(conn)
        for row in conn.execute(f"SELECT text, vector, {', '.join(columns)} FROM chunks WHERE gen > ? AND gen <= ? "
                                "ORDER BY chunk_id", (lo, hi)):
            fields = self._fields(columns, row[2:])
            yield fields["chunk_id"], fields.get("title") or "", row[0], row[1], fields

    @staticmethod
    def _field_columns(conn: Any) -> list[str]:
        return [r[1] for r in conn.execute("PRAGMA table_info(chunks)") if r[1] not in _NOT_FIELDS]

    def _fields(self, columns: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
        data = dict(zip(columns, values, strict=True))
        data["metadata"] = self._metadata(data.get("chunk_id", "?"), data.get("metadata"))
        return Chunk.from_fields(data).fields()

    def stored_fields(self, lo: int, hi: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """The stored fields of the rows of generations (lo, hi], every column but the text and
        vector (so a column added to chunks reaches the filter without a change here)."""
        conn = self.db.connection()
        with self.db.checked():
            columns = self._field_columns(conn)
            for row in conn.execute(f"SELECT {', '.join(columns)} FROM chunks WHERE gen > ? AND gen <= ?", (lo, hi)):
                fields = self._fields(columns, row)
                yield fields["chunk_id"], fields

    def swap_manifest(self, expected: list[dict[str, Any]], updated: list[dict[str, Any]]) -> None:
        """Replace the manifest ``expected`` by ``updated`` in one transaction (the previous one is
        kept: a process still on it may be opening its segments), and drop the tombstones no view
        of the new manifest needs (older than its oldest segment)."""
        with self.db.transaction() as conn:
            now = self.manifest(conn)
            if now != expected:
                raise RuntimeError(f"the manifest of {self.path} changed during a merge under the merge lock")
            conn.execute("UPDATE meta SET value = ? WHERE key = 'manifest_previous'", (json.dumps(now),))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'manifest'", (json.dumps(updated),))
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'manifest_version'")
            if updated:
                conn.execute("DELETE FROM tombstones WHERE gen <= ?", (min(d["built_at"] for d in updated),))
        self.unreadable.clear()  # both rows written whole

    def close(self) -> None:
        self.db.close()
