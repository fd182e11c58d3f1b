"""The MCP ``feedback`` tool, called by the MCP SDK's own streamable-HTTP client against the gateway
served by uvicorn on loopback (the loop's stages scripted): the rating kept in the record, the SDK's
client identified by its remote address (or X-Ragbus-Client), and bad ratings refused with the API's
own messages."""

from __future__ import annotations

import anyio
import pytest

from shared.contract import state_collections
from shared.query.feedback import client_key
from tests.integration.test_mcp import deps, server  # noqa: F401 - the fixtures
from tests.support import mcp_session, mcp_structured, mcp_tools

pytestmark = pytest.mark.integration


def test_the_sdk_rates_an_answer_it_was_given(server, deps):  # noqa: F811
    async def session_run():
        async with mcp_session(f"{server.url}/mcp") as session:
            tools = await mcp_tools(session)
            asked = mcp_structured(await session.call_tool("ask", {"question": "how does BM25 rank?"}))
            down = await session.call_tool("feedback", {"query_id": asked["id"], "rating": "down",
                                                        "comment": "cites <b>the wrong</b> page",
                                                        "wrong_citations": [2], "expected": "by term frequency"})
            up = await session.call_tool("feedback", {"query_id": asked["id"], "rating": "up"})
            refusals = [await session.call_tool("feedback", arguments) for arguments in (
                {"query_id": "nope", "rating": "up"},
                {"query_id": asked["id"], "rating": "sideways"},
                {"query_id": asked["id"], "rating": "down", "wrong_citations": ["2"]},
                {"query_id": asked["id"], "rating": "down", "comment": "\x1b[2J"},
                {"query_id": asked["id"], "rating": "down", "stars": 1},
            )]
            return tools, asked, down, up, refusals

    tools, asked, down, up, refusals = anyio.run(session_run)
    schema = tools["feedback"].input_schema
    assert set(schema["properties"]) == {"query_id", "rating", "comment", "wrong_citations", "expected"}
    assert set(schema["required"]) == {"query_id", "rating"}
    assert not down.is_error, down.content
    assert mcp_structured(down) == {"query_id": asked["id"], "rating": "down", "replaced": False, "up": 0, "down": 1}
    assert mcp_structured(up)["replaced"] is True  # the same client (this address) rated again
    (kept,) = deps.state.get(state_collections.QUERIES, asked["id"])["feedback"]
    assert (kept["client"], kept["rating"]) == (client_key("address:127.0.0.1"), "up")
    messages = [r.content[0].text for r in refusals]
    assert all(r.is_error for r in refusals), messages
    assert "no query with id 'nope'" in messages[0]
    assert "'rating' must be \"up\" or \"down\"" in messages[1]
    assert "'wrong_citations' must be a list of citation numbers" in messages[2]
    assert "control character U+001B" in messages[3]
    assert "feedback takes no argument 'stars'" in messages[4]


def test_the_tool_shares_the_rate_bound_of_the_http_route(server, deps):  # noqa: F811
    import httpx

    from shared.query.feedback import RATINGS_PER_MINUTE

    async def session_run():
        async with mcp_session(f"{server.url}/mcp") as session:
            asked = mcp_structured(await session.call_tool("ask", {"question": "how does BM25 rank?"}))
            results = [await session.call_tool("feedback", {"query_id": asked["id"], "rating": "up"})
                       for _ in range(RATINGS_PER_MINUTE)]
            return asked, results, await session.call_tool("feedback", {"query_id": asked["id"], "rating": "down"})

    asked, results, refused = anyio.run(session_run)
    assert not any(r.is_error for r in results)
    assert refused.is_error and f"more than {RATINGS_PER_MINUTE} ratings a minute" in refused.content[0].text
    over_http = httpx.post(f"{server.url}/v1/queries/{asked['id']}/feedback", json={"rating": "down"}, timeout=10)
    assert over_http.status_code == 429  # one bound for both doors
    (kept,) = deps.state.get(state_collections.QUERIES, asked["id"])["feedback"]
    assert kept["rating"] == "up"
