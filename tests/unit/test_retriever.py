"""The retriever stage: the question leads, sub-queries embed nothing, parallel searches, fusion, dedupe,
header filter."""

from __future__ import annotations

import numpy as np

from services.retriever.handler import (
    QueryHits,
    fuse,
    is_header_only,
    leading_queries,
    only_adds_to,
)
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.messages import ContextsRetrieved
from shared.contract.ports import ScoredChunk
from shared.runtime.dispatch import Disposition
from tests.unit.loop_fakes import CORPUS, chunk, make_loop


def _message(loop, query, subs=(), iteration=0):
    return loop.transformed(query, iteration, subs)


def test_contexts_are_fused_deduplicated_and_stored():
    loop = make_loop(CORPUS)
    loop.submit("compare BM25 and dense retrieval")
    loop.deliver(_message(loop, "BM25 dense retrieval", ["What is BM25 ranking?", "What is dense retrieval?"]))

    # the rewrite dropped words of the question: both are searched, each with its own vector; the
    # sub-queries embed nothing (their dense side is the rewrite's vector, their BM25 side their words)
    assert loop.embedder.batches[-1] == ["compare BM25 and dense retrieval", "BM25 dense retrieval"]
    assert sorted(s[0] for s in loop.index.searches if s[2] == "hybrid") == sorted(
        ["compare BM25 and dense retrieval", "BM25 dense retrieval", "What is BM25 ranking?",
         "What is dense retrieval?"])
    # and the question's words alone (BM25), fused as the question is
    assert [s[0] for s in loop.index.searches if s[2] != "hybrid"] == ["compare BM25 and dense retrieval"]
    assert {mode for _, _, mode in loop.index.searches} == {"hybrid", "bm25"}
    (message,) = loop.publisher.of_type(ContextsRetrieved)
    entry = loop.record()["iterations"][0]
    contexts = entry["contexts"]
    assert message.iteration == 0 and len(contexts) == 4  # the header-only chunk is gone
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
    loop.deliver(_message(loop, "BM25 ranking"))
    assert len(loop.record()["iterations"][0]["contexts"]) == 3


def test_fewer_than_two_successful_sub_queries_fall_back_to_the_rewritten_query():
    loop = make_loop(CORPUS, settings=Settings())
    loop.index.fail_on = lambda text: text.startswith("What is dense")
    loop.submit("BM25 and dense retrieval")
    loop.deliver(_message(loop, "BM25 ranking", ["What is BM25?", "What is dense retrieval?"]))
    entry = loop.record()["iterations"][0]
    assert entry["sub_queries_used"] == [] and entry["sub_queries_succeeded"] == 1
    assert all(set(c["matched_by"]) <= {"question", "rewritten", "keywords"} for c in entry["contexts"])
    # the leading searches are named as they were: the question, and a rewrite that differs
    assert "(fewer than 2: the question and its rewrite only)" in loop.record()["events"][-1]["detail"]


def test_a_failing_search_of_the_rewritten_query_is_retried():
    loop = make_loop(CORPUS)
    loop.index.fail_on = lambda text: text == "BM25 ranking"
    loop.submit("BM25")
    assert loop.deliver(_message(loop, "BM25 ranking")) == [Disposition.RETRY]
    assert loop.publisher.messages == []


def test_redelivery_republishes_without_searching_again():
    loop = make_loop(CORPUS)
    loop.submit("BM25")
    loop.deliver(_message(loop, "BM25 ranking"))
    before, searches = loop.record(), len(loop.index.searches)
    loop.deliver(_message(loop, "BM25 ranking"))
    assert loop.record() == before and len(loop.index.searches) == searches
    first, second = loop.publisher.of_type(ContextsRetrieved)
    assert first == second


def test_an_empty_index_gives_zero_contexts():
    loop = make_loop([])
    loop.submit("anything")
    loop.deliver(_message(loop, "anything"))
    assert loop.publisher.of_type(ContextsRetrieved) and not loop.record()["iterations"][0]["contexts"]


