"""Freshness: how soon after a new item appears in a feed can ``ask`` cite it (a benchmark, not a test).

Local provider, on either runtime:

- ``embedded`` (default): the stages run as threads of this process over the SQLite bus
  (issue 14's target: p50 <= 5 s);
- ``emulators``: the production topology of ``ragbus up --emulators`` (Pub/Sub and
  Firestore emulators, fake-gcs-server, one functions-framework process per stage,
  push subscriptions), started under a temporary home and stopped by pid at the end;
  this process is only a client, as ``ragbus poll`` / ``ragbus ask`` are. No target:
  the figure is reported (the emulators' push delivery is not Cloud Pub/Sub's).

A feed served on 127.0.0.1 (any free port)
starts with a few articles and the bundled sample corpus is ingested beside it.
Then, each round: a new article with a fact no other document states is
published into the feed, a poll is requested (what ``ragbus poll`` does), and
the question about that fact is asked again and again until an answer cites
the new article. The figure is publish -> first citing answer (the poll
schedule's own interval is not included: the poll is requested at once), split
into publish -> indexed and indexed -> cited.

    python bench/freshness.py                 # 5 rounds, embedded
    python bench/freshness.py --rounds 3 --json
    python bench/freshness.py --runtime emulators --rounds 3    # the emulator topology (about a minute to start)
    python bench/freshness.py --runtime both                    # both figures, one after the other
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.contract.config import load_settings  # noqa: E402
from shared.contract.messages import FeedPollRequested  # noqa: E402
from shared.ingest.files import ingest_path  # noqa: E402
from shared.ingest.listings import add_listing, list_listings  # noqa: E402
from shared.ingest.progress import status_of, touched_since  # noqa: E402
from shared.query.api import submit_query, wait_for_query  # noqa: E402
from shared.runtime.bootstrap import build_deps, build_local  # noqa: E402
from shared.runtime.local import LocalRuntime  # noqa: E402
from shared.tools.demo import CORPUS, serve_corpus  # noqa: E402
from tests.support import serve_get  # noqa: E402

TARGET_S = 5.0  # embedded runtime (issue 14); the emulator topology's figure is reported without one
RUNTIMES = ("embedded", "emulators")
# Invented facts (no real-world knowledge, no overlap with the sample corpus), one per round.
FACTS = [
    ("Quenwick relay", "Harbourline", "carries 4,812 parcels an hour"),
    ("Velmora index", "Ostrand", "was recalibrated to a tolerance of 0.37 units"),
    ("Tarsel beacon", "Drummond Point", "flashes every 11 seconds during fog"),
    ("Kelvane ledger", "Amberfield", "settles transfers in 19 minutes"),
    ("Pryscott gauge", "Lowmere", "reads river depth to 6 millimetres"),
    ("Ardley turbine", "Saltmarsh", "turns at 212 revolutions a minute"),
    ("Brenmoor archive", "Caldwick", "holds 73,000 survey maps"),
    ("Fennick valve", "Northgate", "opens at a pressure of 38 bar"),
]


class Feed:
    """An RSS feed and its articles, in memory, that the benchmark adds items to."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.base = ""

    def add(self, slug: str, title: str, paragraphs: list[str], published: datetime) -> str:
        with self.lock:
            self.items.insert(0, {"slug": slug, "title": title, "body": "".join(f"<p>{p}</p>" for p in paragraphs),
                                  "date": format_datetime(published)})
        return f"{self.base}/articles/{slug}.html"

    def rss(self) -> bytes:
        with self.lock:
            items = "".join(
                f"<item><title>{i['title']}</title><link>{self.base}/articles/{i['slug']}.html</link>"
                f"<guid isPermaLink=\"false\">freshness:{i['slug']}</guid><pubDate>{i['date']}</pubDate>"
                f"<description>{i['title']}</description></item>"
                for i in self.items)
        return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><rss version=\"2.0\"><channel><title>Freshness feed"
                f"</title><link>{self.base}/</link><description>bench</description>{items}</channel></rss>").encode()

    def page(self, slug: str) -> bytes | None:
        with self.lock:
            item = next((i for i in self.items if i["slug"] == slug), None)
        if item is None:
            return None
        return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{item['title']}</title>"
                f"</head><body><article><h1>{item['title']}</h1>{item['body']}</article></body></html>").encode()


