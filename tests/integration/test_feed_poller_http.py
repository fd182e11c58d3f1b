"""The feed poller end to end over real HTTP: SafeFetcher + SQLite state + folder blobs."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from services.feed_poller.handler import handle, poll_listing
from shared.adapters.http_fetch import SafeFetcher
from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import RetryableError
from shared.contract.ids import feed_item_id
from shared.contract.messages import DocumentDeleted, DocumentFetched, FeedPollRequested
from shared.ingest import processed_items
from shared.ingest.listings import add_listing, get_listing
from tests.fakes import FakeClock, RecordingPublisher


class Site:
    """Pages by path: (status, headers, body). Every 200 carries an ETag and honours If-None-Match."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.hits: dict[str, int] = {}
        self.conditional_hits: dict[str, int] = {}
        self.base = ""

    def put(
        self, path: str, body: bytes | str, content_type: str = "text/html; charset=utf-8"
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.pages[path] = (200, {"Content-Type": content_type}, data)

    def redirect(self, path: str, location: str) -> None:
        self.pages[path] = (302, {"Location": location}, b"")

    def status(self, path: str, code: int) -> None:
        self.pages[path] = (code, {}, b"")


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            site.hits[self.path] = site.hits.get(self.path, 0) + 1
            status, headers, body = site.pages.get(self.path, (404, {}, b""))
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            if status == 200 and self.headers.get("If-None-Match") == etag:
                site.conditional_hits[self.path] = site.conditional_hits.get(self.path, 0) + 1
                status, body = 304, b""
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if status in (200, 304):
                self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # clients hang up on oversized pages on purpose

    server = Server(("127.0.0.1", 0), Handler)
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def rss(base: str, items: list[dict[str, str]]) -> str:
    entries = "".join(
        f"<item><title>{i['title']}</title><link>{base}{i['path']}</link><guid>{i['guid']}</guid>"
        f"<pubDate>Thu, 01 Oct 2026 0{n}:00:00 GMT</pubDate><description>{i['title']}</description></item>"
        for n, i in enumerate(items)
    )
    return (
        "<?xml version='1.0' encoding='UTF-8'?><rss version='2.0'><channel><title>Test</title>"
        f"<link>{base}/</link><description>d</description>{entries}</channel></rss>"
    )


class Pipeline:
    def __init__(
        self, tmp_path, site: Site, *, allow_loopback: bool = True, **settings: Any
    ) -> None:
        self.site = site
        self.state = SqliteStateStore(tmp_path / "state.db")
        self.blobs = FolderBlobStore(tmp_path / "blobs")
        self.publisher = RecordingPublisher()
        self.clock = FakeClock()
        self.settings = Settings(home=tmp_path, allow_loopback=allow_loopback, **settings)
        self.fetcher = SafeFetcher(
            allow_loopback=allow_loopback, timeout_s=2.0, retries=1, sleep=lambda s: None
        )
        self.feed = f"{site.base}/feed.xml"

    def deps(self, settings: Settings | None = None) -> Deps:
        return Deps(
            settings or self.settings,
            publisher=self.publisher,
            state=self.state,
            blobs=self.blobs,
            fetcher=self.fetcher,
            clock=self.clock,
        )

    def poll(self, **settings: Any):
        return poll_listing(self.feed, self.deps(self.settings.with_(**settings)))

    def publish_feed(self, items: list[dict[str, str]]) -> None:
        self.site.put("/feed.xml", rss(self.site.base, items), "application/rss+xml")

    def fetched(self) -> list[DocumentFetched]:
        return self.publisher.of_type(DocumentFetched)

    def deleted(self) -> list[DocumentDeleted]:
        return self.publisher.of_type(DocumentDeleted)

    def record(self) -> dict:
        return get_listing(self.state, self.feed)


@pytest.fixture
def site():
    with serve(Site()) as running:
        yield running


def articles(site: Site, names: list[str]) -> list[dict[str, str]]:
    items = []
    for name in names:
        site.put(
            f"/posts/{name}.html",
            f"<html><body><article><p>All about {name}.</p></article></body></html>",
        )
        items.append(
            {"title": f"All about {name}", "path": f"/posts/{name}.html", "guid": f"guid-{name}"}
        )
    return items


def test_poll_twice_then_change_and_remove(tmp_path, site):
    p = Pipeline(tmp_path, site)
    add_listing(p.state, p.feed, allow_loopback=True, now=p.clock.now())
    items = articles(site, ["volcano", "glacier", "satellite"])
    p.publish_feed(items)

    handle(FeedPollRequested(request_id="1", requested_at=datetime.now(UTC)), p.deps())
    assert sorted(m.guid for m in p.fetched()) == ["guid-glacier", "guid-satellite", "guid-volcano"]
    volcano = next(m for m in p.fetched() if m.guid == "guid-volcano")
    assert (
        volcano.url == f"{site.base}/posts/volcano.html"
        and volcano.content_type == "text/html; charset=utf-8"
    )
    assert p.blobs.get(volcano.raw_ref) == site.pages["/posts/volcano.html"][2]
    assert p.record()["last_status"] == "ok: 3 new, 0 changed, 0 removed" and p.record()["etag"]

    # second poll: a 304 from the server, nothing fetched or published
    p.poll()
    assert site.conditional_hits["/feed.xml"] == 1
    assert site.hits["/posts/volcano.html"] == 1 and len(p.fetched()) == 3
    assert p.record()["last_status"] == "not modified"

    # one item changes, one leaves the feed
    items[1] = {**items[1], "title": "All about glaciers, revised"}
    p.publish_feed([items[0], items[1]])
    report = p.poll()
    assert (report.new, report.changed, report.unchanged, report.removed) == (0, 1, 1, 1)
    changed = p.fetched()[-1]
    assert changed.document_id == feed_item_id(p.feed, "guid-glacier")
    (deleted,) = p.deleted()
    assert (
        deleted.document_id == feed_item_id(p.feed, "guid-satellite")
        and deleted.reason == "left feed"
    )
    assert site.hits["/posts/volcano.html"] == 1
    assert len(processed_items.records(p.state, {})) == 2  # and the removed item's tombstone
    assert processed_items.is_tombstone(p.state.get(state_collections.PROCESSED_ITEMS, deleted.document_id))


def test_keep_policy_leaves_removed_items(tmp_path, site):
    p = Pipeline(tmp_path, site)
    items = articles(site, ["a", "b"])
    p.publish_feed(items)
    p.poll()
    p.publish_feed(items[:1])
    assert p.poll(removed_item_policy="keep").removed == 0
    assert p.deleted() == [] and p.state.count(state_collections.PROCESSED_ITEMS) == 2


def test_bad_article_links_are_recorded_and_the_rest_published(tmp_path, site):
    p = Pipeline(tmp_path, site, fetch_max_bytes=1024 * 1024)
    p.fetcher = SafeFetcher(
        allow_loopback=True, timeout_s=2.0, retries=1, sleep=lambda s: None, max_bytes=1024 * 1024
    )
    good = articles(site, ["good"])
    site.put("/posts/empty.html", b"")
    site.put("/posts/huge.html", b"x" * (3 * 1024 * 1024))
    site.put("/posts/latin1.html", "<p>Café</p>".encode("latin-1"), "text/html; charset=ISO-8859-1")
    site.put("/posts/photo.png", b"\x89PNG\r\n", "image/png")  # a kind no reader takes (a PDF now is one)
    site.redirect("/posts/to-metadata", "http://169.254.169.254/latest/meta-data/")
    site.redirect("/posts/to-private", "http://10.0.0.8/admin")
    site.redirect("/posts/moved", "/posts/good.html")
    site.redirect("/posts/loop", "/posts/loop")
    site.status("/posts/gone", 404)
    site.status("/posts/broken", 500)
    paths = [
        "empty.html",
        "huge.html",
        "latin1.html",
        "photo.png",
        "to-metadata",
        "to-private",
        "moved",
        "loop",
        "gone",
        "broken",
    ]
    p.publish_feed(good + [{"title": n, "path": f"/posts/{n}", "guid": n} for n in paths])

    report = p.poll()
    published = {m.guid: m for m in p.fetched()}
    assert set(published) == {"guid-good", "empty.html", "latin1.html", "moved"}
    assert p.blobs.get(published["empty.html"].raw_ref) == b""
    assert published["latin1.html"].content_type == "text/html; charset=iso-8859-1"
    assert p.blobs.get(published["latin1.html"].raw_ref) == "<p>Café</p>".encode("latin-1")
    assert published["moved"].url == f"{site.base}/posts/good.html"

    errors = {e.split(": ", 1)[0].rsplit("/", 1)[-1]: e for e in report.item_errors}
    assert "3145728 bytes" in errors["huge.html"] and "cap" in errors["huge.html"]
    assert "'image/png'" in errors["photo.png"]
    assert "169.254.169.254 is a link-local address" in errors["to-metadata"]
    assert "10.0.0.8 is a private address" in errors["to-private"]
    assert "redirect loop" in errors["loop"]
    assert "HTTP 404" in errors["gone"]
    assert "HTTP 500" in errors["broken"]
    assert site.hits["/posts/broken"] == 2  # retried once
    record = p.record()
    assert record["last_status"] == "partial: 4 new, 0 changed, 0 removed, 7 failed"
    assert "7 item(s) failed and will be retried" in record["last_error"]
    failed = p.state.list(state_collections.PROCESSED_ITEMS, {"status": "failed"})
    assert len(failed) == 7 and all(r["error"] for r in failed)

    # the server gets fixed: the next poll retries only the failed items
    site.put("/posts/gone", "<p>back</p>")
    before = dict(site.hits)
    report = p.poll()
    assert report.pending == 1 and [m.guid for m in p.fetched()][-1] == "gone"
    assert site.hits["/posts/good.html"] == before["/posts/good.html"]  # not fetched again


@pytest.mark.parametrize(
    "breakage, message, retryable",
    [
        (
            lambda s: s.put(
                "/feed.xml",
                "<?xml version='1.0'?><rss><channel><item><title>trunc",
                "application/rss+xml",
            ),
            "malformed XML",
            False,
        ),
        (
            lambda s: s.put("/feed.xml", "<html><body><h1>Our blog</h1></body></html>"),
            "not an RSS or Atom feed",
            False,
        ),
        (lambda s: s.status("/feed.xml", 404), "HTTP 404", False),
        (lambda s: s.status("/feed.xml", 500), "HTTP 500", True),
        (lambda s: s.redirect("/feed.xml", "/feed.xml"), "redirect loop", False),
        (lambda s: s.redirect("/feed.xml", "http://169.254.169.254/feed"), "link-local", False),
    ],
    ids=["truncated", "html-page", "404", "500", "redirect-loop", "redirect-metadata"],
)
def test_a_broken_feed_is_recorded_and_nothing_indexed_is_lost(
    tmp_path, site, breakage, message, retryable
):
    p = Pipeline(tmp_path, site)
    p.publish_feed(articles(site, ["a", "b"]))
    p.poll()
    breakage(site)
    report = p.poll()
    assert report.outcome == "failed" and report.retryable is retryable
    record = p.record()
    assert message in record["last_error"] and record["last_status"] == "failed"
    assert p.deleted() == [] and len(p.fetched()) == 2
    assert p.state.count(state_collections.PROCESSED_ITEMS, {"status": "published"}) == 2
    request = FeedPollRequested(request_id="x", feed_urls=[p.feed], requested_at=datetime.now(UTC))
    if retryable:
        with pytest.raises(RetryableError, match="every feed failed"):
            handle(request, p.deps())
    else:
        handle(request, p.deps())  # acknowledged: retrying cannot help


def test_a_slow_feed_times_out_retryably(tmp_path, site):
    release = threading.Event()
    p = Pipeline(tmp_path, site)
    p.fetcher = SafeFetcher(allow_loopback=True, timeout_s=0.2, retries=0, sleep=lambda s: None)
    original = site.pages

    class Slow(dict):
        def get(self, key, default=None):
            if key == "/feed.xml":
                release.wait(5)
            return original.get(key, default)

    site.pages = Slow()
    try:
        report = p.poll()
    finally:
        release.set()
    assert (
        report.outcome == "failed" and report.retryable and "timed out" in p.record()["last_error"]
    )


def test_loopback_feeds_are_refused_unless_allowed(tmp_path, site):
    p = Pipeline(tmp_path, site, allow_loopback=False)
    p.publish_feed(articles(site, ["a"]))
    report = p.poll()
    assert report.outcome == "failed" and "loopback" in p.record()["last_error"]
    assert site.hits == {} and p.fetched() == []


def test_a_kill_between_claim_and_publish_loses_nothing(tmp_path, site):
    class Kill(BaseException):
        pass

    class DyingBus(RecordingPublisher):
        def publish(self, message, attributes=None):
            if len(self.messages) == 1:
                raise Kill()
            return super().publish(message, attributes)

    p = Pipeline(tmp_path, site)
    p.publish_feed(articles(site, ["a", "b", "c"]))
    request = FeedPollRequested(request_id="1", feed_urls=[p.feed], requested_at=datetime.now(UTC))
    dying = DyingBus()
    deps = Deps(
        p.settings, publisher=dying, state=p.state, blobs=p.blobs, fetcher=p.fetcher, clock=p.clock
    )
    with pytest.raises(Kill):
        handle(request, deps)
    assert [m.guid for m in dying.messages] == ["guid-a"]
    assert (
        p.record() is None or p.record()["etag"] is None
    )  # validators not stored: next poll reads the feed

    handle(request, p.deps())  # redelivered
    assert [m.guid for m in p.fetched()] == ["guid-b", "guid-c"]
    handle(request, p.deps())
    assert len(p.fetched()) == 2
