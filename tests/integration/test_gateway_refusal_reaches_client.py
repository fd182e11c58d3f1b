"""A connection refused at once (past RAGBUS_MAX_CONNECTIONS_PER_ADDRESS or RAGBUS_MAX_CONNECTIONS) is answered
429 or 503, and the client reads that answer: the gateway closed the socket as it wrote it, so the request the
client was still sending arrived at a closed socket, the kernel answered it with a reset, and the reset threw
away the answer before the client read it. A flood of 80 questions from one address over httpx (the OpenAI
SDK's transport) got 63 202s, one 429 and 16 bare `ReadError`s: no status, no Retry-After."""

from __future__ import annotations

import asyncio
import collections
import json

import httpx

from services.gateway.server import serve
from shared.contract.config import Settings
from tests.integration.test_gateway_http import make_deps


async def _flood(url: str, count: int) -> list:
    async with httpx.AsyncClient(timeout=20) as client:
        return await asyncio.gather(*[client.post(url + "/v1/search", json={"q": "washers", "padding": "x" * 5000})
                                      for _ in range(count)], return_exceptions=True)


def test_clients_refused_for_too_many_connections_read_the_429_not_a_reset(tmp_path):
    settings = Settings(home=tmp_path, request_read_timeout_s=20.0, max_connections=64, max_connections_per_address=4)
    handle = serve(make_deps(tmp_path, settings, step_s=0.3), "127.0.0.1", 0)
    try:
        answers = asyncio.run(_flood(handle.url, 24))
        seen = collections.Counter(a.status_code if isinstance(a, httpx.Response) else repr(a) for a in answers)
        assert set(seen) <= {405, 429} and seen[429] >= 1, seen  # POST /v1/search: 405, answered whole
        refused = next(a for a in answers if isinstance(a, httpx.Response) and a.status_code == 429)
        assert refused.headers["retry-after"] == "1"
        assert "RAGBUS_MAX_CONNECTIONS_PER_ADDRESS" in json.loads(refused.text)["error"]
        assert httpx.get(handle.url + "/healthz").status_code == 200
    finally:
        handle.stop()