@contextmanager
def serve_feed(feed: Feed):
    def page_of(path: str) -> tuple[str, bytes] | None:
        if path == "/feed.xml":
            return "application/rss+xml", feed.rss()
        if path.startswith("/articles/") and path.endswith(".html"):
            body = feed.page(path[len("/articles/"):-len(".html")])
            return None if body is None else ("text/html; charset=utf-8", body)
        return None

    with serve_get(page_of) as base:
        feed.base = base
        yield f"{feed.base}/feed.xml"


def _article(thing: str, place: str, fact: str) -> list[str]:
    return [
        f"The {thing} in {place} {fact}, according to the operators' latest report. "
        f"Engineers in {place} measured the figure over several weeks before publishing it.",
        f"Before this report nobody had published how the {thing} behaves. The {thing} was installed "
        f"in {place} to replace an older design, and its operators now review the readings every month.",
        f"Residents of {place} can read the full measurements in the operators' public notes, which list "
        f"the method, the instruments used and the dates of every reading of the {thing}.",
    ]


def _cites(record, url: str) -> bool:
    return record.status == "answered" and any(c.get("url") == url for c in record.citations)


class Runtime:
    """Where the stages run: ``deps`` is this process's client; ``wait_ingested`` waits for what
    was submitted before the rounds (feeds polled after ``since``, files published) to be indexed."""

    def __init__(self, name: str, deps, wait_ingested) -> None:
        self.name = name
        self.deps = deps
        self.wait_ingested = wait_ingested


@contextmanager
def embedded_runtime(home: Path):
    settings = load_settings({"RAGBUS_HOME": str(home)}).with_(allow_loopback=True)
    system = build_local(settings)
    with LocalRuntime(system.deps, system.bus) as runtime:
        yield Runtime("embedded", system.deps, lambda *_args, timeout_s: runtime.wait_idle(timeout_s))


