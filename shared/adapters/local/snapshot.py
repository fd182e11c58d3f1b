"""One generation of the local index as searchers see it: immutable, shared by every reader.

A :class:`View` is the manifest's segments, the in-memory segments of the generations
written after it, and each segment's dead rows (tombstones applied as masks). BM25 is
scored here, with N, document frequencies and the average length summed over the rows a
:class:`Scope` admits (every live row, or those a filter admits), so a ranking over many
segments is that of one fresh build of exactly those chunks.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.scoring import bm25_tokens
from shared.adapters.local.segments import BM25_B, BM25_K1, Segment, bm25_idf
from shared.contract.filters import Filters, published_at

_SEGMENT_UIDS = itertools.count(1)


_FIELD_KEYS = ("origin", "url", "source", "document_id", "title", "metadata")


class FilterColumns:
    """What filters read of every row of one segment, as arrays: dates, kinds and presence are
    compared vectorised; a source prefix or ``where`` is checked row by row on the rows left.

    Built with the segment from the rows it reads anyway, and written beside it
    (:meth:`save`): read back from chunks.db instead, the first filtered search of a process
    took 12.8 s over a 100k-row segment (load 18), every row's whole record read for a few
    fields."""

    def __init__(self, size: int) -> None:
        self.present = np.zeros(size, dtype=bool)  # the row's chunk is still in chunks.db
        self.kind = np.full(size, "", dtype=object)
        self.published = np.full(size, np.nan)  # epoch seconds; NaN: undated, never admitted by a date
        self._fields: list[dict[str, Any] | None] | None = [None] * size
        self._fields_file: Path | None = None  # read when a source or ``where`` filter first needs them

    @property
    def fields(self) -> list[dict[str, Any] | None]:
        if self._fields is None:
            assert self._fields_file is not None
            fields = json.loads(self._fields_file.read_text())
            if not isinstance(fields, list) or not all(f is None or isinstance(f, dict) for f in fields):
                raise ValueError(f"{self._fields_file} is not a list of each row's fields")
            if len(fields) != len(self.published):
                raise ValueError(f"{self._fields_file} does not match its segment's rows")
            self._fields = fields
        return self._fields

    @classmethod
    def empty(cls, size: int) -> FilterColumns:
        return cls(size)

    def set(self, row: int, fields: dict[str, Any]) -> None:
        self.present[row] = True
        self.kind[row] = fields.get("source") or ""
        at = published_at(fields.get("published"))
        if at is not None:
            self.published[row] = at.timestamp()
        self.fields[row] = {k: fields.get(k) for k in _FIELD_KEYS}

    def save(self, folder: Path) -> None:
        """Write the columns into a segment's folder (before its ``complete`` marker)."""
        kinds = sorted(set(self.kind.tolist()))
        code = {k: i for i, k in enumerate(kinds)}
        np.save(folder / "filter_published.npy", self.published)
        np.save(folder / "filter_kind.npy", np.asarray([code[k] for k in self.kind.tolist()], dtype=np.int32))
        (folder / "filter_kinds.json").write_text(json.dumps(kinds))
        (folder / "filter_fields.json").write_text(json.dumps(self.fields))

    @classmethod
    def load(cls, folder: Path) -> FilterColumns | None:
        """The columns a segment was written with; None for a segment written without them."""
        if not (folder / "filter_fields.json").exists():
            return None
        kinds = json.loads((folder / "filter_kinds.json").read_text())
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise ValueError(f"{folder / 'filter_kinds.json'} is not a list of kinds")
        published = np.load(folder / "filter_published.npy", allow_pickle=False)
        codes = np.load(folder / "filter_kind.npy", allow_pickle=False)
        if published.ndim != 1 or codes.ndim != 1 or len(codes) != len(published):
            raise ValueError(f"the filter columns of {folder} do not match its rows")
        if len(codes) and kinds and (codes.dtype.kind not in "iu" or codes.min() < 0 or codes.max() >= len(kinds)):
            raise ValueError(f"{folder / 'filter_kind.npy'} holds a kind number out of range [0, {len(kinds)})")
        out = cls(len(published))
        out.present[:] = True  # rows deleted since are dead in the view, not here
        out.published = published
        if kinds:
            out.kind = np.asarray(kinds, dtype=object)[codes]
        out._fields, out._fields_file = None, folder / "filter_fields.json"
        return out

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
class DenseKind:
    kind: str


@dataclass(frozen=True)
class Scope:
    """The rows a search may return, per segment: a mask of excluded rows (None: none),
    and the BM25 statistics of the rest."""

    excluded: tuple[np.ndarray | None, ...]
    rows: int
    length: float  # BM25 tokens in the admitted rows

    @classmethod
    def of(cls, segments: Sequence[Segment], excluded: Sequence[np.ndarray | None]) -> Scope:
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
class View:
    """Immutable view of one generation: the manifest's segments, the in-memory segments of
    the generations after it, and each segment's dead rows; shared by every reader until
    replaced."""

    generation: int
    manifest_version: int
    manifest: tuple[dict[str, Any], ...]
    segments: tuple[Segment, ...]
    dead: tuple[np.ndarray | None, ...]
    offsets: np.ndarray  # global row index of each segment's first row; one more at the end
    live: Scope  # every row not dead

    @property
    def size(self) -> int:
        return self.live.rows

    @property
    def dense(self) -> DenseKind | None:
        if not self.segments:
            return None
        return DenseKind("hnsw" if any(s.dense.kind == "hnsw" for s in self.segments) else "exact")

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

    def bm25_scores(self, text: str, scope: Scope | None = None) -> np.ndarray:
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

    def _postings(self, term: str, scope: Scope) -> list[tuple[int, np.ndarray, np.ndarray]]:
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


def make_view(generation: int, manifest_version: int, manifest: Sequence[dict[str, Any]],
               segments: Sequence[Segment], dead: Sequence[np.ndarray | None]) -> View:
    offsets = np.zeros(len(segments) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in segments], out=offsets[1:])
    return View(generation, manifest_version, tuple(manifest), tuple(segments), tuple(dead), offsets,
                 Scope.of(segments, dead))



def new_segment(**fields: Any) -> Segment:
    seg = Segment(**fields)
    seg.uid = next(_SEGMENT_UIDS)  # keys the dense-top cache: a segment never changes
    return seg


def with_dead(mask: np.ndarray | None, size: int, rows: Sequence[int]) -> np.ndarray | None:
    """``mask`` with ``rows`` marked dead: a new array (views already handed out keep theirs)."""
    if not rows:
        return mask
    out = np.zeros(size, dtype=bool) if mask is None else mask.copy()
    out[np.asarray(rows, dtype=np.int64)] = True
    return out