def test_fusion_weighs_the_rewritten_query_highest():
    a, b = CORPUS[0], CORPUS[1]
    fused = fuse([
        QueryHits("rewritten", "q", [ScoredChunk(a, 0.5), ScoredChunk(b, 0.4)]),
        QueryHits("sub_query_1", "s", [ScoredChunk(b, 0.9), ScoredChunk(a, 0.1)]),
    ], top_k=5)
    assert [c["chunk_id"] for c in fused] == [a.chunk_id, b.chunk_id]
    assert fused[0]["matched_by"] == ["rewritten", "sub_query_1"]
    assert fused[1]["index_score"] == 0.9


def test_a_source_s_index_score_is_a_similarity_not_the_keywords_search_s_bm25_score():
    """The keywords search (BM25 alone) scored its chunk 4.44, which became the chunk's index_score: the page
    showed "score 4.44" among sources scored 0.4 to 1.00. A keywords hit now counts by its similarity."""
    from services.retriever.handler import KEYWORDS_LABEL

    a, b = CORPUS[0], CORPUS[1]
    fused = fuse([
        QueryHits("rewritten", "q", [ScoredChunk(a, 0.8), ScoredChunk(b, 0.6)]),
        QueryHits(KEYWORDS_LABEL, "q", [ScoredChunk(b, 4.44, dense_score=0.55, bm25_score=4.44)]),
    ], top_k=5)
    scores = {c["chunk_id"]: c["index_score"] for c in fused}
    assert scores == {a.chunk_id: 0.8, b.chunk_id: 0.6}
    (alone,) = fuse([QueryHits(KEYWORDS_LABEL, "q", [ScoredChunk(b, 4.44, dense_score=0.55, bm25_score=4.44)])], 5)
    assert alone["index_score"] == 0.55 and alone["matched_by"] == [KEYWORDS_LABEL]


def test_header_only_chunks_are_recognised():
    assert is_header_only(CORPUS[4].text)
    assert not is_header_only(CORPUS[0].text)
    # without a header a short text is a body, not a header: a short passage still answers
    assert not is_header_only("The pension fund was 92% funded at the end of 2024.")
    assert is_header_only("  \n ")
    # a whole short document's one chunk (header and a short body) answers too (issue 31)
    assert not is_header_only("Title: Note\nPublished: unknown\nSource: file:///n.md\n\nShort note.")


class _VectorRecordingIndex:
    """The test index, recording the vector each search was given."""

    def __init__(self, inner):
        self.inner, self.vectors = inner, []

    def search(self, text, vector, k, mode="hybrid"):
        if mode == "hybrid":  # the question's BM25 ranking alone reads no vector
            self.vectors.append((text, np.asarray(vector).copy(), k))
        return self.inner.search(text, vector, k, mode)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_rewrite_that_only_adds_words_searches_bm25_with_it_and_dense_with_the_question():
    loop = make_loop(CORPUS)
    recording = _VectorRecordingIndex(loop.index)
    loop.deps.override("index", recording)
    loop.submit("What is BM25?")
    batches = len(loop.embedder.batches)
    loop.deliver(_message(loop, "What is BM25 (Best Matching 25)? ranking zebrafish"))

    # the rewrite itself was never embedded (its words are keyword evidence only), the question was
    assert loop.embedder.batches[batches:] == [["What is BM25?"]]
    searched = sorted((text, k) for text, _, k in recording.vectors)
    # the question itself leads beside the rewrite; both asked for exactly top_k
    assert searched == [("What is BM25 (Best Matching 25)? ranking zebrafish", 10), ("What is BM25?", 10)]
    for _, vector, _ in recording.vectors:
        np.testing.assert_allclose(vector, loop.embedder.embed(["What is BM25?"])[0])
    assert loop.record()["iterations"][0]["contexts"][0]["matched_by"][0] == "question"


