"""A model the API refuses ends the query `failed`, loudly; a transient failure falls back, visibly."""

from __future__ import annotations

import logging

import pytest

from shared.contract import state_collections
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.messages import AnswerReady, QuerySubmitted
from shared.query.model_health import model_health
from tests.support import metric_points
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, make_loop


def _refused(operation: str, status: int = 404) -> ModelUnusable:
    return ModelUnusable(f"Gemini model 'scripted-1' is unusable: {operation} was refused with HTTP {status}",
                         model="scripted-1", status=status, operation=operation)


@pytest.mark.parametrize("stage, llm", [
    ("transformer", ScriptedLLM(transforms=[_refused("transform")])),
    ("grader", ScriptedLLM(grades=[_refused("grade", 403)])),
    ("synthesizer", ScriptedLLM(answers=[_refused("synthesize", 400)])),
])
def test_a_refused_model_fails_the_query_instead_of_falling_back(stage, llm, caplog, monkeypatch):
    counted = []
    monkeypatch.setattr("shared.observability.metrics.model_unusable", lambda *a: counted.append(a))
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 rank documents", top_k=2)
    with caplog.at_level(logging.ERROR, logger="ragbus.model"):
        loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert (record["status"], record["outcome"]) == ("failed", "failed")
    assert record["error"].startswith(f"{stage}: ") and "scripted-1" in record["error"] and "HTTP" in record["error"]
    assert record["answer"] is None and not record.get("fallbacks")
    assert not loop.publisher.of_type(AnswerReady)
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "scripted-1" in logged.getMessage() and "trace" in logged.getMessage()
    assert counted and counted[0][0] == "scripted-1" and counted[0][2] == stage
    health = model_health(loop.deps.state, "scripted-1")
    assert health["usable"] is False and health["stage"] == stage and "HTTP" in health["reason"]
    # no dead letter: the message was handled, the configuration is what is wrong
    assert loop.deps.state.count(state_collections.DEAD_LETTERS) == 0


def test_a_later_answer_from_the_same_model_clears_the_record():
    loop = make_loop(CORPUS, ScriptedLLM(transforms=[_refused("transform")]))
    loop.submit("how does BM25 rank documents", top_k=2)
    loop.pump(QuerySubmitted(query_id="q1"))
    assert model_health(loop.deps.state, "scripted-1")["usable"] is False
    loop.submit("how does BM25 rank documents", query_id="q2", top_k=2)
    loop.pump(QuerySubmitted(query_id="q2"))
    assert loop.record("q2")["outcome"] in {"answered", "answered_with_caveat"}
    assert model_health(loop.deps.state, "scripted-1") == {"model": "scripted-1", "usable": True}


def test_transient_failures_fall_back_and_every_fallback_is_in_the_record():
    llm = ScriptedLLM(transforms=[RetryableError("Gemini transform failed with 503")],
                      grades=[RetryableError("Gemini grade failed with 429")],
                      answers=[RetryableError("Gemini synthesize failed with 500")])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 rank documents", top_k=2, max_iterations=0)
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["status"] == "answered"
    stages = [(f["stage"], f["iteration"]) for f in record["fallbacks"]]
    assert stages == [("transformer", 0), ("grader", 0), ("synthesizer", 0)]
    reasons = [f["reason"] for f in record["fallbacks"]]
    assert "503" in reasons[0] and "429" in reasons[1] and "500" in reasons[2]
    assert model_health(loop.deps.state, "scripted-1")["usable"] is True


def test_the_refusal_is_counted_by_an_opentelemetry_counter():
    import shared.observability.metrics as m

    points = metric_points("ragbus.model.unusable", lambda: m.model_unusable("gemini-x", 404, "grader"))
    assert points and points[0].attributes == {"model": "gemini-x", "status": "404", "stage": "grader"}
