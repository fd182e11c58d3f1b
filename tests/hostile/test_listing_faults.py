"""One bad value in one listing, and sitemaps built to exhaust the reader, against the real poller,
fetcher and SQLite state on 127.0.0.1 (issue 22, items 1, 8, 9, 10).

Each bad item is skipped with its reason recorded on its listing; each bad listing fails alone with
its own recorded error; the other listings are polled all the same and the poll message is not
retried for one listing's fault; what an earlier good poll stored stays as it was.
"""

from __future__ import annotations

import gzip
import time

import pytest

from services.feed_poller.handler import handle
from shared.adapters.http_fetch import SafeFetcher
from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import FeedPollRequested
from shared.ingest.listings import add_listing, get_listing
from tests.fakes import FakeClock, RecordingPublisher
from tests.hostile.servers import hostile_server
from tests.hostile.test_input_bounds import START, _articles, feed_xml

pytestmark = pytest.mark.hostile

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(locs: list[str], lastmod: str = "2026-10-01") -> str:
    body = "".join(f"<url><loc>{loc}</loc><lastmod>{lastmod}</lastmod></url>" for loc in locs)
    return f"<?xml version='1.0' encoding='UTF-8'?><urlset xmlns='{NS}'>{body}</urlset>"


def sitemapindex(locs: list[str]) -> str:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<?xml version='1.0'?><sitemapindex xmlns='{NS}'>{body}</sitemapindex>"


class Listings:
    """Registered feeds and sitemaps polled the way the worker polls them: one FeedPollRequested."""

    def __init__(self, tmp_path, site) -> None:
        self.site = site
        self.clock = FakeClock()
        self.deps = Deps(
            Settings(home=tmp_path, allow_loopback=True),
            state=SqliteStateStore(tmp_path / "state.db"), blobs=FolderBlobStore(tmp_path / "blobs"),
            publisher=RecordingPublisher(), clock=self.clock,
            fetcher=SafeFetcher(allow_loopback=True, timeout_s=5.0, retries=0, host_rate=1000.0,
                                host_concurrency=8))

    @property
    def state(self):
        return self.deps.state

    def add(self, path: str, kind: str = "feed") -> str:
        return add_listing(self.state, f"{self.site.base}{path}", allow_loopback=True, now=self.clock.now(),
                        kind=kind)["url"]

    def poll(self) -> None:
        """One poll message, as the bus delivers it; it must not raise (a raise is a retry, then a dead letter)."""
        handle(FeedPollRequested(request_id="r", feed_urls=[], requested_at=START), self.deps)

    def record(self, path: str) -> dict:
        return get_listing(self.state, f"{self.site.base}{path}") or {}

    def fetched(self) -> list[str]:
        return [m.url for m in self.deps.publisher.messages if type(m).__name__ == "DocumentFetched"]

    def deleted(self) -> list[str]:
        return [m.document_id for m in self.deps.publisher.messages if type(m).__name__ == "DocumentDeleted"]


@pytest.fixture
def listings(tmp_path):
    with hostile_server() as site:
        yield Listings(tmp_path, site)


def _healthy_feed(listings: Listings) -> list[str]:
    """A good feed registered beside the bad listing: its pages must be fetched whatever the other does."""
    items = _articles(listings.site, 2, prefix="good")
    listings.site.put("/good.xml", feed_xml(listings.site.base, items), "application/rss+xml")
    listings.add("/good.xml")
    return [f"{listings.site.base}/good{n}.html" for n in range(2)]


def _feed_with(site, extra_item: str) -> str:
    items = _articles(site, 2)
    xml = feed_xml(site.base, items)
    return xml.replace("</channel>", extra_item + "</channel>")


# ------------------------------------------------------------ item 1: one bad value


@pytest.mark.parametrize("bad_item,reason", [
    ("<item><title>bad link</title><link>http://[oops/</link><guid>oops</guid></item>", "Invalid IPv6 URL"),
    ("<item><title>bad link, no guid</title><link>http://[oops/x</link></item>", "Invalid IPv6 URL"),
])
def test_a_feed_item_with_an_unparseable_link_is_skipped_with_its_reason(listings, bad_item, reason):
    site = listings.site
    healthy = _healthy_feed(listings)
    site.put("/feed.xml", _feed_with(site, bad_item), "application/rss+xml")
    listings.add("/feed.xml")
    listings.poll()
    assert set(healthy) <= set(listings.fetched())
    record = listings.record("/feed.xml")
    assert record["last_status"].startswith("ok: 2 new") and "1 skipped" in record["last_status"]
    assert reason in record["last_status"] and not record["last_error"]
    assert sorted(listings.fetched()) == sorted(healthy + [f"{site.base}/p0.html", f"{site.base}/p1.html"])


