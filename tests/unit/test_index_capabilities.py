"""Optional index capabilities are declared Protocols: what an index offers is checked, not guessed."""

from __future__ import annotations

import numpy as np
import pytest

from shared.adapters.local.index import HybridIndex
from shared.adapters.local.llm import LocalLanguageModel
from shared.contract.ports import (
    CountsChanges,
    GradingContext,
    Index,
    SearchesMany,
    StoredVectors,
    TermStatistics,
    checked_query,
)
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, MemoryIndex


def test_the_local_index_declares_every_optional_capability(tmp_path):
    index = HybridIndex(tmp_path / "index", dimension=4)
    try:
        assert isinstance(index, Index)
        assert isinstance(index, CountsChanges)
        assert isinstance(index, TermStatistics)
        assert isinstance(index, StoredVectors)
        assert isinstance(index, SearchesMany)
    finally:
        index.close()


def test_an_index_with_only_the_port_offers_no_capability():
    index = MemoryIndex(HashingEmbedder(), CORPUS)
    assert isinstance(index, Index)
    assert not isinstance(index, CountsChanges | TermStatistics | StoredVectors | SearchesMany)


class _VectorStoringIndex(MemoryIndex):
    """The test index plus StoredVectors: the vectors it returns are the embedder's own."""

    def __init__(self, embedder, chunks):
        super().__init__(embedder, chunks)
        self.asked: list[list[str]] = []

    def get_vectors(self, chunk_ids):
        self.asked.append(list(chunk_ids))
        by_id = {c.chunk_id: c for c in self.chunks}
        return {i: self.embedder.embed([by_id[i].text])[0] for i in chunk_ids if i in by_id}


def _contexts(index):
    return [GradingContext(number=n, source=c.url, text=c.text, chunk_id=c.chunk_id)
            for n, c in enumerate(index.chunks[:3], start=1)]


def test_grading_uses_stored_vectors_exactly_when_the_index_declares_them():
    embedder = HashingEmbedder()
    storing = _VectorStoringIndex(embedder, CORPUS)
    plain = MemoryIndex(embedder, CORPUS)
    with_vectors = LocalLanguageModel(index=storing, embedder=embedder).grade("what is BM25", _contexts(storing))
    before = len(embedder.batches)
    without = LocalLanguageModel(index=plain, embedder=embedder).grade("what is BM25", _contexts(plain))
    assert storing.asked == [[c.chunk_id for c in storing.chunks[:3]]]
    # the three contexts; the question's vector is the one this process already computed
    assert embedder.batches[before:] == [[c.text for c in plain.chunks[:3]]]
    assert with_vectors == without  # the same vectors either way, so the same grade


@pytest.mark.parametrize(
    ("vector", "k", "mode", "error"),
    [
        (np.ones(4), 3, "fuzzy", "search mode 'fuzzy'"),
        (np.ones(3), 3, "hybrid", "query vector has 3 values, expected 4"),
    ],
)
def test_the_search_contract_is_checked_in_one_place(vector, k, mode, error):
    with pytest.raises(ValueError, match=error):
        checked_query(vector, k, mode, 4)


def test_a_search_for_nothing_is_answered_before_the_vector_is_read():
    assert checked_query(np.ones(3), 0, "dense", 4) is None
    assert checked_query([1, 2, 3, 4], 2, "bm25", 4).dtype == np.float32
