"""``ragbus demo``: the README's main job, entirely offline.

Starts the gateway on 127.0.0.1 (port 8080 unless told otherwise), which serves
the bundled sample corpus (an RSS feed and its article pages) under ``/sample/``,
registers that feed, polls it, ingests the bundled Markdown and text files, then
asks three questions chosen to show the loop at work: one the first search answers, one
that needs a refinement, one the corpus cannot answer. Each is headed by what happened to
it (:func:`what_happened`), never by what it was chosen to show: the reader's verdict may
add a caveat to an answer the first search found ("answered at once" above
``answered_with_caveat`` told two stories).

It leaves a home the everyday commands work in: on the way out it unregisters
its feed (keeping the documents), so a later ``ragbus poll`` has no dead feed
to fetch, and ``ragbus serve`` on the same port serves ``/sample/`` again, so
the citations of the sample articles keep opening.
"""

from __future__ import annotations

import functools
import http.server
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from shared.contract.config import load_settings
from shared.contract.errors import InvalidInput, RagbusError
from shared.contract.messages import FeedPollRequested
from shared.corpus import CORPUS, SAMPLE_PATH

log = logging.getLogger("ragbus.demo")

#: one the first search answers, one the grade leaves unsure (a model refines it; the offline one finds nothing new
#: to search, so the loop ends at its first grade: services/transformer), one the corpus cannot answer
QUESTIONS = (
    "How does BM25 saturate term frequency?",
    "Is approximate search always good enough?",
    "What is the boiling point of tungsten?",
)


