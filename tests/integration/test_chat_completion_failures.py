"""/v1/chat/completions when the question is not answered, through the `openai` SDK: a query that
runs out of time (504, and mid-stream an error event the SDK raises, after keep-alives), one that
fails (500), a bus that takes no question (503), all in OpenAI's error shape. The loop's stages are
scripted (tests/scripted_loop.py); the gateway is served by uvicorn on loopback."""

from __future__ import annotations

import httpx
import openai
import pytest

from services.gateway import openai_compat, serve
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import RetryableError
from shared.query.state import fail_query
from tests.integration.test_gateway_http import make_deps

QUESTION = [{"role": "user", "content": "How does BM25 rank documents?"}]


def _client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=30)


@pytest.fixture
def hanging(tmp_path):
    deps = make_deps(tmp_path, Settings(home=tmp_path, query_timeout_s=1.0), hang=True)
    server = serve(deps, "127.0.0.1", 0)
    yield deps, server
    server.stop()


def test_a_question_out_of_time_is_a_504(hanging):
    deps, server = hanging
    with pytest.raises(openai.APIStatusError) as late:
        _client(server).chat.completions.create(model="ragbus", messages=QUESTION)
    assert late.value.status_code == 504
    assert (late.value.body["type"], late.value.body["code"]) == ("server_error", "timed_out")
    (record,) = deps.state.list(state_collections.QUERIES)
    assert record["status"] == "timed_out" and record["id"] in late.value.body["message"]


def test_a_streamed_question_out_of_time_keeps_alive_then_ends_with_an_error_event(hanging, monkeypatch):
    _, server = hanging
    monkeypatch.setattr(openai_compat, "KEEPALIVE_S", 0.2)
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", timeout=30,
                      json={"model": "ragbus", "messages": QUESTION, "stream": True}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        raw = "".join(response.iter_text())
    assert raw.count(": keepalive") >= 2 and raw.endswith("data: [DONE]\n\n")
    stream = _client(server).chat.completions.create(model="ragbus", messages=QUESTION, stream=True)
    with pytest.raises(openai.APIError) as late:
        list(stream)
    assert late.value.body["code"] == "timed_out" and "not answered in time" in late.value.message


def test_a_failed_question_is_a_500_naming_the_reason(tmp_path):
    state = SqliteStateStore(tmp_path / "state.db")
    clock = SystemClock()

    class FailingStage:  # the first stage fails the query, as a stage does on a permanent error
        def publish(self, message, attributes=None):
            fail_query(state, message.query_id, "the model server refused the transform", clock.now())
            return "1"

    server = serve(Deps(Settings(home=tmp_path), publisher=FailingStage(), state=state, clock=clock), "127.0.0.1", 0)
    try:
        with pytest.raises(openai.InternalServerError) as failed:
            _client(server).chat.completions.create(model="ragbus", messages=QUESTION)
    finally:
        server.stop()
    assert failed.value.status_code == 500 and failed.value.body["code"] == "query_failed"
    assert "the model server refused the transform" in failed.value.body["message"]


def test_a_bus_that_takes_no_question_is_a_503_to_retry(tmp_path):
    deps = make_deps(tmp_path, fail_publish=RetryableError("pubsub unavailable"))
    server = serve(deps, "127.0.0.1", 0)
    try:
        response = httpx.post(f"{server.url}/v1/chat/completions", json={"model": "ragbus", "messages": QUESTION},
                              timeout=30)
    finally:
        server.stop()
    assert response.status_code == 503 and response.headers["retry-after"] == "2"
    error = response.json()["error"]
    assert error["type"] == "server_error" and "pubsub unavailable" in error["message"]