@pytest.mark.parametrize("date", ["0000-01-01T00:00:00Z", "Mon, 01 Jan 0000 00:00:00 GMT"])
def test_a_feed_item_dated_year_zero_is_kept_without_a_date(listings, date):
    site = listings.site
    healthy = _healthy_feed(listings)
    site.put("/zero.html", "<html><head><title>Zero</title></head><body><p>year zero</p></body></html>")
    bad = f"<item><title>zero</title><link>{site.base}/zero.html</link><guid>zero</guid><pubDate>{date}</pubDate></item>"
    site.put("/feed.xml", _feed_with(site, bad), "application/rss+xml")
    listings.add("/feed.xml")
    listings.poll()
    assert set(healthy) <= set(listings.fetched())
    zero = [m for m in listings.deps.publisher.messages if getattr(m, "guid", "") == "zero"]
    assert len(zero) == 1 and zero[0].published is None
    assert listings.record("/feed.xml")["last_status"].startswith("ok: 3 new")


@pytest.mark.parametrize("bad_entry,reason", [
    ("<url><loc>http://[oops/</loc></url>", "Invalid IPv6 URL"),
    ("<url><loc>{base}/late.html</loc><lastmod>9999-12-31T23:59:59-05:00</lastmod></url>", None),
    ("<url><loc>{base}/early.html</loc><lastmod>0000-01-01</lastmod></url>", None),
])
def test_a_sitemap_entry_with_a_bad_value_costs_that_entry_only(listings, bad_entry, reason):
    site = listings.site
    healthy = _healthy_feed(listings)
    for name in ("a", "b", "late", "early"):
        site.put(f"/{name}.html", f"<html><head><title>{name}</title></head><body><p>{name}</p></body></html>")
    site.put("/sitemap.xml", urlset([f"{site.base}/a.html", f"{site.base}/b.html"]).replace(
        "</urlset>", bad_entry.format(base=site.base) + "</urlset>"), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    assert set(healthy) <= set(listings.fetched())
    record = listings.record("/sitemap.xml")
    assert not record["last_error"], record
    if reason:
        assert record["last_status"].startswith("ok: 2 new") and reason in record["last_status"]
    else:  # the date is unusable, the page is not: fetched, without a date
        assert record["last_status"].startswith("ok: 3 new")


def test_a_listing_that_fails_is_its_own_error_and_the_poll_exits_nonzero(tmp_path):
    """The whole path a user drives: two feeds and a sitemap, one of them bad; `poll` exits 1
    naming only the bad one, and `feeds list` / `sitemaps list` show each listing's own state."""
    from tests.support import cli_json, run_cli

    home = tmp_path / "home"
    with hostile_server() as site:
        good = _articles(site, 2, prefix="good")
        site.put("/good.xml", feed_xml(site.base, good), "application/rss+xml")
        site.put("/broken.xml", "<rss><channel><item><title>cut", "application/rss+xml")
        _articles(site, 1, prefix="a")
        site.put("/sitemap.xml", urlset([f"{site.base}/a0.html"]).replace(
            "</urlset>", "<url><loc>http://[oops/</loc><lastmod>9999-12-31T23:59:59-05:00</lastmod></url></urlset>"),
            "application/xml")
        for path in ("/good.xml", "/broken.xml"):
            run_cli(home, "feeds", "add", f"{site.base}{path}", "--allow-loopback")
        run_cli(home, "sitemaps", "add", f"{site.base}/sitemap.xml", "--allow-loopback")
        proc = run_cli(home, "poll", "--allow-loopback", "--timeout", "120", check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "malformed XML" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr
        assert "dead-letters" not in proc.stderr
        feeds = {f["url"].rsplit("/", 1)[-1]: f for f in cli_json(home, "feeds", "list")}
        assert "malformed XML" in feeds["broken.xml"]["last_error"]
        assert feeds["good.xml"]["last_error"] is None and feeds["good.xml"]["last_status"].startswith("ok: 2 new")
        (sitemap,) = cli_json(home, "sitemaps", "list")
        assert sitemap["last_error"] is None and "Invalid IPv6 URL" in sitemap["last_status"]
        assert site.hits.get("/good0.html") == 1 and site.hits.get("/a0.html") == 1


# ------------------------------------------------------------ item 8: one page, one document


def test_spellings_of_one_page_in_a_sitemap_are_one_document(listings):
    site = listings.site
    site.put("/p1.html", "<html><head><title>p1</title></head><body><p>one</p></body></html>")
    spellings = ["/p1.html", "/p1.html#frag", "/./p1.html", "/x/../p1.html", "/%701.html"]
    site.put("/sitemap.xml", urlset([f"{site.base}{s}" for s in spellings]
                                    + [site.base.replace("http://", "HTTP://") + "/p1.html"]), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    assert listings.fetched() == [f"{site.base}/p1.html"]
    assert site.hits["/p1.html"] == 1
    assert len(listings.state.list(state_collections.PROCESSED_ITEMS)) == 1


# ------------------------------------------------------------ item 9: bounded while reading


def _big_urlset(base: str, n: int) -> bytes:
    return urlset([f"{base}/page-{i}.html" for i in range(n)]).encode()


def test_a_huge_sitemap_index_is_refused_at_the_child_that_passes_the_cap(listings):
    site = listings.site
    full = _big_urlset(site.base, 50_000)  # the protocol's most for one file, ~3.7 MB
    for n in range(50):
        site.put(f"/s{n}.xml", full, "application/xml")
    site.put("/index.xml", sitemapindex([f"{site.base}/s{n}.xml" for n in range(50)]), "application/xml")
    listings.add("/index.xml", "sitemap")
    listings.poll()
    record = listings.record("/index.xml")
    assert "more than 50000 pages in all" in record["last_error"] and "/s1.xml" in record["last_error"]
    assert sum(site.hits.get(f"/s{n}.xml", 0) for n in range(50)) == 2  # not 50: refused while reading
    assert listings.fetched() == [] and listings.deleted() == []


def test_a_gzip_sitemap_is_read(listings):
    site = listings.site
    for name in ("a", "b"):
        site.put(f"/{name}.html", f"<html><head><title>{name}</title></head><body><p>{name}</p></body></html>")
    body = gzip.compress(urlset([f"{site.base}/a.html", f"{site.base}/b.html"]).encode())
    site.put("/sitemap.xml.gz", body, "application/x-gzip")
    site.put("/other.xml.gz", body, "application/gzip")
    listings.add("/sitemap.xml.gz", "sitemap")
    listings.poll()
    assert sorted(listings.fetched()) == [f"{site.base}/a.html", f"{site.base}/b.html"]
    assert listings.record("/sitemap.xml.gz")["last_status"].startswith("ok: 2 new")


def _polled_sitemap(listings: Listings) -> None:
    site = listings.site
    for name in ("a", "b"):
        site.put(f"/{name}.html", f"<html><head><title>{name}</title></head><body><p>{name}</p></body></html>")
    site.put("/sitemap.xml", urlset([f"{site.base}/a.html", f"{site.base}/b.html"]), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    assert len(listings.fetched()) == 2


def _nothing_lost(listings: Listings) -> None:
    assert len(listings.fetched()) == 2 and listings.deleted() == []
    assert len(listings.state.list(state_collections.PROCESSED_ITEMS)) == 2


def test_a_gzip_bomb_stops_at_the_cap_while_decompressing(listings):
    _polled_sitemap(listings)
    head = f"<?xml version='1.0'?><urlset xmlns='{NS}'><url><loc>{listings.site.base}/a.html</loc></url><!-- "
    bomb = gzip.compress(head.encode() + b" " * (200 * 1024 * 1024), compresslevel=9)  # 200 MB in ~200 KB
    listings.site.put("/sitemap.xml", bomb, "application/x-gzip")
    started = time.monotonic()
    listings.poll()
    assert time.monotonic() - started < 30
    assert "decompresses to more than 52428800 bytes" in listings.record("/sitemap.xml")["last_error"]
    _nothing_lost(listings)


# ------------------------------------------------------------ item 10: no DTD reaches a parser

LAUGHS = ("<!DOCTYPE urlset [<!ENTITY lol \"lol\">"
          + "".join(f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10 if n > 1 else "&lol;" * 10}">'
                    for n in range(1, 10))
          + f"]><urlset xmlns='{NS}'><url><loc>&lol9;</loc></url></urlset>")


@pytest.mark.parametrize("body", [
    ("<?xml version='1.0'?><!-- " + "x" * 5000 + " -->" + LAUGHS).encode(),
    ("<?xml version='1.0' encoding='UTF-16'?>" + LAUGHS).encode("utf-16"),
    ("<?xml version='1.0'?>" + " " * 8000 + "<!DOCTYPE urlset SYSTEM 'http://127.0.0.1:9/x.dtd'>"
     + f"<urlset xmlns='{NS}'/>").encode(),
    gzip.compress(("<?xml version='1.0'?>" + LAUGHS).encode()),
], ids=["after-a-5KB-comment", "utf-16", "external-after-8KB", "gzipped"])
def test_a_document_type_anywhere_is_refused_by_the_parser(listings, body):
    _polled_sitemap(listings)
    listings.site.put("/sitemap.xml", body, "application/xml")
    started = time.monotonic()
    listings.poll()
    assert time.monotonic() - started < 5
    error = listings.record("/sitemap.xml")["last_error"]
    assert "declares a document type" in error, error
    _nothing_lost(listings)


# ------------------------------------------------------------ item 8: one page across listings


def test_a_page_listed_by_a_feed_and_a_sitemap_is_one_document(listings):
    site = listings.site
    items = _articles(site, 2)
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    # the sitemap spells the same pages its own way
    site.put("/sitemap.xml", urlset([f"{site.base}/./p0.html", f"{site.base}/p1.html#top"]), "application/xml")
    listings.add("/feed.xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    assert sorted(listings.fetched()) == [f"{site.base}/p0.html", f"{site.base}/p1.html"]
    assert site.hits["/p0.html"] == 1 and site.hits["/p1.html"] == 1
    assert "2 already indexed from another listing" in listings.record("/sitemap.xml")["last_status"]
    listings.poll()  # and again: nothing new, nothing twice
    assert len(listings.fetched()) == 2 and listings.deleted() == []


def test_an_index_and_its_child_registered_separately_hold_each_page_once(listings):
    site = listings.site
    _articles(site, 3)
    site.put("/child.xml", urlset([f"{site.base}/p{n}.html" for n in range(3)]), "application/xml")
    site.put("/index.xml", sitemapindex([f"{site.base}/child.xml"]), "application/xml")
    listings.add("/index.xml", "sitemap")
    listings.add("/child.xml", "sitemap")
    listings.poll()
    assert sorted(listings.fetched()) == [f"{site.base}/p{n}.html" for n in range(3)]


def test_removing_one_listing_keeps_the_pages_another_still_lists(listings):
    from shared.ingest.listings import remove_listing

    site = listings.site
    items = _articles(site, 2)
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    site.put("/sitemap.xml", urlset([f"{site.base}/p0.html", f"{site.base}/p1.html"]), "application/xml")
    feed, sitemap = listings.add("/feed.xml"), listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    (first_ids,) = {tuple(sorted(m.document_id for m in listings.deps.publisher.messages))}
    kw = {"publisher": listings.deps.publisher, "clock": listings.clock}
    # the feed found the pages first; removing it must not delete what the sitemap lists
    assert remove_listing(listings.state, feed, **kw) == []
    assert listings.deleted() == []
    # the sitemap drops one page: now it is gone, the other stays
    site.put("/sitemap.xml", urlset([f"{site.base}/p1.html"]), "application/xml")
    listings.poll()
    (gone,) = listings.deleted()
    assert gone in first_ids
    assert len(listings.fetched()) == 2  # nothing fetched again
    assert sorted(remove_listing(listings.state, sitemap, kind="sitemap", **kw) + [gone]) == sorted(first_ids)


def test_the_same_pages_in_a_feed_and_a_sitemap_are_indexed_once_and_survive_removing_one(tmp_path):
    """Through the CLI and the real indexer: `stats` counts each page once, and `feeds remove`
    keeps what the sitemap still lists."""
    from tests.support import cli_json, run_cli

    home = tmp_path / "home"
    with hostile_server() as site:
        items = _articles(site, 3)
        site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
        site.put("/sitemap.xml", urlset([f"{site.base}/p{n}.html" for n in range(3)]), "application/xml")
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml", "--allow-loopback")
        run_cli(home, "sitemaps", "add", f"{site.base}/sitemap.xml", "--allow-loopback")
        run_cli(home, "poll", "--allow-loopback", "--timeout", "120")
        assert cli_json(home, "stats")["documents"] == 3
        run_cli(home, "feeds", "remove", f"{site.base}/feed.xml", "--timeout", "120")
        assert cli_json(home, "stats")["documents"] == 3
        run_cli(home, "sitemaps", "remove", f"{site.base}/sitemap.xml", "--timeout", "120")
        assert cli_json(home, "stats")["documents"] == 0
