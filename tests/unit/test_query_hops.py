"""The loop's hops: one generic message whose topic is the producing stage's, each stage's consumed
type read from the registry and checked against its handler, and old shapes still readable."""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from shared.contract import messages
from shared.contract.messages import (
    ContextsRetrieved,
    QueryGraded,
    QueryHop,
    QueryTransformed,
    decode,
    encode,
    hop_message,
)
from shared.runtime.query_steps import check_consumed, consumed_annotation
from shared.runtime.stages import DECLARED, STAGE_BY_NAME, STAGES, Stage, linked

pytestmark = pytest.mark.unit


def _steps(stage):
    module = importlib.import_module(stage.handler.partition(":")[0])
    return getattr(module, "STEPS", None) or (module.STEP,)


@pytest.mark.parametrize("name", [s.name for s in STAGES if s.group == "query"])
def test_each_query_handler_consumes_what_the_registry_delivers_and_says_so(name):
    stage = STAGE_BY_NAME[name]
    steps = _steps(stage)
    assert {step.consumes.TOPIC for step in steps} == {t for t, _ in stage.consumes}
    for step in steps:
        annotated = consumed_annotation(step.run)
        assert isinstance(annotated, type) and issubclass(step.consumes, annotated), (name, annotated)
        if stage.after and step.consumes.TOPIC == STAGE_BY_NAME[stage.after].hop_topic:
            assert step.after == stage.after  # it waits for the stage it follows


def test_a_handler_annotating_another_message_than_the_registry_delivers_is_refused():
    grader = STAGE_BY_NAME["grader"]
    delivered = hop_message(STAGE_BY_NAME[grader.after].hop_topic)

    def grade(record, message: QueryGraded, ports):  # the grader is delivered the hop of the stage it follows
        return None

    with pytest.raises(TypeError, match=f"grade takes QueryGraded, but the registry delivers {delivered.__name__}"):
        check_consumed(grader, delivered, grade)
    with pytest.raises(TypeError, match="consumes QueryGraded"):
        check_consumed(grader, QueryGraded, grade)


def test_a_stage_following_another_consumes_its_hop_and_the_hop_names_the_topic(monkeypatch):
    monkeypatch.setattr(messages, "MESSAGE_TYPES", dict(messages.MESSAGE_TYPES))  # the new hop stays here
    grader = STAGE_BY_NAME["grader"]
    before = STAGE_BY_NAME[grader.after]
    assert before.hop_topic in before.publishes
    assert [t for t, _ in grader.consumes] == [before.hop_topic]
    assert STAGE_BY_NAME["retriever"].hop_topic == ContextsRetrieved.TOPIC
    assert hop_message("query-transformed") is QueryTransformed and issubclass(QueryTransformed, QueryHop)
    # a stage the registry puts before the grader: the grader then consumes its hop, the topic its name's
    inserted = Stage("throwaway_probe", "query", "pubsub", "looks at the contexts", after=grader.after,
                     handler="throwaway.handler:handle")
    declared = []
    for s in DECLARED:
        declared += [inserted, replace(s, after="throwaway_probe")] if s.name == "grader" else [s]
    by_name = {s.name: s for s in linked(tuple(declared))}
    assert by_name["throwaway_probe"].consumes == ((before.hop_topic, 2),)
    assert by_name["throwaway_probe"].publishes == ("throwaway-probe-done",)
    assert [t for t, _ in by_name["grader"].consumes] == ["throwaway-probe-done"]
    assert hop_message("throwaway-probe-done").__name__ == "ThrowawayProbeDone"
    assert "ThrowawayProbeDone" in messages.MESSAGE_TYPES


def test_old_shapes_in_flight_across_a_deploy_are_read():
    old = {"query_id": "q1", "iteration": 1, "query": "BM25 ranking", "sub_queries": ["What is BM25?"]}
    message = decode(b'{"query_id": "q1", "iteration": 1, "query": "BM25 ranking", "sub_queries": []}',
                     {"type": "QueryTransformed", "schema_version": "1"})
    assert message == QueryTransformed(query_id="q1", iteration=1)
    assert decode(encode(QueryTransformed(**{k: old[k] for k in ("query_id", "iteration")}))[0],
                  {"type": "QueryTransformed", "schema_version": "2"}) == message
    retrieved = decode(b'{"query_id": "q1", "iteration": 0, "context_count": 3}',
                       {"type": "ContextsRetrieved", "schema_version": "1"})
    assert retrieved == ContextsRetrieved(query_id="q1", iteration=0)
    body, attributes = encode(retrieved)
    assert attributes["schema_version"] == "2" and body == b'{"query_id":"q1","iteration":0}'
