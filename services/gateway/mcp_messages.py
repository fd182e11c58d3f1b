"""What ``/mcp`` takes, each refusal one line that names the problem: one JSON-RPC message per POST, and
params of the types MCP gives them.

The SDK answered a malformed message with pydantic's errors for four message types (13 lines and a
link per error), and a ``tools/call`` whose ``arguments`` is not an object with "Invalid request
parameters" and nothing more. The SDK's own Host and Origin check still comes first: a request it
refuses is refused before its body is read.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
from mcp.server.context import CallNext, HandlerResult
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from shared.contract.text import shown

#: what a JSON value of each kind pydantic names is called in a message a client reads
_EXPECTED = {"dict_type": "an object", "model_type": "an object", "string_type": "text",
             "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
             "list_type": "an array", "bool_type": "true or false", "float_type": "a number"}
#: the tags pydantic adds to a field's location for each member of a union (``id``: ``str | int``)
_UNION_TAGS = {"str", "int", "float", "bool", "list", "dict"}


def named_problem(exc: ValidationError) -> str:
    """The first of pydantic's errors as one line naming the field and what it takes, with the value
    that was sent (``'params.arguments' must be an object, got 'what?'``)."""
    errors = exc.errors(include_url=False)

    def field(error: Any) -> str:
        return ".".join(str(part) for part in error["loc"] if part not in _UNION_TAGS)

    first = errors[0]
    if first["type"] == "missing":
        return f"missing '{field(first)}'"
    expected = []
    for error in errors:  # a union's members each report, at the same field
        if field(error) == field(first):
            said = _EXPECTED.get(error["type"]) or error["msg"].removeprefix("Input should be ")
            expected += [said] if said not in expected else []
    return f"'{field(first)}' must be {' or '.join(expected)}, got {shown(first['input'])}"


def message_problem(message: Any) -> str | None:
    """What makes ``message`` (parsed JSON) no JSON-RPC message, in one line; None when it is one.

    Its kind is read from its members (``method`` and ``id``: a request), so a request whose ``id`` is
    ``true`` is refused, naming ``id``: tried against each kind in turn, it passed as a notification,
    answered 202 with nothing, and the client waited for an answer that never came."""
    if isinstance(message, list):
        return ("a JSON-RPC batch (a JSON array) is not taken: MCP carries one message per POST since its "
                "2025-06-18 revision; send each request alone")
    if not isinstance(message, dict):
        return f"a JSON-RPC message is a JSON object, got {shown(message)}"
    kinds: list[tuple[str, type[BaseModel]]] = [
        ("request", JSONRPCRequest), ("notification", JSONRPCNotification),
        ("response", JSONRPCResponse), ("error response", JSONRPCError)]
    if "method" in message:
        kind, model = kinds[0] if "id" in message else kinds[1]
    elif "result" in message or "error" in message:
        kind, model = kinds[2] if "result" in message else kinds[3]
    else:
        return "not a JSON-RPC message: send 'method' (a request or notification), or 'result' or 'error'"
    try:
        model.model_validate(message, by_name=False)
    except ValidationError as exc:
        return f"not a JSON-RPC {kind}: {named_problem(exc)}"
    return None


class OneMessagePerPost:
    """The SDK's ``/mcp`` endpoint, except that a POST whose body is not one JSON-RPC message (a batch,
    or a message of the wrong shape) is answered 400 with one JSON-RPC error line naming the problem.

    The SDK's Host and Origin check (``security``) runs first, on the headers alone; the body is then read
    whole within the SDK's own bound (``max_body``: a body past it, or declared past it, is handed on
    unread for the SDK to refuse), and handed on as it came."""

    def __init__(self, app: Any, security: TransportSecurityMiddleware, max_body: int) -> None:
        self.app = app
        self.security = security
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        refusal = await self.security.validate_request(Request(scope), is_post=True)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        received, body = await self._body(scope, receive)
        problem = None
        if body is not None:
            try:
                problem = message_problem(pydantic_core.from_json(body))
            except ValueError:
                pass  # not JSON: the SDK's "Parse error" says so in one line
        if problem is not None:
            await _send_invalid_request(send, problem)
            return

        async def replayed() -> Any:
            return received.pop(0) if received else await receive()

        await self.app(scope, replayed, send)

    async def _body(self, scope: Any, receive: Any) -> tuple[list[Any], bytes | None]:
        """The messages read, and the whole body (None when it is past the bound or did not all come)."""
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            return [], None
        received, size = [], 0
        while size <= self.max_body:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                return received, None
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                return received, b"".join(m.get("body", b"") for m in received) if size <= self.max_body else None
        return received, None


async def _send_invalid_request(send: Any, problem: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": INVALID_REQUEST, "message": problem}}).encode()
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def name_invalid_params(ctx: Any, call_next: CallNext) -> HandlerResult:
    """Server middleware: params of the wrong shape (``tools/call`` with ``arguments`` text, say) are refused
    naming the field and what it takes, where the SDK said "Invalid request parameters" alone."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        raise MCPError(code=INVALID_PARAMS, message=f"{ctx.method}: {named_problem(exc)}") from None
