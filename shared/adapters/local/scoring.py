"""How the local index scores text: BM25 tokens, and the fusion of dense and BM25 scores.

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

import logging
import re

import numpy as np

from shared.contract.text import OPTION, strip_header

_WORD = re.compile(r"\w\w+", re.UNICODE)
# A version or a dotted number ("3.7", "4.9.0") standing alone: one term, beside the words it holds.
# "3.7" holds no word of two characters, so a question asking for release 3.7 had no term for it.
_TERM = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?!\w)|\w\w+", re.UNICODE)
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
    """Lower-cased words of two or more characters, stop words dropped, plurals folded; a version or
    dotted number standing alone is a term too, followed by the words it holds ("2.6.32", "32"); then each
    command-line option as written ("-N", "--fast": an index built before holds none, and a query's option
    terms then match nothing there, so its words rank as they did)."""
    out: list[str] = []
    for term in _TERM.findall(text.lower()):
        if "." in term:
            out.append(term)
            out += _WORD.findall(term)
        elif term not in _STOPWORDS:
            out.append(_s_stem(term))
    return out + OPTION.findall(text)


def import_bm25s():
    import bm25s

    # bm25s sets its own logger to DEBUG on import, which floods any application that
    # configures logging; its progress chatter is not ours to show.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def bm25_text(title: str, text: str) -> str:
    """What BM25 reads of a chunk: the title goes with every chunk (only the first carries the
    header); the header's date and URL are noise for keyword matching."""
    return f"{title}\n{strip_header(text)}"


def top_positive(scores: np.ndarray, n: int) -> np.ndarray:
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

