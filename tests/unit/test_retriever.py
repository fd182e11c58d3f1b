"""The retriever stage: one embedding batch, parallel searches, fusion, dedupe, header filter."""

from __future__ import annotations

from services.retriever.handler import QueryHits, fuse, is_header_only
from shared.contract.config import Settings
from shared.contract.messages import ContextsRetrieved, QueryTransformed
from shared.contract.ports import ScoredChunk
from shared.runtime.dispatch import Outcome
from tests.unit.loop_fakes import CORPUS, chunk, make_loop


def _message(query, subs=(), iteration=0):
    return QueryTransformed(query_id="q1", iteration=iteration, query=query, sub_queries=list(subs))


def test_contexts_are_fused_deduplicated_and_stored():
    loop = make_loop(CORPUS)
    loop.submit("compare BM25 and dense retrieval")
    loop.deliver(_message("BM25 dense retrieval", ["What is BM25 ranking?", "What is dense retrieval?"]))

    assert loop.embedder.batches[-1] == ["BM25 dense retrieval", "What is BM25 ranking?",
                                         "What is dense retrieval?"]
    assert sorted(s[0] for s in loop.index.searches) == sorted(
        ["BM25 dense retrieval", "What is BM25 ranking?", "What is dense retrieval?"])
    assert {mode for _, _, mode in loop.index.searches} == {"hybrid"}
    (message,) = loop.publisher.of_type(ContextsRetrieved)
    entry = loop.record()["iterations"][0]
    contexts = entry["contexts"]
    assert message.context_count == len(contexts) == 4  # the header-only chunk is gone
    ids = [c["chunk_id"] for c in contexts]
    assert len(ids) == len(set(ids))
    assert "doc5:h:5" not in ids
    by_id = {c["chunk_id"]: c for c in contexts}
    assert set(by_id["doc2:h:2"]["matched_by"]) >= {"rewritten", "sub_query_1"}
    assert set(contexts[0]) >= {"chunk_id", "document_id", "title", "url", "text", "score", "matched_by"}
    assert [c["score"] for c in contexts] == sorted((c["score"] for c in contexts), reverse=True)
    assert entry["sub_queries_used"] == ["What is BM25 ranking?", "What is dense retrieval?"]
    assert "retriever" in entry["timings"]


def test_top_k_is_kept():
    many = [chunk(n, f"Doc {n}", f"BM25 ranking notes number {n}. " * 8) for n in range(10, 30)]
    loop = make_loop(many)
    loop.submit("BM25 ranking", top_k=3)
    loop.deliver(_message("BM25 ranking"))
    assert len(loop.record()["iterations"][0]["contexts"]) == 3


def test_fewer_than_two_successful_sub_queries_fall_back_to_the_rewritten_query():
    loop = make_loop(CORPUS, settings=Settings())
    loop.index.fail_on = lambda text: text.startswith("What is dense")
    loop.submit("BM25 and dense retrieval")
    loop.deliver(_message("BM25 ranking", ["What is BM25?", "What is dense retrieval?"]))
    entry = loop.record()["iterations"][0]
    assert entry["sub_queries_used"] == [] and entry["sub_queries_succeeded"] == 1
    assert all(c["matched_by"] == ["rewritten"] for c in entry["contexts"])
    assert "rewritten query only" in loop.record()["events"][-1]["detail"]


def test_a_failing_search_of_the_rewritten_query_is_retried():
    loop = make_loop(CORPUS)
    loop.index.fail_on = lambda text: text == "BM25 ranking"
    loop.submit("BM25")
    assert loop.deliver(_message("BM25 ranking")) == [Outcome.RETRY]
    assert loop.publisher.messages == []


def test_redelivery_republishes_without_searching_again():
    loop = make_loop(CORPUS)
    loop.submit("BM25")
    loop.deliver(_message("BM25 ranking"))
    before, searches = loop.record(), len(loop.index.searches)
    loop.deliver(_message("BM25 ranking"))
    assert loop.record() == before and len(loop.index.searches) == searches
    first, second = loop.publisher.of_type(ContextsRetrieved)
    assert first == second


def test_an_empty_index_gives_zero_contexts():
    loop = make_loop([])
    loop.submit("anything")
    loop.deliver(_message("anything"))
    assert loop.publisher.of_type(ContextsRetrieved)[0].context_count == 0


def test_fusion_weighs_the_rewritten_query_highest():
    a, b = CORPUS[0], CORPUS[1]
    fused = fuse([
        QueryHits("rewritten", "q", [ScoredChunk(a, 0.5), ScoredChunk(b, 0.4)]),
        QueryHits("sub_query_1", "s", [ScoredChunk(b, 0.9), ScoredChunk(a, 0.1)]),
    ], top_k=5)
    assert [c["chunk_id"] for c in fused] == [a.chunk_id, b.chunk_id]
    assert fused[0]["matched_by"] == ["rewritten", "sub_query_1"]
    assert fused[1]["index_score"] == 0.9


def test_header_only_chunks_are_recognised():
    assert is_header_only(CORPUS[4].text)
    assert not is_header_only(CORPUS[0].text)


class _BatchSearchingIndex:
    """The test index plus SearchesMany; records how it was asked."""

    def __init__(self, inner, fail=False):
        self.inner, self.fail, self.batches = inner, fail, []

    def search_many(self, texts, vectors, k, mode="hybrid"):
        self.batches.append(list(texts))
        if self.fail:
            raise RuntimeError("batch search unavailable")
        return [self.inner.search(t, v, k, mode) for t, v in zip(texts, vectors, strict=True)]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _fan_out(fail):
    loop = make_loop(CORPUS)
    batching = _BatchSearchingIndex(loop.index, fail=fail)
    loop.deps.override("index", batching)
    loop.submit("compare BM25 and dense retrieval")
    loop.deliver(_message("BM25 dense retrieval", ["What is BM25 ranking?", "What is dense retrieval?"]))
    return loop, batching


def test_an_index_that_searches_many_gets_the_query_and_its_sub_queries_in_one_call():
    from shared.contract.ports import SearchesMany

    loop, batching = _fan_out(fail=False)
    plain, _ = _fan_out(fail=False)
    assert isinstance(batching, SearchesMany)
    assert batching.batches == [["BM25 dense retrieval", "What is BM25 ranking?", "What is dense retrieval?"]]
    # the calls it made through to the test index were the batch's, none of its own
    assert len(loop.index.searches) == 3
    assert loop.record()["iterations"][0]["contexts"] == plain.record()["iterations"][0]["contexts"]


def test_a_failed_batch_search_is_done_again_one_query_at_a_time():
    loop, batching = _fan_out(fail=True)
    assert len(batching.batches) == 1
    assert sorted(s[0] for s in loop.index.searches) == sorted(
        ["BM25 dense retrieval", "What is BM25 ranking?", "What is dense retrieval?"])
    assert len(loop.record()["iterations"][0]["contexts"]) == 4
