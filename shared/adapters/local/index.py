"""The local hybrid index: SQLite as the source of truth, BM25 and dense search over segments.

Layout under ``path``::

    chunks.db             every chunk: text, metadata, float32 vector and the generation that
                          wrote it; tombstones of replaced and deleted chunks; the generation
                          counter and the manifest (which segments make up the index)
    segments/seg-*/       immutable segments (see :mod:`shared.adapters.local.segments`):
                          memory-mapped vectors, BM25 postings, an HNSW graph when large

Every upsert or delete bumps the generation in the same SQLite transaction as the change
(WAL mode), so a crash never leaves half a document. A search reads the manifest's
segments (opened once per process) plus the rows written since the last one, held in small
in-memory segments: the cost of a change is the cost of the rows it wrote, whatever the
size of the corpus (see :class:`HybridIndex`). Before segments, every change rebuilt the
whole bm25s index and, above 100k chunks, the whole HNSW graph: the first search after one
new document took 1.0 s at 10k chunks and 86 s at 150k (issue 26).

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

import fcntl
import itertools
import json
import logging
import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.segments import (
    BM25_B,
    BM25_K1,
    PostingsBuilder,
    Segment,
    bm25_idf,
    merge_plan,
    read_segment_files,
    write_segment,
)
from shared.adapters.local.sqlite import SqliteDatabase
from shared.contract.errors import ConfigError, DataFileError
from shared.contract.filters import Filters, published_at
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

_CHUNK_COLUMNS = "chunk_id, document_id, ordinal, text, title, url, published, source, origin, metadata"
# Columns added after the first release, with their definitions: an older chunks.db gains them on open.
# ``gen`` is the generation that wrote the row: rows of older indexes get 0 and are found by the
# first refresh (and flushed into a segment by the first maintenance).
_ADDED_COLUMNS = {"origin": "TEXT NOT NULL DEFAULT ''", "metadata": "TEXT NOT NULL DEFAULT '{}'",
                  "gen": "INTEGER NOT NULL DEFAULT 0"}
_FILTER_COLUMNS_KEPT = 64  # segments whose filter columns stay in memory (a few bytes a row)
_NOT_FIELDS = frozenset({"vector", "gen", "text"})  # columns a filter never reads
_FILTER_MASKS_KEPT = 64  # (segment, filter) row masks kept per index

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


# ------------------------------------------------------------------ dense search


_ONE_PASS_BYTES = 16 * 2**20  # about 10k 384-float vectors
_DENSE_TOPS_KEPT = 1024  # recent (segment, query vector) dense tops kept per index (about 1 MB)


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

    def __len__(self) -> int:
        return len(self.matrix)

    def scores_of(self, query: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.matrix[idx] @ query if len(idx) else np.zeros(0, dtype=np.float32)

    def top_many(self, queries: np.ndarray, n: int, dead: np.ndarray | None = None
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`top` of each row of ``queries``, the matrix read once for all of them; rows
        marked in ``dead`` (a boolean mask) are never returned."""
        # A matrix too large for the cache is read once for all queries (one product); a small one
        # is cheaper query by query.
        if len(queries) > 1 and self.matrix.nbytes >= _ONE_PASS_BYTES:
            scores = np.einsum("ij,kj->ki", self.matrix, queries)
            columns = [np.ascontiguousarray(row) for row in scores]
        else:
            columns = [self._products(query) for query in queries]
        out = []
        live = len(self.matrix) - (int(dead.sum()) if dead is not None else 0)
        n = min(n, live)
        for column in columns:
            if dead is not None:
                column[dead] = -np.inf
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

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def top_many(self, queries: np.ndarray, n: int, dead: np.ndarray | None = None
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`top` of each row of ``queries`` in one faiss call; rows marked in ``dead``
        are excluded inside the graph walk (faiss's IDSelector), so the top stays ``n`` deep."""
        live = self.index.ntotal - (int(dead.sum()) if dead is not None else 0)
        n = min(n, live)
        if n <= 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)) for _ in range(len(queries))]
        import faiss

        selector = None
        if dead is not None and dead.any():
            excluded = faiss.IDSelectorBatch(np.flatnonzero(dead).astype(np.int64))
            selector = faiss.IDSelectorNot(excluded)  # ``excluded`` stays referenced until the search ends
        params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, n), sel=selector)
        scores, idx = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), n, params=params)
        out = []
        for row_idx, row_scores in zip(idx, scores, strict=True):
            keep = row_idx >= 0
            out.append((row_idx[keep].astype(np.int64), row_scores[keep]))
        return out


