"""The sitemap source: a parser plus one registration, on the poller's shared ingestion step."""

from __future__ import annotations

import pytest

from services.feed_poller.sitemaps import MAX_CHILD_SITEMAPS, read_sitemap
from shared.contract.errors import InvalidInput
from shared.contract.ids import feed_item_id
from shared.contract.messages import DocumentDeleted, DocumentFetched
from shared.contract.ports import FetchResult
from shared.ingest.listings import add_listing, list_listings, remove_listing
from tests.unit.test_feed_poller import FakeFetcher, world  # noqa: F401 - the fixture

SITEMAP = "https://site.example/sitemap.xml"
INDEX = "https://site.example/sitemap_index.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(pages: dict[str, str | None]) -> bytes:
    body = "".join(
        f"<url><loc>{loc}</loc>" + (f"<lastmod>{lastmod}</lastmod>" if lastmod else "") + "</url>"
        for loc, lastmod in pages.items()
    )
    return f"<?xml version='1.0' encoding='UTF-8'?><urlset xmlns='{NS}'>{body}</urlset>".encode()


def sitemapindex(children: list[str]) -> bytes:
    body = "".join(f"<sitemap><loc>{c}</loc></sitemap>" for c in children)
    return f"<?xml version='1.0'?><sitemapindex xmlns='{NS}'>{body}</sitemapindex>".encode()


def publish(world, url, body, pages=()):  # noqa: F811
    world.fetcher.feed(url, body, content_type="application/xml")
    for page in pages:
        if page not in world.fetcher.responses:
            world.fetcher.page(page, f"<html><head><title>About {page}</title></head><body><p>{page}</p></body></html>"
                               .encode())


def register(world, url=SITEMAP):  # noqa: F811
    add_listing(world.state, url, allow_loopback=False, now=world.clock.now(), kind="sitemap",
             resolver=lambda *a, **k: [(2, 1, 6, "", ("93.184.216.34", 443))])


def _result(url, body):
    return FetchResult(url, 200, "application/xml", None, body)


# ----------------------------------------------------------------- parsing


def test_a_urlset_lists_its_pages_with_lastmod_as_utc():
    sitemap = read_sitemap(_result(SITEMAP, urlset({
        "https://site.example/a": "2026-10-01",
        "/b": "2026-10-02T10:00:00+02:00",
        "https://site.example/a#again": None,
        "ftp://site.example/c": None,
    })), fetch=lambda url: pytest.fail("a urlset fetches nothing"))
    assert [(p.url, p.lastmod, p.published) for p in sitemap.pages] == [
        ("https://site.example/a", "2026-10-01", "2026-10-01T00:00:00+00:00"),
        ("https://site.example/b", "2026-10-02T10:00:00+02:00", "2026-10-02T08:00:00+00:00"),
    ]
    # a page is its normalised URL: the fragment names a part of the same page
    assert (sitemap.skipped, sitemap.duplicates, sitemap.is_index) == (1, 1, False)


