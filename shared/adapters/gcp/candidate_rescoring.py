"""Keyword scoring for the cloud indexes: the final ranking, and Firestore's only keyword search.

Firestore's Standard edition (the one infra/firestore.tf creates) has no keyword search (the
Enterprise edition's text search, firebase.google.com/docs/firestore/enterprise/text-search, is not
used here), so a Firestore index ranks in two steps: the vector service returns a pool of dense candidates, and
this module scores those candidates here with Okapi BM25 (k1 = 1.2, b = 0.75)
over the pool itself, then orders them by mode:

- ``dense``: the cosine alone;
- ``hybrid``: the local index's fusion (``dense_weight`` times the min-max
  normalised cosine plus the rest times BM25 over the pool's best BM25);
- ``bm25``: BM25 alone, chunks sharing no query term left out.

Vertex AI Vector Search does find candidates by keywords corpus-wide (hybrid queries,
:mod:`shared.adapters.gcp.vertex_index`) and passes their corpus BM25 in as ``lexical``.
For Firestore, what this is not: a corpus-wide keyword search. A chunk the embedder ranks
below the pool never becomes a candidate however well its words match, and the
document frequencies behind the IDF come from the pool (chunks already close
to the query), so a term common in the pool weighs less than it would over the
corpus. The texts are tokenised exactly as the local index does
(:func:`shared.adapters.local.index.bm25_tokens`: lower case, stop words out,
plurals folded), so scores are comparable in kind, not in value.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from shared.adapters.local.index import bm25_tokens, hybrid_scores
from shared.contract.ports import SEARCH_MODES, Chunk, ScoredChunk, SearchMode
from shared.contract.text import strip_header

BM25_K1 = 1.2
BM25_B = 0.75


def candidate_pool(k: int, mode: SearchMode, *, cap: int) -> int:
    """How many dense candidates to fetch for ``k`` results in ``mode``.

    Dense needs only ``k``; hybrid takes the local index's ``max(50, 5k)``;
    bm25, which leans entirely on re-scoring, takes twice that. ``cap`` is the
    service's own limit (Firestore's ``find_nearest`` returns at most 1000).
    """
    if mode == "dense":
        wanted = k
    elif mode == "hybrid":
        wanted = max(50, 5 * k)
    else:
        wanted = max(100, 10 * k)
    return max(1, min(wanted, cap))


def keyword_text(chunk: Chunk) -> str:
    # As the local index: the title goes with every chunk, the header's date and URL do not.
    return f"{chunk.title}\n{strip_header(chunk.text)}"


def bm25_over_pool(query: str, texts: Sequence[str]) -> np.ndarray:
    """Okapi BM25 of ``query`` against each of ``texts``, statistics from ``texts`` alone."""
    scores = np.zeros(len(texts), dtype=np.float32)
    terms = list(dict.fromkeys(bm25_tokens(query)))
    if not terms or not texts:
        return scores
    docs = [Counter(bm25_tokens(t)) for t in texts]
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    average = float(lengths.mean()) or 1.0
    n = len(docs)
    for term in terms:
        frequency = np.array([d.get(term, 0) for d in docs], dtype=np.float64)
        containing = int((frequency > 0).sum())
        if not containing:
            continue
        # Lucene's IDF: never negative, so a term in most of the pool still counts a little.
        idf = math.log(1.0 + (n - containing + 0.5) / (containing + 0.5))
        norm = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / average)
        scores += (idf * frequency * (BM25_K1 + 1.0) / (frequency + norm)).astype(np.float32)
    return scores


def rank_candidates(
    text: str,
    candidates: Sequence[tuple[Chunk, float]],
    k: int,
    mode: SearchMode,
    *,
    dense_weight: float = 0.7,
    lexical: Sequence[float] | None = None,
) -> list[ScoredChunk]:
    """The ``k`` best of ``candidates`` (chunk, cosine) for the query, best first. ``lexical``:
    each candidate's BM25 when the index knows it corpus-wide (Vector Search's sparse side);
    otherwise BM25 over the pool."""
    if mode not in SEARCH_MODES:
        raise ValueError(f"search mode {mode!r}: use 'hybrid', 'dense' or 'bm25'")
    if k <= 0 or not candidates:
        return []
    dense = np.array([score for _, score in candidates], dtype=np.float32)
    if lexical is None:
        lexical = bm25_over_pool(text, [keyword_text(c) for c, _ in candidates])
    else:
        lexical = np.asarray(lexical, dtype=np.float32)
    if mode == "dense":
        score = dense
        keep = np.arange(len(candidates))
    elif mode == "bm25":
        score = lexical
        keep = np.flatnonzero(lexical > 0)
    else:
        score = hybrid_scores(dense, lexical, dense_weight)
        keep = np.arange(len(candidates))
    # Ties (equal BM25, say) fall back to the cosine, then to the pool's order.
    order = sorted(keep.tolist(), key=lambda i: (-float(score[i]), -float(dense[i]), i))[:k]
    return [
        ScoredChunk(
            chunk=candidates[i][0],
            score=float(score[i]),
            dense_score=float(dense[i]),
            bm25_score=float(lexical[i]),
        )
        for i in order
    ]


