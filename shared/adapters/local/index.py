"""The local hybrid index: SQLite as the source of truth, BM25 and dense search derived.

Layout under ``path``::

    chunks.db             every chunk: text, metadata, float32 vector; a generation counter
    cache/gen-<N>/        derived structures for generation N: chunk id order, the bm25s
                          index and, above ``ann_threshold`` chunks, the faiss HNSW graph

Every upsert or delete bumps the generation in the same SQLite transaction as the
change (WAL mode), so a crash never leaves half a document and a reader can tell
whether its derived structures are current. They are rebuilt lazily on the first
search after a change, and persisted per generation so another process (the CLI,
a restarted runtime) loads them instead of re-tokenising every chunk.

Search fuses two candidate lists of ``max(50, 5k)`` chunks each. Plain reciprocal
rank fusion did worse than dense retrieval alone on the project's eval set (nDCG@10:
dense 0.742, BM25 0.579, RRF 0.688), so the fusion here is a convex combination of
per-query normalised scores in which dense dominates: ``dense_weight`` (0.7) times
the min-max normalised cosine plus the rest times BM25 divided by the best BM25
score among the candidates (BM25's theoretical minimum is 0). Keyword evidence thus
lifts a chunk and rescues exact-term matches the embedder misses, without letting
lexical noise outrank clear semantic matches.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.sqlite import SqliteDatabase
from shared.contract.errors import ConfigError, DataFileError
from shared.contract.filters import Filters
from shared.contract.ports import Chunk, ScoredChunk, SearchMode, checked_query, checked_vectors
from shared.contract.text import strip_header

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
  metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks(document_id, ordinal);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
"""

_CHUNK_COLUMNS = "chunk_id, document_id, ordinal, text, title, url, published, source, origin, metadata"
# Columns added after the first release, with their definitions: an older chunks.db gains them on open.
_ADDED_COLUMNS = {"origin": "TEXT NOT NULL DEFAULT ''", "metadata": "TEXT NOT NULL DEFAULT '{}'"}
_FILTER_MASKS_KEPT = 32

# ------------------------------------------------------------------ BM25 text

_WORD = re.compile(r"\w\w+", re.UNICODE)
_STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with"]
)


def _s_stem(word: str) -> str:
    """Harman's "S" stemmer: folds English plurals (policies/policy, glaciers/glacier) only.

    Deliberately light (no PyStemmer dependency): it never merges unrelated words,
    which matters more for a fusion where BM25 is the minority voice.
    """
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased words of two or more characters, stop words dropped, plurals folded."""
    return [_s_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def import_bm25s():
    import bm25s

    # bm25s sets its own logger to DEBUG on import, which floods any application that
    # configures logging; its progress chatter is not ours to show.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def _bm25_text(title: str, text: str) -> str:
    # The title goes with every chunk (only the first carries the header); the header's
    # date and URL are noise for keyword matching.
    return f"{title}\n{strip_header(text)}"


# ------------------------------------------------------------------ snapshot


_ONE_PASS_BYTES = 16 * 2**20  # about 10k 384-float vectors
_DENSE_TOPS_KEPT = 256  # recent query vectors' dense tops kept per index (a few hundred KB)


class _Dense:
    """Exact inner-product search over an in-memory float32 matrix.

    The products are ``np.einsum`` loops, not BLAS: OpenBLAS spreads a matrix-vector
    product over its own threads, and in the runtime's process (a dozen handler threads
    on two cores) waking them cost more than the product. Measured in one warm 10k-chunk
    home, load ~10: 10k x 384 by one query 15-21 ms p50 through BLAS, 0.6 ms by einsum;
    100k, 45-60 ms against 15-18 ms (bench/perf_suite.py's query path shows the effect).
    """

    kind = "exact"

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    def _products(self, query: np.ndarray) -> np.ndarray:
        return np.einsum("ij,j->i", self.matrix, query)

    def top(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.top_many(query.reshape(1, -1), n)[0]

    def scores_of(self, query: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.matrix[idx] @ query if len(idx) else np.zeros(0, dtype=np.float32)

    def top_many(self, queries: np.ndarray, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`top` of each row of ``queries``, the matrix read once for all of them."""
        # A matrix too large for the cache is read once for all queries (one product); a small one
        # is cheaper query by query.
        if len(queries) > 1 and self.matrix.nbytes >= _ONE_PASS_BYTES:
            scores = np.einsum("ij,kj->ki", self.matrix, queries)
            columns = [np.ascontiguousarray(row) for row in scores]
        else:
            columns = [self._products(query) for query in queries]
        out = []
        n = min(n, len(self.matrix))
        for column in columns:
            if n <= 0:
                out.append((np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)))
                continue
            idx = np.argpartition(-column, n - 1)[:n] if n < len(column) else np.arange(len(column))
            idx = idx[np.argsort(-column[idx], kind="stable")]
            out.append((idx.astype(np.int64), column[idx]))
        return out


