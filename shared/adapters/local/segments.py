"""Immutable index segments: one range of generations, searched exactly or by HNSW.

A segment holds the chunks written in generations ``(lo, hi]`` that were still present
when it was built (generation ``built_at``), sorted by chunk id:

    chunk_ids.json        the rows' chunk ids, sorted (rows are found by binary search)
    vectors.npy           float32 [rows, dim], memory-mapped when read back
    indptr.npy, postings_rows.npy, postings_tfs.npy, lengths.npy
                          BM25 postings in CSR form by term id, and each row's token count
    vocab.json            the terms, by term id
    filter_*              what filters read of each row (see snapshot.FilterColumns); absent
                          in segments written before them (then read from chunks.db)
    hnsw.faiss            above the ANN threshold only: the faiss HNSW graph
    complete              written last; a folder without it is a crashed build

Only per-row data is stored; corpus-wide BM25 statistics (N, document frequency, average
length) are summed over the live rows of every segment at query time, so a ranking over
many segments is the ranking of one fresh build of the same chunks (tests check this).
A later change never edits a segment: deletions and replacements are tombstones, applied
as a per-segment mask of dead rows.
"""

from __future__ import annotations

import bisect
import json
import math
import shutil
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

BM25_K1 = 1.5
BM25_B = 0.75


class Postings:
    """BM25 postings of one segment: for each term, the rows holding it and how often."""

    def __init__(self, vocab: dict[str, int], indptr: np.ndarray, rows: np.ndarray, tfs: np.ndarray,
                 lengths: np.ndarray) -> None:
        self.vocab = vocab
        self.indptr = indptr
        self.rows = rows
        self.tfs = tfs
        self.lengths = lengths

    @classmethod
    def build(cls, documents: Iterable[list[str]]) -> Postings:
        builder = PostingsBuilder()
        for tokens in documents:
            builder.add(tokens)
        return builder.finish()

    def term(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        tid = self.vocab.get(term)
        if tid is None:
            return _NO_ROWS, _NO_TFS
        start, end = int(self.indptr[tid]), int(self.indptr[tid + 1])
        return self.rows[start:end], self.tfs[start:end]


class PostingsBuilder:
    """Postings built row by row in bounded memory: each batch of rows is packed into
    numpy arrays (12 bytes a posting), so a 1M-row segment never holds its token lists
    or a Python int per posting (about 10 GB at 1M chunks of ~150 words)."""

    _BATCH = 4096

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._lengths = array("f")
        self._terms = array("q")
        self._rows = array("i")
        self._tfs = array("f")

    def add(self, tokens: list[str]) -> None:
        row = len(self._lengths)
        self._lengths.append(len(tokens))
        vocab = self.vocab
        for term, tf in Counter(tokens).items():
            self._terms.append(vocab.setdefault(term, len(vocab)))
            self._rows.append(row)
            self._tfs.append(tf)
        if len(self._terms) >= self._BATCH * 64:
            self._pack()

    def _pack(self) -> None:
        if self._terms:
            self._parts.append((np.frombuffer(self._terms, dtype=np.int64).copy(),
                                np.frombuffer(self._rows, dtype=np.int32).copy(),
                                np.frombuffer(self._tfs, dtype=np.float32).copy()))
            self._terms, self._rows, self._tfs = array("q"), array("i"), array("f")

    def finish(self) -> Postings:
        self._pack()
        term_arr = np.concatenate([p[0] for p in self._parts]) if self._parts else np.zeros(0, dtype=np.int64)
        order = np.argsort(term_arr, kind="stable")  # rows stay ascending within a term
        indptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_arr, minlength=len(self.vocab)), out=indptr[1:])
        del term_arr
        rows = np.concatenate([p[1] for p in self._parts]) if self._parts else np.zeros(0, dtype=np.int32)
        rows = rows[order]
        tfs = np.concatenate([p[2] for p in self._parts]) if self._parts else np.zeros(0, dtype=np.float32)
        tfs = tfs[order]
        self._parts = []
        return Postings(self.vocab, indptr, rows, tfs, np.frombuffer(self._lengths, dtype=np.float32).copy())


_NO_ROWS = np.zeros(0, dtype=np.int32)
_NO_TFS = np.zeros(0, dtype=np.float32)


