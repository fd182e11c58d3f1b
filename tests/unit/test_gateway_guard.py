"""The gateway's request guard on a bare app: Host, cross-origin writes, JSON, token; MCP's one message per POST."""

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from services.gateway.guard import RequestGuard


async def ok(request):
    return PlainTextResponse("ok")


def _client(bound="127.0.0.1", token=None, base="http://127.0.0.1:8080"):
    app = Starlette(routes=[Route("/", ok), Route("/healthz", ok), Route("/v1/x", ok, methods=["GET", "POST"])],
                    middleware=[Middleware(RequestGuard, bound_host=bound, api_token=token)])
    return TestClient(app, base_url=base)


@pytest.mark.parametrize("host,status", [
    ("127.0.0.1:8080", 200), ("localhost:8080", 200), ("LOCALHOST", 200), ("[::1]:8080", 200),
    ("evil.example", 421), ("evil.example:8080", 421), ("127.0.0.1.evil.example", 421), ("", 421),
])
def test_only_the_bound_address_is_answered_on_loopback(host, status):
    assert _client().get("/v1/x", headers={"Host": host}).status_code == status


def test_a_public_bind_does_not_check_host():
    assert _client(bound="0.0.0.0", token="t").get(
        "/v1/x", headers={"Host": "ragbus.example", "Authorization": "Bearer t"}).status_code == 200


