"""The MCP endpoint, driven by the MCP SDK's own streamable-HTTP client against the
gateway served by uvicorn on loopback; the loop's stages are scripted."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from services.gateway import serve
from shared import collections
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.config import Settings
from shared.runtime.deps import Deps
from tests.scripted_loop import ANSWER, CONTEXTS, ScriptedLoop


@pytest.fixture
def deps(tmp_path) -> Deps:
    state = SqliteStateStore(tmp_path / "state.db")
    clock = SystemClock()
    return Deps(Settings(home=tmp_path), publisher=ScriptedLoop(state, clock, step_s=0.01), state=state, clock=clock)


@pytest.fixture
def server(deps):
    handle = serve(deps, "127.0.0.1", 0)
    yield handle
    handle.stop()


def structured(result) -> dict:
    """The tool's result as the client sees it: structured content, else the JSON text."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_tools_are_listed_and_both_run_the_loop(server, deps):
    async def session_run():
        async with (
            streamable_http_client(f"{server.url}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            search = await session.call_tool("search_documents", {"query": "what is bm25", "top_k": 3})
            ask = await session.call_tool("ask", {"question": "how does BM25 rank?"})
            bad = await session.call_tool("ask", {"question": "   "})
            by_question = await session.call_tool("search_documents", {"question": "what is bm25", "top_k": 3})
            both = await session.call_tool("search_documents", {"question": "a", "query": "b"})
            return tools, search, ask, bad, by_question, both

    tools, search, ask, bad, by_question, both = anyio.run(session_run)
    assert structured(by_question)["status"] == "answered"
    assert both.is_error and "not both" in both.content[0].text

    assert set(tools) == {"search_documents", "ask"}
    assert set(tools["search_documents"].input_schema["properties"]) == {"question", "query", "top_k"}
    assert "question" in set(tools["ask"].input_schema["properties"])
    assert tools["ask"].input_schema["required"] == ["question"]

    found = structured(search)
    assert (found["status"], found["iterations"], found["best_iteration"]) == ("answered", 2, 1)
    assert [c["chunk_id"] for c in found["contexts"]] == [c["chunk_id"] for c in CONTEXTS]
    assert found["grade"]["score"] == 0.82 and found["grade"]["grounded"] is True
    record = deps.state.get(collections.QUERIES, found["id"])
    assert record["top_k"] == 3

    answered = structured(ask)
    assert (answered["outcome"], answered["answer"]) == ("answered", ANSWER)
    assert [c["url"] for c in answered["citations"]] == [c["url"] for c in CONTEXTS]
    assert deps.state.get(collections.QUERIES, answered["id"])["original_query"] == "how does BM25 rank?"

    assert bad.is_error
    assert "'question' is empty" in bad.content[0].text


def test_mcp_refuses_a_foreign_host_header_on_loopback(server):
    # DNS-rebinding protection: a page on another origin must not drive the local server.
    response = httpx.post(
        f"{server.url}/mcp",
        headers={"Host": "evil.example:80", "Accept": "application/json, text/event-stream",
                 "Content-Type": "application/json"},
        content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
        timeout=10,
    )
    assert response.status_code in {400, 403, 421}
