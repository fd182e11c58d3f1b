"""Optional index capabilities are declared Protocols: what an index offers is checked, not guessed."""

from __future__ import annotations

import numpy as np
import pytest

from shared.adapters.local.index import HybridIndex
from shared.adapters.local.llm import LocalLanguageModel
from shared.contract.ports import (
    CountsChanges,
    Index,
    NumberedContext,
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
    return [NumberedContext(number=n, source=c.url, text=c.text, chunk_id=c.chunk_id)
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


@pytest.fixture
def counted_index(tmp_path, monkeypatch):
    """A one-document index and the list of how many query rows each exact dense product searched."""
    from shared.adapters.local import dense as local_dense

    embedder = HashingEmbedder()
    index = HybridIndex(tmp_path / "index", dimension=embedder.dimension)
    index.upsert(CORPUS[0].document_id, [CORPUS[0]], embedder.embed([CORPUS[0].text]))
    products: list[int] = []
    real = local_dense.ExactSearch.top_many
    monkeypatch.setattr(local_dense.ExactSearch, "top_many",
                        lambda self, queries, n, dead=None: products.append(len(queries)) or real(self, queries, n, dead))
    return index, embedder, products


def test_a_vector_searched_again_on_the_same_snapshot_reuses_its_dense_top(counted_index):
    index, embedder, products = counted_index
    vector = embedder.embed(["reciprocal rank fusion"])[0]
    first = index.search("reciprocal rank fusion", vector, 10)
    again = index.search("rank fusion feedback terms", vector, 5)  # same vector, other words, shallower
    assert products == [1]
    assert [h.chunk.chunk_id for h in again] == [h.chunk.chunk_id for h in first][: len(again)]
    # a new generation adds a segment: only it is searched afresh, and the new chunk is found
    index.upsert(CORPUS[1].document_id, [CORPUS[1]], embedder.embed([CORPUS[1].text]))
    after = index.search("reciprocal rank fusion", vector, 10)
    assert products == [1, 1]
    assert {h.chunk.chunk_id for h in after} == {CORPUS[0].chunk_id, CORPUS[1].chunk_id}


def test_identical_vectors_in_one_batch_are_searched_once(counted_index):
    index, embedder, products = counted_index
    question = embedder.embed(["reciprocal rank fusion"])[0]
    other = embedder.embed(["bm25 saturation"])[0]
    texts = ["reciprocal rank fusion", "fusion of ranks", "rank fusion k", "bm25 saturation"]
    hits = index.search_many(texts, np.stack([question, question, question, other]), 5)
    assert products == [2]  # two distinct vectors, one product each
    assert len(hits) == 4 and all(hits)
