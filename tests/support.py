"""Helpers shared by integration and e2e tests: a mutable site on 127.0.0.1 and a CLI runner."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class Site:
    """A tiny web site whose pages tests change between polls."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.delay_s: float = 0.0
        self.hits: dict[str, int] = {}
        self.base = ""

    def put(self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8") -> None:
        self.pages[path] = (content_type, body.encode() if isinstance(body, str) else body)

    def remove(self, path: str) -> None:
        self.pages.pop(path, None)


def send_json(handler: http.server.BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Answer a stand-in server's request with ``payload`` as JSON, as Google's REST APIs answer."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def loopback_http(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[http.server.ThreadingHTTPServer]:
    """``handler`` served on a free 127.0.0.1 port in a background thread until the block ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serve_get(page_of: Callable[[str], tuple[str, bytes] | None]) -> Iterator[str]:
    """GET answered from ``page_of(path)`` (content type and body; None is a 404) on a free
    127.0.0.1 port until the block ends; yields the base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            page = page_of(self.path)
            if page is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", page[0])
            self.send_header("Content-Length", str(len(page[1])))
            self.end_headers()
            self.wfile.write(page[1])

    with loopback_http(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@contextmanager
def serve_site(site: Site) -> Iterator[Site]:
    def page_of(path: str) -> tuple[str, bytes] | None:
        site.hits[path] = site.hits.get(path, 0) + 1
        if site.delay_s and path != "/feed.xml":
            time.sleep(site.delay_s)
        return site.pages.get(path)

    with serve_get(page_of) as base:
        site.base = base
        yield site


@asynccontextmanager
async def mcp_session(url: str, **transport: Any) -> AsyncIterator[Any]:
    """An initialised session of the MCP SDK's own client over streamable HTTP at ``url``
    (``transport``: streamable_http_client's options, such as http_client)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url, **transport) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def mcp_tools(session: Any) -> dict[str, Any]:
    """The session's tools by name."""
    return {tool.name: tool for tool in (await session.list_tools()).tools}


def mcp_structured(result: Any) -> dict:
    """A successful tool result as the client sees it: structured content, else the JSON text."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


WORDS = (
    "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river mountain "
    "harbor lantern violet copper meadow signal archive quartz ember glacier falcon"
).split()


def article_html(title: str, paragraphs: list[str], published: str = "2026-10-01") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font:14px sans-serif}</style><script>var tracker=1;</script></head><body>"
        "<nav><a href='/'>Home</a> <a href='/about'>About</a> <a href='/blog'>Blog</a></nav>"
        "<div class='cookie-banner'>We use cookies to improve your experience. Accept all cookies?</div>"
        f"<article><h1>{title}</h1><time datetime='{published}'>{published}</time>{body}</article>"
        "<aside class='related'><h3>Related posts</h3><ul><li><a href='/x'>Other post</a></li></ul></aside>"
        "<footer>Copyright 2026 Example Blog. All rights reserved. Privacy policy.</footer></body></html>"
    )


def topic_paragraphs(topic: str, n: int = 4, seed: int = 0) -> list[str]:
    """Distinct, sentence-shaped paragraphs about ``topic``."""
    out = []
    for p in range(n):
        words = [WORDS[(seed * 7 + p * 3 + i) % len(WORDS)] for i in range(12)]
        out.append(
            f"The {topic} report number {p} describes how the {words[0]} and {words[1]} systems "
            f"interact with {words[2]} signals. Engineers observed that {topic} behaves like "
            f"{words[3]} under load, and that {words[4]} {words[5]} improves with {words[6]}. "
            f"Further study of {topic} compared {words[7]} against {words[8]} in {words[9]} "
            f"conditions, finding that {words[10]} matters more than {words[11]}."
        )
    return out


def topic_files(folder: Path, topic: str, count: int, paragraphs: int = 4) -> Path:
    """``folder`` created with ``count`` text files d0.txt... about ``topic``0, ``topic``1, ..."""
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"d{n}.txt").write_text("\n\n".join(topic_paragraphs(f"{topic}{n}", paragraphs, seed=n)))
    return folder



def put_article_feed(site: Site, n: int, topic: str) -> list[dict[str, str]]:
    """``n`` articles about ``topic`` on ``site`` and ``/feed.xml`` listing them (call it with the
    site served: the feed names its base URL); returns the feed's items."""
    items = [{"title": f"{topic} {i}", "path": f"/{topic}{i}.html", "guid": f"{topic}-{i}"} for i in range(n)]
    for i, item in enumerate(items):
        site.put(item["path"], article_html(f"{topic} {i}", topic_paragraphs(f"{topic}{i}", 3, seed=i)))
    publish_feed(site, items)
    return items


def put_topic_articles(site: Site, topics: list[str]) -> list[dict[str, str]]:
    """An article "All about <topic>" at ``/posts/<topic>.html`` on ``site`` for each of ``topics``; their feed items
    (guid ``guid-<topic>``), for :func:`publish_feed`."""
    items = []
    for n, topic in enumerate(topics):
        path = f"/posts/{topic}.html"
        site.put(path, article_html(f"All about {topic}", topic_paragraphs(topic, seed=n)))
        items.append({"title": f"All about {topic}", "path": path, "guid": f"guid-{topic}"})
    return items


def publish_feed(site: Site, items: list[dict[str, str]]) -> None:
    """``/feed.xml`` on ``site`` listing ``items`` (the site served: the feed names its base URL)."""
    site.put("/feed.xml", rss(site.base, items), "application/rss+xml")


def documents_by_name(home: Path) -> dict[str, dict]:
    """The documents a ``ragbus`` home holds, by the last part of their URL."""
    from shared.adapters.local.state import SqliteStateStore
    from shared.contract import state_collections

    store = SqliteStateStore(home / "ragbus.db")
    return {d["url"].rsplit("/", 1)[-1]: d for d in store.list(state_collections.DOCUMENTS)}

def rss(base: str, items: list[dict[str, str]]) -> str:
    start = datetime(2026, 10, 1, tzinfo=UTC)
    entries = "".join(
        f"<item><title>{i['title']}</title><link>{base}{i['path']}</link><guid>{i['guid']}</guid>"
        f"<pubDate>{format_datetime(start + timedelta(days=n))}</pubDate>"
        f"<description>{i.get('summary', i['title'])}</description></item>"
        for n, i in enumerate(items)
    )
    return (
        "<?xml version='1.0' encoding='UTF-8'?><rss version='2.0'><channel>"
        f"<title>Test feed</title><link>{base}/</link><description>t</description>{entries}</channel></rss>"
    )


def ragbus_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"RAGBUS_HOME": str(home), "RAGBUS_ALLOW_LOOPBACK": "1", "RAGBUS_RETRY_MIN_BACKOFF_S": "0.05",
                "RAGBUS_RETRY_MAX_BACKOFF_S": "0.2"})
    env.update(extra)
    return env


def suite_model_cache() -> dict[str, str]:
    """The run's one optimised-graph cache of the embedder (tests/conftest.py), for settings read
    from a dict of their own rather than the environment: not 90 MB more in every test's home."""
    return {"RAGBUS_MODEL_CACHE": os.environ["RAGBUS_MODEL_CACHE"]} if "RAGBUS_MODEL_CACHE" in os.environ else {}


def interrupt(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Ctrl-C to ``proc``'s process group (started with ``start_new_session``), as a person stops it;
    SIGKILL when it has not ended within ``timeout`` seconds."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_cli(home: Path, *args: str, check: bool = True, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`python -m shared.tools.cli ARGS` on ``home``, its output captured as text (forked from a process
    that imported the CLI once: tests/cli_fork.py)."""
    from tests import cli_fork

    proc = cli_fork.run(args, REPO, ragbus_env(home, **env), timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"ragbus {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_json(home: Path, *args: str, **env: str) -> Any:
    return json.loads(run_cli(home, *args, "--json", **env).stdout)


def root_main():
    """The repository's root ``main.py`` (functions-framework may have put another module
    under the name ``main`` in ``sys.modules``, so load it by path)."""
    import importlib.util

    module = sys.modules.get("ragbus_root_main")
    if module is None:
        spec = importlib.util.spec_from_file_location("ragbus_root_main", REPO / "main.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["ragbus_root_main"] = module
        spec.loader.exec_module(module)
    return module


@contextmanager
def tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted under ``tmp_path`` (root only: the test is skipped elsewhere, saying why)."""
    import uuid

    import pytest

    mount = tmp_path / f"mnt-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@contextmanager
