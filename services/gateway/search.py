"""``GET /v1/search``: retrieval only, the chunks nearest the words within the filters."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.gateway.replies import ascii_int, error
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.contract.text import shown, without_bidi_controls
from shared.query.api import TOP_K_RANGE, search_documents, validate_int

#: GET /v1/search's filter parameters (``where`` repeats: where=key=value).
_SEARCH_FILTERS = ("source", "since", "until", "kind", "where")


class SearchRoute:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

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
        # the query as searched, which drops bidirectional overrides (shared.query.api.validate_query_text)
        query = without_bidi_controls(params["q"])
        return JSONResponse({"query": query, "k": k or self.deps.settings.top_k, "results": results})


def _int_param(raw: str, name: str) -> int:
    try:
        return ascii_int(raw)
    except ValueError:
        raise InvalidInput(f"'{name}' must be a whole number, got {shown(raw)}") from None
