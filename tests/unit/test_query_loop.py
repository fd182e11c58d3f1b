"""The four query-loop handlers wired together, messages pumped by hand: every query ends."""

from __future__ import annotations

from shared.contract.messages import (
    AnswerReady,
    QueryGraded,
    QuerySubmitted,
    QueryTransformed,
    encode,
)
from shared.contract.ports import Transformation
from shared.runtime.dispatch import Disposition, handle_delivery, record_dead_letter
from shared.runtime.stages import QUERY_STAGES, consumers_of
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, good_grade, make_loop, weak_grade


def _event_types(record):
    return [(e["stage"], e["type"]) for e in record["events"]]


def test_a_question_the_corpus_answers_is_answered_by_the_local_model():
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit("How does BM25 rank documents by term frequency?")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["status"] == "answered", record["events"]
    assert record["outcome"] in {"answered", "answered_with_caveat"}
    assert "BM25 ranks documents by term frequency" in record["answer"]
    assert record["citations"] and record["citations"][0]["url"].startswith("https://example.org/")
    events = _event_types(record)
    assert events[0] == ("gateway", "submitted")
    # each query stage once, in the registry's order (one added between them changes nothing here)
    assert [stage for stage, _ in events[1:len(QUERY_STAGES)]] == [s for s in QUERY_STAGES if s != "synthesizer"]
    assert [e for e in events if e in {("transformer", "transformed"), ("retriever", "retrieved"),
                                       ("grader", "graded")}] == [("transformer", "transformed"),
                                                                  ("retriever", "retrieved"), ("grader", "graded")]
    assert _event_types(record)[-1] == ("synthesizer", "answered")
    assert loop.publisher.of_type(AnswerReady)[-1].outcome == record["outcome"]


def test_a_weak_first_grade_is_refined_then_answered():
    llm = ScriptedLLM(grades=[weak_grade(0.4, missing=["saturation"]), good_grade(0.8)])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["outcome"] == "answered" and len(record["iterations"]) == 2
    assert record["best_iteration"] == 1
    assert [m.iteration for m in loop.publisher.of_type(QueryTransformed)] == [0, 1]
    assert [m.decision for m in loop.publisher.of_type(QueryGraded)] == ["refine", "accept"]
    assert ("transformer", "refined") in _event_types(record)
    assert record["model_calls"] == 5  # transform, grade, refine, grade, synthesize
    # every query stage times its part of an iteration; the synthesizer runs once, after the last
    assert all(set(i["timings"]) == set(QUERY_STAGES) - {"synthesizer"} for i in record["iterations"][:1])


def test_every_iteration_weak_ends_exhausted_with_a_caveat():
    # the question's best chunk leads each iteration, each refinement adds a different second one,
    # so every iteration is worth grading
    # (each refinement raises the grade, so each earns its round, and none reaches the thresholds)
    llm = ScriptedLLM(grades=[weak_grade(0.3), weak_grade(0.45), weak_grade(0.4)],
                      refines=["embedding vectors cosine similarity", "Compute Unified Device Architecture kernels GPU grid"])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work", top_k=2)
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert len(record["iterations"]) == 3 and record["best_iteration"] == 1
    assert record["outcome"] == "answered_with_caveat" and record["answered_from_iteration"] == 1


def test_a_question_outside_the_corpus_is_not_answerable():
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit("What is the capital of Peru?")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["outcome"] == "not_answerable" and record["citations"] == []
    assert len(record["iterations"]) == 1  # stopped early, no iterations spent
    assert loop.publisher.of_type(QueryGraded)[-1].decision == "abstain"


def test_a_crashing_stage_is_dead_lettered_and_the_query_fails_with_the_reason():
    loop = make_loop(CORPUS)
    loop.submit("how does BM25 work")
    loop.deliver(QuerySubmitted(query_id="q1"))
    message = loop.publisher.of_type(QueryTransformed)[-1]

    def broken(texts):
        raise MemoryError("embedder ran out of memory")

    loop.embedder.embed = broken
    data, attributes = encode(message)
    (consumer,) = consumers_of("retriever")
    result = handle_delivery(consumer, data, attributes, loop.deps, attempt=5)
    assert result.disposition is Disposition.RETRY
    record_dead_letter(loop.deps, consumer, data, attributes, result.error, attempts=5, message_id="m1")

    record = loop.record()
    assert record["status"] == "failed" and record["outcome"] == "failed"
    assert "retriever gave up" in record["error"] and "embedder ran out of memory" in record["error"]
    # a late delivery of anything for this query now changes nothing
    loop.embedder.embed = type(loop.embedder)().embed
    loop.deliver(message)
    assert loop.record() == record