@pytest.mark.parametrize("headers,status", [
    ({"Content-Type": "application/json"}, 200),
    ({"Content-Type": "application/json; charset=utf-8", "Origin": "http://127.0.0.1:8080"}, 200),
    ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403),
    ({"Content-Type": "application/json", "Origin": "http://127.0.0.1:9999"}, 403),
    ({"Content-Type": "application/json", "Origin": "https://127.0.0.1:8080"}, 403),
    ({"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403),
    ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
    ({"Content-Type": "text/plain"}, 415),
])
def test_writes_must_be_same_origin_json(headers, status):
    assert _client().post("/v1/x", content=b"{}", headers=headers).status_code == status


def test_the_token_guards_everything_but_page_and_health():
    client = _client(token="s3cret")
    assert client.get("/v1/x").status_code == 401
    assert client.get("/v1/x", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/v1/x", headers={"Authorization": "Basic s3cret"}).status_code == 401
    assert client.get("/v1/x", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/").status_code == 200 and client.get("/healthz").status_code == 200


@pytest.mark.parametrize("method,path,hint,not_hint", [
    ("POST", "/v1/queries", '{"question": "your question"}', "body may be empty"),
    ("POST", "/v1/dead-letters/retry", "the body may be empty", "question"),
    ("DELETE", "/v1/dead-letters/abc", "the body may be empty", "question"),
    ("POST", "/mcp", "Content-Type: application/json", "question"),
])
def test_a_write_without_json_is_told_what_to_send_for_its_own_endpoint(method, path, hint, not_hint):
    app = Starlette(routes=[Route(path, ok, methods=[method])],
                    middleware=[Middleware(RequestGuard, bound_host="127.0.0.1")])
    response = TestClient(app, base_url="http://127.0.0.1:8080").request(method, path)
    assert response.status_code == 415
    assert hint in response.json()["error"] and not_hint not in response.json()["error"]


def test_a_415_quotes_a_huge_content_type_only_in_part():
    response = _client().post("/v1/x", content=b"{}", headers={"Content-Type": "text/" + "x" * 20_000})
    assert response.status_code == 415 and len(response.json()["error"]) < 300


@pytest.mark.parametrize("method,path,status,allow", [
    ("PUT", "/v1/x", 405, "GET, HEAD, POST"),  # a known route, another method: 405 naming the ones it takes
    ("DELETE", "/v1/x", 405, "GET, HEAD, POST"),
    ("PATCH", "/", 405, "GET, HEAD"),
    ("PUT", "/nowhere", 404, None),  # no such route
    ("DELETE", "/v1/x/y", 404, None),
    ("POST", "/v1/x", 415, None),  # a route that takes the method: then the body's Content-Type
    ("POST", "/v1/x/", 415, None),  # the same route with a trailing slash (the router redirects it)
])
def test_method_and_route_are_checked_before_the_body(method, path, status, allow):
    # a PUT or DELETE on a path no route has, or on one that takes other methods, was told it "needs
    # Content-Type: application/json", as if sending a body would make it work
    response = _client().request(method, path, content=b"x", headers={"Content-Type": "text/plain"},
                                 follow_redirects=False)
    assert response.status_code == status, response.text
    if allow is not None:
        assert sorted(response.headers["allow"].split(", ")) == sorted(allow.split(", "))
    if status != 415:
        assert "Content-Type" not in response.text
        if path != "/":  # the token still comes before the router's answer (the page needs none)
            assert _client(token="t").request(method, path).status_code == 401


def test_an_mcp_batch_is_refused_in_one_json_rpc_line_and_one_message_still_answered():
    """MCP takes one JSON-RPC message per POST (no batches since its 2025-06-18 revision): the SDK answered a
    batch with 13 lines of pydantic's errors. The gateway says what is wrong in one line; a lone message is
    still the SDK's (its body given on as it came, though the gateway read its first character)."""
    from services.gateway.app import create_app
    from shared.contract.config import Settings
    from shared.contract.deps import Deps
    from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ping = b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}'
    with TestClient(create_app(deps), base_url="http://127.0.0.1:8080") as client:
        batch = client.post("/mcp", headers=headers, content=b" \n[" + ping + b"]")
        alone = client.post("/mcp", headers=headers, content=ping)
    assert batch.status_code == 400
    error = batch.json()["error"]
    assert error["code"] == -32600 and "batch" in error["message"] and "\n" not in error["message"]
    assert alone.status_code == 200 and '"id":7' in alone.text and '"result"' in alone.text


def test_an_mcp_post_of_blanks_is_handed_on_after_64_kib_not_kept_whole():
    """The batch check read a body until its first character: a body of blanks was kept in memory whole (125 MiB
    seen) before the SDK's own 4 MiB limit could refuse it. It looks at most 64 KiB, then hands the body on as
    it came, every byte in order."""
    import anyio

    from services.gateway.mcp_server import OneMessagePerPost

    chunks = [b" " * 1024] * 1024 + [b"{}"]  # 1 MiB of blanks, then a message
    sent = iter(chunks)
    pulled = []
    seen = []

    async def receive():
        body = next(sent)
        pulled.append(body)
        return {"type": "http.request", "body": body, "more_body": body != chunks[-1]}

    async def sdk(scope, receive, send):
        seen.append(len(pulled))  # how much the check had read when the SDK was called
        body = b""
        while True:
            message = await receive()
            body += message["body"]
            if not message["more_body"]:
                break
        seen.append(body)

    async def send(message):
        raise AssertionError(f"the check answered itself: {message}")

    anyio.run(OneMessagePerPost(sdk), {"type": "http", "method": "POST"}, receive, send)
    assert seen[0] <= 64 and seen[1] == b"".join(chunks)


@pytest.mark.parametrize("served", [[Mount("/mcp", app=ok)], [], [Route("/mcp", ok), Route("/mcp", ok)]])
def test_the_gateway_will_not_start_when_its_batch_check_cannot_wrap_mcp(served):
    """The batch check wrapped the SDK's plain '/mcp' route if there was one: an SDK serving it from a Mount would
    have taken batches again with nothing said (review of the batch check)."""
    from types import SimpleNamespace

    from services.gateway.app import _mcp_routes
    from services.gateway.mcp_server import OneMessagePerPost

    class SDK:
        def streamable_http_app(self, **options):
            return SimpleNamespace(routes=served)

    with pytest.raises(RuntimeError, match="serves '/mcp' from .* plain routes, not one"):
        _mcp_routes(SDK(), "127.0.0.1")
    alone = Route("/mcp", ok)
    SDK.streamable_http_app = lambda self, **options: SimpleNamespace(routes=[alone])
    assert _mcp_routes(SDK(), "127.0.0.1") == [alone] and isinstance(alone.app, OneMessagePerPost)
