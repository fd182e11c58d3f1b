"""The local hybrid index: SQLite as the source of truth, BM25 and dense search over segments.

Layout under ``path``::

    chunks.db             every chunk: text, metadata, float32 vector and the generation that
                          wrote it; tombstones of replaced and deleted chunks; the generation
                          counter and the manifest (which segments make up the index)
    segments/seg-*/       immutable segments (see :mod:`shared.adapters.local.segments`):
                          memory-mapped vectors, BM25 postings, an HNSW graph when large

The parts: :mod:`.chunk_store` (chunks.db), :mod:`.segments` (a segment's files and the
merge policy), :mod:`.snapshot` (the immutable view of one generation, and BM25 over it),
:mod:`.dense` (exact and HNSW search of one segment), :mod:`.scoring` (BM25 tokens and the
hybrid fusion). This module puts them together: search, filters, refresh and maintenance.

A search reads the manifest's segments (opened once per process) plus the rows written
since the last one, held in small in-memory segments: the cost of a change is the cost of
the rows it wrote, whatever the size of the corpus (see :class:`HybridIndex`). Before
segments, every change rebuilt the whole bm25s index and, above 100k chunks, the whole
HNSW graph: the first search after one new document took 1.0 s at 10k chunks and 86 s at
150k (issue 26).
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.chunk_store import ChunkStore
from shared.adapters.local.dense import ExactSearch, HnswSearch, build_hnsw
from shared.adapters.local.scoring import (
    bm25_text,
    bm25_tokens,
    hybrid_scores,
    import_bm25s,
    top_positive,
)
from shared.adapters.local.segments import (
    PostingsBuilder,
    Segment,
    SegmentDamaged,
    checked_before,
    merge_plan,
    note_checked,
    read_graph,
    read_segment_files,
    write_graph,
    write_segment,
)
from shared.adapters.local.snapshot import (
    FilterColumns,
    Scope,
    View,
    make_view,
    new_segment,
    with_dead,
)
from shared.contract.errors import ConfigError, DataFileError
from shared.contract.filters import Filters
from shared.contract.ports import Chunk, ScoredChunk, SearchMode, checked_query

log = logging.getLogger("ragbus.index")

__all__ = ["HybridIndex", "bm25_tokens", "hybrid_scores", "import_bm25s"]

_FILTER_COLUMNS_KEPT = 64  # segments whose filter columns stay in memory (a few bytes a row)
_FILTER_MASKS_KEPT = 64  # (segment, filter) row masks kept per index
_DENSE_TOPS_KEPT = 1024  # recent (segment, query vector) dense tops kept per index (about 1 MB)
_RECLAIM_DEAD = 0.3  # a segment with more dead rows than this share is rewritten without them
# A segment above this many rows is searched through an HNSW graph. At 100k rows the exact product
# took 64 / 202 ms p50 / p95 per search at load 11-17, HNSW 1.1 / 16.6 ms with recall@10 1.0 (M=32,
# efSearch 64), and a question searches twice: exact search at 100k alone was past the 150 ms p95
# target. At 20k: exact 6 ms p50, HNSW 0.7 ms; the graph costs the merge that builds it (23 s at
# 20k, 203 s at 100k under that load), in the background.
_ANN_ROWS = 20_000
# HNSW's search breadth: on the 1M-chunk benchmark corpus (real text, clustered vectors, ~200 near a
# centre) recall@10 against exact was 0.946 at 64, 0.9955 at 256 and 1024 (200 probes); a search at
# 256 costs ~1.2 ms against ~0.4 at 64 (the performance suite's ANN rows, 1M vectors).
_EF_SEARCH = 256
_MEMORY_DELTAS = 8  # in-memory segments of recent generations before the newest are folded into one
# The most rows a search folds (re-reads and re-tokenises) on its own path. Folding every in-memory
# row each time there were 8 deltas cost the unlucky search 1.07 s at 2,000 rows (load 14): with a
# writer trickling, that came every 8 writes. Bigger in-memory segments wait for the background
# flush, which is due once there are ``2 * _MEMORY_DELTAS`` of them.
_FOLD_ROWS = 256


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
        ann_threshold: int = _ANN_ROWS,
        dense_weight: float = 0.7,
        hnsw_m: int = 32,
        ef_search: int = _EF_SEARCH,
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
        self.store = ChunkStore(self.path, dimension)
        self.set_aside = self.store.set_aside  # where a damaged chunks.db was moved, when it was
        self.started_new = self.store.started_new
        self._view: View | None = None
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
        self._columns: OrderedDict[int, FilterColumns] = OrderedDict()
        # segment name -> what was found damaged in it (file, why, where its folder was set aside), until
        # the manifest no longer names it: the rows are rebuilt from chunks.db and written back meanwhile
        self._damaged: dict[str, dict[str, Any]] = {}
        self._moved: set[str] = set()
        self._damaged_lock = threading.Lock()
        self._repair_at_exit = False

    # ------------------------------------------------------------ writes

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` in one transaction."""
        self.store.upsert(document_id, chunks, vectors)

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks; 0 when it had none (deleting twice is fine)."""
        return self.store.delete_document(document_id)

    # ------------------------------------------------------------- reads

    @property
    def generation(self) -> int:
        return self.store.generation

    def count_chunks(self) -> int:
        return self.store.count_chunks()

    def count_documents(self) -> int:
        return self.store.count_documents()

    def document_chunk_ids(self, document_id: str) -> list[str]:
        return self.store.document_chunk_ids(document_id)

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        return self.store.get_chunks(chunk_ids)

    def get_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embedding of each known chunk id (computed once, at indexing)."""
        return self.store.get_vectors(chunk_ids)

    def document_frequency(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (as the BM25 tokenizer sees it; 0 if none)."""
        view = self.snapshot()
        out: dict[str, int] = {}
        for term in terms:
            counts = [view.document_frequency(t) for t in bm25_tokens(term)]
            out[term] = min(counts) if counts else 0
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
        try:
            return self._search_view(view, texts, queries, k, mode, filters)
        except (IndexError, ValueError, _NotFinite) as exc:
            # checked when opened, a segment's files may still change under a running process (written
            # over in place: the memory map reads the new bytes); found and set aside, search again once
            if not self._recheck(view, exc):
                raise
        return self._search_view(self.snapshot(), texts, queries, k, mode, filters)

    def _search_view(self, view: View, texts: Sequence[str], queries: list[np.ndarray], k: int, mode: SearchMode,
                     filters: Filters | None) -> list[list[ScoredChunk]]:
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
                candidates.append(top_positive(bm25_all, pool))
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
            if not (np.isfinite(score).all() and np.isfinite(dense).all() and np.isfinite(lexical).all()):
                raise _NotFinite("a score that is not a finite number")
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

    def _dense_top_many(self, view: View, queries: np.ndarray, pool: int, scope: Scope, scope_key: str
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

    def forget_dense_tops(self) -> None:
        """Drop the dense tops kept per query vector (a benchmark measuring a new question's
        whole cost asks the same questions again; nothing else needs this)."""
        with self._dense_tops_lock:
            self._dense_tops.clear()

    # ------------------------------------------------------------ filters

    def _filtered(self, view: View, filters: Filters) -> Scope:
        """The view's live rows that ``filters`` admits, as a scope (excluded: dead or refused)."""
        excluded = []
        for seg, dead in zip(view.segments, view.dead, strict=True):
            refused = ~self._admitted(seg, filters)
            excluded.append(refused if dead is None else refused | dead)
        return Scope.of(view.segments, excluded)

    def _admitted(self, seg: Segment, filters: Filters) -> np.ndarray:
        key = (seg.uid, filters.key)
        with self._masks_lock:
            hit = self._masks.get(key)
            if hit is not None:
                self._masks.move_to_end(key)
                return hit
        try:
            mask = self._columns_of(seg).mask(filters)
        except (OSError, ValueError) as exc:  # the segment's fields file, read on first need
            log.warning("the filter columns of %s are unreadable (%s); reading chunks.db", seg.folder, exc)
            with self._masks_lock:
                self._columns[seg.uid] = self._columns_from_store(seg)
            mask = self._columns_of(seg).mask(filters)
        mask.setflags(write=False)
        with self._masks_lock:
            self._masks[key] = mask
            while len(self._masks) > _FILTER_MASKS_KEPT:
                self._masks.popitem(last=False)
        return mask

    def _columns_of(self, seg: Segment) -> FilterColumns:
        """The segment's filterable fields as arrays, read once (a segment never changes): a relative
        date ("7d", "latest") resolves to a new instant for every query, so a mask is rarely asked
        twice, and reading every row's fields per query cost 0.6 s at 20k chunks."""
        with self._masks_lock:
            hit = self._columns.get(seg.uid)
            if hit is not None:
                self._columns.move_to_end(seg.uid)
                return hit
        columns = seg.filter_columns
        if columns is None and seg.folder is not None:
            try:
                columns = FilterColumns.load(seg.folder)
            except (OSError, ValueError) as exc:
                log.warning("the filter columns of %s are unreadable (%s); reading chunks.db", seg.folder, exc)
        if columns is None or len(columns.published) != len(seg):
            columns = self._columns_from_store(seg)
        with self._masks_lock:
            self._columns[seg.uid] = columns
            while len(self._columns) > _FILTER_COLUMNS_KEPT:
                self._columns.popitem(last=False)
        return columns

    def _columns_from_store(self, seg: Segment) -> FilterColumns:
        columns = FilterColumns.empty(len(seg))
        for chunk_id, fields in self._stored_fields(seg):
            rows = seg.rows_of([chunk_id])
            if rows:
                columns.set(rows[0], fields)
        return columns

    def _stored_fields(self, seg: Segment) -> Iterator[tuple[str, dict[str, Any]]]:
        """The stored fields of the segment's rows still in chunks.db, every column but the text
        and vector (so a column added to chunks reaches the filter without a change here). A row
        rewritten since the segment was built is dead in it anyway."""
        return self.store.stored_fields(seg.lo, seg.hi)

    # --------------------------------------------------------------- view

    def snapshot(self) -> View:
        """The view of the current generation and manifest, refreshed when either moved."""
        current = self._view
        generation, manifest_version = self.store.versions()
        if current is not None and (current.generation, current.manifest_version) == (generation, manifest_version):
            return current
        if current is not None:
            if not self._refresh_lock.acquire(blocking=False):
                return current  # someone is refreshing; answer from the previous view
        else:
            self._refresh_lock.acquire()
        try:
            current = self._view
            if current is None or (current.generation, current.manifest_version) != self.store.versions():
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

    def _refresh(self, current: View | None, *, reopen: bool = False) -> View:
        with self.store.read() as conn:
            generation, manifest_version = self.store.versions(conn)
            manifest = self.store.manifest(conn)
            if current is not None and current.manifest_version == manifest_version and not reopen:
                segments, dead = self._advanced(conn, current, manifest, generation)
            else:
                segments, dead = self._reopened(conn, current, manifest, generation)
        return make_view(generation, manifest_version, manifest, segments, dead)

    def _advanced(self, conn: Any, current: View, manifest: list[dict[str, Any]], generation: int
                  ) -> tuple[list[Segment], list[np.ndarray | None]]:
        """The same manifest, later generations: the new tombstones marked in every segment, the
        new rows in one more in-memory segment; when there are more than ``_MEMORY_DELTAS`` of
        those, the newest of them holding at most ``_FOLD_ROWS`` rows together are folded into one."""
        segments = list(current.segments)
        dead = list(current.dead)
        gone = self.store.tombstones(conn, current.generation)
        if gone:
            chunk_ids = [chunk_id for chunk_id, _ in gone]
            for si, seg in enumerate(segments):
                dead[si] = with_dead(dead[si], len(seg), seg.rows_of(chunk_ids))
        delta = self._segment_from_rows(conn, current.generation, generation, generation)
        if len(delta):
            segments.append(delta)
            dead.append(None)
        if len(segments) - len(manifest) > _MEMORY_DELTAS:
            first = _fold_start(segments, len(manifest))
            if first is not None:
                folded = self._segment_from_rows(conn, segments[first].lo, generation, generation)
                segments, dead = [*segments[:first], folded], [*dead[:first], None]
        return segments, dead

    def _reopened(self, conn: Any, current: View | None, manifest: list[dict[str, Any]], generation: int
                  ) -> tuple[list[Segment], list[np.ndarray | None]]:
        """A new manifest: its segments (those already open kept), each with the tombstones written
        after it was built, and the rows written after it in one in-memory segment."""
        known = {s.name: s for s in current.disk_segments if s.name not in self._damaged} if current else {}
        segments = [known.get(d["name"]) or self._open_segment(conn, d, generation) for d in manifest]
        oldest = min((s.built_at for s in segments), default=generation)
        gone = self.store.tombstones(conn, oldest)
        dead: list[np.ndarray | None] = []
        for seg in segments:
            ids = [chunk_id for chunk_id, gen in gone if gen > seg.built_at]
            dead.append(with_dead(None, len(seg), seg.rows_of(ids)) if ids else None)
        covered = manifest[-1]["hi"] if manifest else -1
        fresh = self._segment_from_rows(conn, covered, generation, generation)
        if len(fresh):
            segments.append(fresh)
            dead.append(None)
        return segments, dead

    def _segment_from_rows(self, conn: Any, lo: int, hi: int, built_at: int) -> Segment:
        """A segment of the rows written in generations (lo, hi] still present now."""
        # Streamed in bounded memory: the vectors go straight into one preallocated matrix and
        # the tokens into packed postings (a 1M-row merge held ~10 GB of lists before).
        size = self.store.count_rows(conn, lo, hi)
        matrix = np.empty((size, self.dimension), dtype=np.float32)
        chunk_ids: list[str] = []
        builder = PostingsBuilder()
        columns = FilterColumns(size)
        for chunk_id, title, text, vector, fields in self.store.rows(conn, lo, hi):
            columns.set(len(chunk_ids), fields)
            matrix[len(chunk_ids)] = np.frombuffer(vector, dtype=np.float32)
            chunk_ids.append(chunk_id)
            builder.add(bm25_tokens(bm25_text(title, text)))
        matrix = matrix[: len(chunk_ids)]
        postings = builder.finish()
        dense = self._build_hnsw(matrix) if self._use_ann(len(chunk_ids)) else ExactSearch(matrix)
        seg = new_segment(name="", lo=lo, hi=hi, built_at=built_at, chunk_ids=chunk_ids, vectors=matrix,
                          postings=postings, dense=dense)
        seg.filter_columns = columns if len(chunk_ids) == size else None  # (size is read in the same transaction)
        return seg

    def _open_segment(self, conn: Any, desc: dict[str, Any], generation: int) -> Segment:
        folder = self._segments_dir / desc["name"]
        if desc["name"] in self._damaged:  # set aside already: its rows until it is written anew
            return self._segment_from_rows(conn, desc["lo"], desc["hi"], generation)
        try:
            # every number is read once per change of the files (1.1 s for a 100k-row HNSW segment at
            # load 19), not at every start: shapes and lengths are checked every time
            thorough = not checked_before(folder)
            _, chunk_ids, vectors, postings = read_segment_files(folder, self.dimension, thorough=thorough)
            graph = folder / "hnsw.faiss"
            if self._use_ann(len(chunk_ids)) and graph.exists():
                index = read_graph(folder, len(chunk_ids), self.dimension, thorough=thorough)
                dense: ExactSearch | HnswSearch = HnswSearch(index, self.ef_search, vectors)
            elif self._use_ann(len(chunk_ids)):
                # written by an instance that searched it exactly: add the graph
                dense = self._build_hnsw(np.ascontiguousarray(vectors))
                self._persist_graph(folder, dense)
            else:
                dense = ExactSearch(vectors)
            seg = new_segment(name=desc["name"], lo=desc["lo"], hi=desc["hi"], built_at=desc["built_at"],
                              chunk_ids=chunk_ids, vectors=vectors, postings=postings, dense=dense)
            seg.folder = folder  # its filter columns are read from here when a filter first asks
            if thorough:
                note_checked(folder)
            return seg
        except (OSError, ValueError, RuntimeError) as exc:
            # SQLite holds every row: rebuild this range from it rather than fail or lose it, and
            # write it back (maintenance rewrites a manifest segment whose folder is gone).
            self._set_aside(desc["name"], exc)
            return self._segment_from_rows(conn, desc["lo"], desc["hi"], generation)

    def _set_aside(self, name: str, exc: Exception) -> None:
        """Note segment ``name`` damaged, naming the file and what is wrong, and move its folder to
        ``damaged/`` (kept for a look, never read again): maintenance then writes the segment anew
        from chunks.db, and until it has, :meth:`damage` names it (``/readyz`` says degraded)."""
        folder = self._segments_dir / name
        file = str(exc.path) if isinstance(exc, SegmentDamaged) else str(getattr(exc, "filename", None) or folder)
        why = exc.why if isinstance(exc, SegmentDamaged) else f"unreadable ({exc})"
        aside = ""
        with self._damaged_lock:  # two searches tripping on one segment at once: set aside once
            if name in self._damaged:
                return
            if folder.exists():
                target = self.path / "damaged" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{time.monotonic_ns()}"
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    folder.rename(target)
                    aside = str(target)
                except OSError as move:
                    log.warning("could not set the damaged index segment %s aside: %s", folder, move)
            self._damaged[name] = {"file": file, "reason": why, "set_aside": aside, "answering": True}
            if not folder.exists():
                self._moved.add(name)  # a complete folder of this name later is the segment written anew
        log.error("index segment file %s is damaged: %s; the segment %s%s is rebuilt from chunks.db and "
                  "written anew", file, why, name, f" is set aside as {aside} and" if aside else "")
        if not self._repair_at_exit:
            # a short command (ragbus search) ends before the background rewrite: without this, every
            # run would rebuild the segment in memory again (problem 9 of issue 35)
            self._repair_at_exit = True
            atexit.register(self._finish_repairs)
        self._maybe_maintain(self._view, damaged=True)

    def _finish_repairs(self) -> None:
        """At exit: wait for the rewrite of a damaged segment, or run it when none is under way."""
        thread = self._maintainer
        if thread is not None and thread.is_alive():
            thread.join()
        if self._damaged:
            log.warning("writing the damaged index segment(s) %s anew before exiting", ", ".join(self._damaged))
            self._maintain_quietly(False)

    def damage(self) -> dict[str, dict[str, Any]]:
        """The damage found and not yet repaired (empty when none): segment name (or chunks.db) ->
        file, reason, where a damaged folder was set aside, and whether searches answer meanwhile (a
        segment's rows are rebuilt in memory from chunks.db) or fail (chunks.db itself is malformed).
        ``/readyz`` says degraded, or unready when searches fail, and names them."""
        found = self.store.damage()
        with self._damaged_lock:
            if not self._damaged:
                return found
        named = {d["name"] for d in self.store.manifest(self.store.connection())}
        with self._damaged_lock:
            for name in list(self._damaged):
                # written anew (by any process): the manifest names its successor, or the same name
                # again once the damaged folder was moved away
                if name not in named or (name in self._moved and (self._segments_dir / name / "complete").exists()):
                    del self._damaged[name]
                    self._moved.discard(name)
            return found | {name: dict(seen) for name, seen in self._damaged.items()}

    def _recheck(self, view: View, exc: Exception) -> bool:
        """After a search of ``view`` failed or scored a non-finite number (a segment's files
        changed under it since they were checked at open): check each of its segments' files
        again, set the damaged ones aside and reload the view without them. True when one was."""
        found = False
        for seg in view.disk_segments:
            if seg.folder is None or seg.name in self._damaged:
                continue
            try:
                read_segment_files(seg.folder, self.dimension)
            except (OSError, ValueError) as damage:
                self._set_aside(seg.name, damage)
                found = True
        if not found:
            return False
        log.warning("a search failed on changed index files (%s); reloading the index without them", exc)
        with self._refresh_lock:
            self._view = self._refresh(self._view, reopen=True)
        return True

    def _persist_graph(self, folder: Path, dense: HnswSearch) -> None:
        try:
            write_graph(dense.index, folder, f".hnsw-{threading.get_ident()}-{time.monotonic_ns()}")
        except (OSError, RuntimeError) as exc:
            log.warning("could not persist the HNSW graph of %s: %s", folder, exc)

    def _use_ann(self, size: int) -> bool:
        return size > self.ann_threshold

    def _build_hnsw(self, matrix: np.ndarray) -> HnswSearch:
        return build_hnsw(matrix, m=self.hnsw_m, ef_construction=self.ef_construction, ef_search=self.ef_search)

    # --------------------------------------------------------- maintenance

    def _maybe_maintain(self, view: View | None, *, damaged: bool = False) -> None:
        if not self.background_merges:
            return
        # many in-memory segments, however few their rows, are flushed: each costs every search a little
        crowded = view is not None and len(view.segments) - len(view.disk_segments) >= 2 * _MEMORY_DELTAS
        due = damaged or bool(self._damaged) or bool(self.store.unreadable) or crowded or (view is not None and (
            view.memory_rows >= self.flush_rows or merge_plan(
                [len(s) for s in view.disk_segments], self.flush_rows, self.merge_factor) is not None))
        if not due:
            return
        with self._maintainer_guard:
            if self._maintainer is not None and self._maintainer.is_alive():
                return
            self._maintainer = threading.Thread(target=self._maintain_quietly, args=(crowded,),
                                                name="ragbus-index-merge", daemon=True)
            self._maintainer.start()

    def _maintain_quietly(self, flush: bool) -> None:
        try:
            self.maintain(flush=flush)
        except DataFileError as exc:  # a full disk, a damaged chunks.db: said plainly, named, no traceback
            log.error("index maintenance of %s failed; the previous segments stay in use: %s", self.path, exc)
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
        """One flush or merge: its segment built from chunks.db in one read transaction, written
        through a temporary folder, then swapped into the manifest; False when none is due."""
        t0 = time.perf_counter()
        with self.store.read() as conn:
            generation, _ = self.store.versions(conn)
            manifest = self.store.manifest(conn)
            covered = manifest[-1]["hi"] if manifest else -1
            fresh = self.store.count_rows(conn, covered, generation)
            flush = flush or bool(self.store.unreadable)  # a manifest read as empty: its rows written anew
            segment = None
            if fresh and (fresh >= self.flush_rows or flush):
                segment = self._segment_from_rows(conn, covered, generation, generation)
                first, last, kind = len(manifest), len(manifest), "flushed"
            else:
                plan = self._rewrite_plan(manifest)
                plan = plan or merge_plan([d["rows"] for d in manifest], self.flush_rows, self.merge_factor)
                plan = plan or self._reclaim_plan(conn, manifest)
                if plan is not None:
                    first, last = plan
                    segment = self._segment_from_rows(conn, manifest[first]["lo"], manifest[last - 1]["hi"],
                                                      generation)
                    kind = "merged"
        if segment is None:
            if self.store.unreadable:  # nothing to write but a whole manifest
                self.store.swap_manifest(manifest, manifest)
            return False
        columns = segment.filter_columns
        name = write_segment(self._segments_dir, segment, f".tmp-{os.getpid()}-{threading.get_ident()}",
                             extra=columns.save if columns is not None else None)
        self.store.swap_manifest(manifest, [*manifest[:first], segment.describe() | {"name": name}, *manifest[last:]])
        with self._damaged_lock:
            for replaced in manifest[first:last]:
                self._moved.discard(replaced["name"])
                if self._damaged.pop(replaced["name"], None) is not None:
                    log.warning("index segment %s was written anew from chunks.db as %s", replaced["name"], name)
        report[kind].append({"rows": len(segment), "segments_in": last - first,
                             "seconds": round(time.perf_counter() - t0, 3)})
        self._collect_garbage(current_only=False)
        return True

    def _rewrite_plan(self, manifest: Sequence[dict[str, Any]]) -> tuple[int, int] | None:
        """A manifest segment whose folder was set aside as damaged (by this process or another),
        or is gone: written anew from chunks.db, so no process rebuilds it in memory at every start."""
        for i, d in enumerate(manifest):
            if d["name"] in self._damaged or not (self._segments_dir / d["name"] / "complete").exists():
                return i, i + 1
        return None

    def _reclaim_plan(self, conn: Any, manifest: Sequence[dict[str, Any]]) -> tuple[int, int] | None:
        """A segment more than ``_RECLAIM_DEAD`` dead, rewritten alone (Lucene's reclaim of
        deletes): a segment whose documents were mostly replaced still costs its full size in
        every search, and a log merge may never come for it. Its live rows are those of its
        generations still in chunks.db (an indexed count)."""
        for i, d in enumerate(manifest):
            if d["rows"] >= 2 and self.store.count_rows(conn, d["lo"], d["hi"]) < (1 - _RECLAIM_DEAD) * d["rows"]:
                return i, i + 1
        return None

    def _collect_garbage(self, *, current_only: bool) -> None:
        """Remove segment folders neither the manifest nor the previous one names (a process
        still on the previous manifest may be opening them), and crashed builds' folders."""
        conn = self.store.connection()
        keep: set[str] = set()
        for key in ("manifest",) if current_only else ("manifest", "manifest_previous"):
            keep |= {d["name"] for d in self.store.manifest(conn, key)}
        for folder in self._segments_dir.iterdir():
            if folder.is_dir() and folder.name not in keep:
                shutil.rmtree(folder, ignore_errors=True)
        legacy = self.path / "cache"  # per-generation caches of the index before segments
        if legacy.exists():
            shutil.rmtree(legacy, ignore_errors=True)

    def close(self) -> None:
        self.store.close()


class _NotFinite(ArithmeticError):
    """A search scored a row NaN or infinite: a segment's numbers changed since they were checked."""


def _fold_start(segments: Sequence[Segment], disk: int) -> int | None:
    """Where the newest run of in-memory segments (after the ``disk`` first) holding at most
    ``_FOLD_ROWS`` rows together starts; None when not even the last two fit."""
    first, rows = len(segments), 0
    while first > disk and rows + len(segments[first - 1]) <= _FOLD_ROWS:
        first -= 1
        rows += len(segments[first])
    return first if len(segments) - first >= 2 else None
