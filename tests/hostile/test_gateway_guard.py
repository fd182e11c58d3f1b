"""Hostile HTTP requests against the gateway on 127.0.0.1: foreign Host (DNS rebinding),
cross-site writes (CSRF), missing tokens and malformed JSON. Each is refused with a 4xx that
says why, and nothing is stored."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from services.gateway.server import serve
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.runtime.bootstrap import build_local
from tests.support import REPO, gateway_on, ragbus_env, run_cli

QUESTION = {"question": "what is bm25"}
MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with gateway_on(tmp_path_factory.mktemp("gw")) as served:
        yield served


def _queries(deps) -> int:
    return deps.state.count(state_collections.QUERIES)


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/v1/search?q=bm25", None),
    ("POST", "/v1/queries", QUESTION),
    ("GET", "/", None),
    ("POST", "/mcp", MCP_INIT),
])
@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}"])
def test_a_foreign_host_is_refused_on_every_route(gateway, method, path, body, host):
    server, deps = gateway
    before = _queries(deps)
    response = httpx.request(method, server.url + path, json=body,
                             headers={**MCP_HEADERS, "Host": host.format(port=server.port)})
    assert response.status_code == 421 and "DNS rebinding" in response.json()["error"]
    assert _queries(deps) == before


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "localhost"])
def test_the_bound_address_and_localhost_are_accepted(gateway, host):
    server, _ = gateway
    response = httpx.get(server.url + "/healthz", headers={"Host": host.format(port=server.port)})
    assert response.status_code == 200


@pytest.mark.parametrize("headers,status", [
    ({"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403),  # the CSRF of issue 10
    ({"Origin": "http://evil.example", "Content-Type": "application/json"}, 403),
    ({"Origin": "null", "Content-Type": "text/plain"}, 403),  # sandboxed iframe, file://
    ({"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, 403),
    ({"Content-Type": "text/plain"}, 415),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ({}, 415),
])
def test_cross_site_or_non_json_writes_are_refused(gateway, headers, status):
    server, deps = gateway
    before = _queries(deps)
    response = httpx.post(server.url + "/v1/queries", content=json.dumps(QUESTION), headers=headers)
    assert response.status_code == status, response.text
    assert _queries(deps) == before


def test_cross_origin_mcp_calls_are_refused_too(gateway):
    server, _ = gateway
    response = httpx.post(server.url + "/mcp", json=MCP_INIT,
                          headers={**MCP_HEADERS, "Origin": "http://evil.example"})
    assert response.status_code == 403


def test_a_same_origin_json_post_from_the_page_is_accepted(gateway):
    server, deps = gateway
    before = _queries(deps)
    response = httpx.post(server.url + "/v1/queries", json=QUESTION, headers={"Origin": server.url})
    assert response.status_code == 202
    assert _queries(deps) == before + 1


@pytest.mark.parametrize("content", [
    b"[" * 30_000 + b"]" * 30_000,  # under the 64 KB body cap, far over any sane depth
    b'{"question": ' + b"{\"a\": " * 6_000 + b"1" + b"}" * 6_000 + b"}",
    b'{"question": "q", "top_k": ' + b"9" * 5000 + b"}",
    b'{"question": 1e999999}',
    b'{"question": "\\ud800"}',
])
def test_malformed_json_of_any_shape_gets_400_not_500(gateway, content):
    server, deps = gateway
    before = _queries(deps)
    response = httpx.post(server.url + "/v1/queries", content=content,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    said = response.json()["error"]
    assert "sys." not in said and "recursion" not in said, said  # in JSON's terms, not Python's
    assert _queries(deps) == before


@pytest.mark.parametrize("content", [b"[" * 30_000 + b"]" * 30_000, b'{"jsonrpc": ' + b"9" * 5000 + b"}"])
def test_malformed_json_to_mcp_is_a_client_error(gateway, content):
    server, _ = gateway
    response = httpx.post(server.url + "/mcp", content=content, headers=MCP_HEADERS)
    assert 400 <= response.status_code < 500


def test_a_token_guards_the_api_and_mcp_but_not_the_page(tmp_path):
    deps = build_local(load_settings({"RAGBUS_HOME": str(tmp_path)})).deps
    server = serve(deps, "127.0.0.1", 0, api_token="s3cret")
    try:
        url = server.url
        assert httpx.get(url + "/v1/search?q=x").status_code == 401
        assert httpx.get(url + "/v1/search?q=x", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.post(url + "/mcp", json=MCP_INIT, headers=MCP_HEADERS).status_code == 401
        assert httpx.get(url + "/v1/search?q=x", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(url + "/healthz").status_code == 200 and httpx.get(url + "/").status_code == 200
    finally:
        server.stop()


def test_serve_on_a_public_address_without_a_token_warns_and_refuses_to_start(tmp_path):
    proc = run_cli(tmp_path / "home", "serve", "--host", "0.0.0.0", "--port", "0", check=False, timeout=60,
                   RAGBUS_API_TOKEN="")
    assert proc.returncode == 2
    assert "error: --host 0.0.0.0 is reachable" in proc.stderr and "RAGBUS_API_TOKEN" in proc.stderr
    assert "Not starting" in proc.stderr and "warning" not in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_on_a_busy_or_impossible_port_says_so_in_one_line(tmp_path):
    # uvicorn logged a bind failure as a bare "ERROR: [Errno 98] ..." line before ragbus's own
    # "error: RuntimeError ... (address in use or not allowed?)", and a port over 65535 as a traceback
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = run_cli(tmp_path / "home", "serve", "--port", str(port), check=False, timeout=60)
    assert taken.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in " ".join(taken.stderr.split())
    huge = run_cli(tmp_path / "home", "serve", "--port", "70000", check=False, timeout=60)
    assert huge.returncode == 2
    assert "port 70000 is not a TCP port" in " ".join(huge.stderr.split())
    for proc in (taken, huge):
        assert "Traceback" not in proc.stderr and "ERROR:" not in proc.stderr and "RuntimeError" not in proc.stderr


def test_ragbus_serve_refuses_a_text_plain_cross_origin_post_and_a_foreign_host(tmp_path):
    """The issue's check, against the real `ragbus serve` process."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "shared.tools.cli", "serve", "--port", str(port)], cwd=REPO,
                            env=ragbus_env(tmp_path / "home"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "ragbus serve did not start"
            time.sleep(0.2)
        csrf = httpx.post(base + "/v1/queries", content='{"question": "what is bm25"}',
                          headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
        rebinding = httpx.get(base + "/v1/search?q=bm25", headers={"Host": f"evil.example:{port}"})
        assert 400 <= csrf.status_code < 500 and 400 <= rebinding.status_code < 500
        assert httpx.get(base + "/v1/search?q=bm25").status_code == 200
    finally:
        proc.terminate()
        proc.wait(20)
    assert json.loads(run_cli(tmp_path / "home", "stats", "--json").stdout)["queries"]["total"] == 0
