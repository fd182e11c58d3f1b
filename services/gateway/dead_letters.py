"""``/v1/dead-letters``: list, retry and purge the messages that could not be handled."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.gateway.replies import error
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput


class DeadLetterRoutes:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def dead_letters(self, request: Request) -> Response:
        """GET: every dead letter; DELETE: purge them all."""
        from services.dead_letters.redrive import as_shown, letters, purge

        if request.method == "DELETE":
            return await self._redrive(purge, None, "purged")
        kept = await anyio.to_thread.run_sync(letters, self.deps.state)
        return JSONResponse({"dead_letters": as_shown(kept)})

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
