"""Cloud Function entry point of the gateway (``functions-framework --target=gateway``).

functions-framework 3.10 serves a function decorated with
``functions_framework.aio.http`` on its ASGI server (Starlette + uvicorn; it
detects the decorator, ``--asgi`` is not needed), handing it a Starlette
``Request``. It cannot mount an arbitrary ASGI app, so this function returns
the gateway app itself as the "response": Starlette then calls it with the
original scope, receive and send, and every route, the event stream and the
MCP endpoint work unchanged. No WSGI bridge is involved, so streaming is real.

``RAGBUS_API_TOKEN`` is enforced as in ``ragbus serve``; with Cloud Run IAM in front,
callers send their identity token as ``X-Serverless-Authorization`` and the ragbus
token as ``Authorization`` (:mod:`services.gateway.guard`).

The framework runs no lifespan for our app, so the first request starts it
(the MCP session manager needs its task group) and it lives as long as the
event loop. Deps are built once per instance, on first use.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import functions_framework.aio
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from services.gateway.app import create_app
from shared.contract.deps import Deps
from shared.runtime.functions import function_deps
from shared.runtime.telemetry import flush_telemetry

log = logging.getLogger("ragbus.gateway")

_running: dict[asyncio.AbstractEventLoop, _LifespanApp] = {}


def deps() -> Deps:
    """This instance's Deps, built on first use (clients are reused across requests)."""
    return function_deps()


class _LifespanApp:
    """The gateway app with its lifespan started once in the current event loop."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._ready = asyncio.Event()
        self._failed: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._lifespan())
        await self._ready.wait()
        if self._failed:
            raise RuntimeError(f"the gateway failed to start: {self._failed}")

    async def _lifespan(self) -> None:
        # A minimal ASGI lifespan conversation: start up, then wait forever
        # (the instance is torn down with its event loop).
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})

        async def receive() -> dict[str, Any]:
            return await inbox.get()

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.failed":
                self._failed = message.get("message", "unknown error")
            if message["type"].startswith("lifespan.startup"):
                self._ready.set()

        try:
            await self.app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        finally:
            if not self._ready.is_set():
                self._failed = self._failed or "the lifespan ended before startup completed"
                self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The framework's router added its own keys; hand our app a clean http scope.
        scope = {k: v for k, v in scope.items() if k not in {"path_params", "endpoint", "route", "router"}}

        async def send_after_flush(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # The invocation ends with this message and the CPU is throttled after it:
                # export this request's spans and metrics first (bounded, see flush_telemetry).
                await asyncio.to_thread(flush_telemetry)
            await send(message)

        await self.app(scope, receive, send_after_flush)


async def _gateway_app() -> _LifespanApp:
    loop = asyncio.get_running_loop()
    app = _running.get(loop)
    if app is None:
        gateway_deps = deps()
        settings = gateway_deps.settings
        app = _running[loop] = _LifespanApp(create_app(gateway_deps, host=settings.gateway_host,
                                                       api_token=settings.api_token))
    await app.start()
    return app


@functions_framework.aio.http
async def gateway(request: Request) -> _LifespanApp:
    """Every path of the gateway: the returned ASGI app answers this request."""
    return await _gateway_app()