def serving_documents(env: dict[str, str], docs: Path) -> Iterator[Any]:
    """The embedded runtime of ``env``'s settings, ``docs`` ingested and indexed by its real stages,
    and its gateway served on 127.0.0.1 (the handle: ``.url``, ``.stop()``), stopped afterwards."""
    from services.gateway.server import serve
    from shared.contract.config import load_settings
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    local = build_local(load_settings({**suite_model_cache(), **env}))
    with LocalRuntime(local.deps, local.bus) as runtime:
        ingest_path(docs, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                    clock=local.deps.clock)
        assert runtime.wait_idle(120)
        server = serve(local.deps, "127.0.0.1", 0)
        try:
            yield server
        finally:
            server.stop()


def metric_points(name: str, record: Callable[[], None]) -> list[Any]:
    """The data points of the metric ``name`` after ``record()`` (which calls shared.observability.metrics),
    read from a meter provider of this call's own (the process's global one may be another test's)."""
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import shared.observability.metrics as instruments

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instruments._instruments.cache_clear()
    original = metrics.get_meter
    try:
        metrics.get_meter = lambda meter, *a, **k: provider.get_meter(meter)
        record()
        data = reader.get_metrics_data()
        return [p for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
                if metric.name == name for p in metric.data.data_points]
    finally:
        metrics.get_meter = original
        instruments._instruments.cache_clear()


@contextmanager
def gateway_on(home: Path) -> Iterator[tuple[Any, Any]]:
    """The embedded runtime's ports on ``home`` (no stages running) and its gateway served on 127.0.0.1:
    ``(server, deps)``, stopped afterwards."""
    from services.gateway.server import serve
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local

    deps = build_local(load_settings({"RAGBUS_HOME": str(home), **suite_model_cache()})).deps
    server = serve(deps, "127.0.0.1", 0)
    try:
        yield server, deps
    finally:
        server.stop()


def cpu_ratio(run: Callable[[int], Any], small: int, large: int, tries: int = 3,
              check: Callable[[int, Any], None] | None = None) -> float:
    """How many times the CPU time of ``run(small)`` ``run(large)`` takes: the least of ``tries`` runs of each, in
    the thread's CPU time (wall time counts what a loaded machine takes away mid-try; the least drops a pause).
    ``check(n, result)`` is called on each size's last result, outside the timing."""
    least = {}
    for n in (small, large):
        least[n] = float("inf")
        for _ in range(tries):
            started = time.thread_time()
            result = run(n)
            least[n] = min(least[n], time.thread_time() - started)
        if check is not None:
            check(n, result)
    return least[large] / least[small]
