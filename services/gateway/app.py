"""The gateway as an ASGI app: HTTP API, Server-Sent Events, OpenAPI, MCP and the web page.

Every route only parses its protocol and calls :mod:`shared.query.api`; state
reads and model calls are blocking, so they run in worker threads and the event
loop stays free to stream events to many watchers at once.
"""

from __future__ import annotations

import functools
import hmac
import html
import json
import logging
import math
import re
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from services.gateway.conversations import Conversations, unknown_conversation
from services.gateway.guard import RequestGuard
from services.gateway.mcp_server import build_mcp_server
from services.gateway.openai_compat import ChatCompletions, error_body, is_openai_path
from services.gateway.openapi import openapi_document
from shared.contract.config import check_api_token
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.query.api import (
    POLL_MAX_S,
    POLL_MIN_S,
    TOP_K_RANGE,
    ConversationNotFound,
    get_query,
    search_documents,
    submit_query,
    validate_int,
    wait_for_query_async,
)
from shared.query.record import QueryRecord
from shared.runtime.stages import QUERY_EVENT_SOURCES

log = logging.getLogger("ragbus.gateway")

WEB_DIR = Path(__file__).parent / "web"
MAX_BODY_BYTES = 64 * 1024
MAX_WAIT_S = 60.0
# An events stream ends with the query, which always ends by its deadline; this
# extra bound is for a client that asks about a query whose record went away.
MAX_STREAM_S = 600.0
STREAM_GRACE_S = 30.0
KEEPALIVE_S = 15.0
#: Worker threads kept for /healthz and /readyz alone, so a crowd of queries cannot delay a probe.
HEALTH_THREADS = 4
_LARGEST_FLOAT = int(sys.float_info.max)
# "question" is the name everywhere (CLI, MCP, page); "query" is its old name here, still accepted.
_QUERY_FIELDS = ("question", "top_k", "max_iterations", "wait_s", "filters", "conversation_id", "query")
#: GET /v1/search's filter parameters (``where`` repeats: where=key=value).
_SEARCH_FILTERS = ("source", "since", "until", "kind", "where")
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_EVENT_NAME = re.compile(r"[^A-Za-z0-9_.-]")
# The page loads only its own files; untrusted document text is rendered as text
# by the script, and the policy is a second line of defence against injection.
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error shape of the API: ``{"error": "..."}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def create_app(deps: Deps, *, host: str = "127.0.0.1", api_token: str | None = None,
               stages: Sequence[str] = ()) -> Starlette:
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
    """
    check_api_token(api_token, host)
    api = _Api(deps, tuple(stages), detail_open=host in _LOOPBACK_HOSTS, api_token=api_token)
    mcp = build_mcp_server(deps, unready=api._unready_stages)
    security = None
    if host in _LOOPBACK_HOSTS:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    # Stateless: no MCP session lives in this instance's memory, so behind a load balancer
    # any instance can answer any request (with sessions, the other instance answered 404).
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, host=host, stateless_http=True
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The MCP session manager owns a task group that must live as long as the app.
        async with mcp.session_manager.run():
            log.info("gateway ready (runtime=%s)", deps.settings.runtime)
            yield

    routes: list[BaseRoute] = [
        Route("/", api.page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=WEB_DIR), name="static"),
        Route("/healthz", api.health, methods=["GET"]),
        Route("/readyz", api.ready, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/v1/queries", api.submit, methods=["POST"]),
        Route("/v1/queries/{query_id}", api.read, methods=["GET"]),
        Route("/v1/queries/{query_id}/events", api.events, methods=["GET"]),
        Route("/v1/queries/{query_id}/trace", api.trace, methods=["GET"]),
        Route("/v1/search", api.search, methods=["GET"]),
        *Conversations(deps).routes(),
        *ChatCompletions(deps, api._unready_stages).routes(),
        Route("/v1/dead-letters", api.dead_letters, methods=["GET", "DELETE"]),
        Route("/v1/dead-letters/retry", api.retry_dead_letters, methods=["POST"]),
        Route("/v1/dead-letters/{letter_id}", api.purge_dead_letter, methods=["DELETE"]),
        Route("/v1/dead-letters/{letter_id}/retry", api.retry_dead_letter, methods=["POST"]),
        Route("/sample/{path:path}", api.sample, methods=["GET"]),
        *mcp_app.routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
        middleware=[Middleware(RequestGuard, bound_host=host, api_token=api_token)],
    )
    app.state.deps = deps
    app.state.mcp = mcp
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no such endpoint {request.url.path}; see /openapi.json for the API"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}; see /openapi.json"
    else:
        message = str(exc.detail)
    if is_openai_path(request.url.path):
        return JSONResponse(error_body(exc.status_code, message), exc.status_code, headers=dict(exc.headers or {}))
    return error(exc.status_code, message, headers=dict(exc.headers or {}))


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    if is_openai_path(request.url.path):
        return JSONResponse(error_body(500, "internal error in the gateway; the details are in its log"), 500)
    return error(500, "internal error in the gateway; the details are in its log")


class _Api:
    """The HTTP endpoints, bound to one Deps.

    ``/healthz`` and ``/readyz`` stay open without a token (probes send none), so on an
    address other machines reach (``detail_open`` false) they answer the status alone,
    and the detail (the model's refusal, a stage's reason) only to a request bearing the
    token; the detail is in the log either way.
    """

    def __init__(self, deps: Deps, stages: tuple[str, ...] = (), *, detail_open: bool = True,
                 api_token: str | None = None) -> None:
        self.deps = deps
        self.stages = stages
        self.detail_open = detail_open
        self.api_token = api_token
        self._health_threads: anyio.CapacityLimiter | None = None

    async def _health_read(self, read: Callable[[], Any]) -> Any:
        """``read`` in a worker thread of the health checks' own: never queued behind query work."""
        if self._health_threads is None:  # made in the event loop, which anyio requires
            self._health_threads = anyio.CapacityLimiter(HEALTH_THREADS)
        return await anyio.to_thread.run_sync(read, limiter=self._health_threads)

    def _shows_detail(self, request: Request) -> bool:
        if self.detail_open:
            return True
        if not self.api_token:
            return False
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.api_token.encode())

    # ------------------------------------------------------------ page

    async def page(self, request: Request) -> Response:
        return HTMLResponse(page_html(), headers=_PAGE_HEADERS)

    async def sample(self, request: Request) -> Response:
        """The bundled sample corpus, as `ragbus demo` fed it: its citations open here."""
        from shared.corpus import SAMPLE_PATH, sample_file

        base = f"{request.url.scheme}://{request.url.netloc}{SAMPLE_PATH}"
        found = sample_file(request.path_params["path"], base)
        if found is None:
            return error(404, f"no sample file {request.url.path}")
        body, media_type = found
        return Response(body, media_type=media_type)

    def _model_health(self) -> dict[str, Any]:
        from shared.query.model_health import model_health

        # The stages that call the model may run elsewhere: what they recorded is the truth.
        return model_health(self.deps.state, self.deps.settings.llm_model)

    def _unready_stages(self) -> dict[str, str]:
        from shared.runtime.readiness import unready_stages

        return unready_stages(self.deps.settings, self.stages) if self.stages else {}

    async def health(self, request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok", "runtime": self.deps.settings.runtime}
        if not self._shows_detail(request):
            return JSONResponse(body)  # live; what is wrong is for token holders and the log
        model = await self._health_read(self._model_health)
        if not model["usable"]:
            body["model"] = model  # still live (200): restarting the gateway cannot fix the model
        unready = await self._health_read(self._unready_stages)
        if unready:
            body["stages"] = unready  # still live: the fix is a file or a setting, not a restart
        return JSONResponse(body)

    async def ready(self, request: Request) -> Response:
        model = await self._health_read(self._model_health)
        unready = await self._health_read(self._unready_stages)
        ready = bool(model["usable"]) and not unready
        status = 200 if ready else 503
        if not self._shows_detail(request):
            return JSONResponse({"status": "ready" if ready else "unready",
                                 "model": {"model": model["model"], "usable": model["usable"]}}, status_code=status)
        body: dict[str, Any] = {"status": "ready" if ready else "unready", "model": model}
        if unready:
            body["stages"] = unready
        return JSONResponse(body, status_code=status)

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document(self.deps.settings))

    # --------------------------------------------------------- queries

    async def submit(self, request: Request) -> Response:
        body = await _read_json_object(request)
        if isinstance(body, Response):
            return body
        unknown = sorted(set(body) - set(_QUERY_FIELDS))
        if unknown:
            return error(
                400,
                f"unknown field(s) {', '.join(map(repr, unknown))}; send only "
                f"{', '.join(f for f in _QUERY_FIELDS if f != 'query')}",
            )
        if "question" in body and "query" in body:
            return error(400, "send 'question' only: 'query' is its old name")
        field = "question" if "question" in body or "query" not in body else "query"
        if field not in body:
            return error(400, 'missing \'question\'; send {"question": "your question"}')
        unready = await anyio.to_thread.run_sync(self._unready_stages)
        if unready:  # a stage of this process would fail it: say why now, not as a failed query later
            return error(503, "not ready, so no question is taken: " + "; ".join(
                f"{stage}: {reason}" for stage, reason in unready.items()) + " (GET /readyz says the same)")
        try:
            wait_s = _wait_seconds(body.get("wait_s"))
            record = await anyio.to_thread.run_sync(
                lambda: submit_query(
                    self.deps,
                    body[field],
                    top_k=body.get("top_k"),
                    max_iterations=body.get("max_iterations"),
                    field=field,
                    filters=body.get("filters"),
                    conversation_id=body.get("conversation_id"),
                )
            )
        except InvalidInput as exc:
            return error(400, str(exc))
        except ConversationNotFound:
            return error(404, unknown_conversation(str(body["conversation_id"])))
        except RetryableError as exc:
            return error(503, str(exc), headers={"Retry-After": "2"})
        query_id = record.id
        if wait_s > 0:
            record = await wait_for_query_async(self.deps, query_id, wait_s)
            if record.ended:
                return JSONResponse(record.to_doc())
        status_url = f"/v1/queries/{query_id}"
        return JSONResponse(
            {
                "id": query_id,
                "status": record.status,
                "conversation_id": record.conversation_id,
                "status_url": status_url,
                "events_url": f"{status_url}/events",
            },
            status_code=202,
            headers={"Location": status_url},
        )

    async def read(self, request: Request) -> Response:
        query_id = request.path_params["query_id"]
        record = await anyio.to_thread.run_sync(get_query, self.deps, query_id)
        if record is None:
            return _unknown_query(query_id)
        return JSONResponse(record.to_doc())

    async def events(self, request: Request) -> Response:
        query_id = request.path_params["query_id"]
        try:
            limit_s = _stream_seconds(request.query_params.get("timeout_s"), self.deps)
            start = _resume_index(request.headers.get("last-event-id"))
        except InvalidInput as exc:
            return error(400, str(exc))
        record = await anyio.to_thread.run_sync(get_query, self.deps, query_id)
        if record is None:
            return _unknown_query(query_id)
        return StreamingResponse(
            _event_stream(self.deps, query_id, start, limit_s),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def trace(self, request: Request) -> Response:
        """The query's trace as waterfall rows: from the local span store, or from Cloud Trace on GCP."""
        query_id = request.path_params["query_id"]
        record = await anyio.to_thread.run_sync(get_query, self.deps, query_id)
        if record is None:
            return _unknown_query(query_id)
        if cloud_traces(self.deps.settings):
            return JSONResponse(await anyio.to_thread.run_sync(cloud_query_trace, self.deps.settings, record))
        found = await anyio.to_thread.run_sync(query_trace, self.deps.settings, record)
        if found is None:
            # The query exists; its spans are not stored here (tracing off, or exported to Cloud Trace).
            return JSONResponse({"trace_id": record.trace_id, "duration_ms": 0.0, "rows": [],
                                 "note": "no spans of this query are stored here; on Google Cloud look "
                                         "the trace id up in Cloud Trace"})
        return JSONResponse(found)

    # ---------------------------------------------------------- search

    async def search(self, request: Request) -> Response:
        params = request.query_params
        if "q" not in params:
            return error(400, "missing 'q'; send /v1/search?q=your+words&k=10")
        k: Any = params.get("k")
        repeated = [name for name in ("q", "k", *_SEARCH_FILTERS[:-1]) if len(params.getlist(name)) > 1]
        if repeated:  # which one was meant? (only `where` repeats)
            return error(400, f"'{repeated[0]}' is given {len(params.getlist(repeated[0]))} times; give it once")
        filters: dict[str, Any] = {name: params[name] for name in _SEARCH_FILTERS[:-1] if name in params}
        if "where" in params:
            filters["where"] = params.getlist("where")
        try:
            if k is not None:
                k = validate_int(_int_param(k, "k"), "k", TOP_K_RANGE)
            results = await anyio.to_thread.run_sync(
                lambda: search_documents(self.deps, params["q"], k, filters=filters or None))
        except InvalidInput as exc:
            return error(400, str(exc))
        except RetryableError as exc:
            return error(503, f"retrieval is unavailable right now: {exc}", {"Retry-After": "2"})
        return JSONResponse({"query": params["q"], "k": k or self.deps.settings.top_k, "results": results})

    # ----------------------------------------------------- dead letters

    async def dead_letters(self, request: Request) -> Response:
        """GET: every dead letter; DELETE: purge them all."""
        from services.dead_letters.redrive import letters, purge

        if request.method == "DELETE":
            return await self._redrive(purge, None, "purged")
        kept = await anyio.to_thread.run_sync(letters, self.deps.state)
        return JSONResponse({"dead_letters": kept})

    async def retry_dead_letters(self, request: Request) -> Response:
        from services.dead_letters.redrive import retry

        return await self._redrive(retry, None, "retried")

    async def retry_dead_letter(self, request: Request) -> Response:
        from services.dead_letters.redrive import retry

        return await self._redrive(retry, request.path_params["letter_id"], "retried")

    async def purge_dead_letter(self, request: Request) -> Response:
        from services.dead_letters.redrive import purge

        return await self._redrive(purge, request.path_params["letter_id"], "purged")

    async def _redrive(self, action: Any, letter_id: str | None, verb: str) -> Response:
        """``{verb: [ids], refused: [{id, error}]}``; 404 for an id that names no dead letter."""
        from services.dead_letters.redrive import select

        def run() -> Any:
            return action(self.deps, select(self.deps.state, letter_id, every=letter_id is None))

        try:
            done = await anyio.to_thread.run_sync(run)
        except InvalidInput as exc:
            return error(404, str(exc))
        status = 409 if letter_id is not None and done.refused else 200
        return JSONResponse(done.to_doc(verb), status_code=status)


# ------------------------------------------------------------- parsing


@functools.lru_cache(maxsize=4)
def _span_store(path: str) -> Any:
    """One reader per span store file, reused across requests (not one per request)."""
    from shared.adapters.local.spans import SqliteSpanStore

    return SqliteSpanStore(path)


def query_trace(settings: Any, record: QueryRecord) -> dict[str, Any] | None:
    """``{trace_id, duration_ms, rows}`` of the query's trace, or None when none is stored here."""
    from shared.observability.waterfall import rows

    if not settings.traces_path.exists():
        return None
    store = _span_store(str(settings.traces_path))
    trace_id = record.trace_id or store.trace_of_query(record.id)
    spans = store.spans_of_trace(trace_id) if trace_id else []
    if not spans:
        return None
    drawn = rows(spans)
    end = max(r["offset_ms"] + r["duration_ms"] for r in drawn)
    return {"trace_id": trace_id, "duration_ms": round(end, 3), "rows": drawn}


def cloud_traces(settings: Any) -> bool:
    """Whether this gateway's spans go to Cloud Trace (the gcp runtime, not on the emulators)."""
    from shared.runtime.telemetry import on_emulators

    return settings.runtime == "gcp" and settings.tracing and not on_emulators()


@functools.lru_cache(maxsize=2)
def cloud_trace_reader(project: str) -> Any:
    """One Cloud Trace reader per project, with the instance's Google credentials."""
    from shared.adapters.gcp.cloud_trace import CloudTraceReader
    from shared.runtime.telemetry import google_session

    return CloudTraceReader(project, google_session())


def cloud_query_trace(settings: Any, record: QueryRecord) -> dict[str, Any]:
    """The query's trace read from Cloud Trace, or a note saying why not and where to look."""
    from shared.adapters.gcp.cloud_trace import TraceUnavailable, console_url
    from shared.observability.waterfall import rows

    if not record.trace_id:
        return {"trace_id": None, "duration_ms": 0.0, "rows": [],
                "note": "this query has no trace id (it was submitted with tracing off)"}
    link = console_url(settings.gcp_project or "", record.trace_id)
    try:
        drawn = rows(cloud_trace_reader(settings.gcp_project or "").spans_of_trace(record.trace_id))
    except TraceUnavailable as exc:
        return {"trace_id": record.trace_id, "duration_ms": 0.0, "rows": [], "console_url": link,
                "note": f"{exc}; open the trace in the Cloud console: {link}"}
    except Exception as exc:  # noqa: BLE001 - credentials missing or broken: the link still helps
        return {"trace_id": record.trace_id, "duration_ms": 0.0, "rows": [], "console_url": link,
                "note": f"Cloud Trace cannot be read from here ({type(exc).__name__}: {str(exc)[:200]}); "
                        f"open the trace in the Cloud console: {link}"}
    end = max(r["offset_ms"] + r["duration_ms"] for r in drawn)
    return {"trace_id": record.trace_id, "duration_ms": round(end, 3), "rows": drawn, "console_url": link}


async def _read_json_object(request: Request) -> dict[str, Any] | Response:
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return error(413, f"the body is larger than {MAX_BODY_BYTES} bytes; send a shorter query")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return error(400, 'the body is empty; send JSON like {"question": "your question"}')
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return error(400, "the body is not UTF-8; send UTF-8 encoded JSON")
    except RecursionError:
        return error(400, "the body's JSON is nested too deeply; send a flat object like "
                          '{"question": "your question"}')
    except json.JSONDecodeError as exc:
        return error(
            400,
            f"the body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'send JSON like {"question": "your question"}',
        )
    except ValueError as exc:  # an integer of thousands of digits (Python's int conversion limit)
        return error(400, f"the body's JSON has a value that cannot be read ({str(exc)[:120]})")
    if not isinstance(body, dict):
        return error(400, 'the body must be a JSON object; send one like {"question": "your question"}')
    return body


def _wait_seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or isinstance(value, float) \
            and not math.isfinite(value):
        raise InvalidInput(f"'wait_s' must be a number of seconds (0 to {MAX_WAIT_S:g}), got {str(value)[:40]}")
    if isinstance(value, int) and abs(value) > _LARGEST_FLOAT:  # float() of it would overflow
        raise InvalidInput(f"'wait_s' is a {len(str(abs(value)))}-digit number; send 0 (return at once) "
                           f"up to {MAX_WAIT_S:g} seconds")
    if value < 0:
        raise InvalidInput(f"'wait_s' is {value}; send 0 (return at once) up to {MAX_WAIT_S:g}")
    # Longer waits are shortened rather than refused: the query still runs, and
    # the 202 tells the client where to follow it.
    return min(float(value), MAX_WAIT_S)


def _int_param(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"'{name}' must be a whole number, got {raw!r}") from None


def _stream_seconds(raw: str | None, deps: Deps) -> float:
    if raw is None:
        return min(deps.settings.query_timeout_s + STREAM_GRACE_S, MAX_STREAM_S)
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"'timeout_s' must be a number of seconds, got {raw!r}") from None
    if not 0 < value <= MAX_STREAM_S:
        raise InvalidInput(f"'timeout_s' is {raw}; send a number of seconds above 0 up to {MAX_STREAM_S:g}")
    return value


