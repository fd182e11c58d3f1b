"""The grader stage: thresholds applied by the stage, decisions, best iteration, budgets, fallbacks."""

from __future__ import annotations

import pytest

from shared.contract import state_collections
from shared.contract.messages import ContextsRetrieved, QueryGraded
from shared.contract.ports import Grade
from shared.query.state import fail_query
from shared.runtime.dispatch import Disposition
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, chunk, good_grade, make_loop, weak_grade


def _retrieved(loop, iteration=0, query="BM25 ranking"):
    return loop.run_up_to("grader", loop.transformed(query, iteration))


def _grade(loop, grade, iteration=0, query="BM25 ranking"):
    loop.llm.grades.append(grade)
    loop.deliver(_retrieved(loop, iteration, query))
    return loop.publisher.of_type(QueryGraded)[-1]


def test_accept_with_bounded_grading_contexts():
    long_chunks = [chunk(n, f"T{n}", ("BM25 ranking detail. " * 60)) for n in range(20)]
    loop = make_loop(long_chunks)
    loop.submit("what is BM25 ranking", top_k=20)
    graded = _grade(loop, good_grade())
    entry = loop.record()["iterations"][0]
    assert (graded.decision, entry["should_refine"], entry["grade"]["score"]) == ("accept", False, 0.9)
    (_, contexts), = [c for c in loop.llm.calls if c[0] == "grade"]
    assert len(contexts) == 15 and all(len(c.text) <= 500 for c in contexts)
    assert contexts[0].number == 1 and contexts[0].text.startswith("T") and "Published:" not in contexts[0].text
    record = loop.record()
    assert record["best_iteration"] == 0 and record["model_calls"] == 1
    assert record["iterations"][0]["decision"] == "accept"


def test_the_stage_not_the_model_decides_to_refine():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    # scores above the thresholds but not grounded: refine, whatever the model thinks
    graded = _grade(loop, Grade(0.9, 0.9, 0.9, grounded=False, answerable=True))
    assert loop.record()["iterations"][0]["should_refine"] and graded.decision == "refine"
    assert loop.record()["iterations"][0]["failed_thresholds"] == ["not grounded"]


def test_the_record_carries_each_score_as_shown_beside_the_decision():
    """The page and `ragbus ask` show the score the record carries, not one parsed out of a failed rule's
    text: 0.5999 under a threshold of 0.6 reads "0.5999" (two places read "0.60" beside "refine")."""
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    _grade(loop, Grade(0.5999, 0.9, 0.7049, grounded=True, answerable=True))
    entry = loop.record()["iterations"][0]
    assert entry["shown_scores"] == {"score": "0.5999", "relevance": "0.90", "completeness": "0.70"}, entry
    assert entry["failed_thresholds"] == ["score 0.5999 < 0.6"]
    assert "score 0.5999 (relevance 0.90, completeness 0.70, grounded) -> refine" in loop.record()["events"][-1]["detail"]


def test_unanswerable_stops_early():
    loop = make_loop(CORPUS)
    loop.submit("recipe for pancakes")
    graded = _grade(loop, weak_grade(0.05, answerable=False))
    assert graded.decision == "abstain"
    assert "cannot answer" in loop.record()["events"][-1]["detail"]


def test_no_contexts_abstains_without_a_model_call():
    loop = make_loop([])
    loop.submit("anything at all")
    loop.deliver(_retrieved(loop))
    assert loop.publisher.of_type(QueryGraded)[-1].decision == "abstain"
    assert loop.llm.count("grade") == 0


def test_out_of_iterations_is_exhausted_and_the_best_iteration_is_kept():
    loop = make_loop(CORPUS)
    # the question's best context leads every iteration; the second differs with each query
    loop.submit("what is BM25", max_iterations=2, top_k=2)
    assert _grade(loop, weak_grade(0.3), 0).decision == "refine"
    assert _grade(loop, weak_grade(0.45), 1, "embedding vectors cosine similarity").decision == "refine"
    assert loop.record()["best_iteration"] == 1  # the refinement helped
    last = _grade(loop, weak_grade(0.4), 2, "Compute Unified Device Architecture kernels GPU grid")
    assert last.decision == "exhausted"
    record = loop.record()
    assert record["best_iteration"] == 1  # iteration 2 graded worse: the better one is kept
    assert "no refinement left" in record["events"][-1]["detail"]


