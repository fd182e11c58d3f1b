"""``/healthz`` and ``/readyz``: whether the gateway is up, and whether the model and the stages
this process runs can answer a question."""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared.contract.deps import Deps

#: Worker threads kept for /healthz and /readyz alone, so a crowd of queries cannot delay a probe.
HEALTH_THREADS = 4
#: How long what the model's server answered to a probe (reachable or not) stands for the probes after it.
MODEL_PROBE_HOLD_S = 10.0
#: How long a data file error a request met keeps /readyz unready after it (a full disk that frees
#: itself, a quota lifted): the free space of the data directory's disk is read at every probe besides.
DATA_ERROR_HOLD_S = 15.0


class Probes:
    """The probes, bound to one Deps.

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
        self._data_error: tuple[float, str] | None = None  # (monotonic time, message) of the last one met
        self._data_error_lock = threading.Lock()
        self._model_probe: tuple[float, str | None] | None = None  # (monotonic time, why unreachable) of the last
        self._model_probe_lock = threading.Lock()

    def note_data_error(self, exc: Exception) -> None:
        """A request met a data file that cannot be written or read (a full disk): ``/readyz`` says so."""
        with self._data_error_lock:
            self._data_error = (time.monotonic(), str(exc))

    def disk_full(self) -> str | None:
        """Why nothing can be stored: the disk holding the embedded runtime's data directory has
        (almost) no room left (None otherwise, and always for the gcp runtime)."""
        settings = self.deps.settings
        if settings.runtime != "local":
            return None
        from shared.adapters.local.disk import LOW_SPACE_BYTES, free_bytes

        free = free_bytes(settings.home)
        if free is None or free >= LOW_SPACE_BYTES:
            return None
        return (f"the disk holding {settings.home} is full ({free} bytes free); free space on it: questions, "
                "ingestion and index flushes cannot be stored meanwhile")

    def storage_problem(self) -> str | None:
        """Why this process cannot store what it is asked to (None when it can): the disk holding
        the data directory is (nearly) full, or a request met a data file error a moment ago."""
        full = self.disk_full()
        if full is not None:
            return full
        with self._data_error_lock:
            noted = self._data_error
        if noted is not None and time.monotonic() - noted[0] < DATA_ERROR_HOLD_S:
            return noted[1]
        return None

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

    def _model_health(self) -> dict[str, Any]:
        from shared.query.model_health import model_health

        # The stages that call the model may run elsewhere: what they recorded is the truth, and whether its
        # server answers at all (a transient failure records nothing: each query would fall back or fail unseen)
        return model_health(self.deps.state, self.deps.settings.llm_model, self.model_unreachable())

    def model_unreachable(self) -> str | None:
        """Why the served model's server cannot be reached (None: it answers, or no server serves the model), asked
        at most every :data:`MODEL_PROBE_HOLD_S`."""
        from shared.contract.providers import PROVIDER_BY_NAME

        if not PROVIDER_BY_NAME[self.deps.settings.llm_provider].base_url_setting:
            return None
        with self._model_probe_lock:
            if self._model_probe is not None and time.monotonic() - self._model_probe[0] < MODEL_PROBE_HOLD_S:
                return self._model_probe[1]
            probe = getattr(self.deps.llm, "unreachable", None)
            why = probe() if callable(probe) else None
            self._model_probe = (time.monotonic(), why)
            return why

    def index_damage(self) -> dict[str, dict[str, Any]]:
        """The index segments found damaged and not yet written anew (the local index names them)."""
        damage = getattr(self.deps.built("index"), "damage", None)
        return damage() if callable(damage) else {}

    def unready_stages(self) -> dict[str, str]:
        from shared.runtime.readiness import unready_stages

        return unready_stages(self.deps.settings, self.stages) if self.stages else {}

    async def health(self, request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok", "runtime": self.deps.settings.runtime}
        if not self._shows_detail(request):
            return JSONResponse(body)  # live; what is wrong is for token holders and the log
        model = await self._health_read(self._model_health)
        if not model["usable"]:
            body["model"] = model  # still live (200): restarting the gateway cannot fix the model
        unready = await self._health_read(self.unready_stages)
        if unready:
            body["stages"] = unready  # still live: the fix is a file or a setting, not a restart
        return JSONResponse(body)

    async def ready(self, request: Request) -> Response:
        model = await self._health_read(self._model_health)
        unready = await self._health_read(self.unready_stages)
        damaged = await self._health_read(self.index_damage)
        storage = await self._health_read(self.storage_problem)
        ready = (bool(model["usable"]) and not unready and storage is None
                 and all(d.get("answering", True) for d in damaged.values()))
        status = 200 if ready else 503
        # degraded: answering (a damaged segment's rows are rebuilt from chunks.db) until it is written anew
        word = ("degraded" if damaged else "ready") if ready else "unready"
        if not self._shows_detail(request):
            return JSONResponse({"status": word, "model": {"model": model["model"], "usable": model["usable"]}},
                                status_code=status)
        body: dict[str, Any] = {"status": word, "model": model}
        if unready:
            body["stages"] = unready
        if damaged:
            body["index"] = {"damaged": damaged}
        if storage is not None:
            body["storage"] = storage
        return JSONResponse(body, status_code=status)