class _Hnsw:
    """Approximate search with a faiss HNSW graph (inner product); exact re-scoring by id."""

    kind = "hnsw"

    def __init__(self, index: Any, ef_search: int) -> None:
        self.index = index
        self.ef_search = ef_search

    def top(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        n = min(n, self.index.ntotal)
        if n <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        import faiss

        params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, n))
        scores, idx = self.index.search(query.reshape(1, -1), n, params=params)
        keep = idx[0] >= 0
        return idx[0][keep].astype(np.int64), scores[0][keep]

    def scores_of(self, query: np.ndarray, idx: np.ndarray) -> np.ndarray:
        if not len(idx):
            return np.zeros(0, dtype=np.float32)
        return self.index.reconstruct_batch(np.asarray(idx, dtype=np.int64)) @ query

    def top_many(self, queries: np.ndarray, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`top` of each row of ``queries`` in one faiss call."""
        n = min(n, self.index.ntotal)
        if n <= 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)) for _ in range(len(queries))]
        import faiss

        params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, n))
        scores, idx = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), n, params=params)
        out = []
        for row_idx, row_scores in zip(idx, scores, strict=True):
            keep = row_idx >= 0
            out.append((row_idx[keep].astype(np.int64), row_scores[keep]))
        return out


@dataclass(frozen=True)
class _Snapshot:
    """Immutable derived view of one generation; shared by every reader until replaced."""

    generation: int
    chunk_ids: list[str]
    dense: _Dense | _Hnsw | None
    bm25: Any  # bm25s.BM25, or None when there are no chunks

    @property
    def size(self) -> int:
        return len(self.chunk_ids)

    def bm25_scores(self, text: str) -> np.ndarray:
        if self.bm25 is None or not self.chunk_ids:
            return np.zeros(self.size, dtype=np.float32)
        vocab = self.bm25.vocab_dict
        ids = [vocab[t] for t in bm25_tokens(text) if t in vocab]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self.bm25.get_scores(ids), dtype=np.float32)


# --------------------------------------------------------------------- index


class HybridIndex:
    """The :class:`~shared.contract.ports.Index` of the local runtime (BM25 + dense, on disk).

    Thread-safe: writers serialise on SQLite's write lock; readers share an
    immutable snapshot of the derived structures, rebuilt under a lock when the
    generation moved. A reader that finds another thread already rebuilding
    keeps answering from the previous (consistent, slightly older) snapshot
    rather than waiting.
    """

    def __init__(
        self,
        path: Path | str,
        dimension: int,
        *,
        ann_threshold: int = 100_000,
        dense_weight: float = 0.7,
        hnsw_m: int = 32,
        ef_search: int = 64,
        ef_construction: int = 80,
    ) -> None:
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"dense_weight={dense_weight} must be between 0 and 1")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.dimension = dimension
        self.ann_threshold = ann_threshold
        self.dense_weight = dense_weight
        self.hnsw_m = hnsw_m
        self.ef_search = max(64, ef_search)
        self.ef_construction = ef_construction
        self.set_aside: Path | None = None  # where a damaged chunks.db was moved, when it was
        self._db = self._open()
        self._add_columns()
        self.started_new = self._check_dimension()
        self._snapshot: _Snapshot | None = None
        self._rebuild_lock = threading.Lock()
        # (generation, query vector bytes) -> its dense top (ids, scores), best first: one query's
        # vector is searched by several stages (the transformer's feedback search, the retriever),
        # and at 100k chunks the exact product is the largest cost of a query (18 ms of ~60).
        self._dense_tops: OrderedDict[tuple[int, bytes], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._dense_tops_lock = threading.Lock()
        # (generation, filters.key) -> the snapshot's row mask: a filter is usually asked again by the
        # same question's sub-queries and stages.
        self._masks: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._masks_lock = threading.Lock()

    def _add_columns(self) -> None:
        with self._db.transaction() as conn:
            present = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
            for name, definition in _ADDED_COLUMNS.items():
                if name not in present:
                    conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {definition}")

    def _open(self) -> SqliteDatabase:
        """chunks.db; a damaged or emptied one is moved aside (kept, for a look) and a new one
        started: the index is derived data, rebuilt from the documents (see ``started_new``)."""
        chunks = self.path / "chunks.db"
        try:
            return SqliteDatabase(chunks, _SCHEMA, way_out="the index is derived data: set aside, and started anew")
        except DataFileError as exc:
            if exc.kind not in ("damaged", "empty"):
                raise
            stamp = time.strftime("%Y%m%dT%H%M%S")
            self.set_aside = chunks.with_name(f"chunks.db.damaged-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                try:
                    chunks.with_name(chunks.name + suffix).rename(self.set_aside.with_name(self.set_aside.name + suffix))
                except FileNotFoundError:  # another process moved it first
                    pass
            log.warning("%s (kept as %s)", exc, self.set_aside)
            return SqliteDatabase(chunks, _SCHEMA)

    def _check_dimension(self) -> bool:
        """Check the vectors' dimension; True when this index was created just now."""
        with self._db.transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'dimension'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta(key, value) VALUES ('dimension', ?)", (str(self.dimension),))
                # derived structures of an index that stood here before belong to its generations,
                # which this one's would otherwise reuse by number
                shutil.rmtree(self.path / "cache", ignore_errors=True)
                return conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None
            elif int(row[0]) != self.dimension:
                raise ConfigError(
                    f"the index at {self.path} holds {row[0]}-dimensional vectors but the embedder makes "
                    f"{self.dimension}; point RAGBUS_HOME elsewhere or delete {self.path} and re-ingest"
                )
        return False

    # ------------------------------------------------------------ writes

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` in one transaction."""
        vectors = checked_vectors(document_id, chunks, vectors, self.dimension)
        rows = [
            (c.chunk_id, document_id, c.ordinal, c.text, c.title, c.url, c.published, c.source,
             c.origin, json.dumps(dict(c.metadata), sort_keys=True), np.ascontiguousarray(v).tobytes())
            for c, v in zip(chunks, vectors, strict=True)
        ]
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
            conn.executemany(
                f"INSERT OR REPLACE INTO chunks({_CHUNK_COLUMNS}, vector) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows
            )
            self._bump(conn)

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks; 0 when it had none (deleting twice is fine)."""
        with self._db.transaction() as conn:
            removed = conn.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,)).rowcount
            if removed:
                self._bump(conn)
        return removed

    @staticmethod
    def _bump(conn: Any) -> None:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    # ------------------------------------------------------------- reads

    @property
    def generation(self) -> int:
        row = self._db.connection().execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0])

    def count_chunks(self) -> int:
        return int(self._db.connection().execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def count_documents(self) -> int:
        return int(self._db.connection().execute("SELECT COUNT(DISTINCT document_id) FROM chunks").fetchone()[0])

    def document_chunk_ids(self, document_id: str) -> list[str]:
        rows = self._db.connection().execute(
            "SELECT chunk_id FROM chunks WHERE document_id = ? ORDER BY ordinal", (document_id,)
        ).fetchall()
        return [r[0] for r in rows]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        found: dict[str, Chunk] = {}
        conn = self._db.connection()
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 500):  # stay under SQLite's variable limit
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for row in conn.execute(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE chunk_id IN ({marks})", part):
                found[row["chunk_id"]] = Chunk(
                    chunk_id=row["chunk_id"], document_id=row["document_id"], ordinal=row["ordinal"],
                    text=row["text"], title=row["title"], url=row["url"], published=row["published"],
                    source=row["source"], origin=row["origin"], metadata=json.loads(row["metadata"] or "{}"),
                )
        return [found[i] for i in chunk_ids if i in found]

    def document_frequency(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (as the BM25 tokenizer sees it; 0 if none)."""
        snap = self.snapshot()
        out: dict[str, int] = {}
        if snap.bm25 is None:
            return {t: 0 for t in terms}
        vocab, indptr = snap.bm25.vocab_dict, snap.bm25.scores["indptr"]
        for term in terms:
            counts = [int(indptr[vocab[t] + 1] - indptr[vocab[t]]) if t in vocab else 0 for t in bm25_tokens(term)]
            out[term] = min(counts) if counts else 0
        return out

    def get_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each known chunk id (computed once, at indexing)."""
        out: dict[str, np.ndarray] = {}
        conn = self._db.connection()
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for chunk_id, blob in conn.execute(
                f"SELECT chunk_id, vector FROM chunks WHERE chunk_id IN ({marks})", part
            ):
                out[chunk_id] = np.frombuffer(blob, dtype=np.float32)
        return out

    def search(
        self, text: str, vector: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks for the query among those ``filters`` admits; ``mode`` is hybrid,
        dense or bm25."""
        return self.search_many([text], np.asarray(vector).reshape(1, -1), k, mode, filters)[0]

    def search_many(
        self, texts: Sequence[str], vectors: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[list[ScoredChunk]]:
        """:meth:`search` for each (text, vector), on one snapshot, the dense matrix read once
        and the chunks fetched in one statement (see :class:`~shared.contract.ports.SearchesMany`)."""
        if not texts:
            return []
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(f"{len(texts)} query texts need as many vector rows, got shape {rows.shape}")
        queries = [checked_query(row, k, mode, self.dimension) for row in rows]
        if k <= 0:
            return [[] for _ in texts]
        snap = self.snapshot()
        if snap.size == 0:
            return [[] for _ in texts]
        mask = None if filters is None or filters.is_empty else self.row_mask(snap, filters)
        admitted = snap.size if mask is None else int(mask.sum())
        if admitted == 0:
            return [[] for _ in texts]
        pool = min(admitted, max(50, 5 * k))
        matrix = np.stack(queries)
        dense_tops = None
        if mode in ("hybrid", "dense") and snap.dense is not None:
            dense_tops = (
                self._dense_top_many(snap, matrix, pool) if mask is None else _masked_dense_tops(snap.dense, matrix, pool, mask)
            )
        ranked: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for j, (text, query) in enumerate(zip(texts, queries, strict=True)):
            bm25_all = snap.bm25_scores(text)
            if mask is not None:
                bm25_all = np.where(mask, bm25_all, np.float32(0))
            candidates: list[np.ndarray] = []
            if dense_tops is not None:
                candidates.append(dense_tops[j][0])
            if mode in ("hybrid", "bm25"):
                candidates.append(_top_positive(bm25_all, pool))
            idx = np.unique(np.concatenate(candidates)) if candidates else np.zeros(0, dtype=np.int64)
            if not len(idx):
                ranked.append((idx, idx, np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)))
                continue
            dense = (
                np.asarray(snap.dense.scores_of(query, idx), dtype=np.float32)
                if snap.dense is not None else np.zeros(len(idx), dtype=np.float32)
            )
            lexical = bm25_all[idx]
            if mode == "dense":
                score = dense
            elif mode == "bm25":
                score = lexical
            else:
                score = hybrid_scores(dense, lexical, self.dense_weight)
            order = np.argsort(-score, kind="stable")
            # A few spares: a chunk replaced since the snapshot is skipped, not returned stale.
            picked = order[: k + 8]
            ranked.append((idx, picked, score, np.stack([dense, lexical])))
        wanted = [snap.chunk_ids[idx[i]] for idx, picked, _, _ in ranked for i in picked]
        chunks = {c.chunk_id: c for c in self.get_chunks(wanted)}
        results: list[list[ScoredChunk]] = []
        for idx, picked, score, parts in ranked:
            out: list[ScoredChunk] = []
            for i in picked:
                chunk = chunks.get(snap.chunk_ids[idx[i]])
                if chunk is None:
                    continue
                out.append(ScoredChunk(chunk=chunk, score=float(score[i]), dense_score=float(parts[0][i]),
                                       bm25_score=float(parts[1][i])))
                if len(out) == k:
                    break
            results.append(out)
        return results

    def _dense_top_many(self, snap: _Snapshot, queries: np.ndarray, pool: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``snap.dense.top_many(queries, pool)``, answering rows this snapshot searched before
        (at least as deep) from memory; the rest in one call."""
        keys = [(snap.generation, row.tobytes()) for row in queries]
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        with self._dense_tops_lock:
            for j, key in enumerate(keys):
                hit = self._dense_tops.get(key)
                if hit is not None and len(hit[0]) >= pool:
                    self._dense_tops.move_to_end(key)
                    found[j] = (hit[0][:pool], hit[1][:pool])
        # Rows not yet searched, each distinct vector once (sub-queries search with the question's).
        first_of: dict[tuple[int, bytes], int] = {}
        for j in range(len(keys)):
            if j not in found:
                first_of.setdefault(keys[j], j)
        if first_of:
            rows = list(first_of.values())
            fresh = snap.dense.top_many(queries[rows], pool)
            with self._dense_tops_lock:
                for j, top in zip(rows, fresh, strict=True):
                    for part in top:
                        part.setflags(write=False)  # shared by later searches of the same vector
                    found[j] = top
                    self._dense_tops[keys[j]] = top
                    self._dense_tops.move_to_end(keys[j])
                while len(self._dense_tops) > _DENSE_TOPS_KEPT:
                    self._dense_tops.popitem(last=False)
        return [found[j] if j in found else found[first_of[keys[j]]] for j in range(len(keys))]

    # ------------------------------------------------------------ filters

    def row_mask(self, snap: _Snapshot, filters: Filters) -> np.ndarray:
        """Which rows of ``snap`` ``filters`` admits (a boolean per chunk id, in snapshot order).

        Pre-filtering: search restricts its dense and BM25 candidates to these rows before scoring,
        so a narrow filter still fills ``k``. A chunk id no longer stored is not admitted.
        """
        key = (snap.generation, filters.key)
        with self._masks_lock:
            hit = self._masks.get(key)
            if hit is not None:
                self._masks.move_to_end(key)
                return hit
        position = {chunk_id: n for n, chunk_id in enumerate(snap.chunk_ids)}
        mask = np.zeros(snap.size, dtype=bool)
        conn = self._db.connection()
        for row in conn.execute("SELECT chunk_id, document_id, title, url, published, source, origin, metadata FROM chunks"):
            n = position.get(row[0])
            if n is None:
                continue
            fields = {"document_id": row[1], "title": row[2], "url": row[3], "published": row[4],
                      "source": row[5], "origin": row[6], "metadata": json.loads(row[7] or "{}")}
            mask[n] = filters.matches(fields)
        mask.setflags(write=False)
        with self._masks_lock:
            self._masks[key] = mask
            while len(self._masks) > _FILTER_MASKS_KEPT:
                self._masks.popitem(last=False)
        return mask

    # --------------------------------------------------- derived structures

    def snapshot(self) -> _Snapshot:
        """The derived view of the current generation, rebuilt or loaded when it moved."""
        current = self._snapshot
        generation = self.generation
        if current is not None and current.generation == generation:
            return current
        if current is not None:
            if not self._rebuild_lock.acquire(blocking=False):
                return current  # someone is rebuilding; answer from the previous generation
        else:
            self._rebuild_lock.acquire()
        try:
            current = self._snapshot
            if current is None or current.generation != self.generation:
                current = self._load_or_build()
                self._snapshot = current
            return current
        finally:
            self._rebuild_lock.release()

    def _cache_dir(self, generation: int) -> Path:
        return self.path / "cache" / f"gen-{generation:012d}"

    def _load_or_build(self) -> _Snapshot:
        started = time.perf_counter()
        conn = self._db.connection()
        conn.execute("BEGIN")  # one read transaction: rows and generation agree
        try:
            generation = int(conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
            cached = self._load_cached(conn, generation)
            if cached is not None:
                snap, how = cached, "loaded"
            else:
                snap, how = self._build(conn, generation), "built"
        finally:
            conn.execute("COMMIT")
        log.info("index generation %d %s: %d chunks, %s search, %.2fs", snap.generation, how, snap.size,
                 snap.dense.kind if snap.dense else "no", time.perf_counter() - started)
        return snap

    def _use_ann(self, size: int) -> bool:
        return size > self.ann_threshold

    def _read_matrix(self, conn: Any, size: int) -> np.ndarray:
        matrix = np.empty((size, self.dimension), dtype=np.float32)
        for n, (blob,) in enumerate(conn.execute("SELECT vector FROM chunks ORDER BY chunk_id")):
            matrix[n] = np.frombuffer(blob, dtype=np.float32)
        return matrix

    def _load_cached(self, conn: Any, generation: int) -> _Snapshot | None:
        folder = self._cache_dir(generation)
        if not (folder / "complete").exists():
            return None
        try:
            bm25s = import_bm25s()

            chunk_ids = json.loads((folder / "chunk_ids.json").read_text())
            bm25 = bm25s.BM25.load(str(folder / "bm25"), mmap=False, show_progress=False) if chunk_ids else None
            graph = folder / "hnsw.faiss"
            if self._use_ann(len(chunk_ids)) and graph.exists():
                import faiss

                dense: _Dense | _Hnsw = _Hnsw(faiss.read_index(str(graph)), self.ef_search)
            elif self._use_ann(len(chunk_ids)):
                # cached by an instance that searched exactly: keep its BM25, add the graph
                dense = self._build_hnsw(self._read_matrix(conn, len(chunk_ids)))
                snap = _Snapshot(generation, chunk_ids, dense, bm25)
                self._persist(snap)
                return snap
            else:
                dense = _Dense(self._read_matrix(conn, len(chunk_ids)))
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("index cache %s is unreadable (%s); rebuilding it", folder, exc)
            return None
        return _Snapshot(generation, chunk_ids, dense, bm25)

    def _build_hnsw(self, matrix: np.ndarray) -> _Hnsw:
        import faiss

        hnsw = faiss.IndexHNSWFlat(self.dimension, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = self.ef_construction
        hnsw.hnsw.efSearch = self.ef_search
        hnsw.add(np.ascontiguousarray(matrix))
        return _Hnsw(hnsw, self.ef_search)

    def _build(self, conn: Any, generation: int) -> _Snapshot:
        bm25s = import_bm25s()

        chunk_ids: list[str] = []
        corpus: list[list[str]] = []
        matrix_rows: list[bytes] = []
        for row in conn.execute("SELECT chunk_id, title, text, vector FROM chunks ORDER BY chunk_id"):
            chunk_ids.append(row[0])
            corpus.append(bm25_tokens(_bm25_text(row[1], row[2])))
            matrix_rows.append(row[3])
        size = len(chunk_ids)
        matrix = np.frombuffer(b"".join(matrix_rows), dtype=np.float32).reshape(size, self.dimension)
        del matrix_rows
        bm25 = None
        dense: _Dense | _Hnsw | None = None
        if size:
            bm25 = bm25s.BM25()
            bm25.index(corpus, show_progress=False)
            if self._use_ann(size):
                dense = self._build_hnsw(matrix)
            else:
                dense = _Dense(matrix.copy())  # writable, owned copy
        snap = _Snapshot(generation, chunk_ids, dense, bm25)
        self._persist(snap)
        return snap

    def _persist(self, snap: _Snapshot) -> None:
        """Write the snapshot's derived files for other processes; best effort."""
        cache = self.path / "cache"
        final = self._cache_dir(snap.generation)
        if (final / "complete").exists():
            # Published already, perhaps by an instance that searched exactly; add the graph.
            if isinstance(snap.dense, _Hnsw) and not (final / "hnsw.faiss").exists():
                import faiss

                part = final / f".hnsw-{threading.get_ident()}-{time.monotonic_ns()}"
                try:
                    faiss.write_index(snap.dense.index, str(part))
                    part.rename(final / "hnsw.faiss")
                except (OSError, RuntimeError) as exc:
                    part.unlink(missing_ok=True)
                    log.warning("could not persist the HNSW graph of generation %d: %s", snap.generation, exc)
            return
        tmp = cache / f".tmp-{snap.generation}-{threading.get_ident()}-{time.monotonic_ns()}"
        try:
            tmp.mkdir(parents=True)
            (tmp / "chunk_ids.json").write_text(json.dumps(snap.chunk_ids))
            if snap.bm25 is not None:
                snap.bm25.save(str(tmp / "bm25"), show_progress=False)
            if isinstance(snap.dense, _Hnsw):
                import faiss

                faiss.write_index(snap.dense.index, str(tmp / "hnsw.faiss"))
            (tmp / "complete").write_text(str(snap.generation))
            tmp.rename(final)
        except OSError as exc:
            # Another process may have published the same generation first; that is fine.
            shutil.rmtree(tmp, ignore_errors=True)
            if not (final / "complete").exists():
                log.warning("could not persist index cache for generation %d: %s", snap.generation, exc)
            return
        for old in cache.glob("gen-*"):
            if old != final and old.name < final.name:
                shutil.rmtree(old, ignore_errors=True)

    def close(self) -> None:
        self._db.close()


_EXACT_MASKED_ROWS = 50_000  # below this many admitted rows, scoring them exactly beats a filtered graph walk


def _masked_dense_tops(
    dense: _Dense | _Hnsw, queries: np.ndarray, n: int, mask: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The dense top ``n`` of each query among the rows ``mask`` admits, best first."""
    rows = np.flatnonzero(mask).astype(np.int64)
    if isinstance(dense, _Hnsw) and len(rows) > _EXACT_MASKED_ROWS:
        import faiss

        # faiss's HNSW takes an id selector, so the graph walk itself skips excluded rows.
        params = faiss.SearchParametersHNSW(efSearch=max(dense.ef_search, n), sel=faiss.IDSelectorBatch(rows))
        scores, idx = dense.index.search(np.ascontiguousarray(queries, dtype=np.float32), n, params=params)
        return [(i[i >= 0].astype(np.int64), s[i >= 0]) for i, s in zip(idx, scores, strict=True)]
    out = []
    vectors = dense.matrix[rows] if isinstance(dense, _Dense) else dense.index.reconstruct_batch(rows)
    for query in queries:
        column = np.einsum("ij,j->i", vectors, query)
        m = min(n, len(rows))
        best = np.argpartition(-column, m - 1)[:m] if m < len(column) else np.arange(len(column))
        best = best[np.argsort(-column[best], kind="stable")]
        out.append((rows[best], column[best]))
    return out


def _top_positive(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` highest scores above zero (chunks sharing no term are not candidates)."""
    positive = np.flatnonzero(scores > 0)
    if len(positive) > n:
        positive = positive[np.argpartition(-scores[positive], n - 1)[:n]]
    return positive.astype(np.int64)


def hybrid_scores(dense: np.ndarray, lexical: np.ndarray, dense_weight: float) -> np.ndarray:
    """The hybrid fusion every index uses: ``dense_weight`` times the min-max normalised
    cosine plus the rest times BM25 over its best score."""
    return dense_weight * _min_max(dense) + (1.0 - dense_weight) * _by_max(lexical)


def _min_max(values: np.ndarray) -> np.ndarray:
    if not len(values):
        return values
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return np.ones_like(values)
    return (values - low) / (high - low)


def _by_max(values: np.ndarray) -> np.ndarray:
    high = float(values.max()) if len(values) else 0.0
    if high <= 0:
        return np.zeros_like(values)
    return values / high
