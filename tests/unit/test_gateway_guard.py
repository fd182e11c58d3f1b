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
    # no host and port, though it starts as one (newcomer17): a name after the port, or words after it
    ("localhost:8080@evil.example", 421), ("127.0.0.1:8080 evil.example", 421), ("[::1]:8080@evil.example", 421),
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


def test_an_mcp_post_past_the_sdks_bound_is_handed_on_unkept():
    """The message check reads a body whole only within the SDK's own bound (4 MiB): a body of blanks was kept
    in memory whole (125 MiB seen) before the SDK could refuse it. Past the bound the body is handed on as it
    came, every byte in order, for the SDK to refuse (413)."""
    import anyio

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

    anyio.run(_one_message_per_post(sdk, max_body=64 * 1024), _post_scope((b"host", b"127.0.0.1:8080")), receive,
              send)
    assert seen[0] <= 65 and seen[1] == b"".join(chunks)


def _post_scope(*headers: tuple[bytes, bytes]) -> dict:
    return {"type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
            "headers": [(b"content-type", b"application/json"), *headers]}


def _one_message_per_post(sdk, max_body=4 * 1024 * 1024):
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

    from services.gateway.mcp_messages import OneMessagePerPost

    loopback = TransportSecuritySettings(allowed_hosts=["127.0.0.1:*"], allowed_origins=["http://127.0.0.1:*"])
    return OneMessagePerPost(sdk, TransportSecurityMiddleware(loopback), max_body)


@pytest.mark.parametrize("headers,status", [
    ([(b"host", b"127.0.0.1:8080"), (b"origin", b"http://evil.example")], 403),
    ([(b"host", b"127.0.0.1")], 421),  # no port: the gateway's guard lets it by, the SDK's check does not
])
def test_an_mcp_post_the_sdk_refuses_by_its_headers_is_refused_before_its_body_is_read(headers, status):
    """The gateway reads a POST's body to check it is one JSON-RPC message: it did so before the SDK's Host and
    Origin check, so a batch from a Host the SDK refuses was answered about its body (400), not refused (421).
    The headers are checked first now, and the body not read at all."""
    import anyio

    answered = []

    async def receive():
        raise AssertionError("the body was read")

    async def sdk(scope, receive, send):
        raise AssertionError("handed on to the SDK")

    async def send(message):
        answered.append(message)

    anyio.run(_one_message_per_post(sdk), _post_scope(*headers), receive, send)
    assert answered[0]["status"] == status


@pytest.mark.parametrize("headers,status", [({"Host": "127.0.0.1"}, 421), ({"Origin": "http://evil.example"}, 403)])
def test_a_batch_from_a_refused_host_or_origin_is_refused_for_that_not_for_its_body(headers, status):
    # Host without its port: the gateway's guard lets it by, the SDK's check does not; the body was answered (400)
    with _gateway_client() as client:
        response = client.post("/mcp", headers={**_MCP_HEADERS, **headers}, content=b'[{"jsonrpc": "2.0"}]')
    assert response.status_code == status, response.text


def _gateway_client():
    from services.gateway.app import create_app
    from shared.contract.config import Settings
    from shared.contract.deps import Deps
    from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    return TestClient(create_app(deps), base_url="http://127.0.0.1:8080")


_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("body,named", [
    ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "ask"}',
     "not a JSON-RPC request: 'params' must be an object, got 'ask'"),
    ('{"id": 1, "method": "ping"}', "not a JSON-RPC request: missing 'jsonrpc'"),
    ('{"jsonrpc": "1.0", "id": 1, "method": "ping"}', "'jsonrpc' must be '2.0', got '1.0'"),
    ('{"jsonrpc": "2.0", "id": 1, "method": 5}', "'method' must be text, got 5"),
    # tried as each kind in turn, this passed as a notification: 202, and the client waited for nothing
    ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', "'id' must be an integer or text, got true"),
    ('{"jsonrpc": "2.0", "id": 1}', "send 'method' (a request or notification), or 'result' or 'error'"),
    ('"ping"', "a JSON-RPC message is a JSON object, got 'ping'"),
])
def test_a_malformed_mcp_message_is_refused_in_one_line_naming_the_problem(body, named):
    """The SDK answered one malformed message with pydantic's errors for four message types (13 lines, a link
    per error), as it did a batch."""
    with _gateway_client() as client:
        response = client.post("/mcp", headers=_MCP_HEADERS, content=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32600 and named in error["message"] and "\n" not in error["message"]


@pytest.mark.parametrize("params,named", [
    ({"name": "ask", "arguments": "what is bm25?"}, "tools/call: 'params.arguments' must be an object, got 'what"),
    ({"name": "ask", "arguments": ["what is bm25?"]}, "tools/call: 'params.arguments' must be an object, got ["),
    ({"arguments": {"question": "what is bm25?"}}, "tools/call: missing 'params.name'"),
])
def test_a_tool_call_of_the_wrong_shape_names_the_field_and_what_it_takes(params, named):
    """The SDK said "Invalid request parameters" and nothing more when a tool call's arguments were not an
    object."""
    import json

    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    with _gateway_client() as client:
        response = client.post("/mcp", headers=_MCP_HEADERS, content=json.dumps(call))
    error = json.loads(response.text.split("data: ", 1)[1])["error"]
    assert error["code"] == -32602 and error["message"].startswith(named), error


@pytest.mark.parametrize("served", [[Mount("/mcp", app=ok)], [], [Route("/mcp", ok), Route("/mcp", ok)]])
def test_the_gateway_will_not_start_when_its_message_check_cannot_wrap_mcp(served):
    """The message check (once the batch check) wraps the SDK's plain '/mcp' route if there was one: an SDK serving it from a Mount would
    have taken batches again with nothing said (review of the batch check)."""
    from types import SimpleNamespace

    from services.gateway.app import _mcp_routes
    from services.gateway.mcp_messages import OneMessagePerPost

    class SDK:
        session_manager = SimpleNamespace(max_request_body_size=4 * 1024 * 1024)

        def streamable_http_app(self, **options):
            return SimpleNamespace(routes=served)

    with pytest.raises(RuntimeError, match="serves '/mcp' from .* plain routes, not one"):
        _mcp_routes(SDK(), "127.0.0.1")
    alone = Route("/mcp", ok)
    SDK.streamable_http_app = lambda self, **options: SimpleNamespace(routes=[alone])
    assert _mcp_routes(SDK(), "127.0.0.1") == [alone] and isinstance(alone.app, OneMessagePerPost)


def test_a_header_s_utf8_is_quoted_back_as_sent_not_as_latin1_mojibake():
    # 'Last-Event-ID: \u0661\u0662' (Arabic-Indic digits, from curl) was answered "Last-Event-ID 'Ù¡Ù¢' is not an
    # event index" (newcomer17): Starlette reads header bytes as Latin-1
    from services.gateway.queries import _resume_index
    from shared.contract.errors import InvalidInput

    with pytest.raises(InvalidInput, match="'\u0661\u0662' is not an event index"):
        _resume_index("\u0661\u0662".encode().decode("latin-1"))
    refused = _client().get("/v1/x", headers={"Host": "ünï.example".encode()})
    assert refused.status_code == 421 and "'ünï.example'" in refused.json()["error"]
    refused = _client().post("/v1/x", headers={"Origin": "http://ünï.example".encode()}, json={})
    assert refused.status_code == 403 and "'http://ünï.example'" in refused.json()["error"]