_RECLAIM_DEAD = 0.3  # a segment with more dead rows than this share is rewritten without them
_MEMORY_DELTAS = 8  # in-memory segments of recent generations before they are folded into one
_SEGMENT_UIDS = itertools.count(1)


class _FilterColumns:
    """What filters read of every row of one segment, as arrays: dates, kinds and presence are
    compared vectorised; a source prefix or ``where`` is checked row by row on the rows left."""

    def __init__(self, size: int) -> None:
        self.present = np.zeros(size, dtype=bool)  # the row's chunk is still in chunks.db
        self.kind = np.full(size, "", dtype=object)
        self.published = np.full(size, np.nan)  # epoch seconds; NaN: undated, never admitted by a date
        self.fields: list[dict[str, Any] | None] = [None] * size

    @classmethod
    def empty(cls, size: int) -> _FilterColumns:
        return cls(size)

    def set(self, row: int, fields: dict[str, Any]) -> None:
        self.present[row] = True
        self.kind[row] = fields.get("source") or ""
        at = published_at(fields.get("published"))
        if at is not None:
            self.published[row] = at.timestamp()
        self.fields[row] = {k: fields.get(k) for k in ("origin", "url", "source", "document_id", "title", "metadata")}

    def mask(self, filters: Filters) -> np.ndarray:
        mask = self.present.copy()
        if filters.kind is not None:
            mask &= self.kind == filters.kind
        if filters.since is not None:
            mask &= self.published >= filters.since.timestamp()
        if filters.until is not None:
            mask &= self.published < filters.until.timestamp()
        rest = Filters(source=filters.source, where=filters.where)
        if not rest.is_empty:
            for n in np.flatnonzero(mask):
                mask[n] = rest.matches(self.fields[n] or {})
        return mask


@dataclass(frozen=True)
class _DenseKind:
    kind: str


@dataclass(frozen=True)
class _Scope:
    """The rows a search may return, per segment: a mask of excluded rows (None: none),
    and the BM25 statistics of the rest."""

    excluded: tuple[np.ndarray | None, ...]
    rows: int
    length: float  # BM25 tokens in the admitted rows

    @classmethod
    def of(cls, segments: Sequence[Segment], excluded: Sequence[np.ndarray | None]) -> _Scope:
        rows, length = 0, 0.0
        for seg, mask in zip(segments, excluded, strict=True):
            lengths = seg.postings.lengths
            if mask is None:
                rows += len(seg)
                length += float(lengths.sum())
            else:
                rows += int((~mask).sum())
                length += float(lengths[~mask].sum())
        return cls(tuple(excluded), rows, length)


