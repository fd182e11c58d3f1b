"""Retrieval-only runs over the evaluation set: dense, BM25, naive RRF and the project's hybrid.

Passages are embedded once and cached on disk (``<cache>/<model>-<set key>.npy``),
keyed by the embedder's model and the passages' texts, so a rerun skips the few
minutes the int8 MiniLM needs for 5,899 passages on two cores. The index is a real
:class:`~shared.adapters.local.index.HybridIndex` on disk holding one chunk per
passage (chunk id = document id = passage id, no title), reused while it holds
exactly the set's passages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared.adapters.local.index import HybridIndex
from shared.contract.ports import Chunk, Embedder
from shared.contract.text import strip_header
from shared.tools.eval.dataset import EvalQuery, EvalSet
from shared.tools.eval.metrics import ranking_metrics, reciprocal_rank_fusion

log = logging.getLogger("ragbus.eval")

K = 10
RRF_K = 60
# The retriever drops contexts shorter than this once the header is gone (header-only chunks);
# mirrored here only to report how many passages of the set that affects.
RETRIEVER_MIN_BODY_CHARS = 100


def texts_key(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return f"{len(texts)}-{digest.hexdigest()[:12]}"


def embed_cached(
    texts: Sequence[str], embedder: Embedder, cache_dir: Path | None, key: str, *, batch: int = 256
) -> np.ndarray:
    """Embeddings of ``texts``, read from ``cache_dir`` when cached under the same model and key."""
    name = f"{getattr(embedder, 'model_name', type(embedder).__name__)}-{key}.npy"
    path = cache_dir / name if cache_dir is not None else None
    if path is not None and path.exists():
        vectors = np.load(path)
        if vectors.shape == (len(texts), embedder.dimension):
            return vectors
        log.warning("embedding cache %s has shape %s, expected %s; recomputing", path, vectors.shape,
                    (len(texts), embedder.dimension))
    started = time.perf_counter()
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    for start in range(0, len(texts), batch):
        vectors[start : start + batch] = embedder.embed(list(texts[start : start + batch]))
    log.info("embedded %d texts in %.1fs", len(texts), time.perf_counter() - started)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.rename(path)
    return vectors


class CachedEmbedder:
    """An :class:`Embedder` whose document vectors are kept on disk under ``cache_dir``, by model and
    text (``<model>-texts.npy``: the vectors; ``<model>-texts.json``: each text's digest, in row order),
    so a rerun that ingests the same chunks again (re-cleaned, re-chunked, re-indexed) embeds only
    the texts it has not seen. Queries pass through. ``cache_dir`` None keeps them in memory only.
    Call :meth:`save` to write what was added."""

    def __init__(self, inner: Embedder, cache_dir: Path | None) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._rows: dict[str, int] = {}
        self._vectors: list[np.ndarray] = []
        self._saved = 0
        stem = f"{self.model_name}-texts".replace("/", "_")
        self._paths = (cache_dir / f"{stem}.json", cache_dir / f"{stem}.npy") if cache_dir is not None else None
        if self._paths is not None and self._paths[0].is_file() and self._paths[1].is_file():
            digests = json.loads(self._paths[0].read_text(encoding="utf-8"))
            vectors = np.load(self._paths[1])
            if vectors.shape == (len(digests), self.dimension):
                self._rows = {d: i for i, d in enumerate(digests)}
                self._vectors = list(vectors)
                self._saved = len(digests)
            else:
                log.warning("embedding cache %s has shape %s for %d texts; starting it again", self._paths[1],
                            vectors.shape, len(digests))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_spans(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        digests = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        with self._lock:
            missing = list(dict.fromkeys(d for d in digests if d not in self._rows))
        if missing:
            first = {d: t for d, t in zip(digests, texts, strict=True)}
            fresh = self.inner.embed([first[d] for d in missing])
            with self._lock:
                for d, vector in zip(missing, fresh, strict=True):
                    if d not in self._rows:
                        self._rows[d] = len(self._vectors)
                        self._vectors.append(np.asarray(vector, dtype=np.float32))
        with self._lock:
            self.misses += len(missing)
            self.hits += len(texts) - len(missing)
            rows = [self._vectors[self._rows[d]] for d in digests]
        return np.stack(rows) if rows else np.zeros((0, self.dimension), dtype=np.float32)

    def save(self) -> None:
        """Write the cache when texts were added since it was read."""
        with self._lock:
            if self._paths is None or len(self._vectors) == self._saved:
                return
            digests = sorted(self._rows, key=self._rows.__getitem__)
            vectors = np.stack(self._vectors)
            self._saved = len(digests)
        keys_path, vectors_path = self._paths
        keys_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = vectors_path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.rename(vectors_path)
        keys_path.with_suffix(".tmp").write_text(json.dumps(digests), encoding="utf-8")
        keys_path.with_suffix(".tmp").rename(keys_path)


def passage_chunks(evalset: EvalSet) -> list[Chunk]:
    return [Chunk(chunk_id=p.passage_id, document_id=p.passage_id, ordinal=0, text=p.text) for p in evalset.passages]


def fill_index(index: HybridIndex, evalset: EvalSet, vectors: np.ndarray) -> bool:
    """Put every passage into ``index`` unless it already holds exactly them; True when it wrote."""
    ids = [p.passage_id for p in evalset.passages]
    if index.count_chunks() == len(ids) and index.count_documents() == len(ids):
        present = {c.chunk_id for c in index.get_chunks(ids)}
        if len(present) == len(ids):
            return False
    for chunk, vector in zip(passage_chunks(evalset), vectors, strict=True):
        index.upsert(chunk.document_id, [chunk], vector.reshape(1, -1))
    index.snapshot()  # build BM25 and the dense matrix once, now
    return True


def short_passages(evalset: EvalSet) -> set[str]:
    """Passages the retriever would drop as header-only (< 100 characters of body)."""
    return {p.passage_id for p in evalset.passages if len(strip_header(p.text).strip()) < RETRIEVER_MIN_BODY_CHARS}


@dataclass
class RetrievalRun:
    """One configuration's rankings (passage ids, best first) and its mean metrics."""

    name: str
    rankings: list[list[str]]
    metrics: dict[str, float]
    seconds: float


def run_index_mode(
    index: HybridIndex, queries: Sequence[EvalQuery], query_vectors: np.ndarray, mode: str, *, name: str | None = None,
    k: int = K,
) -> RetrievalRun:
    """Rank every query with ``index.search`` in ``mode`` (hybrid uses the index's ``dense_weight``)."""
    started = time.perf_counter()
    rankings = [
        [hit.chunk.document_id for hit in index.search(q.text, vec, k, mode=mode)]  # type: ignore[arg-type]
        for q, vec in zip(queries, query_vectors, strict=True)
    ]
    elapsed = time.perf_counter() - started
    return RetrievalRun(name or mode, rankings, ranking_metrics(rankings, [q.relevant for q in queries], k), elapsed)


def run_rrf(dense: RetrievalRun, bm25: RetrievalRun, queries: Sequence[EvalQuery], *, k: int = K,
            rrf_k: int = RRF_K, depth_runs: tuple[RetrievalRun, RetrievalRun] | None = None) -> RetrievalRun:
    """Naive reciprocal-rank fusion (``rrf_k``=60) of a dense and a BM25 ranking, cut at ``k``."""
    started = time.perf_counter()
    a, b = depth_runs or (dense, bm25)
    rankings = [reciprocal_rank_fusion([x, y], k=rrf_k, depth=k) for x, y in zip(a.rankings, b.rankings, strict=True)]
    return RetrievalRun("rrf", rankings, ranking_metrics(rankings, [q.relevant for q in queries], k),
                        time.perf_counter() - started)


def filtered(run: RetrievalRun, drop: set[str], queries: Sequence[EvalQuery], name: str, k: int = K) -> RetrievalRun:
    """``run`` with the passages in ``drop`` removed from every ranking (needs rankings deeper than k)."""
    rankings = [[p for p in ranking if p not in drop][:k] for ranking in run.rankings]
    return RetrievalRun(name, rankings, ranking_metrics(rankings, [q.relevant for q in queries], k), run.seconds)


def bm25s_reference(evalset: EvalSet, queries: Sequence[EvalQuery], *, depth: int = 50) -> RetrievalRun:
    """BM25 as the reference figures were measured: plain bm25s, its own tokenizer with English
    stop words, passage text only (the index adds titles and folds plurals)."""
    from shared.adapters.local.index import import_bm25s

    bm25s = import_bm25s()
    started = time.perf_counter()
    ids = [p.passage_id for p in evalset.passages]
    model = bm25s.BM25()
    model.index(bm25s.tokenize([p.text for p in evalset.passages], stopwords="en", show_progress=False),
                show_progress=False)
    tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", show_progress=False)
    # every passage scored, ties in passage order: bm25s's top-k (numpy's argpartition) orders tied scores by the
    # CPU's sorting kernels, so its figures differed in the third decimal between machines
    docs, scores = model.retrieve(tokens, k=len(ids), show_progress=False)
    rankings = [[ids[i] for i, score in sorted(zip(row, row_scores, strict=True), key=lambda p: (-p[1], p[0]))
                 if score > 0][:depth] for row, row_scores in zip(docs, scores, strict=True)]
    return RetrievalRun("bm25s (own tokenizer, English stop words)", rankings,
                        ranking_metrics([r[:K] for r in rankings], [q.relevant for q in queries], K),
                        time.perf_counter() - started)


def open_index(path: Path, dimension: int, *, dense_weight: float = 0.7) -> HybridIndex:
    return HybridIndex(path, dimension, dense_weight=dense_weight)


def retrieval_rows(
    index_path: Path,
    evalset: EvalSet,
    query_vectors: np.ndarray,
    *,
    dimension: int,
    weights: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9),
    default_weight: float = 0.7,
    progress: Callable[[str], None] | None = None,
) -> list[RetrievalRun]:
    """Dense, BM25, naive RRF, hybrid at the default weight and a ``dense_weight`` sweep.

    Rankings are taken 50 deep for the fusion and the short-passage diagnostic, then
    cut at 10 for the metrics.
    """
    queries = evalset.queries
    runs: list[RetrievalRun] = []
    base = open_index(index_path, dimension, dense_weight=default_weight)
    deep = 50
    dense50 = run_index_mode(base, queries, query_vectors, "dense", k=deep)
    bm25_50 = run_index_mode(base, queries, query_vectors, "bm25", k=deep)
    relevant = [q.relevant for q in queries]
    for run, name in ((dense50, "dense"), (bm25_50, "bm25 (HybridIndex: title + text, plurals folded)")):
        cut = [r[:K] for r in run.rankings]
        runs.append(RetrievalRun(name, cut, ranking_metrics(cut, relevant, K), run.seconds))
        if progress:
            progress(f"{name}: nDCG@10 {runs[-1].metrics['ndcg@10']:.3f}")
    runs.append(run_rrf(dense50, bm25_50, queries, depth_runs=(dense50, bm25_50)))
    runs[-1].name = "rrf k=60 (dense + HybridIndex bm25)"
    if progress:
        progress(f"rrf: nDCG@10 {runs[-1].metrics['ndcg@10']:.3f}")
    reference = bm25s_reference(evalset, queries, depth=deep)
    runs.append(RetrievalRun(reference.name, [r[:K] for r in reference.rankings], reference.metrics, reference.seconds))
    rrf_reference = run_rrf(dense50, reference, queries, depth_runs=(dense50, reference))
    rrf_reference.name = "rrf k=60 (dense + bm25s own tokenizer)"
    runs.append(rrf_reference)
    if progress:
        progress(f"{reference.name}: {reference.metrics['ndcg@10']:.3f}; "
                 f"{rrf_reference.name}: {rrf_reference.metrics['ndcg@10']:.3f}")
    for weight in sorted({default_weight, *weights}):
        index = open_index(index_path, dimension, dense_weight=weight)
        label = f"hybrid (dense_weight {weight:g})" + (" [default]" if weight == default_weight else "")
        run = run_index_mode(index, queries, query_vectors, "hybrid", name=label)
        runs.append(run)
        index.close()
        if progress:
            progress(f"{label}: nDCG@10 {run.metrics['ndcg@10']:.3f}")
    drop = short_passages(evalset)
    runs.append(filtered(dense50, drop, queries, "dense, passages < 100 chars dropped (as the retriever does)"))
    base.close()
    return runs