def test_the_contexts_first_half_is_the_questions_own_search_whatever_a_rewrite_adds():
    # The added words ("zebrafish tanks") point BM25 at another document; the question's own
    # top hits still open the contexts, in the order a plain search of the question gives.
    corpus = [*CORPUS, chunk(40, "Aquarium care", "Zebrafish tanks need weekly water changes and BM25 "
                                                  "is not a water test. Zebrafish tanks are kept at 26 degrees.")]
    loop = make_loop(corpus)
    loop.submit("How does BM25 score documents?", top_k=4)
    loop.deliver(_message(loop, "How does BM25 score documents? zebrafish tanks zebrafish tanks"))
    question = "How does BM25 score documents?"
    plain = [h.chunk.chunk_id for h in loop.index.search(question, loop.embedder.embed([question])[0], 4)
             if "Header only" not in h.chunk.title]
    contexts = [c["chunk_id"] for c in loop.record()["iterations"][0]["contexts"]]
    assert contexts[:2] == plain[:2]
    rewrite_top = loop.index.search("How does BM25 score documents? zebrafish tanks zebrafish tanks",
                                    loop.embedder.embed([question])[0], 4)[0].chunk.chunk_id
    assert rewrite_top == "doc40:h:40" != plain[0]  # the rewrite alone would have led with the aquarium
    assert "doc40:h:40" in contexts  # kept below the question's best, not dropped


def test_a_rewrite_that_changes_the_question_is_searched_beside_it_and_the_question_leads():
    loop = make_loop(CORPUS)
    loop.submit("How do search engines combine rankings?")
    loop.deliver(_message(loop, "GPU kernels"))  # a bad rewrite
    contexts = loop.record()["iterations"][0]["contexts"]
    question_top = [h.chunk.chunk_id for h in loop.index.search(
        "How do search engines combine rankings?",
        loop.embedder.embed(["How do search engines combine rankings?"])[0], 20) if "Header only" not in h.chunk.title]
    assert [c["chunk_id"] for c in contexts[:2]] == question_top[:2]  # ceil(4 / 2): len(CORPUS usable) = 4
    assert "question" in contexts[0]["matched_by"]


def test_only_adds_to_and_leading_queries():
    assert only_adds_to("What is RRF?", "What is RRF (reciprocal rank fusion)? November 2026")
    assert only_adds_to("what is  rrf", "What is RRF?")
    assert not only_adds_to("Was ist RRF?", "What is RRF?")
    assert leading_queries("What is RRF?", "What is RRF? fusion") == (
        [("question", "What is RRF?"), ("rewritten", "What is RRF? fusion")], ["What is RRF?", "What is RRF?"])
    assert leading_queries("What is RRF?", " What is  RRF? ") == ([("rewritten", "What is RRF?")], ["What is RRF?"])
    assert leading_queries("Was ist RRF?", "What is RRF?") == (
        [("question", "Was ist RRF?"), ("rewritten", "What is RRF?")], ["Was ist RRF?", "What is RRF?"])


def test_the_first_rankings_leading_half_is_kept_whatever_the_others_agree_on():
    a, b, c, d = CORPUS[0], CORPUS[1], CORPUS[2], CORPUS[3]
    question = QueryHits("question", "q", [ScoredChunk(a, 0.9), ScoredChunk(b, 0.8), ScoredChunk(c, 0.7)])
    subs = [QueryHits(f"sub_query_{n}", "s", [ScoredChunk(d, 0.9), ScoredChunk(c, 0.5)]) for n in (1, 2, 3)]
    fused = fuse([question, *subs], top_k=4)
    # d and c are found by every sub-query, yet the question's top 2 stay first and in order
    assert [x["chunk_id"] for x in fused] == [a.chunk_id, b.chunk_id, c.chunk_id, d.chunk_id]
    assert fused[2]["score"] > fused[0]["score"]  # the score is the fusion's; the lead is by position


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
    loop.deliver(_message(loop, "BM25 dense retrieval", ["What is BM25 ranking?", "What is dense retrieval?"]))
    return loop, batching