def _resume_index(raw: str | None) -> int:
    """Where a reconnecting EventSource resumes: after the last event id it saw."""
    if not raw:
        return 0
    try:
        return max(0, int(raw) + 1)
    except ValueError:
        raise InvalidInput(f"Last-Event-ID {raw!r} is not an event index from this stream") from None


def _unknown_query(query_id: str) -> Response:
    return error(404, f"no query with id {query_id!r}; submit one with POST /v1/queries")


# ------------------------------------------------------------------ SSE


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    # json.dumps never emits a raw newline, so the payload is one data line.
    lines.append("data: " + json.dumps(data, ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


_STAGE_EVENTS_META = '<meta name="ragbus-stage-events" content="">'


@functools.cache
def page_html() -> str:
    """index.html with the stage registry's event sources, which its script listens for."""
    page = (WEB_DIR / "index.html").read_text(encoding="utf-8")
    if _STAGE_EVENTS_META not in page:
        raise RuntimeError(f"{WEB_DIR / 'index.html'} lost its {_STAGE_EVENTS_META}")
    return page.replace(_STAGE_EVENTS_META, _STAGE_EVENTS_META.replace(
        'content=""', f'content="{html.escape(",".join(QUERY_EVENT_SOURCES))}"'))


def event_name(event: dict[str, Any]) -> str:
    """The SSE event name of a record event: its stage, else its type."""
    name = str(event.get("stage") or event.get("type") or "message")
    return _EVENT_NAME.sub("_", name) or "message"


async def _event_stream(deps: Deps, query_id: str, start: int, limit_s: float) -> AsyncIterator[str]:
    """Each record event once, in order, as it appears; then ``end`` with the record."""
    give_up_at = time.monotonic() + limit_s
    last_sent = time.monotonic()
    sent = start
    interval = POLL_MIN_S
    yield "retry: 2000\n\n"
    while True:
        record = await anyio.to_thread.run_sync(get_query, deps, query_id)
        if record is None:
            yield _sse("end", {"id": query_id, "status": None, "error": "the query record is gone"})
            return
        events = record.events
        if len(events) > sent:
            for index in range(sent, len(events)):
                yield _sse(event_name(events[index]), {**events[index], "index": index}, index)
            sent = len(events)
            last_sent = time.monotonic()
            interval = POLL_MIN_S
        if record.ended or time.monotonic() >= give_up_at:
            yield _sse("end", record.to_doc())
            return
        if time.monotonic() - last_sent >= KEEPALIVE_S:
            yield ": keepalive\n\n"
            last_sent = time.monotonic()
        await anyio.sleep(min(interval, max(0.0, give_up_at - time.monotonic())))
        interval = min(interval * 2, POLL_MAX_S)


# ---------------------------------------------------------------- serve


@dataclass
class ServerHandle:
    """A gateway served by uvicorn in a background thread of this process."""

    host: str
    port: int
    server: uvicorn.Server
    thread: threading.Thread
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def wait(self) -> None:
        """Block until the server stops (for ``ragbus serve`` in the foreground)."""
        while self.thread.is_alive():
            self.thread.join(0.5)

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout)


def check_listenable(host: str, port: int) -> None:
    """Refuse, naming the reason, an address the gateway cannot listen on: uvicorn would log a
    bind failure as a bare ERROR line and exit, and let a port out of range out as a traceback.

    Binds (and closes) a socket for every address ``host`` resolves to, as uvicorn will."""
    if not 0 <= port <= 65535:
        raise InvalidInput(f"port {port} is not a TCP port; choose one from 1 to 65535 (0 picks a free one)")
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInput(f"cannot listen on host {host!r} ({exc}); give an address of this machine, "
                           "such as 127.0.0.1") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise InvalidInput(
                    f"the gateway cannot listen on {host}:{port}: {exc.strerror or exc} (a `ragbus serve` "
                    "already running?); stop what listens there or choose another --port"
                ) from None


def serve(
    deps: Deps,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    app: Starlette | None = None,
    api_token: str | None = None,
    stages: Sequence[str] = (),
    log_level: str = "warning",
    ready_timeout_s: float = 15.0,
) -> ServerHandle:
    """Serve the gateway on ``host:port`` (0 picks a free port) until ``.stop()``; ``stages``: the
    stages this process runs beside it, whose readiness ``/readyz`` reports (see :func:`create_app`).

    Raises :class:`InvalidInput` for an address it cannot listen on (see :func:`check_listenable`)."""
    check_listenable(host, port)
    config = uvicorn.Config(
        app or create_app(deps, host=host, api_token=api_token, stages=stages),
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        # Open event streams end with their query; do not let one hold shutdown.
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    def run() -> None:
        try:
            server.run()
        except SystemExit:
            # uvicorn exits when it cannot bind; the caller hears it from serve() below.
            pass

    thread = threading.Thread(target=run, name=f"gateway@{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_timeout_s
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(
                f"the gateway could not start on {host}:{port} (address in use or not allowed?); "
                "choose another --port or host"
            )
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the gateway did not start on {host}:{port} within {ready_timeout_s:g}s")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1] if port == 0 else port
    log.info("gateway serving on %s:%d", host, bound)
    return ServerHandle(host=host, port=bound, server=server, thread=thread)


__all__: Sequence[str] = ("ServerHandle", "create_app", "event_name", "serve")
