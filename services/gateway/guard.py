"""Who may talk to the gateway: an ASGI guard in front of every route (REST, MCP, page).

- ``Host``: bound to a loopback address, the gateway answers only requests whose
  Host names that address (or ``localhost``); anything else is 421. A page on
  another site that rebinds its DNS name to 127.0.0.1 sends its own name as Host,
  so it can neither read indexed text nor submit queries.
- Cross-origin writes: a POST (PUT, PATCH, DELETE) whose ``Origin`` is not the
  gateway's own, or that a browser marks ``Sec-Fetch-Site: cross-site``, is 403;
  a POST must be ``application/json`` (415 otherwise), which a cross-site form or
  a "simple" ``text/plain`` fetch cannot send without a preflight that fails. Method
  and route come first: a write no route takes is the router's 404, or 405 with ``Allow``.
- Token: with ``api_token`` (``RAGBUS_API_TOKEN``), every request except the page,
  its static files and the health checks needs ``Authorization: Bearer <token>``.
  Binding to a non-loopback address requires one (see ``ragbus serve``). Behind Cloud
  Run IAM the caller's identity token goes in ``X-Serverless-Authorization`` instead:
  Cloud Run checks that header when it is present and leaves ``Authorization`` to the
  application (Cloud Run, "Authenticating service-to-service"), so the two combine.

Requests without ``Origin`` (curl, MCP clients, scripts) are not browsers acting
for another site, and pass the origin check.

The scheme an ``Origin`` is compared with is the ASGI scope's. Behind a TLS-terminating
front end (Cloud Run) the server sees ``http``; uvicorn (under gunicorn in
functions-framework) rewrites the scope from ``X-Forwarded-Proto`` only for peers in
``FORWARDED_ALLOW_IPS`` (default 127.0.0.1 and ::1). The deployment sets it where a
trusted front end is the only way in (``infra/functions.tf``: the gateway function);
locally nothing trusts a forwarded scheme from elsewhere, so a spoofed header is refused.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from services.gateway.openai_compat import error_body, is_openai_path
from services.gateway.replies import header_text

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
_OPEN_PATHS = ("/", "/healthz", "/readyz")
_OPEN_PREFIXES = ("/static/", "/sample/")  # the page's files and the bundled sample corpus, public already


#: a Host header's value (RFC 9112 3.2): a name or IPv4 address, or an IPv6 address in brackets, and an optional port
_AUTHORITY = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::[0-9]{1,5})?")


def _host_name(value: str) -> str:
    """The name part of a Host header value (``[::1]:8080`` -> ``::1``), lower case; "" for a value that is no
    host and port (``localhost:8080@evil.example`` and ``localhost:80 evil`` were taken for ``localhost``)."""
    found = _AUTHORITY.fullmatch(value.strip().lower())
    return (found["ipv6"] or found["name"]) if found else ""


class RequestGuard:
    def __init__(self, app: ASGIApp, *, bound_host: str, api_token: str | None = None,
                 check_host: bool | None = None) -> None:
        self.app = app
        self.api_token = api_token or None
        loopback = bound_host in LOOPBACK_HOSTS
        self.check_host = loopback if check_host is None else check_host
        self.allowed_names = {bound_host.lower().strip("[]")} | ({"localhost", "127.0.0.1", "::1"} if loopback else set())

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, message, extra = refusal
            await _send_error(send, status, message, extra, openai_shape=is_openai_path(scope.get("path", "")))
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, dict[str, str]] | None:
        host = headers.get("host", "")
        if self.check_host and _host_name(host) not in self.allowed_names:
            return (421, f"this gateway answers for {', '.join(sorted(self.allowed_names))} only, not Host "
                    f"{header_text(host)[:100]!r} (a page on another site reaching it through DNS rebinding?)", {})
        method = scope.get("method", "GET").upper()
        if method in _WRITES:
            origin = headers.get("origin")
            if origin is not None and not _same_origin(origin, host, scope):
                return (403, f"cross-origin {method} from {header_text(origin)[:100]!r} refused; the API accepts writes "
                        "from its own page and from clients that send no Origin" + _proxy_hint(origin, host, scope),
                        {})
            if headers.get("sec-fetch-site") == "cross-site":
                return (403, f"cross-site {method} refused (Sec-Fetch-Site: cross-site)", {})
            # a body is judged only where a route takes this method: elsewhere the router's 404 or 405 (with
            # Allow), not a body's 415
            if _routed(scope):
                media = headers.get("content-type", "").split(";")[0].strip().lower()
                if media != "application/json":
                    return (415, f"{method} needs Content-Type: application/json (got {media[:100] or 'none'!r})"
                            + _body_hint(method, scope.get("path", "")), {})
                encoding = headers.get("content-encoding", "").strip().lower()
                if encoding not in ("", "identity"):
                    # read as sent, a compressed body is "not UTF-8"; inflating it would need a bound of its own
                    return (415, f"{method} bodies are read as sent: send it without Content-Encoding "
                            f"(got {encoding[:100]!r})", {})
        path = scope.get("path", "")
        if self.api_token and path not in _OPEN_PATHS and not path.startswith(_OPEN_PREFIXES):
            given = headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.api_token.encode()):
                return (401, "this gateway needs Authorization: Bearer <RAGBUS_API_TOKEN> (behind Cloud Run IAM, "
                        "send the identity token as X-Serverless-Authorization: Bearer <ID token>)",
                        {"www-authenticate": 'Bearer realm="ragbus"'})
        return None


def _routed(scope: Scope) -> bool:
    """Whether a route of the app takes this method on this path (or on it with its trailing slash toggled,
    which the router redirects). Method and route are checked before the body: a PUT on a path no route has,
    or on one that takes GET only, is the router's 404 or 405, not a 415 about a body no route would read."""
    from starlette.routing import Match, Mount
    from starlette.staticfiles import StaticFiles

    router = getattr(scope.get("app"), "router", None)
    if router is None:  # not under Starlette: nothing to check against
        return True
    path = scope.get("path", "")
    for candidate in (path, path[:-1] if path.endswith("/") else path + "/"):
        probe = {**scope, "path": candidate}
        for route in router.routes:
            if route.matches(probe)[0] == Match.FULL:
                # a mount matches whatever the method; static files are read (GET, HEAD) only
                return not (isinstance(route, Mount) and isinstance(route.app, StaticFiles))
    return False