def test_an_index_that_searches_many_gets_the_query_and_its_sub_queries_in_one_call():
    from shared.contract.ports import SearchesMany

    loop, batching = _fan_out(fail=False)
    plain, _ = _fan_out(fail=False)
    assert isinstance(batching, SearchesMany)
    assert batching.batches == [["compare BM25 and dense retrieval", "BM25 dense retrieval",
                                 "What is BM25 ranking?", "What is dense retrieval?"]]
    # the calls it made through to the test index were the batch's, and the question's BM25 ranking
    assert len(loop.index.searches) == 5 and loop.index.searches[-1][2] == "bm25"
    assert loop.record()["iterations"][0]["contexts"] == plain.record()["iterations"][0]["contexts"]


def test_a_failed_batch_search_is_done_again_one_query_at_a_time():
    loop, batching = _fan_out(fail=True)
    assert len(batching.batches) == 1
    assert sorted(s[0] for s in loop.index.searches if s[2] == "hybrid") == sorted(
        ["compare BM25 and dense retrieval", "BM25 dense retrieval", "What is BM25 ranking?",
         "What is dense retrieval?"])
    assert len(loop.record()["iterations"][0]["contexts"]) == 4


def test_a_refinement_is_searched_beside_the_question_and_the_question_leads():
    loop = make_loop(CORPUS)
    recording = _VectorRecordingIndex(loop.index)
    loop.deps.override("index", recording)
    loop.submit("What is BM25?", top_k=4)
    loop.deliver(_message(loop, "What is BM25? reciprocal rank fusion", iteration=1))

    texts = sorted(t for t, _, _ in recording.vectors)
    assert texts == ["What is BM25?", "What is BM25? reciprocal rank fusion"]
    question_vector = loop.embedder.embed(["What is BM25?"])[0]
    for _, vector, _ in recording.vectors:  # an added-words refinement keeps the question's vector
        np.testing.assert_allclose(vector, question_vector)
    contexts = loop.record()["iterations"][0]["contexts"]
    question_top = [h.chunk.chunk_id for h in loop.index.search("What is BM25?", question_vector, 20)
                    if "Header only" not in h.chunk.title]
    assert [c["chunk_id"] for c in contexts[:2]] == question_top[:2]


# A follow-up's earlier turn's document (the transformer's follows) leads its contexts.
TARGETS = [
    chunk(50, "Generic make", "The make check target runs the test suite of a package built with make.", doc="make"),
    chunk(51, "Generic make", "The make install target copies a package into place.", doc="make"),
    chunk(52, "zstd make check", "In zstd the make check target runs the zstd test suite on this platform.",
          doc="zstd"),
    chunk(53, "Chunking", "Passages of a few hundred words are embedded one by one.", doc="chunking"),
]


def _follow_up_contexts(document, leans="pronoun", question="What does the make check target run?"):
    loop = make_loop(TARGETS)
    loop.submit(question, top_k=2)
    follows = {"document_id": document, "leans": leans, "earlier_question": "Which build system does zstd use?"} \
        if document else None
    loop.state.update(state_collections.QUERIES, "q1", lambda doc: {**doc, "follows": follows})
    loop.deliver(_message(loop, question))
    return loop.record()["iterations"][0]["contexts"], loop.record()["events"][-1]["detail"], loop.index.searches


def test_a_follow_up_that_points_back_is_read_from_the_earlier_turns_document():
    plain, _, _ = _follow_up_contexts(None)
    assert [c["chunk_id"] for c in plain] == ["make:h:50", "zstd:h:52"]  # the generic page first
    contexts, detail, searches = _follow_up_contexts("zstd", "refers back (“that target”)")
    # the earlier document's chunks first (it has one), then the question's own best from elsewhere
    assert [c["chunk_id"] for c in contexts] == ["zstd:h:52", "make:h:50"]
    assert contexts[0]["matched_by"] == ["earlier_document"]
    assert "the earlier turn's document zstd gives the contexts" in detail
    # searched with the earlier question beside it (retrieval only), deeper than top_k
    assert ("What does the make check target run? Which build system does zstd use?", 10, "hybrid") in searches
    # even a document the question's own search does not find: a question that points back keeps the topic
    contexts, _, _ = _follow_up_contexts("chunking", "pronoun")
    assert contexts[0]["chunk_id"] == "chunking:h:53"