@pytest.mark.parametrize("score", [0.3, 0.5, 0.505])
def test_a_refinement_no_better_than_the_best_before_it_ends_the_loop(score):
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_iterations=3, top_k=2)
    assert _grade(loop, weak_grade(0.5), 0).decision == "refine"
    graded = _grade(loop, weak_grade(score), 1, "embedding vectors cosine similarity")
    assert graded.decision == "exhausted"  # iterations and budget are left: the refinement showed nothing new
    record = loop.record()
    assert record["best_iteration"] == (1 if score > 0.5 else 0)  # a hair better is still kept as the best
    assert "no better than iteration 1's 0.50" in record["events"][-1]["detail"]


def test_a_refinement_that_raises_the_grade_earns_another_round():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_iterations=3, top_k=2)
    _grade(loop, weak_grade(0.5), 0)
    assert _grade(loop, weak_grade(0.52), 1, "embedding vectors cosine similarity").decision == "refine"


def test_a_later_unanswerable_grade_does_not_abstain_when_an_earlier_one_found_something():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", top_k=2)
    _grade(loop, weak_grade(0.05), 0)
    assert _grade(loop, weak_grade(0.1, answerable=False), 1, "Compute Unified Device Architecture kernels GPU grid").decision == "refine"


def test_a_refinement_that_retrieves_the_same_contexts_stops_the_loop():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_iterations=2)
    assert _grade(loop, weak_grade(0.5), 0).decision == "refine"
    # the refined query finds exactly the same chunks: grading them again cannot help
    again = _grade(loop, weak_grade(0.5), 1, "BM25 ranking again")
    assert again.decision == "exhausted"
    assert "same contexts as iteration 1" in loop.record()["events"][-1]["detail"]


def test_budget_exhaustion_stops_refining():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_model_calls=4)
    loop.state.update(state_collections.QUERIES, "q1", lambda d: {**d, "model_calls": 1})  # the transform
    graded = _grade(loop, weak_grade(0.5))
    assert graded.decision == "exhausted"
    assert "budget" in loop.record()["events"][-1]["detail"]


def test_no_budget_left_means_the_fallback_grade_without_a_call():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_model_calls=1)
    loop.state.update(state_collections.QUERIES, "q1", lambda d: {**d, "model_calls": 1})
    graded = _grade(loop, good_grade())
    assert loop.llm.count("grade") == 0 and graded.decision == "exhausted"
    assert loop.record()["iterations"][0]["grade"]["fallback"] is True


def test_a_model_failure_becomes_the_conservative_fallback_grade():
    loop = make_loop(CORPUS, ScriptedLLM(grades=[ValueError("reply was not JSON: 'Looks good to me'")]))
    loop.submit("what is BM25")
    loop.deliver(_retrieved(loop))
    graded = loop.publisher.of_type(QueryGraded)[-1]
    assert graded.decision == "refine" and loop.record()["iterations"][0]["grade"]["score"] == 0.0
    record = loop.record()
    entry = record["iterations"][0]
    assert entry["grade_source"] == "fallback" and "not JSON" in entry["grade"]["reasoning"]
    assert record["model_fallbacks"] == 1


def test_redelivery_changes_nothing():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    message = _retrieved(loop)
    loop.llm.grades.append(good_grade())
    loop.deliver(message)
    before = loop.record()
    loop.deliver(message)
    assert loop.record() == before and loop.llm.count("grade") == 1
    first, second = loop.publisher.of_type(QueryGraded)
    assert first == second


def test_grading_before_the_contexts_are_stored_is_retried():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    assert loop.deliver(ContextsRetrieved(query_id="q1", iteration=0)) == [Disposition.RETRY]


def test_a_terminal_or_overdue_query_is_left_alone():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    message = _retrieved(loop)
    fail_query(loop.state, "q1", "stopped", loop.clock.now())
    loop.deliver(message)
    assert loop.llm.count("grade") == 0

    loop = make_loop(CORPUS)
    loop.submit("what is BM25", timeout_s=5)
    message = _retrieved(loop)
    loop.clock.advance(6)
    loop.deliver(message)
    assert loop.llm.count("grade") == 0 and loop.record()["status"] == "timed_out"