def test_an_index_is_followed_one_level_through_the_same_fetcher():
    fetched = []
    children = {
        "https://site.example/s1.xml": urlset({"https://site.example/a": "2026-10-01"}),
        "https://site.example/s2.xml": urlset({"https://site.example/b": None, "https://site.example/a": None}),
    }

    def fetch(url):
        fetched.append(url)
        return _result(url, children[url])

    sitemap = read_sitemap(_result(INDEX, sitemapindex(["/s1.xml", "https://site.example/s2.xml"])), fetch)
    assert fetched == list(children)
    assert [p.url for p in sitemap.pages] == ["https://site.example/a", "https://site.example/b"]
    assert sitemap.is_index and sitemap.duplicates == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<?xml version='1.0'?><urlset><url><loc>https://x/a</loc>", "malformed XML"),
        (b"<html><body>not a sitemap</body></html>", "is not a sitemap (its root element is <html>"),
        (b"<?xml version='1.0'?><!DOCTYPE lolz [<!ENTITY lol 'lol'>]><urlset/>", "declares a document type"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(body, problem):
    with pytest.raises(InvalidInput, match=problem.replace("(", r"\(")):
        read_sitemap(_result(SITEMAP, body), fetch=lambda url: pytest.fail("nothing to follow"))


def test_a_nested_index_an_oversized_index_and_a_missing_child_are_refused_whole():
    def nested(url):
        return _result(url, sitemapindex(["https://site.example/deeper.xml"]))

    with pytest.raises(InvalidInput, match="followed one level only"):
        read_sitemap(_result(INDEX, sitemapindex(["https://site.example/s1.xml"])), nested)
    many = sitemapindex([f"https://site.example/s{n}.xml" for n in range(MAX_CHILD_SITEMAPS + 1)])
    with pytest.raises(InvalidInput, match=f"more than the {MAX_CHILD_SITEMAPS}"):
        read_sitemap(_result(INDEX, many), nested)
    missing = FakeFetcher()
    with pytest.raises(InvalidInput, match="could not be fetched: GET https://site.example/s1.xml returned HTTP 404"):
        read_sitemap(_result(INDEX, sitemapindex(["https://site.example/s1.xml"])),
                     lambda url: missing.fetch(url, accept=()))


# ------------------------------------------------------------ the poller


def test_pages_are_announced_once_and_again_only_when_their_lastmod_changes(world):  # noqa: F811
    register(world)
    pages = {"https://site.example/a": "2026-10-01", "https://site.example/b": None}
    publish(world, SITEMAP, urlset(pages), pages)
    report = world.poll(SITEMAP)
    assert (report.outcome, report.new, report.entries) == ("ok", 2, 2)
    first = {m.url: m for m in world.fetched()}
    a = first["https://site.example/a"]
    assert (a.source, a.origin, a.guid, a.title, a.published) == (
        "sitemap", SITEMAP, "https://site.example/a", "", "2026-10-01T00:00:00+00:00")
    assert a.document_id == feed_item_id(SITEMAP, "https://site.example/a")

    world.fetcher.calls.clear()
    report = world.poll(SITEMAP)
    assert (report.new, report.changed, report.unchanged) == (0, 0, 2)
    assert world.fetcher.urls() == [SITEMAP]  # no page fetched again

    publish(world, SITEMAP, urlset({**pages, "https://site.example/a": "2026-11-01"}))
    report = world.poll(SITEMAP)
    assert (report.changed, report.unchanged) == (1, 1)
    assert world.fetched()[-1].url == "https://site.example/a"


def test_a_page_gone_from_the_sitemap_is_retracted_and_a_broken_sitemap_retracts_nothing(world):  # noqa: F811
    register(world)
    pages = {"https://site.example/a": None, "https://site.example/b": None}
    publish(world, SITEMAP, urlset(pages), pages)
    world.poll(SITEMAP)
    publish(world, SITEMAP, b"<?xml version='1.0'?><urlset><url>")
    report = world.poll(SITEMAP)
    assert report.outcome == "failed" and "malformed XML" in report.error and world.deleted() == []
    publish(world, SITEMAP, urlset({"https://site.example/a": None}))
    report = world.poll(SITEMAP)
    (gone,) = world.deleted()
    assert gone == DocumentDeleted(document_id=feed_item_id(SITEMAP, "https://site.example/b"),
                                   reason="left sitemap", requested_at=gone.requested_at, revision=1)
    assert report.removed == 1


def test_an_index_is_never_polled_conditionally(world):  # noqa: F811
    register(world, INDEX)
    publish(world, "https://site.example/s1.xml", urlset({"https://site.example/a": None}),
            ["https://site.example/a"])
    world.fetcher.feed(INDEX, sitemapindex(["https://site.example/s1.xml"]), content_type="application/xml",
                       etag='"v1"')
    world.poll(INDEX)
    world.poll(INDEX)
    index_calls = [c for u, c in world.fetcher.calls if u == INDEX]
    assert [c["etag"] for c in index_calls] == [None, None]  # a 304 would hide a changed child


def test_sitemaps_and_feeds_share_one_registry_but_keep_their_kind(world):  # noqa: F811
    register(world)
    with pytest.raises(InvalidInput, match="already registered as a sitemap"):
        add_listing(world.state, SITEMAP, allow_loopback=False, now=world.clock.now(),
                 resolver=lambda *a, **k: [(2, 1, 6, "", ("93.184.216.34", 443))])
    assert [s["url"] for s in list_listings(world.state, kind="sitemap")] == [SITEMAP]
    assert list_listings(world.state, kind="feed") == []
    with pytest.raises(InvalidInput, match="no feed"):
        remove_listing(world.state, SITEMAP, publisher=world.publisher, clock=world.clock)
    pages = {"https://site.example/a": None}
    publish(world, SITEMAP, urlset(pages), pages)
    world.poll(SITEMAP)
    deleted = remove_listing(world.state, SITEMAP, publisher=world.publisher, clock=world.clock, kind="sitemap")
    assert deleted == [feed_item_id(SITEMAP, "https://site.example/a")]
    assert world.deleted()[-1].reason == "sitemap removed" and list_listings(world.state) == []


def test_the_cleaner_takes_a_sitemap_page_title_from_the_page(world):  # noqa: F811
    from services.cleaner.handler import clean_document

    register(world)
    pages = {"https://site.example/a": None}
    publish(world, SITEMAP, urlset(pages), pages)
    world.poll(SITEMAP)
    (fetched,) = world.fetched()
    assert isinstance(fetched, DocumentFetched)
    cleaned = clean_document(fetched, world.deps())
    assert cleaned.title == "About https://site.example/a"


# ------------------------------------------------------ the wrong kind of listing


def _accepted(world, url):  # noqa: F811
    """Whether the listing's own fetch accepted the type the server sent (the real fetcher's rule)."""
    from shared.adapters.http_fetch import media_type_accepted

    served = world.fetcher.responses[url].content_type
    return all(media_type_accepted(served, c["accept"]) for u, c in world.fetcher.calls if u == url)


def test_a_sitemap_that_cannot_be_fetched_says_sitemap_not_feed(world):  # noqa: F811
    register(world)
    report = world.poll(SITEMAP)
    assert report.outcome == "failed" and report.error.startswith("fetching the sitemap failed: GET "), report.error


@pytest.mark.parametrize("content_type", ["application/rss+xml", "application/xml"])
def test_a_feed_added_as_a_sitemap_is_named_a_feed_with_the_kind_to_use(world, content_type):  # noqa: F811
    from tests.unit.test_feed_poller import item, rss

    register(world)
    world.fetcher.feed(SITEMAP, rss([item(1)]), content_type=content_type)
    report = world.poll(SITEMAP)
    assert _accepted(world, SITEMAP)
    assert report.outcome == "failed" and "is not a sitemap but an RSS or Atom feed" in report.error, report.error
    assert "--kind feed" in report.error and world.fetched() == []


@pytest.mark.parametrize("content_type", ["application/x-sitemap+xml", "application/xml"])
def test_a_sitemap_added_as_a_feed_is_named_a_sitemap_with_the_kind_to_use(world, content_type):  # noqa: F811
    add_listing(world.state, SITEMAP, allow_loopback=False, now=world.clock.now(), kind="feed",
                resolver=lambda *a, **k: [(2, 1, 6, "", ("93.184.216.34", 443))])
    world.fetcher.feed(SITEMAP, urlset({"https://site.example/a": None}), content_type=content_type)
    report = world.poll(SITEMAP)
    assert _accepted(world, SITEMAP)
    assert report.outcome == "failed" and "is a sitemap, not an RSS or Atom feed" in report.error, report.error
    assert "--kind sitemap" in report.error and world.fetched() == []