def test_a_follow_ups_search_of_the_earlier_document_is_embedded_in_the_questions_batch():
    # one embedding call for the question and its search of the earlier document, not one each
    loop = make_loop(TARGETS)
    question = "What does the make check target run?"
    loop.submit(question, top_k=2)
    follows = {"document_id": "zstd", "leans": "pronoun", "earlier_question": "Which build system does zstd use?"}
    loop.state.update(state_collections.QUERIES, "q1", lambda doc: {**doc, "follows": follows})
    calls: list[list[str]] = []
    embed = loop.deps.embedder.embed
    loop.deps.embedder.embed = lambda texts, *a, **kw: calls.append(list(texts)) or embed(texts, *a, **kw)
    loop.deliver(_message(loop, question))
    assert calls == [[question, f"{question} Which build system does zstd use?"]]


def test_a_question_that_only_opens_with_and_leads_with_the_earlier_document_when_its_own_search_finds_it():
    contexts, detail, _ = _follow_up_contexts("zstd", "connective")
    assert contexts[0]["chunk_id"] == "zstd:h:52" and "make:h:50" in [c["chunk_id"] for c in contexts]
    assert "the earlier turn's document zstd leads (the question's own search finds it too)" in detail
    plain, _, _ = _follow_up_contexts(None)
    contexts, detail, _ = _follow_up_contexts("chunking", "connective")
    assert [c["chunk_id"] for c in contexts] == [c["chunk_id"] for c in plain]
    assert "the earlier turn's document chunking is not among the question's own best: a new topic" in detail


# A question whose form does not lean on the earlier turn ("unmarked"): its words decide, not its wording.
RELEASES = [
    chunk(60, "Release 2.4", "Release 2.4 fixes a crash of the unpacker on crafted archives. The crash affects "
          "only 64-bit ARM systems; other systems were not affected.", doc="tarkit"),
    chunk(61, "Outage report", "The mirror outage affected several download servers for two days.", doc="mirrors"),
    chunk(62, "Shell defaults", "New accounts get /bin/sh as their login shell unless the shell option says "
          "otherwise.", doc="accounts"),
]


def _unmarked_contexts(question, document):
    loop = make_loop(RELEASES)
    loop.submit(question, top_k=2)
    follows = {"document_id": document, "leans": "unmarked", "earlier_question": "Which release fixed the crash?"}
    loop.state.update(state_collections.QUERIES, "q1", lambda doc: {**doc, "follows": follows})
    loop.deliver(_message(loop, question))
    return loop.record()["iterations"][0]["contexts"], loop.record()["events"][-1]["detail"]


def test_an_unmarked_question_is_read_from_the_earlier_document_when_it_holds_the_questions_words():
    # "Which systems were affected?" says nothing of the release, yet only its document says which systems
    contexts, detail = _unmarked_contexts("Which systems were affected?", "tarkit")
    assert contexts[0]["chunk_id"] == "tarkit:h:60"
    assert "the earlier turn's document tarkit gives the contexts (a chunk of it holds as many" in detail


def test_an_unmarked_question_on_another_topic_keeps_its_own_contexts():
    plain, _ = _unmarked_contexts("Which login shell do new accounts get?", "nowhere")
    contexts, detail = _unmarked_contexts("Which login shell do new accounts get?", "tarkit")
    assert contexts[0]["chunk_id"] == "accounts:h:62" == plain[0]["chunk_id"]
    assert "the earlier turn's document tarkit holds fewer of the question's words than another: a new topic" in detail



def test_a_context_carries_its_chunks_section_heading_only_where_it_has_one():
    import dataclasses

    headed = dataclasses.replace(CORPUS[0], heading="Frob 2.3.0 > Bug fixes")
    fused = fuse([QueryHits("question", "q", [ScoredChunk(headed, 0.9), ScoredChunk(CORPUS[1], 0.8)])], top_k=2)
    assert fused[0]["heading"] == "Frob 2.3.0 > Bug fixes"
    assert "heading" not in fused[1]  # a chunk without one (an index written before): the context as before
