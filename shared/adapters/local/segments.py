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
import os
import shutil
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.disk import full_error, is_full

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
            write_graph(segment.dense.index, tmp, ".hnsw-part")
        if extra is not None:
            extra(tmp)
        (tmp / "segment.json").write_text(json.dumps(segment.describe() | {"name": name}))
        (tmp / "complete").write_text("")
        _fsync_folder(tmp)
        if final.exists():  # the same range from a build that crashed before its manifest swap
            shutil.rmtree(final)
        tmp.rename(final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_full(exc, root):  # np.save says only "814080 requested and 337888 written"
            raise full_error(final, exc, "writing an index segment") from exc
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return name


def _fsync_folder(folder: Path) -> None:
    import os

    for f in folder.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


class SegmentDamaged(ValueError):
    """A segment file that cannot be what was written: ``path`` names the file, ``why`` what is wrong."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


#: Rows checked at a time for finite values: a 1M-row segment's vectors are never all in memory at once.
_CHECK_ROWS = 65_536


def _load(path: Path, *, mmap: bool = True) -> Any:
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except FileNotFoundError:
        raise SegmentDamaged(path, "missing") from None
    except (OSError, ValueError, EOFError) as exc:
        raise SegmentDamaged(path, f"not a readable array ({exc})") from None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SegmentDamaged(path, "missing") from None
    except (OSError, ValueError) as exc:
        raise SegmentDamaged(path, f"not readable JSON ({exc})") from None


def _all_finite(path: Path, values: np.ndarray) -> None:
    for start in range(0, len(values), _CHECK_ROWS):
        block = np.asarray(values[start:start + _CHECK_ROWS])
        if not np.isfinite(block).all():
            bad = start + int(np.flatnonzero(~np.isfinite(block.reshape(len(block), -1)).all(axis=1))[0])
            raise SegmentDamaged(path, f"row {bad} holds a value that is not a finite number")


def _in_range(path: Path, values: np.ndarray, low: float, high: float | None, what: str) -> None:
    """Every value in ``[low, high)`` (no upper bound when ``high`` is None), checked block by block."""
    for start in range(0, len(values), _CHECK_ROWS * 16):
        block = np.asarray(values[start:start + _CHECK_ROWS * 16])
        if not len(block):
            continue
        if block.dtype.kind == "f" and not np.isfinite(block).all():
            raise SegmentDamaged(path, f"{what}: a value that is not a finite number")
        lo, hi = block.min(), block.max()
        if lo < low or (high is not None and hi >= high):
            raise SegmentDamaged(path, f"{what}: {lo if lo < low else hi} is out of range "
                                       f"[{low:g}, {'inf' if high is None else f'{high:g}'})")


CHECKED = "checked.json"  # each file's size and modification time when its content was last checked whole


def _file_stamps(folder: Path) -> dict[str, list[int]]:
    out = {}
    for f in sorted(folder.iterdir()):
        if f.name != CHECKED and not f.name.startswith(".") and f.is_file():
            st = f.stat()
            out[f.name] = [st.st_size, st.st_mtime_ns]
    return out


def checked_before(folder: Path) -> bool:
    """Whether every file of the folder is as it was when its content was last checked whole (same
    names, sizes and modification times): then opening it checks shapes and lengths only. A file
    written over since (in place or replaced) is checked whole again."""
    try:
        return json.loads((folder / CHECKED).read_text()) == _file_stamps(folder)
    except (OSError, ValueError):
        return False


def note_checked(folder: Path) -> None:
    """Remember that the folder's files were checked whole as they are now (best effort)."""
    part = folder / f".{CHECKED}.{os.getpid()}"
    try:
        part.write_text(json.dumps(_file_stamps(folder)))
        part.rename(folder / CHECKED)
    except OSError:
        part.unlink(missing_ok=True)  # a read-only or full disk: checked whole again next time


def read_segment_files(folder: Path, dimension: int | None = None, *, thorough: bool = True
                       ) -> tuple[dict[str, Any], list[str], np.ndarray, Postings]:
    """The folder's description, chunk ids, memory-mapped vectors and postings, each file checked
    as it is read: shapes and lengths agree and the offsets span the postings; with ``thorough``
    (a folder not :func:`checked_before`) the content too: row numbers in bounds, offsets
    ascending, every number finite (a length or frequency not negative), chunk ids in order.
    Damage raises :class:`SegmentDamaged` naming the file; a search never indexes out of bounds
    or ranks by NaN. Reading every number costs about 0.4 s per 100k rows of 384 dimensions."""
    if not (folder / "complete").exists():
        raise FileNotFoundError(f"segment {folder} is incomplete")
    info = _json(folder / "segment.json")
    chunk_ids = _json(folder / "chunk_ids.json")
    if not isinstance(chunk_ids, list) or not all(isinstance(c, str) for c in chunk_ids):
        raise SegmentDamaged(folder / "chunk_ids.json", "not a list of chunk ids")
    if thorough and any(a >= b for a, b in zip(chunk_ids, chunk_ids[1:], strict=False)):  # found by binary search
        raise SegmentDamaged(folder / "chunk_ids.json", "the chunk ids are not in ascending order")
    rows = len(chunk_ids)
    vectors = _load(folder / "vectors.npy")
    if vectors.ndim != 2 or len(vectors) != rows or (dimension is not None and vectors.shape[1] != dimension):
        raise SegmentDamaged(folder / "vectors.npy", f"shape {vectors.shape}, expected ({rows}, "
                                                     f"{dimension if dimension is not None else 'dim'})")
    if thorough:
        _all_finite(folder / "vectors.npy", vectors)
    terms = _json(folder / "vocab.json")
    if not isinstance(terms, list):
        raise SegmentDamaged(folder / "vocab.json", "not a list of terms")
    try:
        vocab = dict(zip(terms, range(len(terms)), strict=True))  # 1.8 s for the 1M corpus's 2M terms
    except TypeError:
        raise SegmentDamaged(folder / "vocab.json", "a term that is not a string") from None
    postings = Postings(vocab, _load(folder / "indptr.npy"), _load(folder / "postings_rows.npy"),
                        _load(folder / "postings_tfs.npy"), _load(folder / "lengths.npy", mmap=False))
    _check_postings(folder, postings, rows, thorough)
    return info, chunk_ids, vectors, postings


def _check_postings(folder: Path, p: Postings, rows: int, thorough: bool) -> None:
    indptr, lengths = folder / "indptr.npy", folder / "lengths.npy"
    rows_file, tfs_file = folder / "postings_rows.npy", folder / "postings_tfs.npy"
    for path, values in ((indptr, p.indptr), (rows_file, p.rows), (tfs_file, p.tfs), (lengths, p.lengths)):
        if values.ndim != 1:
            raise SegmentDamaged(path, f"{values.ndim} dimensions, expected 1")
    if len(p.indptr) != len(p.vocab) + 1:
        raise SegmentDamaged(indptr, f"{len(p.indptr)} offsets for {len(p.vocab)} terms")
    if len(p.rows) != len(p.tfs):
        raise SegmentDamaged(tfs_file, f"{len(p.tfs)} frequencies for {len(p.rows)} postings")
    if len(p.lengths) != rows:
        raise SegmentDamaged(lengths, f"{len(p.lengths)} lengths for {rows} rows")
    if len(p.indptr) and (int(p.indptr[0]) != 0 or int(p.indptr[-1]) != len(p.rows)):
        raise SegmentDamaged(indptr, f"the offsets run from {int(p.indptr[0])} to {int(p.indptr[-1])}, "
                                     f"not from 0 to {len(p.rows)} postings")
    if not thorough:
        return
    for start in range(0, len(p.indptr), _CHECK_ROWS * 16):
        block = np.asarray(p.indptr[start:start + _CHECK_ROWS * 16 + 1])
        if len(block) > 1 and (np.diff(block) < 0).any():
            raise SegmentDamaged(indptr, "the offsets do not ascend")
    _in_range(rows_file, p.rows, 0, rows, "a row number")
    _in_range(tfs_file, p.tfs, 0, None, "a term frequency")
    _in_range(lengths, p.lengths, 0, None, "a row length")


GRAPH_SUM = "hnsw.faiss.sha256"  # the graph's checksum, written with it: a loadable but altered graph is found


def graph_checksum(path: Path) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_graph(index: Any, folder: Path, part_name: str) -> None:
    """``index`` (a faiss graph) as ``folder``/hnsw.faiss with its checksum beside it, each through a
    temporary file renamed at the end (the checksum first: a graph without one is re-checked by
    shape alone, as those written before checksums are)."""
    import faiss

    part = folder / part_name
    try:
        faiss.write_index(index, str(part))
        summed = folder / f"{part_name}.sha256"
        summed.write_text(graph_checksum(part))
        summed.rename(folder / GRAPH_SUM)
        part.rename(folder / "hnsw.faiss")
    except BaseException:
        part.unlink(missing_ok=True)
        (folder / f"{part_name}.sha256").unlink(missing_ok=True)
        raise


def read_graph(folder: Path, rows: int, dimension: int, *, thorough: bool = True) -> Any:
    """The faiss graph of the folder, its checksum (when one was written with it, and ``thorough``:
    0.66 s per 200 MB), row count and dimension checked; :class:`SegmentDamaged` naming hnsw.faiss
    otherwise. A graph written before checksums gets one once its shape is found right."""
    import faiss

    graph, summed = folder / "hnsw.faiss", folder / GRAPH_SUM
    expected = summed.read_text().strip() if summed.exists() else None
    if thorough and expected is not None and graph_checksum(graph) != expected:
        raise SegmentDamaged(graph, f"its checksum differs from the one written with it ({GRAPH_SUM})")
    try:
        index = faiss.read_index(str(graph))
    except RuntimeError as exc:
        raise SegmentDamaged(graph, f"not a readable faiss graph ({str(exc).splitlines()[0]})") from None
    if index.ntotal != rows or index.d != dimension:
        raise SegmentDamaged(graph, f"{index.ntotal} rows of dimension {index.d}, expected {rows} of {dimension}")
    if expected is None:
        try:
            summed.write_text(graph_checksum(graph))
        except OSError:
            pass  # checked by shape again next time
    return index


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