def test_events_read_as_words_and_each_decision_names_the_rule_it_follows(capsys):
    # issue 36.5: "grounded True" leaked into the event stream; "score 0.79, refine" then "0.72, accept"
    # did not say that the 0.79 was not grounded
    import re

    from shared.query.record import QueryRecord
    from shared.tools.console import print_answer

    llm = ScriptedLLM(grades=[weak_grade(0.8, missing=["saturation"]), good_grade(0.7)])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    for event in record["events"]:
        assert not re.search(r"\b(?:True|False|None)\b|\[\]|\{'", event.get("detail") or ""), event
    print_answer(QueryRecord.from_doc(record))
    printed = capsys.readouterr().out
    first, second = (line for line in printed.splitlines() if line.strip().startswith("iteration"))
    assert "refine" in first and re.search(r"\((?:.*<.*|.*not grounded.*)\)", first), first
    assert "accept" in second and "(" not in second.partition(",")[0], second


def test_a_refinement_that_brings_nothing_new_ends_the_loop_without_searching_again():
    # the refined query is the one iteration 1 searched (a model that can only restate the question):
    # searching it again would retrieve the same contexts, so the loop ends at the grade it has
    llm = ScriptedLLM(grades=[weak_grade(0.4, missing=[])], refines=["How does BM25 work"])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["status"] == "answered" and len(record["iterations"]) == 1
    assert [m.iteration for m in loop.publisher.of_type(QueryTransformed)] == [0]
    assert [(m.iteration, m.decision) for m in loop.publisher.of_type(QueryGraded)] == [(0, "refine"), (0, "exhausted")]
    assert record["iterations"][0]["decision"] == "exhausted" and record["answered_from_iteration"] == 0
    assert record["outcome"] == "answered_with_caveat"  # the grade never passed: as an exhausted loop ends
    assert llm.count("grade") == 1 and llm.count("refine") == 1
    assert record["model_calls"] == 4  # transform, grade, refine, synthesize
    refined = [e for e in record["events"] if e["type"] == "refined"]
    assert len(refined) == 1 and "nothing new" in refined[0]["detail"] and "iteration 1" in refined[0]["detail"]
    assert _event_types(record)[-1] == ("synthesizer", "answered")


def test_a_refinement_new_only_in_word_order_case_and_spacing_is_nothing_new():
    llm = ScriptedLLM(transforms=[Transformation("BM25  term frequency", ["What is BM25?"])],
                      grades=[weak_grade(0.4)], refines=["frequency of the term, bm25"])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 weigh term frequency")
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert len(record["iterations"]) == 1 and record["iterations"][0]["decision"] == "exhausted"
    assert record["status"] == "answered"


def test_a_refinement_that_ended_the_loop_goes_to_the_synthesizer_though_an_empty_entry_was_timed():
    """An entry for the next iteration holding only a timing (no query) is not a new iteration: the ended one is
    sent on; before, the empty entry went to the retriever and the query waited for its deadline."""
    from services.transformer.handler import refined_next
    from shared.contract.messages import QueryGraded
    from shared.query.record import Iteration, QueryRecord

    record = QueryRecord(id="q1", status="running", original_query="How big is the buffer?",
                         deadline="2026-11-30T00:02:00+00:00", created_at="2026-11-30T00:00:00+00:00",
                         updated_at="2026-11-30T00:00:00+00:00",
                         iterations=[Iteration(iteration=0, query="How big is the buffer?", decision="exhausted"),
                                     Iteration(iteration=1, timings={"transformer": 0.6})])
    sent = refined_next(record, 1)
    assert isinstance(sent, QueryGraded) and (sent.iteration, sent.decision) == (0, "exhausted")
    record.iterations[1].query = "How large is the buffer?"
    assert not isinstance(refined_next(record, 1), QueryGraded)
