"""A slow or overloaded model server on 127.0.0.1 cannot hold a call, a worker or a query past its time.

RAGBUS_OPENAI_TIMEOUT_S is one deadline for the whole call (httpx's own timeouts are per read: a
server sending a byte every half second was never cut off), cut further to the query's remaining
time; a Retry-After that does not fit is not waited out. Under the embedded runtime two such
calls used to hold both transformer workers while a later query timed out behind them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.contract.errors import RetryableError
from shared.contract.ports import NumberedContext
from shared.query.api import submit_query, wait_for_query
from shared.query.call_deadline import note_query_deadline
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from tests.hostile.model_server import MODEL, answer, completion, dribble, model_server, send

CONTEXTS = [NumberedContext(1, "https://example.org/rrf", "Reciprocal rank fusion sums 1/(k + rank).")]
GRADE = {"score": 0.9, "relevance": 0.9, "completeness": 0.9, "grounded": True, "answerable": True,
         "reasoning": "ok", "missing_aspects": []}


def _llm(server, timeout_s: float) -> OpenAICompatibleLanguageModel:
    return OpenAICompatibleLanguageModel(server.url, MODEL, timeout_s=timeout_s)


@pytest.mark.parametrize("behaviour", [
    dribble(0.5),  # headers at once, then the body a byte at a time
    dribble(0.5, headers_first=False),  # the status line and headers a byte at a time
])
def test_a_dribbling_server_is_cut_off_at_the_timeout(behaviour):
    with model_server(default=behaviour) as server:
        llm = _llm(server, timeout_s=2)
        started = time.monotonic()
        with pytest.raises(RetryableError, match="did not finish within its deadline"):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 4  # one deadline, not one per byte
        llm.close()


def test_a_server_that_never_answers_is_cut_off_at_the_timeout():
    def silent(h, body):
        time.sleep(8)

    with model_server(default=silent) as server:
        llm = _llm(server, timeout_s=1.5)
        started = time.monotonic()
        with pytest.raises(RetryableError, match="did not finish"):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 3.5
        llm.close()


def test_the_query_time_left_bounds_a_call_below_the_timeout():
    with model_server(default=dribble(0.3)) as server:
        llm = _llm(server, timeout_s=60)
        now = datetime.now(UTC)
        note_query_deadline((now + timedelta(seconds=1.5)).isoformat(), now)
        started = time.monotonic()
        try:
            with pytest.raises(RetryableError, match="did not finish"):
                llm.grade("q", CONTEXTS)
        finally:
            note_query_deadline((now - timedelta(seconds=1)).isoformat(), now)  # stale: no bound
        assert time.monotonic() - started < 3.5
        llm.close()


@pytest.mark.parametrize("retry_after", ["10", "30", "86400", "Wed, 21 Oct 2099 07:28:00 GMT"])
def test_a_429_storm_with_a_long_retry_after_falls_back_at_once(retry_after):
    def storm(h, body):
        send(h, 429, {"error": {"message": "rate limited"}}, Retry_After=retry_after)

    with model_server(default=storm) as server:
        llm = _llm(server, timeout_s=60)
        started = time.monotonic()
        with pytest.raises(RetryableError, match="asking to retry after"):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 2 and len(server.prompts) == 1
        llm.close()


def test_a_retry_after_beyond_the_time_left_is_not_waited_out():
    def busy(h, body):
        send(h, 503, {"error": {"message": "busy"}}, Retry_After="4")

    with model_server(default=busy) as server:
        llm = _llm(server, timeout_s=3)
        started = time.monotonic()
        with pytest.raises(RetryableError, match="what the call has left"):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 2
        llm.close()


def test_a_short_retry_after_is_still_retried_and_answered():
    with model_server() as server:
        server.then(lambda h, b: send(h, 429, {"error": {"message": "slow down"}}, Retry_After="0"),
                    answer(json.dumps(GRADE)))
        llm = _llm(server, timeout_s=10)
        assert llm.grade("q", CONTEXTS).score == 0.9
        llm.close()


def _fast(h, body):
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    if name.endswith("transform"):
        send(h, 200, completion(json.dumps({"rewritten": "reciprocal rank fusion constant", "sub_queries": []})))
    elif name.endswith("grade"):
        send(h, 200, completion(json.dumps(GRADE)))
    else:
        send(h, 200, completion(json.dumps({"abstained": True, "sentences": []})))


def test_slow_replies_do_not_starve_later_queries_in_the_embedded_runtime(tmp_path):
    with model_server(default=_fast) as server:
        server.then(dribble(1.0, total_s=40), dribble(1.0, total_s=40))  # the first two transform calls
        settings = load_settings({
            "RAGBUS_HOME": str(tmp_path / "home"), "RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": server.url,
            "RAGBUS_OPENAI_MODEL": MODEL, "RAGBUS_OPENAI_TIMEOUT_S": "3", "RAGBUS_QUERY_TIMEOUT_S": "25",
            "RAGBUS_TRACING": "0",
        })
        local = build_local(settings)
        with LocalRuntime(local.deps, local.bus):
            slow = [submit_query(local.deps, f"what is slow question {n}?") for n in range(2)]
            deadline = time.monotonic() + 10
            while len(server.prompts) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            later = submit_query(local.deps, "what constant does reciprocal rank fusion use?")
            started = time.monotonic()
            record = wait_for_query(local.deps, later.id, 30)
            waited = time.monotonic() - started
            ended = [wait_for_query(local.deps, q.id, 30) for q in slow]
        assert record.status == "answered", (record.status, record.error)
        assert record.iterations[0].transform_source == "model"  # it reached the model
        assert waited < 15
        assert any("reciprocal rank fusion use" in p for p in server.prompts)
        # the slow ones fell back (transform without the model) and still ended, each once
        assert all(r.status == "answered" for r in ended), [(r.status, r.error) for r in ended]
        assert all(any(f["stage"] == "transformer" for f in r.fallbacks) for r in ended), [r.fallbacks for r in ended]
        assert local.deps.state.count(state_collections.QUERIES) == 3


def test_a_dribbling_gemini_endpoint_is_cut_off_at_the_call_budget(monkeypatch):
    """The same flaw in google-genai (its timeout is per read too): the whole call, the SDK's
    retries included, ends by retry_budget_s(RAGBUS_GEMINI_TIMEOUT_S)."""
    from shared.adapters.gcp.gemini import GeminiLanguageModel, retry_budget_s

    with model_server(default=dribble(0.3, total_s=60)) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base)
        settings = load_settings({"RAGBUS_LLM": "gemini", "RAGBUS_GEMINI_TIMEOUT_S": "1", "GOOGLE_API_KEY": "x"})
        llm = GeminiLanguageModel.from_settings(settings, env={"GOOGLE_API_KEY": "x"})
        started = time.monotonic()
        with pytest.raises(RetryableError):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < retry_budget_s(1.0) + 2
        assert server.prompts  # it was reached, and dribbled


def test_a_megabyte_of_headers_is_refused_quickly():
    def headers(h, body):
        h.send_response(200)
        for n in range(2000):
            h.send_header(f"X-Pad-{n}", "p" * 500)
        h.end_headers()

    with model_server(default=headers) as server:
        llm = _llm(server, timeout_s=10)
        started = time.monotonic()
        with pytest.raises(RetryableError):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 8
        llm.close()


def test_a_300_mb_gemini_reply_is_refused_while_it_is_read(monkeypatch):
    from shared.adapters.gcp.gemini import GeminiLanguageModel
    from shared.adapters.http_model import MAX_REPLY_BYTES
    from tests.hostile.model_server import flood

    with model_server(default=flood(300 * 1024 * 1024)) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base)
        settings = load_settings({"RAGBUS_LLM": "gemini", "RAGBUS_GEMINI_TIMEOUT_S": "20", "GOOGLE_API_KEY": "x"})
        llm = GeminiLanguageModel.from_settings(settings, env={"GOOGLE_API_KEY": "x"})
        started = time.monotonic()
        with pytest.raises(RetryableError, match="larger than"):
            llm.grade("q", CONTEXTS)
        assert time.monotonic() - started < 20
        assert server.sent < 3 * (MAX_REPLY_BYTES + 32 * 1024 * 1024)  # each attempt stopped near the cap
