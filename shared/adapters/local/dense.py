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


class HnswSearch:
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


def build_hnsw(matrix: np.ndarray, *, m: int, ef_construction: int, ef_search: int) -> HnswSearch:
    """A faiss HNSW graph (inner product) over ``matrix``'s rows."""
    import faiss

    hnsw = faiss.IndexHNSWFlat(matrix.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = ef_construction
    hnsw.hnsw.efSearch = ef_search
    hnsw.add(np.ascontiguousarray(matrix, dtype=np.float32))
    return HnswSearch(hnsw, ef_search)