class Segment:
    """One immutable segment; ``dense`` is an exact or HNSW searcher over ``vectors``."""

    def __init__(self, *, name: str, lo: int, hi: int, built_at: int, chunk_ids: list[str] | np.ndarray,
                 vectors: np.ndarray, postings: Postings, dense: Any) -> None:
        self.name = name  # the folder's name; "" for a segment held only in memory
        self.lo, self.hi, self.built_at = lo, hi, built_at
        # An object array, not a list: every full collection of the garbage collector walks a list's
        # items, not an array's (a full collection took 57 ms with a 1M-row segment open, 9.6 ms
        # before it was opened, load ~10: a pause in whichever search it lands on).
        self.chunk_ids = np.asarray(chunk_ids, dtype=object).reshape(-1)
        self.vectors = vectors
        self.postings = postings
        self.dense = dense
        self.folder: Path | None = None  # where it was read from (None: built in this process)
        self.filter_columns: Any = None  # what filters read of its rows, when built with them

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def rows_of(self, chunk_ids: Iterable[str]) -> list[int]:
        out = []
        for chunk_id in chunk_ids:
            i = bisect.bisect_left(self.chunk_ids, chunk_id)
            if i < len(self.chunk_ids) and self.chunk_ids[i] == chunk_id:
                out.append(i)
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "lo": self.lo, "hi": self.hi, "built_at": self.built_at, "rows": len(self)}


def segment_folder_name(lo: int, hi: int, built_at: int) -> str:
    return f"seg-{lo + 1:012d}-{hi:012d}-{built_at:012d}"


def write_segment(root: Path, segment: Segment, tmp_name: str,
                  extra: Callable[[Path], None] | None = None) -> str:
    """Write ``segment`` under ``root`` through a temporary folder renamed at the end, so a
    crash leaves either nothing or a complete folder; ``extra`` writes more files into it
    first. Returns the folder's name."""
    name = segment_folder_name(segment.lo, segment.hi, segment.built_at)
    final = root / name
    tmp = root / tmp_name
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        (tmp / "chunk_ids.json").write_text(json.dumps(segment.chunk_ids.tolist()))
        np.save(tmp / "vectors.npy", np.ascontiguousarray(segment.vectors, dtype=np.float32))
        p = segment.postings
        np.save(tmp / "indptr.npy", p.indptr)
        np.save(tmp / "postings_rows.npy", p.rows)
        np.save(tmp / "postings_tfs.npy", p.tfs)
        np.save(tmp / "lengths.npy", p.lengths)
        terms = [""] * len(p.vocab)
        for term, tid in p.vocab.items():
            terms[tid] = term
        (tmp / "vocab.json").write_text(json.dumps(terms))
        if getattr(segment.dense, "kind", "") == "hnsw":
            import faiss

            faiss.write_index(segment.dense.index, str(tmp / "hnsw.faiss"))
        if extra is not None:
            extra(tmp)
        (tmp / "segment.json").write_text(json.dumps(segment.describe() | {"name": name}))
        (tmp / "complete").write_text("")
        _fsync_folder(tmp)
        if final.exists():  # the same range from a build that crashed before its manifest swap
            shutil.rmtree(final)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return name


def _fsync_folder(folder: Path) -> None:
    import os

    for f in folder.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


def read_segment_files(folder: Path) -> tuple[dict[str, Any], list[str], np.ndarray, Postings]:
    """The folder's description, chunk ids, memory-mapped vectors and postings."""
    if not (folder / "complete").exists():
        raise FileNotFoundError(f"segment {folder} is incomplete")
    info = json.loads((folder / "segment.json").read_text())
    chunk_ids = json.loads((folder / "chunk_ids.json").read_text())
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    terms = json.loads((folder / "vocab.json").read_text())
    postings = Postings(
        dict(zip(terms, range(len(terms)), strict=True)),  # 1.8 s for the 1M corpus's 2M terms; 2.4 s as a comprehension
        np.load(folder / "indptr.npy", mmap_mode="r"),
        np.load(folder / "postings_rows.npy", mmap_mode="r"),
        np.load(folder / "postings_tfs.npy", mmap_mode="r"),
        np.load(folder / "lengths.npy"),
    )
    if len(chunk_ids) != len(vectors) or len(postings.lengths) != len(chunk_ids):
        raise ValueError(f"segment {folder} is inconsistent: {len(chunk_ids)} ids, {len(vectors)} vectors")
    return info, chunk_ids, vectors, postings


def bm25_idf(df: int, n: int) -> float:
    """Lucene's BM25 idf, as bm25s computes it (method "lucene")."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def merge_plan(sizes: list[int], flush_rows: int, merge_factor: int) -> tuple[int, int] | None:
    """The first run of ``merge_factor`` adjacent segments of one size level, as
    ``(start, end)`` indices, or None. Levels grow by ``merge_factor``: level 0 holds
    segments below ``flush_rows * merge_factor`` rows, and so on (Lucene's LogMergePolicy:
    adjacent segments only, because a segment is a contiguous range of generations).
    Each row is thus rewritten about log_factor(N / flush_rows) times in its life."""
    levels = [_level(s, flush_rows, merge_factor) for s in sizes]
    run_start = 0
    for i in range(1, len(levels) + 1):
        if i == len(levels) or levels[i] != levels[run_start]:
            if i - run_start >= merge_factor:
                return run_start, run_start + merge_factor
            run_start = i
    return None


def _level(size: int, flush_rows: int, merge_factor: int) -> int:
    level, bound = 0, flush_rows * merge_factor
    while size >= bound:
        level += 1
        bound *= merge_factor
    return level