@contextmanager
def emulator_runtime(home: Path):
    """``ragbus up --emulators`` under ``home`` (every stage, loopback feeds allowed), stopped by pid
    (``topology.down``) whatever happens; this process talks to it as the CLI does."""
    from shared.tools import emulators, topology

    missing = {name: why for name, why in emulators.emulators_available().items() if why}
    if missing:
        raise SystemExit("the emulator topology needs the emulators: "
                         + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    saved = dict(os.environ)
    try:
        state = topology.up(home, allow_loopback=True)
        os.environ.update(state["env"])  # the client libraries read the *_EMULATOR_HOST variables
        settings = load_settings({**os.environ, "RAGBUS_HOME": str(home)}).with_(allow_loopback=True)
        deps = build_deps(settings)

        def wait_ingested(since: datetime, feed_urls: list[str], file_ids: set[str], *, timeout_s: float) -> bool:
            # What `ragbus poll` waits for on the topology: every feed polled after `since`,
            # then nothing pending (indexed or failed) three reads in a row.
            deadline = time.monotonic() + timeout_s
            stable = 0
            while time.monotonic() < deadline:
                feeds = [f for f in list_listings(deps.state) if f["url"] in feed_urls]
                if len(feeds) == len(feed_urls) and all(f.get("last_poll") and f["last_poll"] >= since.isoformat()
                                                        for f in feeds):
                    status = status_of(deps.state, touched_since(deps.state, since, feed_urls) | file_ids)
                    stable = stable + 1 if not status.pending else 0
                    if stable >= 3:
                        return True
                time.sleep(0.5)
            return False

        yield Runtime("emulators", deps, wait_ingested)
    finally:
        topology.down(home)
        os.environ.clear()
        os.environ.update(saved)


def measure(rounds: int, *, runtime: str = "embedded", ask_every_s: float = 0.1, timeout_s: float | None = None) -> dict:
    """Run the benchmark on ``runtime`` (embedded or emulators); return the figures (seconds)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime {runtime!r}: choose from {RUNTIMES}")
    timeout_s = timeout_s or (60.0 if runtime == "embedded" else 180.0)
    logging.basicConfig(level=logging.WARNING)
    home = Path(tempfile.mkdtemp(prefix="ragbus-fresh-"))
    started_at = time.perf_counter()
    feed = Feed()
    now = datetime.now(UTC)
    rows = []
    opened = embedded_runtime(home) if runtime == "embedded" else emulator_runtime(home)
    with opened as run, serve_corpus(port=0) as corpus, serve_feed(feed) as feed_url:
        deps = run.deps
        start_s = time.perf_counter() - started_at
        # a feed with history: the new item is never the first thing the index holds
        for n, (thing, place, fact) in enumerate(FACTS[rounds:rounds + 2]):
            feed.add(f"old-{n}", f"Notes on the {thing}", _article(thing, place, fact), now - timedelta(days=n + 1))
        since = deps.clock.now()
        corpus_feed = f"{corpus}/feed.xml"
        for url in (feed_url, corpus_feed):
            add_listing(deps.state, url, allow_loopback=True, now=since)
        deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed_url, corpus_feed],
                                                 requested_at=since))
        files = ingest_path(CORPUS / "docs", state=deps.state, blobs=deps.blobs, publisher=deps.publisher,
                            clock=deps.clock)
        if not run.wait_ingested(since, [feed_url, corpus_feed], {f.document_id for f in files}, timeout_s=600):
            raise SystemExit(f"the initial ingestion did not finish in 10 minutes ({runtime})")
        wait_for_query(deps, submit_query(deps, "warm up the caches").id, 120)
        chunks_before = deps.index.count_chunks()
        for n in range(rounds):
            thing, place, fact = FACTS[n % len(FACTS)]
            slug = f"new-{n}-{uuid.uuid4().hex[:6]}"
            question = f"What does the {thing} in {place} do?"
            published = time.perf_counter()
            url = feed.add(slug, f"The {thing} in {place}", _article(thing, place, fact), datetime.now(UTC))
            deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed_url],
                                                     requested_at=deps.clock.now()))
            indexed_at = None
            asks = 0
            while True:
                elapsed = time.perf_counter() - published
                if elapsed > timeout_s:
                    raise SystemExit(f"round {n}: no answer cited {url} within {timeout_s:.0f} s ({runtime})")
                if indexed_at is None and any(
                        h["url"] == url for h in _search_urls(deps, f"{thing} {place}")):
                    indexed_at = time.perf_counter()
                record = wait_for_query(deps, submit_query(deps, question, max_iterations=0).id, 30)
                asks += 1
                if _cites(record, url):
                    cited_at = time.perf_counter()
                    break
                time.sleep(ask_every_s)
            indexed_at = indexed_at or cited_at
            rows.append({"round": n, "publish_to_cited_s": cited_at - published,
                         "publish_to_indexed_s": indexed_at - published, "asks": asks})
            print(f"round {n} ({runtime}): cited after {cited_at - published:.2f} s (indexed after "
                  f"{indexed_at - published:.2f} s, {asks} asks)", file=sys.stderr, flush=True)
        chunks = deps.index.count_chunks()
    shutil.rmtree(home, ignore_errors=True)  # kept on failure: the stage logs are under it
    cited = [r["publish_to_cited_s"] for r in rows]
    out = {"runtime": runtime, "rounds": rounds, "chunks_before": chunks_before, "chunks_after": chunks,
           "p50_s": statistics.median(cited), "max_s": max(cited),
           "indexed_p50_s": statistics.median(r["publish_to_indexed_s"] for r in rows),
           "startup_s": round(start_s, 1), "rows": rows,
           "load_average": [round(x, 2) for x in os.getloadavg()]}
    if runtime == "embedded":
        out.update(target_s=TARGET_S, met=statistics.median(cited) <= TARGET_S)
    return out


def _search_urls(deps, text: str) -> list[dict]:
    from shared.query.api import search_documents

    return search_documents(deps, text, 5)


def describe(result: dict) -> list[str]:
    """The figures as printed lines."""
    lines = [f"freshness, {result['runtime']} runtime, {result['rounds']} rounds over {result['chunks_before']} chunks "
             f"(load {result['load_average'][0]:.2f}; started in {result['startup_s']:.0f} s):",
             f"  publish -> indexed p50 {result['indexed_p50_s']:.2f} s"]
    verdict = (f"target <= {TARGET_S:.0f} s: {'met' if result['met'] else 'not met'}" if "target_s" in result
               else "reported; issue 14 sets its target on the embedded runtime")
    lines.append(f"  publish -> ask cites it p50 {result['p50_s']:.2f} s, max {result['max_s']:.2f} s ({verdict})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help=f"new items published, one at a time (<= {len(FACTS) - 2})")
    parser.add_argument("--runtime", choices=(*RUNTIMES, "both"), default="embedded",
                        help="embedded (default), emulators (the `ragbus up --emulators` topology) or both")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not 1 <= args.rounds <= len(FACTS) - 2:
        parser.error(f"--rounds must be between 1 and {len(FACTS) - 2}")
    # `timeout` / kill: unwind, so the emulator topology's processes are stopped by pid
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    runtimes = RUNTIMES if args.runtime == "both" else (args.runtime,)
    results = [measure(args.rounds, runtime=r) for r in runtimes]
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=1))
        return
    for result in results:
        print("\n".join(describe(result)))


if __name__ == "__main__":
    main()
