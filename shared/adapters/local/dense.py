"""Dense search over one segment's vectors: exact (numpy) or approximate (a faiss HNSW graph)."""

from __future__ import annotations

from typing import Any

import numpy as np

_ONE_PASS_BYTES = 16 * 2**20  # about 10k 384-float vectors


class ExactSearch:
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


# A filter admitting at most this many rows of a segment is searched exactly among them: a graph
# walk passes the excluded nodes without keeping them, so a narrow filter left HNSW short of the true
# top (3 of 10 wrong for a filter admitting 10% of a 4k-row graph), while the admitted rows' product
# is cheap (20k x 384 floats: a few ms). A wider filter widens the walk by the share it excludes.
EXACT_ADMITTED = 20_000
_MAX_EF = 2048


class HnswSearch:
    """Approximate search with a faiss HNSW graph (inner product); exact re-scoring by id.
    ``vectors`` (the segment's rows, memory-mapped) serve the exact search of a narrow filter."""

    kind = "hnsw"

    def __init__(self, index: Any, ef_search: int, vectors: np.ndarray | None = None) -> None:
        self.index = index
        self.ef_search = ef_search
        self.vectors = vectors

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
        are excluded inside the graph walk (faiss's IDSelector), so the top stays ``n`` deep;
        when at most ``EXACT_ADMITTED`` rows are left, they are searched exactly instead."""
        live = self.index.ntotal - (int(dead.sum()) if dead is not None else 0)
        n = min(n, live)
        if n <= 0:
            return [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)) for _ in range(len(queries))]
        if dead is not None and self.vectors is not None and live <= EXACT_ADMITTED:
            return self._exact_among(queries, n, np.flatnonzero(~dead))
        import faiss

        selector = None
        ef = self.ef_search
        if dead is not None and dead.any():
            excluded = faiss.IDSelectorBatch(np.flatnonzero(dead).astype(np.int64))
            selector = faiss.IDSelectorNot(excluded)  # ``excluded`` stays referenced until the search ends
            ef = min(_MAX_EF, int(np.ceil(ef * self.index.ntotal / live)))
        params = faiss.SearchParametersHNSW(efSearch=max(ef, n), sel=selector)
        scores, idx = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), n, params=params)
        out = []
        for row_idx, row_scores in zip(idx, scores, strict=True):
            keep = row_idx >= 0
            out.append((row_idx[keep].astype(np.int64), row_scores[keep]))
        return out


    def _exact_among(self, queries: np.ndarray, n: int, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        admitted = ExactSearch(np.asarray(self.vectors[rows], dtype=np.float32))
        return [(rows[idx], scores) for idx, scores in admitted.top_many(queries, n)]


def build_hnsw(matrix: np.ndarray, *, m: int, ef_construction: int, ef_search: int) -> HnswSearch:
    """A faiss HNSW graph (inner product) over ``matrix``'s rows."""
    import faiss

    hnsw = faiss.IndexHNSWFlat(matrix.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = ef_construction
    hnsw.hnsw.efSearch = ef_search
    hnsw.add(np.ascontiguousarray(matrix, dtype=np.float32))
    return HnswSearch(hnsw, ef_search, matrix)
