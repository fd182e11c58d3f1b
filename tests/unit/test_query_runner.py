"""The query-step runner: live record, duplicates, preconditions, one transaction, publishing; ask_model's rules."""

from __future__ import annotations

import pytest

from shared.contract import state_collections
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.contract.messages import ContextsRetrieved, QueryTransformed
from shared.query.record import QueryRecord
from shared.query.runner import Change, QueryStep, ask_model, handle_query_message, run_step
from shared.query.state import apply_stage, read_record
from tests.unit.loop_fakes import make_loop


def _step(runs: list[int], **options) -> QueryStep:
    def run(record, message, ports):
        runs.append(message.iteration)

        def change(r: QueryRecord) -> None:
            r.ensure_entry(message.iteration).contexts = [{"chunk_id": "c1"}]

        return Change(change, "checked", "one context", model_calls=1, annotations={"context_count": 1})

    def publishes(record, iteration):
        return ContextsRetrieved(query_id=record.id, iteration=iteration)

    return QueryStep(stage="checker", consumes=QueryTransformed, run=run, publishes=publishes, **options)


def _message(iteration: int = 0) -> QueryTransformed:
    return QueryTransformed(query_id="q1", iteration=iteration)


def test_a_step_records_once_and_a_redelivery_only_publishes_again():
    loop = make_loop()
    loop.submit("what is BM25")
    runs: list[int] = []
    step = _step(runs)
    run_step(step, _message(), loop.deps)
    run_step(step, _message(), loop.deps)
    record = read_record(loop.state, "q1")
    assert runs == [0]  # the second delivery did not run the step again
    assert record.stages_done == ["0/checker"] and record.model_calls == 1
    assert [e["type"] for e in record.events if e["stage"] == "checker"] == ["checked"]
    assert "checker" in record.entry(0).timings
    published = loop.publisher.of_type(ContextsRetrieved)
    assert [m.iteration for m in published] == [0, 0]


def test_a_step_waits_for_the_stage_it_names_and_skips_an_ended_query():
    loop = make_loop()
    loop.submit("what is BM25")
    runs: list[int] = []
    step = _step(runs, after="earlier")
    with pytest.raises(RetryableError, match="earlier has not recorded iteration 0"):
        run_step(step, _message(), loop.deps)
    apply_stage(loop.state, "q1", iteration=0, stage="earlier", event_type="e", detail="", now=loop.clock.now(),
                change=lambda r: None)
    run_step(step, _message(), loop.deps)
    assert runs == [0]
    loop.state.update(state_collections.QUERIES, "q1", lambda doc: {**doc, "status": "failed"})
    run_step(step, _message(1), loop.deps)
    assert runs == [0] and not read_record(loop.state, "q1").stage_done(1, "checker")


def test_a_message_of_another_type_or_not_accepted_is_ignored():
    loop = make_loop()
    loop.submit("what is BM25")
    runs: list[int] = []
    handle_query_message((_step(runs, accepts=lambda m: m.iteration == 0),), _message(1), loop.deps)
    handle_query_message((_step(runs),), ContextsRetrieved(query_id="q1", iteration=0), loop.deps)
    assert runs == [] and loop.publisher.messages == []


class _Model:
    model = "m1"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def transform(self):
        if self.error is not None:
            raise self.error
        return "reply"


def test_ask_model_answers_falls_back_spends_no_call_over_budget_and_ends_a_refused_query():
    loop = make_loop(llm=_Model())
    loop.submit("what is BM25")
    record = read_record(loop.state, "q1")
    reply = ask_model(loop.deps, record, "checker", loop.deps.llm.transform, instead="keeping it")
    assert (reply.value, reply.calls, reply.error, reply.spent) == ("reply", 1, None, False)

    loop.deps.override("llm", _Model(TimeoutError("slow")))
    reply = ask_model(loop.deps, record, "checker", loop.deps.llm.transform, instead="keeping it")
    assert (reply.value, reply.calls, reply.error) == (None, 1, "TimeoutError: slow")

    record.model_calls = record.max_model_calls
    reply = ask_model(loop.deps, record, "checker", loop.deps.llm.transform, instead="keeping it")
    assert (reply.value, reply.calls, reply.spent) == (None, 0, True)

    record.model_calls = 0
    loop.deps.override("llm", _Model(ConfigError("no model file")))
    with pytest.raises(ConfigError):
        ask_model(loop.deps, record, "checker", loop.deps.llm.transform, instead="keeping it")

    loop.deps.override("llm", _Model(ModelUnusable("m1 is retired", model="m1", status=404, operation="x")))
    runs: list[int] = []

    def run(record, message, ports):
        ask_model(ports, record, "checker", ports.llm.transform, instead="keeping it")
        runs.append(1)
        return None

    run_step(QueryStep(stage="checker", consumes=QueryTransformed, run=run, publishes=lambda r, i: None),
             _message(), loop.deps)
    ended = read_record(loop.state, "q1")
    assert runs == [] and ended.status == "failed" and "m1 is retired" in ended.error


def test_a_query_handler_s_step_is_read_from_the_registry():
    from services.grader.handler import STEP as GRADER
    from services.synthesizer.handler import STEP as SYNTHESIZER
    from services.transformer.handler import STEPS
    from shared.contract.messages import QueryGraded, QuerySubmitted
    from shared.runtime.query_steps import producer_of, registered_step, stage_handled_by
    from shared.runtime.stages import STAGE_BY_NAME, STAGES

    # the grader waits for whichever stage publishes what the registry delivers to it
    (topic,) = [t for t, _ in STAGE_BY_NAME["grader"].consumes]
    (before,) = [s.name for s in STAGES if topic in s.publishes]
    assert GRADER.consumes.TOPIC == topic and GRADER.after == producer_of(GRADER.consumes) == before
    assert (SYNTHESIZER.stage, SYNTHESIZER.after) == ("synthesizer", "grader")
    submitted, refined = STEPS
    assert (submitted.consumes, submitted.after) == (QuerySubmitted, None)  # the gateway is no query stage
    assert (refined.consumes, refined.after) == (QueryGraded, "grader")
    assert stage_handled_by("services.retriever.handler").name == "retriever"
    with pytest.raises(LookupError, match="tests.unit.test_query_runner is the handler of 0 registered stages"):
        registered_step(__name__, run=lambda r, m, p: None, publishes=lambda r, i: None)
