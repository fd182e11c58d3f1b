"""Hostile bodies for /v1/chat/completions: each is a 4xx in OpenAI's error shape, one line, and no
question is submitted. The gateway is served by uvicorn on loopback; the loop's stages are scripted."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from services.gateway import serve
from services.gateway.openai_compat import MAX_CHAT_BODY_BYTES, MAX_MESSAGES
from shared.contract import state_collections
from tests.integration.test_gateway_http import make_deps

URL = "/v1/chat/completions"
USER = {"role": "user", "content": "what is bm25"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    deps = make_deps(tmp_path_factory.mktemp("home"))
    server = serve(deps, "127.0.0.1", 0)
    yield deps, server.url
    server.stop()


def _post(url: str, content: bytes) -> httpx.Response:
    return httpx.post(url + URL, content=content, headers={"Content-Type": "application/json"}, timeout=30)


@pytest.mark.parametrize(("content", "status", "says"), [
    (b"x" * (MAX_CHAT_BODY_BYTES + 1), 413, "larger than"),
    # Python's words were shown ("maximum recursion depth exceeded", "use sys.set_int_max_str_digits()")
    (b"[" * 100_000 + b"]" * 100_000, 400, "the body nests its JSON too deeply"),
    (b'{"model": "ragbus", "messages": [], "temperature": ' + b"9" * 5000 + b"}", 400, "a number of more than 4300"),
    (b"\xff\xfe{}", 400, "not UTF-8"),
    (b'"just a string"', 400, "must be a JSON object"),
    (b"", 400, "the body is not valid JSON"),
    (json.dumps({"model": "ragbus", "messages": [USER] * (MAX_MESSAGES + 1)}).encode(), 400, "messages"),
    (json.dumps({"model": ["ragbus"], "messages": [USER]}).encode(), 400, "model"),
    (json.dumps({"model": "ragbus", "messages": [{"role": "user", "content": [{"type": 7}]}]}).encode(), 400,
     "messages[0].content"),
    (json.dumps({"model": "ragbus", "messages": [{"role": "user", "content": "x" * 100_000}]}).encode(), 400,
     "more than the limit"),
    (json.dumps({"model": "ragbus", "messages": [USER], "filters": {"where": {"k": ["v"]}}}).encode(), 400,
     "filters"),
    # a key sent twice was read as its last value, silently (the openai SDK never sends one)
    (b'{"model": "ragbus", "messages": [{"role": "user", "content": "a", "content": "b"}]}', 400,
     "names the key 'content' twice"),
    (b'{"model": "ragbus", "model": "gpt-4o", "messages": []}', 400, "names the key 'model' twice"),
])
def test_each_hostile_body_is_a_one_line_openai_error_and_nothing_is_asked(gateway, content, status, says):
    deps, url = gateway
    response = _post(url, content)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert says in error["message"] and "\n" not in error["message"] and "sys." not in error["message"]
    assert deps.state.count(state_collections.QUERIES) == 0


def test_unknown_routes_and_methods_under_the_openai_paths_answer_in_its_shape(gateway):
    _, url = gateway
    wrong = httpx.get(url + URL, timeout=10)
    assert wrong.status_code == 405 and wrong.json()["error"]["message"].startswith("GET is not allowed")
    plain = httpx.post(url + URL, content=b"{}", headers={"Content-Type": "text/plain"}, timeout=10)
    assert plain.status_code == 415 and '"messages"' in plain.json()["error"]["message"]


@pytest.mark.parametrize(("argument", "value", "code"), [
    ("max_tokens", -1, "integer_below_min_value"), ("max_tokens", 0, "integer_below_min_value"),
    ("max_tokens", True, "invalid_type"), ("max_completion_tokens", 1.5, "invalid_type"),
    ("temperature", 2.5, "decimal_above_max_value"), ("top_p", -1, "decimal_below_min_value"),
    ("n", 0, "integer_below_min_value"),
])
def test_the_openai_sdk_reads_a_numeric_argument_out_of_range_as_openai_would_send_it(gateway, argument, value, code):
    # the SDK sends max_tokens=-1 as it is (it checks nothing); ragbus accepted it and answered. Now the
    # BadRequestError OpenAI raises: type invalid_request_error, param the argument, OpenAI's code
    deps, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="ragbus", messages=[USER], **{argument: value})
    assert refused.value.status_code == 400 and refused.value.body["type"] == "invalid_request_error"
    assert (refused.value.param, refused.value.code) == (argument, code)
    assert refused.value.body["message"].startswith(f"Invalid type for '{argument}'" if code == "invalid_type"
                                                    else f"Invalid '{argument}': ")
    assert deps.state.count(state_collections.QUERIES) == 0
