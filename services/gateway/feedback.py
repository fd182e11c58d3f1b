"""``POST /v1/queries/{query_id}/feedback``: a person's rating of an answer (:mod:`shared.query.feedback`).

Who "the client" is: the ``X-Ragbus-Client`` header when the caller sends one (the page sends a
random id it keeps in the browser's localStorage; a script may send any 1-64 printable ASCII
characters), else the remote address. One rating per query and client: a second replaces the first.

The write is guarded as every write is (:mod:`services.gateway.guard`: token, cross-site, JSON),
and bounded: at most :data:`~shared.query.feedback.RATINGS_PER_MINUTE` ratings per remote address
and minute (429 with ``Retry-After`` past it). The bound counts the address, not the header, since a
caller chooses its header freely; it is kept in this gateway instance's memory, so behind a load
balancer each instance counts its own.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.gateway.replies import error, read_json_object
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.contract.text import shown
from shared.query.api import QueryNotFound
from shared.query.feedback import (
    RATINGS_PER_MINUTE,
    QueryNotEnded,
    feedback_counts,
    give_feedback,
    strip_completion_prefix,
    validate_client_id,
    validate_feedback,
)

CLIENT_HEADER = "x-ragbus-client"
_EXAMPLE = '{"rating": "down", "comment": "why"}'


class RateBound:
    """At most ``limit`` events per key in any ``window_s`` seconds (a sliding window)."""

    #: Keys kept at most; past it the keys idle longest are forgotten (a flood of addresses cannot grow memory).
    MAX_KEYS = 10_000

    def __init__(self, limit: int = RATINGS_PER_MINUTE, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Count one event of ``key``; 0 when allowed, else the seconds until one is (nothing counted)."""
        now = self.clock()
        with self._lock:
            times = self._seen.pop(key, None) or deque()
            while times and times[0] <= now - self.window_s:
                times.popleft()
            wait = 0.0
            if len(times) >= self.limit:
                wait = times[0] + self.window_s - now
            else:
                times.append(now)
            self._seen[key] = times  # re-inserted: the dict's order is the order of last use
            while len(self._seen) > self.MAX_KEYS:
                self._seen.pop(next(iter(self._seen)))
            return wait


def remote_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def client_of(request: Request) -> str:
    """Who rates: the ``X-Ragbus-Client`` header, else the remote address (:class:`InvalidInput` for a bad header)."""
    named = validate_client_id(request.headers.get(CLIENT_HEADER))
    return f"client:{named}" if named else f"address:{remote_address(request)}"


def too_many(wait_s: float) -> Response:
    seconds = max(1, math.ceil(wait_s))
    return error(429, f"more than {RATINGS_PER_MINUTE} ratings a minute from this address; try again in "
                 f"{seconds} s", headers={"Retry-After": str(seconds)})


class FeedbackRoute:
    def __init__(self, deps: Deps, bound: RateBound) -> None:
        self.deps, self.bound = deps, bound

    async def feedback(self, request: Request) -> Response:
        query_id = strip_completion_prefix(request.path_params["query_id"])
        body = await read_json_object(request, example=_EXAMPLE)
        if isinstance(body, Response):
            return body
        try:
            client = client_of(request)
            rating = validate_feedback(body)
        except InvalidInput as exc:
            return error(400, str(exc))
        wait = self.bound.take(remote_address(request))
        if wait > 0:
            return too_many(wait)
        try:
            record, replaced = await anyio.to_thread.run_sync(
                lambda: give_feedback(self.deps, query_id, rating, client=client))
        except QueryNotFound:
            return error(404, f"no query with id {shown(query_id)}; rate the id an answer returned")
        except QueryNotEnded as exc:
            return error(409, str(exc))
        except InvalidInput as exc:
            return error(400, str(exc))
        return JSONResponse({"query_id": record.id, "rating": rating.rating, "replaced": replaced,
                             **feedback_counts(record)})
