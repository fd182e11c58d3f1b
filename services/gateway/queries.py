"""``/v1/queries``: submit a question, read its record, follow its stages as Server-Sent Events,
and read its trace. Every route only parses HTTP and calls :mod:`shared.query.api`."""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from services.gateway.backlog import BacklogFull, QueryBacklog
from services.gateway.conversations import unknown_conversation
from services.gateway.replies import ascii_int, error, header_text, read_json_object
from services.gateway.schemas import MAX_WAIT_S, QueryRequest
from services.gateway.traces import cloud_query_trace, cloud_traces, query_trace
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.contract.text import shown
from shared.query.api import (
    POLL_MAX_S,
    POLL_MIN_S,
    ConversationNotFound,
    get_query,
    submit_query,
    wait_for_query_async,
)

# An events stream ends with the query, which always ends by its deadline; this
# extra bound is for a client that asks about a query whose record went away.
MAX_STREAM_S = 600.0
STREAM_GRACE_S = 30.0
KEEPALIVE_S = 15.0
_LARGEST_FLOAT = int(sys.float_info.max)
# "question" is the name everywhere (CLI, MCP, page); "query" is its old name here, still accepted.
_QUERY_FIELDS = tuple(QueryRequest.model_fields)
_EVENT_NAME = re.compile(r"[^A-Za-z0-9_.-]")


class QueryRoutes:
    """The query endpoints, bound to one Deps; ``unready`` names the stages of this process that
    cannot work (a question is refused while one cannot)."""

    def __init__(self, deps: Deps, unready: Callable[[], dict[str, str]],
                 stopping: threading.Event | None = None, backlog: QueryBacklog | None = None) -> None:
        self.deps = deps
        self.unready = unready
        self.backlog = backlog or QueryBacklog(deps)  # how many questions may wait or run at once
        # set when the server stops: a wait ends at once (202, as when wait_s ends) and an event stream
        # closes without its `end`, so the client's EventSource reconnects (Last-Event-ID) once it is back
        self.stopping = stopping or threading.Event()

    async def submit(self, request: Request) -> Response:
        body = await read_json_object(request)
        if isinstance(body, Response):
            return body
        unknown = sorted(set(body) - set(_QUERY_FIELDS))
        if unknown:
            return error(
                400,
                f"unknown field(s) {', '.join(map(shown, unknown))}; send only "
                f"{', '.join(f for f in _QUERY_FIELDS if f != 'query')}",
            )
        if "question" in body and "query" in body:
            return error(400, "send 'question' only: 'query' is its old name")
        field = "question" if "question" in body or "query" not in body else "query"
        if field not in body:
            return error(400, 'missing \'question\'; send {"question": "your question"}')
        unready = await anyio.to_thread.run_sync(self.unready)
        if unready:  # a stage of this process would fail it: say why now, not as a failed query later
            return error(503, "not ready, so no question is taken: " + "; ".join(
                f"{stage}: {reason}" for stage, reason in unready.items()) + " (GET /readyz says the same)")
        try:
            wait_s = _wait_seconds(body.get("wait_s"))
            record = await anyio.to_thread.run_sync(
                lambda: self.backlog.submit(lambda: submit_query(
                    self.deps,
                    body[field],
                    top_k=body.get("top_k"),
                    max_iterations=body.get("max_iterations"),
                    field=field,
                    filters=body.get("filters"),
                    conversation_id=body.get("conversation_id"),
                ))
            )
        except InvalidInput as exc:
            return error(400, str(exc))
        except ConversationNotFound:
            return error(404, unknown_conversation(str(body["conversation_id"])))
        except BacklogFull as exc:
            return error(429, str(exc), headers={"Retry-After": str(exc.retry_after_s)})
        except RetryableError as exc:
            return error(503, str(exc), headers={"Retry-After": "2"})
        query_id = record.id
        if wait_s > 0:
            record = await wait_for_query_async(self.deps, query_id, wait_s, self.stopping)
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
            _event_stream(self.deps, query_id, start, limit_s, self.stopping),
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


def _wait_seconds(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or isinstance(value, float) \
            and not math.isfinite(value):
        raise InvalidInput(f"'wait_s' must be a number of seconds (0 to {MAX_WAIT_S:g}), got {shown(value)}")
    if isinstance(value, int) and abs(value) > _LARGEST_FLOAT:  # float() of it would overflow
        raise InvalidInput(f"'wait_s' is a {len(str(abs(value)))}-digit number; send 0 (return at once) "
                           f"up to {MAX_WAIT_S:g} seconds")
    if value < 0:
        raise InvalidInput(f"'wait_s' is {value}; send 0 (return at once) up to {MAX_WAIT_S:g}")
    # Longer waits are shortened rather than refused: the query still runs, and
    # the 202 tells the client where to follow it.
    return min(float(value), MAX_WAIT_S)


#: numbers in ASCII digits only: float() and int() also take '1_0' and other scripts' digits ('٥'), which a query
#: parameter or header spelled so is more likely a mistake than meant (newcomer16). Each part of _DECIMAL can
#: match a digit run only one way (``[0-9]+\.?[0-9]*`` split a run of 16,000 digits ways enough to take 7.9 s on
#: the event loop), and a longer value than _LONGEST_DECIMAL is refused before it is matched.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LONGEST_DECIMAL = 32


def _stream_seconds(raw: str | None, deps: Deps) -> float:
    if raw is None:
        return min(deps.settings.query_timeout_s + STREAM_GRACE_S, MAX_STREAM_S)
    try:
        if len(raw) > _LONGEST_DECIMAL or not _DECIMAL.fullmatch(raw):
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"'timeout_s' must be a number of seconds, got {shown(raw)}") from None
    if not 0 < value <= MAX_STREAM_S:
        raise InvalidInput(f"'timeout_s' is {shown(raw)}; send a number of seconds above 0 up to {MAX_STREAM_S:g}")
    return value


def _resume_index(raw: str | None) -> int:
    """Where a reconnecting EventSource resumes: after the last event id it saw."""
    if not raw:
        return 0
    try:
        return max(0, ascii_int(raw) + 1)
    except ValueError:
        raise InvalidInput(f"Last-Event-ID {shown(header_text(raw))} is not an event index from this stream") from None


def _unknown_query(query_id: str) -> Response:
    return error(404, f"no query with id {shown(query_id)}; submit one with POST /v1/queries")


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    # json.dumps never emits a raw newline, so the payload is one data line.
    lines.append("data: " + json.dumps(data, ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


def event_name(event: dict[str, Any]) -> str:
    """The SSE event name of a record event: its stage, else its type."""
    name = str(event.get("stage") or event.get("type") or "message")
    return _EVENT_NAME.sub("_", name) or "message"


async def _event_stream(deps: Deps, query_id: str, start: int, limit_s: float,
                        stopping: threading.Event) -> AsyncIterator[str]:
    """Each record event once, in order, as it appears; then ``end`` with the record. When the server
    stops first, the stream closes without ``end``: the client reconnects from its last event."""
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
        if stopping.is_set():
            return
        if time.monotonic() - last_sent >= KEEPALIVE_S:
            yield ": keepalive\n\n"
            last_sent = time.monotonic()
        await anyio.sleep(min(interval, max(0.0, give_up_at - time.monotonic())))
        interval = min(interval * 2, POLL_MAX_S)
