"""BM25 as sparse vectors, for Vertex AI Vector Search's hybrid queries.

Vector Search ranks a datapoint's sparse embedding by its dot product with the query's
(cloud.google.com/vertex-ai/docs/vector-search/about-hybrid-search). BM25 splits into such a
product: a chunk's side is each term's saturated frequency,
``tf (k1 + 1) / (tf + k1 (1 - b + b len / avglen))``, made at indexing; the query's side is
each of its terms' IDF, made at query time from corpus-wide document frequencies. Their dot
product is the chunk's BM25 for the query, so the sparse search is a corpus-wide keyword
search, as the local index's is.

The text is tokenised exactly as the local index does (:func:`bm25_tokens`: lower case,
stop words out, plurals folded; the title with every chunk) and with its constants (k1 1.5,
b 0.75, Lucene's IDF). A term's dimension is a 63-bit hash of the term (Vector Search's
sparse dimensions are int64 indices). The one difference from the local index: ``avglen``
is a constant (:data:`AVERAGE_TERMS`) rather than the live corpus average, because a chunk's
weights are written once at indexing and must not shift as the corpus grows; chunks are cut
to a bounded window, so their lengths stay close to it.

Document frequencies come from the chunk records: each holds ``terms``, a map of its terms'
keys (``h`` + the dimension in hex) to 1, and Firestore counts the records holding a key
(one count aggregation per query term, billed one read per 1,000 index entries counted).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from shared.adapters.local.scoring import bm25_text, bm25_tokens
from shared.adapters.local.segments import BM25_B, BM25_K1, bm25_idf

#: The chunk length (BM25 tokens, title included) the length normalisation is relative to: the
#: chunker's window is 254 model tokens, and stop words and punctuation are not BM25 tokens.
AVERAGE_TERMS = 120.0
#: The field of a chunk record holding its terms' keys (document frequencies are counted on it).
TERMS_FIELD = "terms"


def dimension(term: str) -> int:
    """The sparse dimension of ``term``: 63 bits of its BLAKE2b hash (a non-negative int64)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def term_key(term: str) -> str:
    """The key of ``term`` in a chunk record's ``terms`` map: a plain field name on every store."""
    return f"h{dimension(term):016x}"


def chunk_terms(title: str, text: str) -> Counter[str]:
    return Counter(bm25_tokens(bm25_text(title, text)))


def document_sparse(title: str, text: str) -> tuple[list[int], list[float]]:
    """A chunk's sparse embedding: (dimensions, saturated term frequencies), dimensions ascending."""
    counts = chunk_terms(title, text)
    length = sum(counts.values())
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / AVERAGE_TERMS)
    weights = {dimension(t): tf * (BM25_K1 + 1.0) / (tf + norm) for t, tf in counts.items()}
    dims = sorted(weights)
    return dims, [round(weights[d], 6) for d in dims]


def record_terms(title: str, text: str) -> dict[str, int]:
    """The ``terms`` map a chunk record carries: each distinct term's key, to 1."""
    return {term_key(t): 1 for t in chunk_terms(title, text)}


def query_terms(text: str) -> list[str]:
    """The query's distinct BM25 terms, in order."""
    return list(dict.fromkeys(bm25_tokens(text)))


def query_sparse(terms: Sequence[str], document_frequency: Mapping[str, int], total: int
                 ) -> tuple[list[int], list[float]]:
    """The query's sparse embedding: each term's IDF over ``total`` chunks; a term no chunk holds
    is left out (it could match nothing)."""
    weights: dict[int, float] = {}
    for term in terms:
        df = int(document_frequency.get(term, 0))
        if df > 0 and total > 0:
            weights[dimension(term)] = weights.get(dimension(term), 0.0) + bm25_idf(min(df, total), total)
    dims = sorted(weights)
    return dims, [round(weights[d], 6) for d in dims]


def bm25_score(query_dims: Sequence[int], query_values: Sequence[float], title: str, text: str) -> float:
    """The chunk's BM25 for the query: the dot product Vector Search ranks sparse neighbours by."""
    dims, values = document_sparse(title, text)
    chunk = dict(zip(dims, values, strict=True))
    return float(math.fsum(chunk.get(d, 0.0) * v for d, v in zip(query_dims, query_values, strict=True)))
