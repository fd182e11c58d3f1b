"""StateStore on SQLite: JSON documents by (collection, key), transactions by write lock."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from shared.adapters.local.sqlite import SqliteDatabase
from shared.contract.ports import Doc

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
  collection TEXT NOT NULL,
  key TEXT NOT NULL,
  doc TEXT NOT NULL,
  PRIMARY KEY (collection, key)
);
"""


def _where_sql(where: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    if not where:
        return "", []
    clauses, params = [], []
    for field, value in where.items():
        path = "$." + field
        if value is None:
            clauses.append("json_extract(doc, ?) IS NULL")
            params.append(path)
        else:
            clauses.append("json_extract(doc, ?) = ?")
            params.extend([path, int(value) if isinstance(value, bool) else value])
    return " AND " + " AND ".join(clauses), params


class SqliteStateStore:
    """The embedded runtime's state: one SQLite table of JSON documents."""

    def __init__(self, path: Path | str) -> None:
        self._db = SqliteDatabase(path, _SCHEMA)

    def get(self, collection: str, key: str) -> Doc | None:
        row = self._db.connection().execute(
            "SELECT doc FROM docs WHERE collection = ? AND key = ?", (collection, key)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def get_many(self, collection: str, keys: Sequence[str]) -> dict[str, Doc]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Doc] = {}
        for start in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            batch = wanted[start : start + 500]
            rows = self._db.connection().execute(
                f"SELECT key, doc FROM docs WHERE collection = ? AND key IN ({','.join('?' * len(batch))})",
                (collection, *batch),
            ).fetchall()
            found.update({key: json.loads(doc) for key, doc in rows})
        return found

    def create(self, collection: str, key: str, doc: Doc) -> bool:
        with self._db.transaction() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO docs(collection, key, doc) VALUES(?,?,?)",
                (collection, key, json.dumps(doc)),
            )
            return cur.rowcount == 1

    def put(self, collection: str, key: str, doc: Doc) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO docs(collection, key, doc) VALUES(?,?,?) "
                "ON CONFLICT(collection, key) DO UPDATE SET doc = excluded.doc",
                (collection, key, json.dumps(doc)),
            )

    def delete(self, collection: str, key: str) -> bool:
        with self._db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM docs WHERE collection = ? AND key = ?", (collection, key)
            )
            return cur.rowcount == 1

    def update(self, collection: str, key: str, fn: Callable[[Doc | None], Doc | None]) -> Doc | None:
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT doc FROM docs WHERE collection = ? AND key = ?", (collection, key)
            ).fetchone()
            current = json.loads(row[0]) if row else None
            new = fn(current)
            if new is None:
                return current
            conn.execute(
                "INSERT INTO docs(collection, key, doc) VALUES(?,?,?) "
                "ON CONFLICT(collection, key) DO UPDATE SET doc = excluded.doc",
                (collection, key, json.dumps(new)),
            )
            return new

    def list(
        self, collection: str, where: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> list[Doc]:
        sql, params = _where_sql(where)
        query = f"SELECT doc FROM docs WHERE collection = ?{sql} ORDER BY key"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        rows = self._db.connection().execute(query, [collection, *params]).fetchall()
        return [json.loads(r[0]) for r in rows]

    def delete_expired(self, collection: str, now_iso: str) -> int:
        """Delete the documents of ``collection`` whose ``expire_at`` (an ISO time in UTC, as written
        with ``+00:00``) is before ``now_iso``; what Firestore's TTL policy does in the cloud."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM docs WHERE collection = ? AND json_extract(doc, '$.expire_at') < ?",
                (collection, now_iso),
            )
            return cur.rowcount

    def delete_matching(self, collection: str, key: str, where: Mapping[str, Any]) -> bool:
        """Delete the document ``key`` only while it still matches ``where`` (one transaction)."""
        sql, params = _where_sql(where)
        with self._db.transaction() as conn:
            cur = conn.execute(f"DELETE FROM docs WHERE collection = ? AND key = ?{sql}", [collection, key, *params])
            return cur.rowcount == 1

    def count(self, collection: str, where: Mapping[str, Any] | None = None) -> int:
        sql, params = _where_sql(where)
        row = self._db.connection().execute(
            f"SELECT COUNT(*) FROM docs WHERE collection = ?{sql}", [collection, *params]
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()
