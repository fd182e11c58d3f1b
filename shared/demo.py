"""``ragbus demo``: the README's main job, entirely offline.

Serves the bundled sample corpus (an RSS feed and its article pages) from disk
on 127.0.0.1, registers that feed, polls it, ingests the bundled Markdown and
text files, then asks three questions chosen to show the loop at work: one
answered at once, one that needs a refinement, one the corpus cannot answer.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from shared.config import load_settings
from shared.errors import RagbusError
from shared.messages import FeedPollRequested

CORPUS = Path(__file__).parent / "corpus"
DEMO_PORT = int(os.environ.get("RAGBUS_DEMO_PORT", "8765"))

QUESTIONS = (
    ("answered at once", "How does BM25 saturate term frequency?"),
    ("needs refinement", "When is exact search good enough?"),
    ("not answerable from the corpus", "What is the boiling point of tungsten?"),
)


class _CorpusHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the corpus folder, writing the server's own address where files say {{BASE}}."""

    base = ""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the demo quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        path = Path(self.translate_path(self.path))
        if path.suffix in {".xml", ".html"} and path.is_file():
            body = path.read_bytes().replace(b"{{BASE}}", self.base.encode())
            self.send_response(200)
            kind = "application/rss+xml" if path.suffix == ".xml" else "text/html; charset=utf-8"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@contextmanager
def serve_corpus(port: int = DEMO_PORT) -> Iterator[str]:
    """Serve ``corpus/site`` on 127.0.0.1:port (0: any free port); yields the base URL."""
    handler = type("Handler", (_CorpusHandler,), {})
    try:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", port), functools.partial(handler, directory=str(CORPUS / "site"))
        )
    except OSError as exc:
        raise RagbusError(
            f"the demo serves its sample feed on 127.0.0.1:{port}, which is in use ({exc}); "
            "free it or set RAGBUS_DEMO_PORT to another port"
        ) from None
    handler.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler.base
    finally:
        server.shutdown()
        server.server_close()


def submit_sample_corpus(deps, base: str) -> str:
    """Register the sample feed served at ``base``, request a poll of it and ingest the
    sample documents; return the feed URL. The stages running somewhere do the rest."""
    from shared.feeds import add_feed, list_feeds
    from shared.file_ingest import ingest_path

    feed_url = f"{base}/feed.xml"
    if not any(f["url"] == feed_url for f in list_feeds(deps.state)):
        add_feed(deps.state, feed_url, allow_loopback=True, now=deps.clock.now())
    deps.publisher.publish(FeedPollRequested(
        request_id=uuid.uuid4().hex, feed_urls=[feed_url], requested_at=deps.clock.now()))
    ingest_path(CORPUS / "docs", state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
    return feed_url


def run_demo(console: Console, *, serve_after: bool = False, port: int = 8080) -> None:
    from shared import collections
    from shared.cli import _wait_with_progress, print_answer
    from shared.query_api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    # The demo's own feed lives on loopback; allowing loopback is scoped to this run.
    settings = load_settings().with_(allow_loopback=True)
    system = build_local(settings)
    deps = system.deps
    console.print(f"[bold]ragbus demo[/] — data in {settings.home.resolve()}")
    with LocalRuntime(deps, system.bus) as runtime, serve_corpus() as base:
        since = time.time() - 0.001
        console.print(f"1. polling the sample feed {base}/feed.xml and ingesting {CORPUS / 'docs'}")
        submit_sample_corpus(deps, base)
        _wait_with_progress(system, runtime, since, 600, "demo ingestion")
        console.print(f"   {deps.state.count(collections.DOCUMENTS)} documents, "
                      f"{deps.index.count_chunks()} chunks indexed\n")
        for n, (why, question) in enumerate(QUESTIONS, 2):
            console.rule(f"{n}. {why}: {question}")
            record = submit_query(deps, question)
            print_answer(wait_for_query(deps, record.id, settings.query_timeout_s + 5))
        if serve_after:
            from services.gateway.app import serve as serve_gateway

            server = serve_gateway(deps, "127.0.0.1", port)
            console.print(f"\nOpen http://127.0.0.1:{port}/ to ask your own questions; Ctrl-C to stop.")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                server.stop()
            return
    console.print(
        "\nTo ask your own questions in the browser: [bold].venv/bin/ragbus serve[/] "
        "and open [bold]http://127.0.0.1:8080/[/] (or [bold]make demo ARGS=--serve[/])."
    )
