"""Query-side embeddings, each text embedded once per process.

One query's text is needed by several stages: the transformer searches with the
question, the retriever with the rewritten query and sub-queries, the grader
and the synthesizer compare the question with their contexts. A query
embedding is the single most expensive step of the local query path, so every
stage asks here instead of calling the embedder: a text already embedded by
this process (for this embedder) is answered from memory, and the texts not yet
seen are embedded together in one batch.

The cache is only an optimisation: a vector is a pure function of its text and
model, so a stage running in another process (Cloud Functions, one stage per
instance) simply misses and embeds it again, with the same result. It is
bounded (least recently used out), and keyed by the text with its whitespace
collapsed, which no tokenizer of ours distinguishes.

Passages get the same treatment where a stage must embed one at query time
(:func:`passage_vectors`): a retrieved chunk that lost a planted instruction to
directive stripping is compared by the vector of what is left, which the index
does not store; the grader and the synthesizer of every query that retrieves it
need the same vector. Those are embedded as documents (``Embedder.embed``), in
a cache of their own.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from shared.contract.ports import Embedder, embed_queries

CAPACITY = 2048  # texts per embedder: about 3 MiB of 384-float vectors


def _embed_passages(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    return embedder.embed(texts)


class QueryVectorCache:
    """Query vectors of one embedder, least recently used out beyond ``capacity``
    (``embed`` says how texts are embedded: as queries, by default, or as passages)."""

    def __init__(
        self, embedder: Embedder, capacity: int = CAPACITY,
        embed: Callable[[Embedder, Sequence[str]], np.ndarray] = embed_queries,
        collapse_whitespace: bool = True,
    ) -> None:
        self.embedder = embedder
        self.capacity = capacity
        self._embed = embed
        self._collapse = collapse_whitespace
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every vector (see :func:`forget_query_vectors`)."""
        with self._lock:
            self._vectors.clear()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for ``texts`` in order; the ones not cached are embedded in one batch."""
        keys = [" ".join(t.split()) for t in texts] if self._collapse else list(texts)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            fresh = np.asarray(self._embed(self.embedder, missing), dtype=np.float32)
            with self._lock:
                for key, vector in zip(missing, fresh, strict=True):
                    vector = vector.copy()
                    vector.setflags(write=False)  # shared between stages: nobody may change it
                    found[key] = self._vectors[key] = vector
                while len(self._vectors) > self.capacity:
                    self._vectors.popitem(last=False)
        if not keys:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys])


_CACHES: weakref.WeakKeyDictionary[object, QueryVectorCache] = weakref.WeakKeyDictionary()
_PASSAGE_CACHES: weakref.WeakKeyDictionary[object, QueryVectorCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()
PASSAGE_CAPACITY = 512  # passages per embedder (only those changed by directive stripping come here)


def _cache(caches: weakref.WeakKeyDictionary, embedder: Embedder, **kwargs) -> QueryVectorCache:
    try:
        with _CACHES_LOCK:
            cache = caches.get(embedder)
            if cache is None:
                cache = caches[embedder] = QueryVectorCache(embedder, **kwargs)
            return cache
    except TypeError:
        # An embedder that cannot be weakly referenced or hashed gets no memory across calls,
        # but its texts are still embedded once per call and in one batch.
        return QueryVectorCache(embedder, **kwargs)


def query_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Query vectors of ``texts`` (see the module docstring), shape (len(texts), dimension)."""
    return _cache(_CACHES, embedder).vectors(texts)


def passage_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Document-side vectors of ``texts`` (``Embedder.embed``), each embedded once per process
    (see the module docstring), shape (len(texts), dimension). Keyed by the exact text: a
    passage is embedded as it is, line breaks and all."""
    return _cache(_PASSAGE_CACHES, embedder, capacity=PASSAGE_CAPACITY, embed=_embed_passages,
                  collapse_whitespace=False).vectors(texts)


_SENTENCE_CACHES: weakref.WeakKeyDictionary[object, QueryVectorCache] = weakref.WeakKeyDictionary()
# Sentences (or a sentence with the one it leans on) of retrieved passages the extractive reader
# compared with a question: about 6 MiB of 384-float vectors, some 400 queries' pools of ten.
SENTENCE_CAPACITY = 4096


def sentence_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Document-side vectors of sentences the extractive reader quotes from (``Embedder.embed``),
    each embedded once per process: the same top passages come back question after question."""
    return _cache(_SENTENCE_CACHES, embedder, capacity=SENTENCE_CAPACITY, embed=_embed_passages).vectors(texts)


def forget_query_vectors() -> None:
    """Drop every cached query vector of this process (a benchmark measuring a new
    question's whole cost asks the same questions again; nothing else needs this)."""
    with _CACHES_LOCK:
        caches = list(_CACHES.values())
    for cache in caches:
        cache.clear()


def forget_passage_vectors() -> None:
    """Drop every cached passage and sentence vector of this process (a benchmark measuring a question
    whose chunks the process has never read; nothing else needs this)."""
    with _CACHES_LOCK:
        caches = [*_PASSAGE_CACHES.values(), *_SENTENCE_CACHES.values()]
    for cache in caches:
        cache.clear()


def query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """The query vector of one ``text``."""
    return query_vectors(embedder, [text])[0]
