"""The gateway as an ASGI app: HTTP API, Server-Sent Events, OpenAPI, MCP and the web page,\nassembled from the modules that serve each (queries, search, dead_letters, probes, page, ...).

Every route only parses its protocol and calls :mod:`shared.query.api`; state
reads and model calls are blocking, so they run in worker threads and the event
loop stays free to stream events to many watchers at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway import page
from services.gateway.backlog import QueryBacklog
from services.gateway.conversations import Conversations
from services.gateway.dead_letters import DeadLetterRoutes
from services.gateway.feedback import FeedbackRoute, RateBound
from services.gateway.guard import LOOPBACK_HOSTS, RequestGuard
from services.gateway.mcp_messages import OneMessagePerPost
from services.gateway.mcp_server import build_mcp_server
from services.gateway.openai_compat import (
    OPENAI_SERVED,
    ChatCompletions,
    error_body,
    is_openai_path,
)
from services.gateway.openapi import openapi_document
from services.gateway.probes import Probes
from services.gateway.queries import QueryRoutes
from services.gateway.replies import error
from services.gateway.search import SearchRoute
from shared.contract.config import check_api_token
from shared.contract.deps import Deps
from shared.contract.errors import DataFileError
from shared.contract.text import cut

log = logging.getLogger("ragbus.gateway")

def create_app(deps: Deps, *, host: str = "127.0.0.1", api_token: str | None = None,
               stages: Sequence[str] = (), stopping: threading.Event | None = None) -> Starlette:
    """The gateway for ``deps``.

    ``host`` is where it will be reachable: on a loopback host every route refuses
    other Host values and the MCP endpoint other Host/Origin headers (DNS-rebinding
    protection, as the MCP SDK does for local servers); elsewhere access control is
    ``api_token`` (bearer) or the platform's (IAM). Cross-origin writes are refused
    everywhere (:mod:`services.gateway.guard`).

    ``stages`` are the stages this process runs beside the gateway (``ragbus serve``: all
    of them); ``/readyz`` answers 503 while one of them cannot do its work
    (:mod:`shared.runtime.readiness`), and says why. A gateway whose stages run elsewhere
    (a Cloud Function) checks none: each stage's function checks itself when it starts.

    ``stopping`` is set by whoever stops the server (:class:`services.gateway.server.ServerHandle`)
    before it stops: a client waiting for an answer (``wait_s``, an event stream, a chat completion,
    MCP ``ask``) is then told at once in its protocol, not cancelled by the server's shutdown.
    """
    stopping = stopping or threading.Event()
    check_api_token(api_token, host)
    probes = Probes(deps, tuple(stages), detail_open=host in LOOPBACK_HOSTS, api_token=api_token)
    ratings = RateBound()  # one bound for the HTTP route and the MCP tool
    backlog = QueryBacklog(deps)  # one count of queued questions for REST, chat completions and MCP
    mcp = build_mcp_server(deps, unready=lambda: probes.unready_stages() | _full_disk(probes), ratings=ratings,
                           stopping=stopping, backlog=backlog)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The MCP session manager owns a task group that must live as long as the app.
        async with mcp.session_manager.run():
            log.info("gateway ready (runtime=%s)", deps.settings.runtime)
            yield

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(deps.settings))

    queries, dead_letters = QueryRoutes(deps, probes.unready_stages, stopping, backlog), DeadLetterRoutes(deps)
    routes: list[BaseRoute] = [
        Route("/", page.page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=page.WEB_DIR), name="static"),
        Route("/healthz", probes.health, methods=["GET"]),
        Route("/readyz", probes.ready, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/queries", queries.submit, methods=["POST"]),
        Route("/v1/queries/{query_id}", queries.read, methods=["GET"]),
        Route("/v1/queries/{query_id}/events", queries.events, methods=["GET"]),
        Route("/v1/queries/{query_id}/trace", queries.trace, methods=["GET"]),
        Route("/v1/queries/{query_id}/feedback", FeedbackRoute(deps, ratings).feedback, methods=["POST"]),
        Route("/v1/search", SearchRoute(deps).search, methods=["GET"]),
        *Conversations(deps).routes(),
        *ChatCompletions(deps, probes.unready_stages, stopping, backlog).routes(),
        Route("/v1/dead-letters", dead_letters.dead_letters, methods=["GET", "DELETE"]),
        Route("/v1/dead-letters/retry", dead_letters.retry_dead_letters, methods=["POST"]),
        Route("/v1/dead-letters/{letter_id}", dead_letters.purge_dead_letter, methods=["DELETE"]),
        Route("/v1/dead-letters/{letter_id}/retry", dead_letters.retry_dead_letter, methods=["POST"]),
        Route("/sample/{path:path}", page.sample, methods=["GET"]),
        *_mcp_routes(mcp, host),
    ]
    async def data_file_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DataFileError)
        return _data_file_error(request, exc, probes)

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, DataFileError: data_file_error,
                            ClientDisconnect: _client_gone, Exception: _internal_error},
        middleware=[Middleware(RequestGuard, bound_host=host, api_token=api_token),
                    Middleware(RefuseWritesWhenFull, probes=probes)],
    )
    app.state.deps = deps
    app.state.mcp = mcp
    return app


def _mcp_routes(mcp: MCPServer, host: str) -> list[BaseRoute]:
    security = None
    if host in LOOPBACK_HOSTS:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    # Stateless: no MCP session lives in this instance's memory, so behind a load balancer
    # any instance can answer any request (with sessions, the other instance answered 404).
    routes = mcp.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, host=host, stateless_http=True
    ).routes
    served = [route for route in routes if isinstance(route, Route) and route.path == "/mcp"]
    # an SDK serving /mcp otherwise (from a Mount) would take batches, and answer a malformed message in
    # pydantic's many lines, again unnoticed
    if len(served) != 1:
        raise RuntimeError(f"the MCP SDK's app serves '/mcp' from {len(served)} plain routes, not one: the "
                           f"gateway's message check (OneMessagePerPost) cannot wrap it")
    served[0].app = OneMessagePerPost(served[0].app, TransportSecurityMiddleware(security),
                                      mcp.session_manager.max_request_body_size)
    return routes


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404 and is_openai_path(request.url.path):
        message = f"ragbus does not serve {cut(request.url.path)}; of the OpenAI API it serves {OPENAI_SERVED}"
    elif exc.status_code == 404:
        message = f"no such endpoint {cut(request.url.path)}; see /openapi.json for the API"
    elif exc.status_code == 405:
        message = f"{cut(request.method)} is not allowed on {cut(request.url.path)}; see /openapi.json"
    else:
        message = str(exc.detail)
    if is_openai_path(request.url.path):
        return JSONResponse(error_body(exc.status_code, message), exc.status_code, headers=dict(exc.headers or {}))
    return error(exc.status_code, message, headers=dict(exc.headers or {}))


def _full_disk(probes: Probes) -> dict[str, str]:
    full = probes.disk_full()
    return {"storage": full} if full is not None else {}


class RefuseWritesWhenFull:
    """A request that would store something (POST, PUT, PATCH, DELETE) while the data directory's
    disk is full is answered 507 at once, naming the disk: a question that got into the bus's spare
    room would otherwise wait for stages that cannot write, and end timed out. MCP is left to its
    tools (``search_documents`` stores nothing; ``ask`` says the same)."""

    def __init__(self, app: ASGIApp, probes: Probes) -> None:
        self.app = app
        self.probes = probes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH", "DELETE")
                and not scope["path"].startswith("/mcp")):
            full = self.probes.disk_full()  # one statvfs: no thread needed
            if full is not None:
                request = Request(scope, receive)
                # not noted: /readyz reads the free space itself, so it is ready again the moment there is room
                await _data_file_error(request, DataFileError(full, "full"), None)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _data_file_error(request: Request, exc: DataFileError, probes: Probes | None) -> Response:
    """A data file that cannot be written (a full disk: 507 Insufficient Storage, as WebDAV names it)
    or read (damaged: 503), named as the file's owner said it; ``/readyz`` says so too meanwhile."""
    if probes is not None:
        probes.note_data_error(exc)
    status, code = (507, "insufficient_storage") if exc.kind == "full" else (503, f"data_file_{exc.kind}")
    log.error("%s %s: %s", request.method, request.url.path, exc)
    message = f"the gateway cannot store this request: {exc}"
    if is_openai_path(request.url.path):
        return JSONResponse(error_body(status, message, code=code), status)
    return error(status, message)


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client went away (or was let go, too slow: see services.gateway.server) before its body was
    read: nothing to answer, and no error of the gateway's to log with a traceback."""
    log.info("%s %s: the client went away before sending its whole body", request.method, request.url.path)
    return Response(status_code=400)  # goes nowhere: the connection is closed


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    if is_openai_path(request.url.path):
        return JSONResponse(error_body(500, "internal error in the gateway; the details are in its log"), 500)
    return error(500, "internal error in the gateway; the details are in its log")
