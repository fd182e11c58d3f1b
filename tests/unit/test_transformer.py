"""The transformer stage: iteration 0 from the question, iteration n+1 from a grade."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.transformer.handler import is_date_only, refinement_without_model, shown_query
from shared.contract import state_collections
from shared.contract.messages import (
    QuerySubmitted,
    QueryTransformed,
)
from shared.contract.ports import RefineRequest, Transformation
from shared.query.record import QueryRecord
from shared.query.state import fail_query
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, make_loop, weak_grade


def _transformed(loop):
    """Each published hop with the query and sub-queries it sent the retriever (in the record)."""
    record = QueryRecord.from_doc(loop.record())
    return [SimpleNamespace(iteration=m.iteration, query=record.entry(m.iteration).query,
                            sub_queries=record.entry(m.iteration).sub_queries)
            for m in loop.publisher.of_type(QueryTransformed)]


def test_iteration_zero_is_recorded_and_published():
    llm = ScriptedLLM(transforms=[Transformation(
        "CUDA (Compute Unified Device Architecture) kernels",
        ["What is CUDA?", "How are kernels launched?", "what is cuda?", "x", "What are grids?",
         "What are blocks?", "What are warps?", "What are streams?"],
    )])
    loop = make_loop(CORPUS, llm)
    loop.submit("CUDA kernels")
    loop.deliver(QuerySubmitted(query_id="q1"))

    (message,) = _transformed(loop)
    assert message.iteration == 0
    assert message.query == "CUDA (Compute Unified Device Architecture) kernels"
    # duplicates (case-insensitive) and too-short ones dropped, capped at five
    assert message.sub_queries == ["What is CUDA?", "How are kernels launched?", "What are grids?",
                                   "What are blocks?", "What are warps?"]
    record = loop.record()
    assert record["status"] == "running" and record["current_query"] == message.query
    assert record["model_calls"] == 1
    assert record["iterations"][0]["transform_source"] == "model"
    assert "transformer" in record["iterations"][0]["timings"]
    assert [e["type"] for e in record["events"]] == ["submitted", "transformed"]


def test_redelivery_changes_nothing_but_republishes():
    loop = make_loop(CORPUS)
    loop.submit("what is reciprocal rank fusion")
    loop.deliver(QuerySubmitted(query_id="q1"))
    before = loop.record()
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert loop.record() == before
    assert loop.llm.count("transform") == 1
    first, second = _transformed(loop)
    assert first == second


def test_an_empty_transformer_reply_keeps_the_original_question():
    loop = make_loop(CORPUS, ScriptedLLM(transforms=[Transformation(rewritten="  ")]))
    loop.submit("what is BM25")
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert _transformed(loop)[0].query == "what is BM25"
    record = loop.record()
    assert record["iterations"][0]["transform_source"].startswith("fallback")
    assert record["model_fallbacks"] == 1


def test_a_failing_model_keeps_the_original_question():
    loop = make_loop(CORPUS, ScriptedLLM(transforms=[TimeoutError("model timed out")]))
    loop.submit("what is BM25")
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert _transformed(loop)[0].query == "what is BM25"
    assert loop.record()["model_calls"] == 1


def test_a_date_only_rewrite_is_refused():
    loop = make_loop(CORPUS, ScriptedLLM(transforms=[Transformation(rewritten="November 2026")]))
    loop.submit("latest CUDA news")
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert _transformed(loop)[0].query == "latest CUDA news"
    assert is_date_only("news from November 2026") and not is_date_only("CUDA news November 2026")


def test_no_model_call_once_the_budget_is_spent():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25", max_model_calls=1)
    loop.state.update(state_collections.QUERIES, "q1", lambda d: {**d, "model_calls": 1})
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert loop.llm.count("transform") == 0
    assert _transformed(loop)[0].query == "what is BM25"


def test_a_terminal_query_is_ignored():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    fail_query(loop.state, "q1", "cancelled", loop.clock.now())
    loop.deliver(QuerySubmitted(query_id="q1"))
    assert loop.publisher.messages == [] and loop.llm.calls == []


def _graded_iteration_zero(loop, grade):
    loop.deliver(QuerySubmitted(query_id="q1"))
    loop.llm.grades.append(grade)
    return loop.run_up_to("transformer", loop.publisher.of_type(QueryTransformed)[-1])


def test_refine_writes_the_next_iteration_from_the_grade():
    llm = ScriptedLLM(transforms=[Transformation("rank fusion", ["What is BM25?", "What is dense retrieval?"])],
                      refines=["rank fusion of BM25 and dense scores"])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does rank fusion work")
    graded = _graded_iteration_zero(loop, weak_grade(missing=["scores"]))
    assert graded.decision == "refine"
    # the graded message reaches the transformer and the synthesizer; only the transformer acts on refine
    loop.deliver(graded)

    message = _transformed(loop)[-1]
    assert (message.iteration, message.query) == (1, "rank fusion of BM25 and dense scores")
    assert message.sub_queries == ["What is BM25?", "What is dense retrieval?"]
    (_, request), = [c for c in llm.calls if c[0] == "refine"]
    assert request == RefineRequest("how does rank fusion work", "rank fusion", "weak", ["scores"], ("rank fusion",))
    record = loop.record()
    assert record["iteration"] == 1 and record["iterations"][1]["refined_from"] == 0
    assert record["events"][-1]["type"] == "refined" and record["status"] == "running"


def test_refine_without_a_working_model_appends_missing_aspects():
    loop = make_loop(CORPUS, ScriptedLLM(refines=[ConnectionError("down")]))
    loop.submit("how does rank fusion work")
    graded = _graded_iteration_zero(loop, weak_grade(missing=["BM25 scores", "normalisation"]))
    loop.deliver(graded)
    assert _transformed(loop)[-1].query == "how does rank fusion work BM25 scores normalisation"
    assert loop.record()["iterations"][1]["transform_source"] == "fallback: model call failed"


def test_other_decisions_are_left_to_the_synthesizer():
    loop = make_loop(CORPUS)
    loop.submit("what is BM25")
    graded = _graded_iteration_zero(loop, weak_grade())
    accepted = graded.model_copy(update={"decision": "accept"})
    published = len(loop.publisher.messages)
    from services.transformer.handler import handle

    handle(accepted, loop.deps)
    assert len(loop.publisher.messages) == published


def test_refinement_rule_without_model():
    request = RefineRequest("what is RRF", "what is RRF fusion", "weak", [])
    assert refinement_without_model(request) == "what is RRF fusion"
    request = RefineRequest("what is RRF", "x", "weak", ["rank lists", "RRF"])
    assert refinement_without_model(request) == "what is RRF rank lists"


def test_time_words_become_a_date_filter_unless_the_setting_turns_it_off():
    from shared.contract.config import Settings, load_settings

    rewrite = Transformation("latest CUDA news November 2026")
    loop = make_loop(CORPUS, ScriptedLLM(transforms=[rewrite]))
    loop.submit("What is the latest CUDA news?")
    loop.deliver(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["time_filter"]["phrase"] == "latest" and record["filters"]["since"]
    assert _transformed(loop)[0].query == "latest CUDA news"  # the date is a filter, not words

    off = make_loop(CORPUS, ScriptedLLM(transforms=[rewrite]), settings=Settings(time_filter=False))
    off.submit("What is the latest CUDA news?")
    off.deliver(QuerySubmitted(query_id="q1"))
    record = off.record()
    assert "time_filter" not in record and "filters" not in record
    assert _transformed(off)[0].query == "latest CUDA news November 2026"  # the old proxy, words only
    assert load_settings({"RAGBUS_TIME_FILTER": "0"}).time_filter is False
    assert load_settings({}).time_filter is True


@pytest.mark.parametrize(("typed", "searched"), [
    ("What is the <b>quill</b> buffer size?", "What is the quill buffer size?"),
    ('Which quill port? <img src="http://127.0.0.1:9/x"> [docs](javascript:alert(1))', "Which quill port? docs"),
    ("Which systems can be named in a Quill-<type> field?", "Which systems can be named in a Quill-<type> field?"),
    ("Can quills compare with <?", "Can quills compare with <?"),  # only spaced by the sanitiser: as typed
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),  # nothing else to search for
])
def test_the_query_searched_and_shown_is_the_question_without_its_markup(typed, searched):
    assert shown_query(typed) == searched