@dataclass(frozen=True)
class _View:
    """Immutable view of one generation: the manifest's segments, the in-memory segments of
    the generations after it, and each segment's dead rows; shared by every reader until
    replaced."""

    generation: int
    manifest_version: int
    manifest: tuple[dict[str, Any], ...]
    segments: tuple[Segment, ...]
    dead: tuple[np.ndarray | None, ...]
    offsets: np.ndarray  # global row index of each segment's first row; one more at the end
    live: _Scope  # every row not dead

    @property
    def size(self) -> int:
        return self.live.rows

    @property
    def dense(self) -> _DenseKind | None:
        if not self.segments:
            return None
        return _DenseKind("hnsw" if any(s.dense.kind == "hnsw" for s in self.segments) else "exact")

    @property
    def disk_segments(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.name)

    @property
    def memory_rows(self) -> int:
        return sum(len(s) for s in self.segments if not s.name)

    def live_chunk_ids(self) -> list[str]:
        out: list[str] = []
        for seg, dead in zip(self.segments, self.dead, strict=True):
            out.extend(c for i, c in enumerate(seg.chunk_ids) if dead is None or not dead[i])
        return out

    def locate(self, idx: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets, idx, side="right") - 1

    def chunk_ids_of(self, idx: np.ndarray) -> list[str]:
        seg_of = self.locate(idx)
        rows = idx - self.offsets[seg_of]
        return [self.segments[si].chunk_ids[r] for si, r in zip(seg_of.tolist(), rows.tolist(), strict=True)]

    def chunk_id(self, g: int) -> str:
        si = int(self.locate(np.asarray([g]))[0])
        return self.segments[si].chunk_ids[g - int(self.offsets[si])]

    def dense_scores(self, query: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = np.zeros(len(idx), dtype=np.float32)
        seg_of = self.locate(idx)
        for si in np.unique(seg_of):
            where = seg_of == si
            rows = idx[where] - int(self.offsets[si])
            out[where] = np.asarray(self.segments[si].vectors[np.sort(rows)] @ query)[np.argsort(np.argsort(rows))]
        return out

    def bm25_scores(self, text: str, scope: _Scope | None = None) -> np.ndarray:
        """Lucene BM25 (bm25s's "lucene" method) with N, document frequencies and the average
        length taken over the rows in ``scope`` (default: the live rows) of every segment: the
        scores of one fresh build of only those chunks; excluded rows score 0."""
        scope = scope or self.live
        total = int(self.offsets[-1])
        scores = np.zeros(total, dtype=np.float32)
        tokens = bm25_tokens(text)
        if not tokens or not scope.rows:
            return scores
        avgdl = scope.length / scope.rows
        postings: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        for term in dict.fromkeys(tokens):
            postings[term] = self._postings(term, scope)
        for term in tokens:  # a repeated query word counts again, as in bm25s
            parts = postings[term]
            df = sum(len(rows) for _, rows, _ in parts)
            if not df:
                continue
            idf = bm25_idf(df, scope.rows)
            for si, rows, tfs in parts:
                dl = self.segments[si].postings.lengths[rows]
                contrib = idf * tfs / (BM25_K1 * ((1 - BM25_B) + BM25_B * dl / avgdl) + tfs)
                scores[int(self.offsets[si]) + rows] += contrib.astype(np.float32)
        return scores

    def _postings(self, term: str, scope: _Scope) -> list[tuple[int, np.ndarray, np.ndarray]]:
        out = []
        for si, seg in enumerate(self.segments):
            rows, tfs = seg.postings.term(term)
            if not len(rows):
                continue
            excluded = scope.excluded[si]
            if excluded is not None:
                keep = ~excluded[rows]
                rows, tfs = rows[keep], tfs[keep]
            if len(rows):
                out.append((si, np.asarray(rows, dtype=np.int64), np.asarray(tfs, dtype=np.float32)))
        return out

    def document_frequency(self, term: str) -> int:
        return sum(len(rows) for _, rows, _ in self._postings(term, self.live))


def _make_view(generation: int, manifest_version: int, manifest: Sequence[dict[str, Any]],
               segments: Sequence[Segment], dead: Sequence[np.ndarray | None]) -> _View:
    offsets = np.zeros(len(segments) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in segments], out=offsets[1:])
    return _View(generation, manifest_version, tuple(manifest), tuple(segments), tuple(dead), offsets,
                 _Scope.of(segments, dead))


# --------------------------------------------------------------------- index


