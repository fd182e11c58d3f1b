"""Hardening IV's gateway cases (issue 35, problems 10, 11, 12, 14, 15, 16), each against the gateway
served by uvicorn on loopback: a refusal named in the client's own error shape, nothing asked."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

import httpx
import openai
import pytest

from services.gateway.server import serve
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.contract.filters import FilterError, Filters
from shared.runtime.bootstrap import build_local
from tests.integration.test_gateway_http import make_deps
from tests.support import cli_json, run_cli

pytestmark = pytest.mark.hostile

CHAT = {"model": "ragbus", "messages": [{"role": "user", "content": "what is bm25"}]}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    deps = make_deps(tmp_path_factory.mktemp("home"))
    server = serve(deps, "127.0.0.1", 0)
    yield deps, server.url
    server.stop()


def _asked(deps) -> int:
    return deps.state.count(state_collections.QUERIES)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "lookup"}}])
def test_a_tool_choice_ragbus_cannot_honour_is_refused_by_name(gateway, choice):
    deps, url = gateway
    before = _asked(deps)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**CHAT, tools=tools, tool_choice=choice)
    assert refused.value.body["param"] == "tool_choice"
    assert "calls no tools" in refused.value.body["message"]
    assert _asked(deps) == before


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_a_tool_choice_that_asks_for_no_tool_call_is_accepted(gateway, choice):
    deps, url = gateway
    response = httpx.post(url + "/v1/chat/completions", json={**CHAT, "tool_choice": choice}, timeout=60)
    assert response.status_code != 400, response.text


@pytest.mark.parametrize("path, method", [
    ("/v1/responses", "POST"), ("/v1/completions", "POST"), ("/v1/embeddings", "POST"),
    ("/v1/audio/transcriptions", "POST"), ("/v1/moderations", "POST"), ("/v1/files", "GET"),
])
def test_the_openai_endpoints_ragbus_does_not_serve_answer_404_in_openai_shape(gateway, path, method):
    _, url = gateway
    response = httpx.request(method, url + path, json={"model": "ragbus", "input": "x"}, timeout=10)
    assert response.status_code == 404
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert path in error["message"] and "/v1/chat/completions" in error["message"]


def test_the_sdk_shows_why_an_unserved_endpoint_is_missing(gateway):
    _, url = gateway
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=10)
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="ragbus", input="x")
    assert "ragbus does not serve /v1/embeddings" in str(missing.value)


@pytest.mark.parametrize("path, body", [("/v1/queries", {"question": "what is bm25"}), ("/v1/chat/completions", CHAT)])
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_a_compressed_body_is_refused_by_name_not_read_as_garbage(gateway, path, body, encoding):
    deps, url = gateway
    before = _asked(deps)
    response = httpx.post(url + path, content=gzip.compress(json.dumps(body).encode()), timeout=10,
                          headers={"Content-Type": "application/json", "Content-Encoding": encoding})
    assert response.status_code == 415, response.text
    message = response.json()["error"]
    message = message["message"] if isinstance(message, dict) else message
    assert "Content-Encoding" in message and encoding in message and "UTF-8" not in message
    assert _asked(deps) == before


def test_the_sample_corpus_is_open_with_a_token_as_the_readme_says(tmp_path):
    deps = build_local(load_settings({"RAGBUS_HOME": str(tmp_path)})).deps
    server = serve(deps, "127.0.0.1", 0, api_token="s3cret-token-for-tests")
    try:
        feed = httpx.get(server.url + "/sample/feed.xml", timeout=10)
        assert feed.status_code == 200 and b"<rss" in feed.content
        assert httpx.get(server.url + "/sample/..%2f..%2fetc%2fpasswd", timeout=10).status_code == 404
        assert httpx.get(server.url + "/sample/feed.xml%00.html", timeout=10).status_code == 404  # was a 500
        assert httpx.get(server.url + "/v1/search?q=x", timeout=10).status_code == 401
    finally:
        server.stop()


@pytest.mark.parametrize("key", ["__class__", "_private", "author\n", "9lives", "-x", ".hidden"])
def test_a_where_key_must_start_with_a_letter_as_its_error_says(key):
    with pytest.raises(FilterError) as refused:
        Filters.parse(now=datetime.now(UTC), where={key: "v"})
    assert "starting with a letter" in str(refused.value)


@pytest.mark.parametrize("flags, named", [
    (("--where", "author=nobody-at-all"), "author=nobody-at-all"),
])
def test_a_filter_that_admits_nothing_is_named_in_the_answer(tmp_path, flags, named):
    # `ragbus search` named the filter; `ask` (and so the API, MCP and chat) said only "could not find"
    # (a --source no stored document comes from is refused by the CLI before asking: test_filter_surfaces)
    doc = tmp_path / "docs" / "bm25.md"
    doc.parent.mkdir()
    doc.write_text("# BM25\n\nBM25 ranks documents by term frequency, saturated by its k1 parameter, and by "
                   "inverse document frequency.\n")
    home = tmp_path / "home"
    run_cli(home, "ingest", str(doc.parent))
    record = cli_json(home, "ask", "How does BM25 rank documents?", *flags)
    assert record["outcome"] == "not_answerable"
    assert "No indexed document matches the filters" in record["answer"] and named in record["answer"]
    unfiltered = cli_json(home, "ask", "How does BM25 rank documents?")
    assert "filters" not in unfiltered["answer"]