def _body_hint(method: str, path: str) -> str:
    """What to send, for the one write that takes a question; the dead-letter writes take no body, and a
    hint naming ``question`` there sends the caller looking for a field that does not exist."""
    if method == "POST" and path.rstrip("/") == "/v1/queries":
        return '; send JSON like {"question": "your question"}'
    if is_openai_path(path):
        return '; send JSON like {"model": "ragbus", "messages": [{"role": "user", "content": "your question"}]}'
    if path.startswith("/v1/dead-letters"):
        return "; the body may be empty"
    return ""


def _same_origin(origin: str, host: str, scope: Scope) -> bool:
    if origin == "null":
        return False
    parts = urlsplit(origin)
    if not parts.netloc:
        return False
    scheme = scope.get("scheme", "http")
    return parts.scheme == scheme and parts.netloc.lower() == host.strip().lower()


def _proxy_hint(origin: str, host: str, scope: Scope) -> str:
    """Why the page's own https origin looks foreign: the server saw plain http from a proxy."""
    parts = urlsplit(origin)
    if parts.scheme == "https" and scope.get("scheme") == "http" and parts.netloc.lower() == host.strip().lower():
        return (" (this server saw http: behind a TLS-terminating proxy, set FORWARDED_ALLOW_IPS to the proxy's "
                "address so its X-Forwarded-Proto is trusted)")
    return ""


async def _send_error(send, status: int, message: str, extra: dict[str, str], *, openai_shape: bool = False) -> None:
    # OpenAI-compatible clients read only OpenAI's error shape (the SDKs show error.message)
    body = json.dumps(error_body(status, message) if openai_shape else {"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