class HybridIndex:
    """The :class:`~shared.contract.ports.Index` of the local runtime (BM25 + dense, on disk).

    Changes cost what they change. SQLite (``chunks.db``) is the source of truth: every
    row carries the generation that wrote it, and a replaced or deleted row leaves a
    tombstone. Search runs over immutable segments (see :mod:`.segments`): the ones named
    by the manifest (in SQLite's ``meta``, so the manifest, the tombstones and the rows
    are read in one transaction and every process sees one consistent generation), plus
    small in-memory segments for the generations written since, built from those rows
    alone. A search after a write therefore reads only the new rows, never the corpus.

    Maintenance (a background thread, or :meth:`maintain`) flushes the in-memory rows into
    a segment on disk once there are ``flush_rows`` of them and merges ``merge_factor``
    adjacent segments of one size level into one (Lucene's log merge policy; adjacent,
    because a segment is a range of generations). A segment above ``ann_threshold`` rows
    gets a faiss HNSW graph; smaller ones are searched exactly. A merge writes its
    segment to a temporary folder, renames it, then swaps the manifest in one SQLite
    transaction: a kill -9 at any point leaves the old manifest and its segments intact.

    Thread-safe: writers serialise on SQLite's write lock; readers share an immutable
    view, replaced under a lock when the generation or the manifest moved. A reader that
    finds another thread already refreshing keeps answering from the previous view.
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
        flush_rows: int = 2_000,
        merge_factor: int = 4,
        background_merges: bool = True,
    ) -> None:
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"dense_weight={dense_weight} must be between 0 and 1")
        if flush_rows < 1 or merge_factor < 2:
            raise ConfigError(f"flush_rows={flush_rows} must be >= 1 and merge_factor={merge_factor} >= 2")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.dimension = dimension
        self.ann_threshold = ann_threshold
        self.dense_weight = dense_weight
        self.hnsw_m = hnsw_m
        self.ef_search = max(64, ef_search)
        self.ef_construction = ef_construction
        self.flush_rows = flush_rows
        self.merge_factor = merge_factor
        self.background_merges = background_merges
        self._segments_dir = self.path / "segments"
        self.set_aside: Path | None = None  # where a damaged chunks.db was moved, when it was
        self._db = self._open()
        self._migrate()
        self.started_new = self._check_dimension()
        self._view: _View | None = None
        self._refresh_lock = threading.Lock()
        self._maintainer: threading.Thread | None = None
        self._maintainer_guard = threading.Lock()
        # (segment, its dead rows, query vector bytes) -> its dense top (rows, scores), best first:
        # one query's vector is searched by several stages (the transformer's feedback search, the
        # retriever), and a segment never changes, so a write only costs the new segment's search.
        self._dense_tops: OrderedDict[tuple[int, int, str, bytes], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._dense_tops_lock = threading.Lock()
        # (segment, filters.key) -> the rows of the segment the filter admits: a segment never
        # changes, so a filter is matched against its rows once, whatever is written later.
        self._masks: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._masks_lock = threading.Lock()
        self._columns: OrderedDict[int, _FilterColumns] = OrderedDict()

    def _migrate(self) -> None:
        with self._db.transaction() as conn:
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
                # segments of an index that stood here before belong to its generations, which this
                # one's would otherwise reuse by name
                shutil.rmtree(self.path / "cache", ignore_errors=True)
                shutil.rmtree(self._segments_dir, ignore_errors=True)
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
        with self._db.transaction() as conn:
            generation = self._bump(conn)
            rows = [
                (c.chunk_id, document_id, c.ordinal, c.text, c.title, c.url, c.published, c.source,
                 c.origin, json.dumps(dict(c.metadata), sort_keys=True), np.ascontiguousarray(v).tobytes(),
                 generation)
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
                f"INSERT OR REPLACE INTO chunks({_CHUNK_COLUMNS}, vector, gen) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows
            )

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks; 0 when it had none (deleting twice is fine)."""
        with self._db.transaction() as conn:
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

    @property
    def generation(self) -> int:
        row = self._db.connection().execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0])

    def _versions(self, conn: Any | None = None) -> tuple[int, int]:
        conn = conn or self._db.connection()
        values = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('generation', 'manifest_version')"))
        return int(values["generation"]), int(values.get("manifest_version", 0))

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
        view = self.snapshot()
        out: dict[str, int] = {}
        for term in terms:
            counts = [view.document_frequency(t) for t in bm25_tokens(term)]
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
        """:meth:`search` for each (text, vector), on one view, each segment's vectors read once
        and the chunks fetched in one statement (see :class:`~shared.contract.ports.SearchesMany`).

        ``filters`` pre-filter: each segment's rows are restricted by a mask before any scoring
        (dense and BM25, whose statistics are then those of the admitted rows), so the results
        are those of an index holding only the admitted chunks, and a narrow filter fills ``k``."""
        if not texts:
            return []
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise ValueError(f"{len(texts)} query texts need as many vector rows, got shape {rows.shape}")
        queries = [checked_query(row, k, mode, self.dimension) for row in rows]
        if k <= 0:
            return [[] for _ in texts]
        view = self.snapshot()
        scope = view.live if filters is None or filters.is_empty else self._filtered(view, filters)
        if scope.rows == 0:
            return [[] for _ in texts]
        pool = min(scope.rows, max(50, 5 * k))
        matrix = np.stack(queries)
        scope_key = "" if scope is view.live else filters.key
        dense_tops = (self._dense_top_many(view, matrix, pool, scope, scope_key)
                      if mode in ("hybrid", "dense") else None)
        ranked: list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]] = []
        for j, (text, query) in enumerate(zip(texts, queries, strict=True)):
            bm25_all = view.bm25_scores(text, scope) if mode in ("hybrid", "bm25") else None
            candidates: list[np.ndarray] = []
            if dense_tops is not None:
                candidates.append(dense_tops[j][0])
            if bm25_all is not None:
                candidates.append(_top_positive(bm25_all, pool))
            idx = np.unique(np.concatenate(candidates)) if candidates else np.zeros(0, dtype=np.int64)
            if not len(idx):
                ranked.append(([], idx, np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)))
                continue
            dense = view.dense_scores(query, idx)
            lexical = bm25_all[idx] if bm25_all is not None else view.bm25_scores(text, scope)[idx]
            if mode == "dense":
                score = dense
            elif mode == "bm25":
                score = lexical
            else:
                score = hybrid_scores(dense, lexical, self.dense_weight)
            # Ties go by chunk id, as in one segment sorted by chunk id: the order does not
            # depend on which segment holds a row.
            names = view.chunk_ids_of(idx)
            order = np.lexsort((np.asarray(names), -score))
            # A few spares: a chunk replaced since the view is skipped, not returned stale.
            picked = order[: k + 8]
            ranked.append((names, picked, score, np.stack([dense, lexical])))
        wanted = [names[i] for names, picked, _, _ in ranked for i in picked]
        chunks = {c.chunk_id: c for c in self.get_chunks(wanted)}
        results: list[list[ScoredChunk]] = []
        for names, picked, score, parts in ranked:
            out: list[ScoredChunk] = []
            for i in picked:
                chunk = chunks.get(names[i])
                if chunk is None:
                    continue
                out.append(ScoredChunk(chunk=chunk, score=float(score[i]), dense_score=float(parts[0][i]),
                                       bm25_score=float(parts[1][i])))
                if len(out) == k:
                    break
            results.append(out)
        return results

    def _dense_top_many(self, view: _View, queries: np.ndarray, pool: int, scope: _Scope, scope_key: str
                        ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The ``pool`` best rows in ``scope`` for each query (global row indices, scores): each
        segment's top, answered from memory where that segment, with the same excluded rows, was
        searched for the same vector before (at least as deep); the rest in one call per segment."""
        per_query: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(len(queries))]
        for si, seg in enumerate(view.segments):
            dead = scope.excluded[si]
            n_dead = int(dead.sum()) if dead is not None else 0
            depth = min(pool, len(seg) - n_dead)
            if depth <= 0:
                continue
            # A segment never changes; its dead rows only grow, so their count tells them apart.
            n_tomb = int(view.dead[si].sum()) if view.dead[si] is not None else 0
            keys = [(seg.uid, n_tomb, scope_key, row.tobytes()) for row in queries]
            found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            with self._dense_tops_lock:
                for j, key in enumerate(keys):
                    hit = self._dense_tops.get(key)
                    if hit is not None and len(hit[0]) >= depth:
                        self._dense_tops.move_to_end(key)
                        found[j] = (hit[0][:depth], hit[1][:depth])
            # Rows not yet searched, each distinct vector once (sub-queries search with the question's).
            first_of: dict[tuple[int, int, str, bytes], int] = {}
            for j in range(len(keys)):
                if j not in found:
                    first_of.setdefault(keys[j], j)
            if first_of:
                rows = list(first_of.values())
                fresh = seg.dense.top_many(queries[rows], depth, dead)
                with self._dense_tops_lock:
                    for j, top in zip(rows, fresh, strict=True):
                        for part in top:
                            part.setflags(write=False)  # shared by later searches of the same vector
                        found[j] = top
                        self._dense_tops[keys[j]] = top
                        self._dense_tops.move_to_end(keys[j])
                    while len(self._dense_tops) > _DENSE_TOPS_KEPT:
                        self._dense_tops.popitem(last=False)
            offset = int(view.offsets[si])
            for j in range(len(keys)):
                top = found[j] if j in found else found[first_of[keys[j]]]
                per_query[j].append((top[0] + offset, top[1]))
        out = []
        for parts in per_query:
            if not parts:
                out.append((np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)))
                continue
            idx = np.concatenate([p[0] for p in parts])
            scores = np.concatenate([p[1] for p in parts])
            order = np.argsort(-scores, kind="stable")[:pool]
            out.append((idx[order], scores[order]))
        return out

    # ------------------------------------------------------------ filters

    def _filtered(self, view: _View, filters: Filters) -> _Scope:
        """The view's live rows that ``filters`` admits, as a scope (excluded: dead or refused)."""
        excluded = []
        for seg, dead in zip(view.segments, view.dead, strict=True):
            refused = ~self._admitted(seg, filters)
            excluded.append(refused if dead is None else refused | dead)
        return _Scope.of(view.segments, excluded)

    def _admitted(self, seg: Segment, filters: Filters) -> np.ndarray:
        key = (seg.uid, filters.key)
        with self._masks_lock:
            hit = self._masks.get(key)
            if hit is not None:
                self._masks.move_to_end(key)
                return hit
        mask = self._columns_of(seg).mask(filters)
        mask.setflags(write=False)
        with self._masks_lock:
            self._masks[key] = mask
            while len(self._masks) > _FILTER_MASKS_KEPT:
                self._masks.popitem(last=False)
        return mask

    def _columns_of(self, seg: Segment) -> _FilterColumns:
        """The segment's filterable fields as arrays, read once (a segment never changes): a relative
        date ("7d", "latest") resolves to a new instant for every query, so a mask is rarely asked
        twice, and reading every row's fields per query cost 0.6 s at 20k chunks."""
        with self._masks_lock:
            hit = self._columns.get(seg.uid)
            if hit is not None:
                self._columns.move_to_end(seg.uid)
                return hit
        columns = _FilterColumns.empty(len(seg))
        for chunk_id, fields in self._stored_fields(seg):
            rows = seg.rows_of([chunk_id])
            if rows:
                columns.set(rows[0], fields)
        with self._masks_lock:
            self._columns[seg.uid] = columns
            while len(self._columns) > _FILTER_COLUMNS_KEPT:
                self._columns.popitem(last=False)
        return columns

    def _stored_fields(self, seg: Segment) -> Iterator[tuple[str, dict[str, Any]]]:
        """The stored fields of the segment's rows still in chunks.db, every column but the text
        and vector (so a column added to chunks reaches the filter without a change here). A row
        rewritten since the segment was built is dead in it anyway."""
        conn = self._db.connection()
        columns = [r[1] for r in conn.execute("PRAGMA table_info(chunks)") if r[1] not in _NOT_FIELDS]
        for row in conn.execute(f"SELECT {', '.join(columns)} FROM chunks WHERE gen > ? AND gen <= ?",
                                (seg.lo, seg.hi)):
            data = dict(zip(columns, row, strict=True))
            data["metadata"] = json.loads(data.get("metadata") or "{}")
            yield data["chunk_id"], Chunk.from_fields(data).fields()

    # --------------------------------------------------------------- view

    def snapshot(self) -> _View:
        """The view of the current generation and manifest, refreshed when either moved."""
        current = self._view
        generation, manifest_version = self._versions()
        if current is not None and (current.generation, current.manifest_version) == (generation, manifest_version):
            return current
        if current is not None:
            if not self._refresh_lock.acquire(blocking=False):
                return current  # someone is refreshing; answer from the previous view
        else:
            self._refresh_lock.acquire()
        try:
            current = self._view
            if current is None or (current.generation, current.manifest_version) != self._versions():
                started = time.perf_counter()
                current = self._refresh(current)
                self._view = current
                log.info("index generation %d loaded: %d chunks in %d segments (%d on disk, %d rows in memory), "
                         "%s search, %.2fs", current.generation, current.size, len(current.segments),
                         len(current.disk_segments), current.memory_rows,
                         current.dense.kind if current.dense else "no", time.perf_counter() - started)
        finally:
            self._refresh_lock.release()
        self._maybe_maintain(current)
        return current

    def _refresh(self, current: _View | None) -> _View:
        conn = self._db.connection()
        conn.execute("BEGIN")  # one read transaction: rows, tombstones, manifest and generation agree
        try:
            generation, manifest_version = self._versions(conn)
            manifest = json.loads(
                conn.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()[0]
            )
            covered = manifest[-1]["hi"] if manifest else -1
            if current is not None and current.manifest_version == manifest_version:
                segments = list(current.segments)
                dead = list(current.dead)
                gone = self._tombstones(conn, current.generation)
                if gone:
                    chunk_ids = [chunk_id for chunk_id, _ in gone]
                    for si, seg in enumerate(segments):
                        dead[si] = _with_dead(dead[si], len(seg), seg.rows_of(chunk_ids))
                delta = self._segment_from_rows(conn, current.generation, generation, generation)
                if len(delta):
                    segments.append(delta)
                    dead.append(None)
                if len(segments) - len(manifest) > _MEMORY_DELTAS:
                    disk = len(manifest)
                    segments = segments[:disk] + [self._segment_from_rows(conn, covered, generation, generation)]
                    dead = dead[:disk] + [None]
            else:
                known = {s.name: s for s in current.disk_segments} if current is not None else {}
                segments = [known.get(d["name"]) or self._open_segment(conn, d, generation) for d in manifest]
                oldest = min((s.built_at for s in segments), default=generation)
                gone = self._tombstones(conn, oldest)
                dead = []
                for seg in segments:
                    ids = [chunk_id for chunk_id, gen in gone if gen > seg.built_at]
                    dead.append(_with_dead(None, len(seg), seg.rows_of(ids)) if ids else None)
                fresh = self._segment_from_rows(conn, covered, generation, generation)
                if len(fresh):
                    segments.append(fresh)
                    dead.append(None)
        finally:
            conn.execute("COMMIT")
        return _make_view(generation, manifest_version, manifest, segments, dead)

    @staticmethod
    def _tombstones(conn: Any, after: int) -> list[tuple[str, int]]:
        return [(r[0], int(r[1])) for r in conn.execute("SELECT chunk_id, gen FROM tombstones WHERE gen > ?", (after,))]

    def _segment_from_rows(self, conn: Any, lo: int, hi: int, built_at: int) -> Segment:
        """A segment of the rows written in generations (lo, hi] still present now."""
        # Streamed in bounded memory: the vectors go straight into one preallocated matrix and
        # the tokens into packed postings (a 1M-row merge held ~10 GB of lists before).
        size = int(conn.execute("SELECT COUNT(*) FROM chunks WHERE gen > ? AND gen <= ?", (lo, hi)).fetchone()[0])
        matrix = np.empty((size, self.dimension), dtype=np.float32)
        chunk_ids: list[str] = []
        builder = PostingsBuilder()
        for row in conn.execute(
            "SELECT chunk_id, title, text, vector FROM chunks WHERE gen > ? AND gen <= ? ORDER BY chunk_id", (lo, hi)
        ):
            matrix[len(chunk_ids)] = np.frombuffer(row[3], dtype=np.float32)
            chunk_ids.append(row[0])
            builder.add(bm25_tokens(_bm25_text(row[1], row[2])))
        matrix = matrix[: len(chunk_ids)]
        postings = builder.finish()
        dense: _Dense | _Hnsw = self._build_hnsw(matrix) if self._use_ann(len(chunk_ids)) else _Dense(matrix)
        return _segment(name="", lo=lo, hi=hi, built_at=built_at, chunk_ids=chunk_ids, vectors=matrix,
                        postings=postings, dense=dense)

    def _open_segment(self, conn: Any, desc: dict[str, Any], generation: int) -> Segment:
        folder = self._segments_dir / desc["name"]
        try:
            _, chunk_ids, vectors, postings = read_segment_files(folder)
            graph = folder / "hnsw.faiss"
            if self._use_ann(len(chunk_ids)) and graph.exists():
                import faiss

                dense: _Dense | _Hnsw = _Hnsw(faiss.read_index(str(graph)), self.ef_search)
            elif self._use_ann(len(chunk_ids)):
                # written by an instance that searched it exactly: add the graph
                dense = self._build_hnsw(np.ascontiguousarray(vectors))
                self._persist_graph(folder, dense)
            else:
                dense = _Dense(vectors)
            return _segment(name=desc["name"], lo=desc["lo"], hi=desc["hi"], built_at=desc["built_at"],
                            chunk_ids=chunk_ids, vectors=vectors, postings=postings, dense=dense)
        except (OSError, ValueError, RuntimeError) as exc:
            # SQLite holds every row: rebuild this range from it rather than fail or lose it.
            log.warning("index segment %s is unreadable (%s); rebuilding its rows from chunks.db", folder, exc)
            return self._segment_from_rows(conn, desc["lo"], desc["hi"], generation)

    def _persist_graph(self, folder: Path, dense: _Hnsw) -> None:
        import faiss

        part = folder / f".hnsw-{threading.get_ident()}-{time.monotonic_ns()}"
        try:
            faiss.write_index(dense.index, str(part))
            part.rename(folder / "hnsw.faiss")
        except (OSError, RuntimeError) as exc:
            part.unlink(missing_ok=True)
            log.warning("could not persist the HNSW graph of %s: %s", folder, exc)

    def _use_ann(self, size: int) -> bool:
        return size > self.ann_threshold

    def _build_hnsw(self, matrix: np.ndarray) -> _Hnsw:
        import faiss

        hnsw = faiss.IndexHNSWFlat(self.dimension, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = self.ef_construction
        hnsw.hnsw.efSearch = self.ef_search
        hnsw.add(np.ascontiguousarray(matrix))
        return _Hnsw(hnsw, self.ef_search)

    # --------------------------------------------------------- maintenance

    def _maybe_maintain(self, view: _View) -> None:
        if not self.background_merges:
            return
        due = view.memory_rows >= self.flush_rows or merge_plan(
            [len(s) for s in view.disk_segments], self.flush_rows, self.merge_factor) is not None
        if not due:
            return
        with self._maintainer_guard:
            if self._maintainer is not None and self._maintainer.is_alive():
                return
            self._maintainer = threading.Thread(target=self._maintain_quietly, name="ragbus-index-merge",
                                                daemon=True)
            self._maintainer.start()

    def _maintain_quietly(self) -> None:
        try:
            self.maintain()
        except Exception:  # noqa: BLE001 - a failed merge leaves the old manifest; searches go on
            log.exception("index maintenance of %s failed; the previous segments stay in use", self.path)

    def maintain(self, *, flush: bool = False) -> dict[str, Any]:
        """Flush the rows written since the last segment (when ``flush_rows`` or more, or any
        with ``flush``) and run the merges due; one process at a time (a file lock), others
        return at once with ``busy``. Returns what was done, with timings."""
        self._segments_dir.mkdir(parents=True, exist_ok=True)
        report: dict[str, Any] = {"busy": False, "flushed": [], "merged": [], "seconds": 0.0}
        started = time.perf_counter()
        with open(self._segments_dir / ".merge.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                report["busy"] = True
                return report
            try:
                self._collect_garbage(current_only=False)
                while self._maintain_step(flush, report):
                    pass
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        report["seconds"] = time.perf_counter() - started
        return report

    def _maintain_step(self, flush: bool, report: dict[str, Any]) -> bool:
        conn = self._db.connection()
        conn.execute("BEGIN")
        try:
            generation, _ = self._versions(conn)
            manifest = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()[0])
            covered = manifest[-1]["hi"] if manifest else -1
            fresh = int(conn.execute("SELECT COUNT(*) FROM chunks WHERE gen > ?", (covered,)).fetchone()[0])
            t0 = time.perf_counter()
            if fresh and (fresh >= self.flush_rows or flush):
                segment = self._segment_from_rows(conn, covered, generation, generation)
                first, last, kind = len(manifest), len(manifest), "flushed"
            else:
                plan = merge_plan([d["rows"] for d in manifest], self.flush_rows, self.merge_factor)
                if plan is None:
                    plan = self._reclaim_plan(conn, manifest)
                if plan is None:
                    return False
                first, last = plan
                segment = self._segment_from_rows(conn, manifest[first]["lo"], manifest[last - 1]["hi"], generation)
                kind = "merged"
        finally:
            conn.execute("COMMIT")
        name = write_segment(self._segments_dir, segment, f".tmp-{os.getpid()}-{threading.get_ident()}")
        desc = segment.describe() | {"name": name}
        updated = [*manifest[:first], desc, *manifest[last:]]
        with self._db.transaction() as conn:
            now = conn.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()[0]
            if json.loads(now) != manifest:
                raise RuntimeError(f"the manifest of {self.path} changed during a merge under the merge lock")
            conn.execute("UPDATE meta SET value = ? WHERE key = 'manifest_previous'", (now,))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'manifest'", (json.dumps(updated),))
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'manifest_version'")
            # No view of this manifest needs a tombstone older than its oldest segment.
            conn.execute("DELETE FROM tombstones WHERE gen <= ?", (min(d["built_at"] for d in updated),))
        report[kind].append({"rows": len(segment), "segments_in": last - first,
                             "seconds": round(time.perf_counter() - t0, 3)})
        self._collect_garbage(current_only=False)
        return True

    @staticmethod
    def _reclaim_plan(conn: Any, manifest: Sequence[dict[str, Any]]) -> tuple[int, int] | None:
        """A segment more than ``_RECLAIM_DEAD`` dead, rewritten alone (Lucene's reclaim of
        deletes): a segment whose documents were mostly replaced still costs its full size in
        every search, and a log merge may never come for it. Its live rows are those of its
        generations still in chunks.db (an indexed count)."""
        for i, d in enumerate(manifest):
            if d["rows"] < 2:
                continue
            live = conn.execute("SELECT COUNT(*) FROM chunks WHERE gen > ? AND gen <= ?", (d["lo"], d["hi"])).fetchone()[0]
            if live < (1 - _RECLAIM_DEAD) * d["rows"]:
                return i, i + 1
        return None

    def _collect_garbage(self, *, current_only: bool) -> None:
        """Remove segment folders neither the manifest nor the previous one names (a process
        still on the previous manifest may be opening them), and crashed builds' folders."""
        conn = self._db.connection()
        keep: set[str] = set()
        for key in ("manifest",) if current_only else ("manifest", "manifest_previous"):
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            keep |= {d["name"] for d in json.loads(row[0])} if row else set()
        for folder in self._segments_dir.iterdir():
            if folder.is_dir() and folder.name not in keep:
                shutil.rmtree(folder, ignore_errors=True)
        legacy = self.path / "cache"  # per-generation caches of the index before segments
        if legacy.exists():
            shutil.rmtree(legacy, ignore_errors=True)

    def close(self) -> None:
        self._db.close()


def _segment(**fields: Any) -> Segment:
    seg = Segment(**fields)
    seg.uid = next(_SEGMENT_UIDS)  # keys the dense-top cache: a segment never changes
    return seg


def _with_dead(mask: np.ndarray | None, size: int, rows: Sequence[int]) -> np.ndarray | None:
    """``mask`` with ``rows`` marked dead: a new array (views already handed out keep theirs)."""
    if not rows:
        return mask
    out = np.zeros(size, dtype=bool) if mask is None else mask.copy()
    out[np.asarray(rows, dtype=np.int64)] = True
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
