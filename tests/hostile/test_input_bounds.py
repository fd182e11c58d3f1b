"""Bounded work per input: one hostile feed, page or file costs a bounded amount, refused with a
clear recorded error, and nothing already stored is lost or duplicated. All on 127.0.0.1."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from services.feed_poller.handler import poll_listing
from shared.adapters.http_fetch import SafeFetcher
from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from tests.fakes import FakeClock, RecordingPublisher
from tests.hostile.crash import census
from tests.hostile.servers import hostile_server
from tests.support import article_html, run_cli, topic_paragraphs

START = datetime(2026, 10, 1, tzinfo=UTC)


def feed_xml(base: str, items: list[dict]) -> str:
    entries = "".join(
        f"<item><title>{i.get('title', i['guid'])}</title><link>{base}{i['path']}</link>"
        f"<guid>{i['guid']}</guid><pubDate>{format_datetime(START + timedelta(hours=n))}</pubDate></item>"
        for n, i in enumerate(items)
    )
    return ("<?xml version='1.0'?><rss version='2.0'><channel><title>t</title>"
            f"<link>{base}/</link><description>d</description>{entries}</channel></rss>")


class Poller:
    """The real poller and fetcher against a hostile server; a recording publisher."""

    def __init__(self, tmp_path: Path, site, **settings) -> None:
        self.site = site
        self.state = SqliteStateStore(tmp_path / "state.db")
        self.blobs = FolderBlobStore(tmp_path / "blobs")
        self.publisher = RecordingPublisher()
        self.settings = Settings(home=tmp_path, allow_loopback=True, **settings)
        self.fetcher = SafeFetcher(allow_loopback=True, timeout_s=2.0, retries=0, host_rate=1000.0,
                                   host_concurrency=8)
        self.feed = f"{site.base}/feed.xml"

    def poll(self):
        return poll_listing(self.feed, Deps(self.settings, state=self.state, blobs=self.blobs,
                                            publisher=self.publisher, fetcher=self.fetcher, clock=FakeClock()))

    def fetched_guids(self) -> list[str]:
        return [m.guid for m in self.publisher.messages if type(m).__name__ == "DocumentFetched"]


@pytest.fixture
def site():
    with hostile_server() as s:
        yield s


def _articles(site, n: int, prefix: str = "p") -> list[dict]:
    items = []
    for i in range(n):
        path = f"/{prefix}{i}.html"
        site.put(path, article_html(f"Post {i}", topic_paragraphs(f"{prefix}{i}", 2, seed=i)))
        items.append({"guid": f"{prefix}{i}", "path": path})
    return items


def test_a_huge_feed_is_fetched_newest_first_a_bounded_number_per_poll(tmp_path, site):
    items = _articles(site, 30)
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    poller = Poller(tmp_path, site, max_items_per_poll=12)
    first = poller.poll()
    assert first.new == 12 and first.deferred == 18
    assert set(poller.fetched_guids()) == {f"p{i}" for i in range(18, 30)}  # the newest twelve
    assert "18 left for the next poll" in poller.state.list(state_collections.FEEDS)[0]["last_status"]
    second, third = poller.poll(), poller.poll()
    assert (second.new, second.deferred, third.new, third.deferred) == (12, 6, 6, 0)
    guids = poller.fetched_guids()
    assert sorted(guids) == sorted(f"p{i}" for i in range(30))  # each once, none repeated
    assert sum(site.hits.get(f"/p{i}.html", 0) for i in range(30)) == 30


def test_an_item_the_fetcher_refused_is_not_fetched_again_until_it_changes(tmp_path, site):
    items = _articles(site, 2)
    site.put("/doc.png", b"\x89PNG\r\n", "image/png")  # a kind no reader takes (a PDF now is one)
    items.append({"guid": "png", "path": "/doc.png"})
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    poller = Poller(tmp_path, site)
    report = poller.poll()
    assert report.new == 2 and "'image/png'" in report.item_errors[0]
    for _ in range(3):
        again = poller.poll()
        assert again.refused == 1 and not again.item_errors
    assert site.hits["/doc.png"] == 1
    items[-1]["title"] = "the image, now as a page"
    site.put("/doc.png", article_html("Now HTML", topic_paragraphs("png", 2)))
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    changed = poller.poll()
    assert changed.changed == 1 and site.hits["/doc.png"] == 2


def test_two_concurrent_polls_of_one_feed_do_the_work_once(tmp_path, site):
    items = _articles(site, 6)
    for item in items:  # slow pages keep the first poll busy while the second starts
        fast = site.routes[item["path"]]
        site.routes[item["path"]] = lambda h, fast=fast: (time.sleep(0.15), fast(h))
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    poller = Poller(tmp_path, site)
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(poller.poll())) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert sorted(r.outcome for r in reports) == ["busy", "ok"]
    assert sorted(poller.fetched_guids()) == sorted(i["guid"] for i in items)
    assert all(site.hits[i["path"]] == 1 for i in items)
    assert poller.poll().unchanged == 6  # the lease was released


def test_a_poll_lease_of_a_dead_process_is_taken_over(tmp_path, site):
    from shared.ingest.listings import listing_key, take_poll_lease

    items = _articles(site, 2)
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    poller = Poller(tmp_path, site)
    assert take_poll_lease(poller.state, poller.feed, now=datetime.now(UTC), lease_s=900)
    assert poller.poll().outcome == "busy"  # held by this (live) process
    record = poller.state.list(state_collections.FEEDS)[0]
    record["poll_lease"]["owner"] = f"{record['poll_lease']['owner'].rsplit(':', 1)[0]}:{2**22 + 12345}"
    poller.state.put(state_collections.FEEDS, listing_key(poller.feed), record)
    assert poller.poll().new == 2  # a killed poller does not block the feed until its lease ends


def test_an_entry_with_a_megabyte_guid_is_skipped(tmp_path, site):
    items = _articles(site, 1)
    items.append({"guid": "g" * 1_000_000, "path": "/p0.html"})
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    poller = Poller(tmp_path, site)
    report = poller.poll()
    assert report.new == 1 and report.skipped == 1
    assert all(len(r["guid"]) < 3000 for r in poller.state.list(state_collections.PROCESSED_ITEMS))


def test_a_feed_item_with_a_1_mb_title_leaves_the_data_directory_under_100_mb(tmp_path, site):
    title = "Amplified " * 100_000  # 1 MB
    site.put("/page.html", article_html("page", topic_paragraphs("amplify", 6)))
    site.put("/feed.xml", feed_xml(site.base, [{"guid": "big", "path": "/page.html", "title": title}]),
             "application/rss+xml")
    home = tmp_path / "home"
    run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
    started = time.monotonic()
    run_cli(home, "poll", "--timeout", "120")
    took = time.monotonic() - started
    size = sum(f.stat().st_size for f in home.rglob("*") if f.is_file())
    assert size < 100 * 1024 * 1024, f"data directory is {size / 1e6:.0f} MB"
    counted = census(home)
    assert counted["documents"] == 1 and counted["chunks"] < 20
    (doc,) = SqliteStateStore(home / "ragbus.db").list(state_collections.DOCUMENTS)
    assert len(doc["title"]) <= 500 and doc["title"].startswith("Amplified")
    assert took < 60


def test_binary_bytes_named_txt_are_refused_before_chunking_and_the_folder_goes_on(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    (docs / "noise.txt").write_bytes(os.urandom(200 * 1024))
    (docs / "good.md").write_text("\n\n".join(topic_paragraphs("lantern", 3)))
    proc = run_cli(home, "ingest", str(docs), check=False)
    assert proc.returncode == 1 and "could not be processed" in proc.stderr
    letters = run_cli(home, "dead-letters", "--json").stdout
    assert "looks like binary data" in letters
    counted = census(home)
    assert counted["documents"] == 1 and counted["chunks"] < 10


def test_a_document_over_the_chunk_cap_is_refused_whole_and_its_old_chunks_kept(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    long = docs / "long.md"
    long.write_text("\n\n".join(topic_paragraphs("glacier", 3)))
    run_cli(home, "ingest", str(long), RAGBUS_MAX_CHUNKS_PER_DOCUMENT="4")
    before = census(home)
    long.write_text("\n\n".join(topic_paragraphs("glacier", 200)))
    proc = run_cli(home, "ingest", str(long), check=False, RAGBUS_MAX_CHUNKS_PER_DOCUMENT="4")
    assert proc.returncode == 1
    assert "RAGBUS_MAX_CHUNKS_PER_DOCUMENT" in run_cli(home, "dead-letters", "--json").stdout
    assert census(home) == before  # the earlier version stays searchable, nothing duplicated
