"""The typed query record: one conversion to and from the stored document, old records keep loading."""

from __future__ import annotations

import copy
from datetime import UTC

from shared.contract import state_collections
from shared.contract.messages import QuerySubmitted
from shared.query.record import Iteration, QueryRecord
from shared.query.state import StageVerdict, apply_stage
from tests.fakes import FakeClock, InMemoryStateStore
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, good_grade, make_loop, weak_grade

# A record as an earlier build stored it: no expire_at, stages_done or model_fallbacks, a grade
# without "fallback", and fields this build has never heard of (kept as they are).
OLD_RECORD = {
    "id": "old1", "status": "running", "outcome": None, "original_query": "what is bm25",
    "current_query": "bm25 ranking", "iteration": 0, "top_k": 5, "max_iterations": 2,
    "model_calls": 2, "max_model_calls": 12, "created_at": "2026-01-01T00:00:00+00:00",
    "updated_at": "2026-01-01T00:00:01+00:00", "deadline": "2099-01-01T00:00:00+00:00",
    "iterations": [{
        "iteration": 0, "query": "bm25 ranking", "sub_queries": [], "contexts": [{"chunk_id": "c1"}],
        "grade": {"score": 0.4, "relevance": 0.5, "completeness": 0.3, "grounded": True,
                  "answerable": True, "reasoning": "thin", "missing_aspects": ["saturation"]},
        "decision": "refine", "timings": {"grader": 3.0}, "reviewer_note": "kept",
    }],
    "best_iteration": 0, "answer": None, "citations": [], "trace_id": None, "error": None,
    "events": [{"stage": "gateway", "type": "submitted", "at": "2026-01-01T00:00:00+00:00", "iteration": 0}],
    "tenant": "acme",
}


def test_a_record_the_loop_wrote_converts_back_to_the_same_document():
    llm = ScriptedLLM(grades=[weak_grade(0.4, missing=["saturation"]), good_grade(0.8)])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work")
    loop.pump(QuerySubmitted(query_id="q1"))
    stored = loop.record()
    assert stored["status"] == "answered" and len(stored["iterations"]) == 2
    record = QueryRecord.from_doc(stored)
    assert record.to_doc() == stored
    assert list(record.to_doc()) == list(stored)  # same fields, same order
    assert record.entry(1).grade.score == 0.8 and record.best_iteration == 1
    assert record.stage_done(1, "grader") and not record.stage_done(2, "grader")


def test_an_old_record_loads_typed_and_is_written_back_unchanged():
    record = QueryRecord.from_doc(copy.deepcopy(OLD_RECORD))
    assert (record.status, record.model_calls, record.model_calls_left) == ("running", 2, 10)
    assert record.stages_done == [] and record.model_fallbacks == 0 and record.expire_at is None
    entry = record.entry(0)
    assert entry.grade.missing_aspects == ["saturation"] and entry.grade.fallback is False
    assert record.extra == {"tenant": "acme"} and entry.extra == {"reviewer_note": "kept"}
    doc = record.to_doc()
    assert {k: v for k, v in doc.items() if k != "iterations"} == {
        k: v for k, v in OLD_RECORD.items() if k != "iterations"}
    # The grade gains only the field this build writes with its default.
    assert doc["iterations"][0] == {**OLD_RECORD["iterations"][0],
                                    "grade": {**OLD_RECORD["iterations"][0]["grade"], "fallback": False}}


def test_a_stage_advances_an_old_record_and_keeps_what_it_does_not_know():
    state, clock = InMemoryStateStore(), FakeClock()
    state.create(state_collections.QUERIES, "old1", copy.deepcopy(OLD_RECORD))

    def change(record: QueryRecord) -> None:
        record.ensure_entry(1).query = "bm25 saturation"

    result = apply_stage(state, "old1", iteration=1, stage="transformer", event_type="refined", detail="d",
                         now=clock.now(), change=change, model_calls=1)
    assert result.verdict is StageVerdict.RECORDED
    stored = state.get(state_collections.QUERIES, "old1")
    assert stored["tenant"] == "acme" and stored["iterations"][0]["reviewer_note"] == "kept"
    assert stored["model_calls"] == 3 and stored["stages_done"] == ["1/transformer"]
    assert [e["iteration"] for e in stored["iterations"]] == [0, 1]
    assert "sub_queries_used" not in stored["iterations"][1]  # optional fields appear only once set


def test_a_new_record_has_the_documented_shape():
    clock = FakeClock()
    doc = QueryRecord.new("q", "why?", top_k=3, max_iterations=1, max_model_calls=4, now=clock.now(),
                          timeout_s=10, trace_id="t").to_doc()
    assert list(doc) == ["id", "status", "outcome", "original_query", "current_query", "iteration", "top_k",
                         "max_iterations", "model_calls", "max_model_calls", "created_at", "updated_at",
                         "deadline", "expire_at", "iterations", "best_iteration", "answer", "citations",
                         "trace_id", "error", "events"]
    assert (doc["status"], doc["outcome"], doc["model_calls"]) == ("pending", None, 0)


def test_an_iteration_is_written_with_its_base_fields_even_when_empty():
    assert Iteration(iteration=3).to_doc() == {
        "iteration": 3, "query": None, "sub_queries": [], "contexts": [], "grade": None,
        "decision": None, "timings": {}}


def test_a_record_read_from_a_document_shares_no_mutable_part_with_it():
    from datetime import datetime

    doc = QueryRecord.new("q1", "What is BM25?", top_k=5, max_iterations=2, max_model_calls=9,
                          timeout_s=60, retention_days=1, now=datetime(2026, 1, 1, tzinfo=UTC)).to_doc()
    doc["iterations"] = [{"iteration": 0, "contexts": [{"chunk_id": "c1", "spans": [[0, 4]]}],
                          "grade": None, "timings": {}, "custom": {"kept": [1, {"deep": True}]}}]
    doc["custom_top"] = {"nested": [{"x": 1}], "when": (1, 2)}
    before = copy.deepcopy(doc)
    record = QueryRecord.from_doc(doc)
    record.iterations[0].contexts[0]["spans"][0][0] = 99
    record.iterations[0].extra["custom"]["kept"][1]["deep"] = False
    record.extra["custom_top"]["nested"][0]["x"] = 2
    record.events[0]["type"] = "changed"
    written = record.to_doc()
    assert doc == before  # the document read is untouched
    written["iterations"][0]["contexts"][0]["spans"][0][0] = 7
    assert record.iterations[0].contexts[0]["spans"][0][0] == 99  # nor is the record by its document
    assert written["custom_top"]["when"] == (1, 2)
