"""Who gets through the gateway when functions-framework serves it, as on Cloud Run:
gunicorn with a uvicorn worker (the production path of ``functions-framework --target=gateway``).

- The page's own POST behind a TLS-terminating front end: a real forwarding proxy process
  (tests/forwarding_proxy.py) reaches the server from 127.0.0.2 with ``X-Forwarded-Proto:
  https``. Without ``FORWARDED_ALLOW_IPS`` the server sees ``http`` and the page's
  ``Origin: https://...`` is refused; with the proxy's address trusted it passes. A forged
  ``X-Forwarded-Proto`` sent straight from 127.0.0.2 to an unconfigured server stays refused.
- ``RAGBUS_API_TOKEN``: enforced by the cloud gateway, combined with Cloud Run IAM through
  ``X-Serverless-Authorization``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from shared.tools.emulators import free_port
from tests.support import REPO, interrupt, ragbus_env

QUESTION = json.dumps({"question": "what is bm25?"})
TOKEN = "s3cret-ragbus-token"
# An identity token as Cloud Run IAM wants it (a JWT); the gateway never validates it.
ID_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL3JiLWdhdGV3YXkucnVuLmFwcCJ9.c2ln"


def _wait_for_port(proc: subprocess.Popen, port: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before listening:\n{proc.stdout.read()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"port {port} did not answer within {timeout_s:.0f}s")


@contextmanager
def _process(argv: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, cwd=REPO, env=env, text=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            interrupt(proc)


@contextmanager
def gateway_function(home: Path, **env: str) -> Iterator[int]:
    port = free_port()
    environment = ragbus_env(home, RAGBUS_TRACING="0", **env)
    environment.pop("FORWARDED_ALLOW_IPS", None)
    environment.update(env)
    argv = [sys.executable, "-m", "functions_framework", "--target=gateway", f"--source={REPO / 'main.py'}",
            "--host=127.0.0.1", f"--port={port}"]
    with _process(argv, environment) as proc:
        _wait_for_port(proc, port)
        yield port


@contextmanager
def forwarding_proxy(target_port: int) -> Iterator[int]:
    port = free_port()
    argv = [sys.executable, str(REPO / "tests" / "forwarding_proxy.py"), str(port), str(target_port)]
    with _process(argv, ragbus_env(Path("/nonexistent"))) as proc:
        assert proc.stdout.readline().startswith("ready"), "the proxy did not start"
        yield port


def _post(port: int, headers: dict[str, str], *, source: str | None = None, path: str = "/v1/queries",
          body: str = QUESTION) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                      source_address=(source, 0) if source else None)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        conn.close()


def _page_post(port: int, **extra: str) -> tuple[int, dict]:
    """What the web page's fetch sends when it is served from https://<host>."""
    host = f"127.0.0.1:{port}"
    return _post(port, {"Host": host, "Origin": f"https://{host}", "Sec-Fetch-Site": "same-origin", **extra})


@pytest.mark.timeout(240)
def test_the_pages_post_through_a_tls_front_end_needs_the_front_end_trusted(tmp_path):
    with gateway_function(tmp_path / "plain") as server, forwarding_proxy(server) as proxy:
        status, body = _page_post(proxy)
        assert status == 403 and "FORWARDED_ALLOW_IPS" in body["error"], body
        # a client that says it came over https, straight from an untrusted address: still refused
        host = f"127.0.0.1:{server}"
        status, body = _post(server, {"Host": host, "Origin": f"https://{host}", "X-Forwarded-Proto": "https"},
                             source="127.0.0.2")
        assert status == 403, body
        # REST clients send no Origin and are not affected
        assert _post(proxy, {})[0] == 202

    with gateway_function(tmp_path / "behind", FORWARDED_ALLOW_IPS="127.0.0.2") as server, \
            forwarding_proxy(server) as proxy:
        status, body = _page_post(proxy)
        assert status == 202, body
        assert body["status"] == "pending"
        # the forwarded scheme is trusted, but another site's origin is still another site
        status, body = _page_post(proxy, Origin="https://evil.example")
        assert status == 403, body


@pytest.mark.timeout(240)
def test_the_cloud_gateway_honours_ragbus_api_token_beside_cloud_run_iam(tmp_path):
    with gateway_function(tmp_path / "token", RAGBUS_API_TOKEN=TOKEN) as port:
        status, body = _post(port, {})
        assert status == 401 and "X-Serverless-Authorization" in body["error"], body
        # IAM's identity token alone in Authorization is not the ragbus token
        assert _post(port, {"Authorization": f"Bearer {ID_TOKEN}"})[0] == 401
        assert _post(port, {"Authorization": "Bearer wrong"})[0] == 401
        # Cloud Run checks X-Serverless-Authorization and passes Authorization on to the app
        status, body = _post(port, {"X-Serverless-Authorization": f"Bearer {ID_TOKEN}",
                                    "Authorization": f"Bearer {TOKEN}"})
        assert status == 202, body
        assert _post(port, {"Authorization": f"Bearer {TOKEN}"})[0] == 202
        # the token in the IAM header does not count as the ragbus token
        assert _post(port, {"X-Serverless-Authorization": f"Bearer {TOKEN}"})[0] == 401
        # MCP is behind the same token
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        mcp_headers = {"Accept": "application/json, text/event-stream"}
        assert _post(port, mcp_headers, path="/mcp", body=initialize)[0] == 401
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200  # health checks stay open
        conn.close()