def what_happened(record) -> str:
    """A query's path as the demo heads it, from its record: "answered with a caveat after 1 refinement",
    "not answerable from the corpus"; the outcome it names is the record's own."""
    refinements = max(0, len(record.iterations) - 1)
    path = (f"after {refinements} refinement{'' if refinements == 1 else 's'}" if refinements
            else "from the first search")
    outcome = record.outcome or record.status
    if outcome == "answered":
        return f"answered {path}"
    if outcome == "answered_with_caveat":
        return f"answered with a caveat {path}"
    if outcome == "not_answerable":
        return f"not answerable from the corpus ({path})" if refinements else "not answerable from the corpus"
    return f"{outcome.replace('_', ' ')} {path}"


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
def serve_corpus(port: int = 0) -> Iterator[str]:
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
    from shared.ingest.files import ingest_path
    from shared.ingest.listings import add_listing, list_listings

    feed_url = f"{base}/feed.xml"
    moved = forget_sample_elsewhere(deps, feed_url)
    if moved:
        log.info("the sample feed moved to %s: %d article(s) indexed from its earlier address removed",
                 feed_url, moved)
    if not any(f["url"] == feed_url for f in list_listings(deps.state)):
        add_listing(deps.state, feed_url, allow_loopback=True, now=deps.clock.now())
    deps.publisher.publish(FeedPollRequested(
        request_id=uuid.uuid4().hex, feed_urls=[feed_url], requested_at=deps.clock.now()))
    ingest_path(CORPUS / "docs", state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
    return feed_url


#: the sample feed's guids: the same articles whatever address the feed is served from
SAMPLE_GUID_PREFIX = "ragbus-sample-corpus:"


def forget_sample_elsewhere(deps, feed_url: str) -> int:
    """Retract the sample articles indexed from the feed at another address (a demo on another
    port), and unregister that feed: the sample corpus is indexed once, under the address that
    serves it now, instead of once per port. Returns how many articles were retracted."""
    from shared.ingest import processed_items
    from shared.ingest.listings import list_listings, remove_listing
    from shared.ingest.step import retract

    moved = [r for r in processed_items.records(deps.state, {"source": "feed"})
             if str(r.get("guid", "")).startswith(SAMPLE_GUID_PREFIX) and r.get("feed_url") != feed_url]
    for record in moved:
        retract(record["document_id"], f"the sample feed moved to {feed_url}", state=deps.state,
                publisher=deps.publisher, clock=deps.clock)
    for listing in list_listings(deps.state, kind="feed"):
        if listing["url"] != feed_url and listing["url"].endswith(f"{SAMPLE_PATH}/feed.xml") \
                and listing["url"].startswith("http://127.0.0.1:"):
            remove_listing(deps.state, listing["url"], publisher=deps.publisher, clock=deps.clock, keep_documents=True)
    return len(moved)


def run_demo(console: Console, *, serve_after: bool = False, port: int | None = None) -> None:
    from services.gateway.server import serve as serve_gateway
    from shared.contract import state_collections
    from shared.ingest.listings import remove_listing
    from shared.observability.terminal_text import markup
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from shared.runtime.readiness import require_ready
    from shared.runtime.stages import STAGES
    from shared.tools.console import (
        dead_since,
        print_answer,
        wait_until_stopped,
        wait_with_progress,
    )

    # The demo's own feed lives on loopback; allowing loopback is scoped to this run.
    settings = load_settings().with_(allow_loopback=True)
    port = settings.demo_port if port is None else port
    require_ready(settings, (s.name for s in STAGES))  # it asks questions: a grader that cannot grade fails now
    system = build_local(settings)
    deps = system.deps
    # paths are the user's: printed as text, never read as markup
    console.print(f"[bold]ragbus demo[/] — data in {markup(settings.home.resolve())}", soft_wrap=True)
    try:
        server = serve_gateway(deps, "127.0.0.1", port)
    except InvalidInput as exc:
        raise RagbusError(f"{exc} (RAGBUS_DEMO_PORT sets the demo's port too)") from None
    except RuntimeError:
        raise RagbusError(
            f"the demo serves its page and sample feed on 127.0.0.1:{port}, which is in use "
            "(a `ragbus serve` already running?); stop it, or pass --port (RAGBUS_DEMO_PORT)"
        ) from None
    base = server.url
    feed_url = ""
    try:
        with LocalRuntime(deps, system.bus) as runtime:
            since = time.time() - 0.001
            console.print(f"1. polling the sample feed {base}{SAMPLE_PATH}/feed.xml and ingesting "
                          f"{markup(CORPUS / 'docs')}", soft_wrap=True)
            feed_url = submit_sample_corpus(deps, base + SAMPLE_PATH)
            if not wait_with_progress(system, runtime, since, 600, "demo ingestion"):
                raise RagbusError("the sample corpus was not indexed within 600 s")
            dead = dead_since(system, since)
            if dead:  # answers from part of the corpus would pass for the demo working
                raise RagbusError(f"the sample corpus was not fully indexed: {dead} message(s) were "
                                  "dead-lettered; see `ragbus dead-letters` for the reasons")
            console.print(f"   {deps.state.count(state_collections.DOCUMENTS)} documents, "
                          f"{deps.index.count_chunks()} chunks indexed\n")
            for n, question in enumerate(QUESTIONS, 2):
                record = wait_for_query(deps, submit_query(deps, question).id, settings.query_timeout_s + 5)
                # headed by what happened, as wide as the terminal, at most 100 columns (a pipe's is unbounded)
                console.print(Rule(f"{n}. {what_happened(record)}: {question}"), width=min(console.width, 100))
                print_answer(record)
            if serve_after:
                console.print(f"\nOpen {base}/ to ask your own questions; Ctrl-C to stop.")
                wait_until_stopped()
    finally:
        server.stop()
        if feed_url:
            # Nothing serves the feed once the demo is gone: a registered dead feed would fail every
            # `ragbus poll`. Its documents stay; `ragbus serve` serves their pages under /sample/.
            remove_listing(deps.state, feed_url, publisher=deps.publisher, clock=deps.clock, keep_documents=True)
    if not serve_after:
        console.print(
            f"\nThe sample articles stay indexed here. To ask your own questions in the browser: "
            f"[bold].venv/bin/ragbus serve --port {base.rsplit(':', 1)[1]}[/] and open [bold]{base}/[/] "
            "(or [bold]make demo ARGS=--serve[/]).", soft_wrap=True
        )
