"""The query record's stage transactions: exactly once, never after the end, timings and events."""

from __future__ import annotations

from shared.contract import state_collections
from shared.query.record import QueryRecord
from shared.query.state import (
    StageVerdict,
    apply_stage,
    fail_query,
    live_record,
    new_query_record,
)
from tests.fakes import FakeClock, InMemoryStateStore

TRANSFORM, GRADE = "transformer", "grader"  # stage names as records store them


def _setup():
    state, clock = InMemoryStateStore(), FakeClock()
    record = new_query_record("q", "what is rrf", top_k=10, max_iterations=2, max_model_calls=5,
                              now=clock.now(), timeout_s=30)
    state.create(state_collections.QUERIES, "q", record)
    return state, clock


def _set_query(record):
    record.ensure_entry(0).query = "rewritten"


def test_a_stage_is_recorded_once_with_its_event_timing_and_model_calls():
    state, clock = _setup()
    first = apply_stage(state, "q", iteration=0, stage=TRANSFORM, event_type="transformed", detail="d",
                        now=clock.now(), change=_set_query, model_calls=1, elapsed_ms=12.5)
    second = apply_stage(state, "q", iteration=0, stage=TRANSFORM, event_type="transformed", detail="d",
                         now=clock.now(), change=_set_query, model_calls=1, elapsed_ms=99)
    assert first.verdict is StageVerdict.RECORDED and first.publish
    assert second.verdict is StageVerdict.DUPLICATE and second.publish and second.reason == "already recorded"
    doc = state.get(state_collections.QUERIES, "q")
    assert doc["status"] == "running"
    assert doc["model_calls"] == 1
    assert doc["iterations"][0]["timings"] == {TRANSFORM: 12.5}
    typed = QueryRecord.from_doc(doc)
    assert typed.stage_done(0, TRANSFORM) and not typed.stage_done(0, GRADE)
    stage_events = [e for e in doc["events"] if e["stage"] == TRANSFORM]
    assert stage_events == [{"stage": TRANSFORM, "type": "transformed", "at": clock.now().isoformat(),
                             "iteration": 0, "detail": "d"}]


def test_an_ended_query_is_not_changed_by_a_stage():
    state, clock = _setup()
    fail_query(state, "q", "boom", clock.now())
    result = apply_stage(state, "q", iteration=0, stage=TRANSFORM, event_type="transformed", detail="d",
                         now=clock.now(), change=_set_query)
    assert result.verdict is StageVerdict.ENDED and not result.publish and "failed" in result.reason
    assert state.get(state_collections.QUERIES, "q")["iterations"] == []


def test_live_record_times_out_an_overdue_query():
    state, clock = _setup()
    assert live_record(state, "q", clock.now()) is not None
    clock.advance(31)
    assert live_record(state, "q", clock.now()) is None
    doc = state.get(state_collections.QUERIES, "q")
    assert doc["status"] == "timed_out" and doc["outcome"] == "timed_out"


def test_best_of_prefers_the_highest_score_and_the_earlier_iteration_on_a_tie():
    doc = {"iterations": [
        {"iteration": 0, "grade": {"score": 0.5}},
        {"iteration": 1, "grade": {"score": 0.7}},
        {"iteration": 2, "grade": {"score": 0.7}},
        {"iteration": 3, "grade": None},
    ]}
    assert QueryRecord.from_doc(doc).best_graded_iteration() == 1
    assert QueryRecord.from_doc({"iterations": []}).best_graded_iteration() is None


def test_change_may_run_twice_without_double_counting():
    """The store may call the transaction function again under contention: it must be pure."""
    state, clock = _setup()

    class RetryingStore(InMemoryStateStore):
        def update(self, collection, key, fn):
            fn(self.get(collection, key))  # a first attempt that loses the race
            return super().update(collection, key, fn)

    store = RetryingStore()
    store.docs = state.docs
    apply_stage(store, "q", iteration=0, stage=TRANSFORM, event_type="t", detail="", now=clock.now(),
                change=_set_query, model_calls=2)
    doc = store.get(state_collections.QUERIES, "q")
    assert doc["model_calls"] == 2 and len(doc["iterations"]) == 1 and len(doc["events"]) == 2


def test_a_stage_on_a_query_that_does_not_exist_ends_without_publishing():
    state, clock = InMemoryStateStore(), FakeClock()
    result = apply_stage(state, "nope", iteration=0, stage=TRANSFORM, event_type="t", detail="",
                         now=clock.now(), change=_set_query)
    assert result.verdict is StageVerdict.ENDED and not result.publish and result.record is None
