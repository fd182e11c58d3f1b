"""A campaign beyond issue 22's list: sitemaps, feeds and data files built to break the reader,
the poller or the store, on 127.0.0.1. Each case fails alone with a clear recorded reason (or is
read correctly), what an earlier good poll stored stays, nothing is duplicated."""

from __future__ import annotations

import gzip
import time

import pytest

from shared.contract import state_collections
from tests.hostile.test_input_bounds import _articles, feed_xml
from tests.hostile.test_listing_faults import NS, Listings, sitemapindex, urlset

pytestmark = pytest.mark.hostile


@pytest.fixture
def listings(tmp_path):
    from tests.hostile.servers import hostile_server

    with hostile_server() as site:
        yield Listings(tmp_path, site)


def _good(listings: Listings) -> None:
    """A sitemap polled once while good: two pages stored."""
    _articles(listings.site, 2)
    base = listings.site.base
    listings.site.put("/sitemap.xml", urlset([f"{base}/p0.html", f"{base}/p1.html"]), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    assert len(listings.fetched()) == 2


def _kept(listings: Listings) -> None:
    assert listings.deleted() == [] and len(listings.fetched()) == 2
    assert len(listings.state.list(state_collections.PROCESSED_ITEMS)) == 2


def _error(listings: Listings, path: str = "/sitemap.xml") -> str:
    return listings.record(path)["last_error"] or ""


# ------------------------------------------------------------ a sitemap refused whole, nothing lost


def _entries(base: str, n: int) -> str:
    return "".join(f"<url><loc>{base}/q{i}.html</loc></url>" for i in range(n))


@pytest.mark.parametrize("name,body,content_type,said", [
    ("50,001 entries in one file", lambda b: f"<urlset xmlns='{NS}'>{_entries(b, 50_001)}</urlset>",
     "application/xml", "more than 50000 entries"),
    ("an index of 51 sitemaps", lambda b: sitemapindex([f"{b}/c{n}.xml" for n in range(51)]),
     "application/xml", "more than the 50 sitemaps"),
    ("an index that lists itself", lambda b: sitemapindex([f"{b}/sitemap.xml"]),
     "application/xml", "is itself an index"),
    ("a truncated gzip file", lambda b: gzip.compress(urlset([f"{b}/p0.html"]).encode())[:-12],
     "application/x-gzip", "sitemap"),
    ("bytes that are not UTF-8", lambda b: b"<?xml version='1.0' encoding='UTF-8'?><urlset><url><loc>\xff\xfe</loc>"
     b"</url></urlset>", "application/xml", "malformed XML"),
    ("elements nested 5,000 deep", lambda b: "<urlset>" + "<x>" * 5000 + "</x>" * 5000 + "</urlset>",
     "application/xml", None),  # read as a stream, no tree: an empty urlset, which removes nothing
    ("a web page served as a sitemap", lambda b: "<html><body>hello</body></html>", "text/html", "content type"),
    ("an RSS feed registered as a sitemap", lambda b: "<rss version='2.0'><channel/></rss>", "application/xml",
     "is not a sitemap"),
    ("an RSS feed served as such registered as a sitemap", lambda b: "<rss version='2.0'><channel/></rss>",
     "application/rss+xml", "--kind feed"),
    ("an empty body", lambda b: b"", "application/xml", "sitemap"),
    ("a processing instruction and an XInclude",
     lambda b: "<?xml-stylesheet href='file:///etc/passwd'?><urlset xmlns:xi='http://www.w3.org/2001/XInclude'>"
               "<xi:include href='file:///etc/passwd' parse='text'/></urlset>", "application/xml", None),
], ids=lambda v: v if isinstance(v, str) and " " in v else None)
def test_a_sitemap_that_cannot_be_used_fails_alone_and_removes_nothing(listings, name, body, content_type, said):
    _good(listings)
    listings.site.put("/sitemap.xml", body(listings.site.base), content_type)
    started = time.monotonic()
    listings.poll()
    assert time.monotonic() - started < 20
    if said is None:  # read, and empty: nothing followed, nothing removed (an empty listing removes nothing)
        assert "root:" not in repr(listings.state.list(state_collections.PROCESSED_ITEMS))
    else:
        assert said in _error(listings), _error(listings)
    _kept(listings)
    assert not any(listings.site.hits.get(f"/c{n}.xml") for n in range(51))


def test_an_index_child_that_is_a_gzip_bomb_fails_the_index_naming_the_child(listings):
    _good(listings)
    base = listings.site.base
    bomb = gzip.compress(f"<urlset xmlns='{NS}'><!-- ".encode() + b" " * (120 * 1024 * 1024), compresslevel=9)
    listings.site.put("/bomb.xml.gz", bomb, "application/x-gzip")
    listings.site.put("/sitemap.xml", sitemapindex([f"{base}/bomb.xml.gz"]), "application/xml")
    listings.poll()
    assert "bomb.xml.gz decompresses to more than" in _error(listings)
    _kept(listings)


# ------------------------------------------------------------ one entry costs one entry


@pytest.mark.parametrize("name,entry,fetched", [
    ("a 3,000-character <loc>", "<url><loc>{base}/{long}</loc></url>", 2),
    ("a <loc> to the metadata server", "<url><loc>http://169.254.169.254/latest/</loc></url>", 2),
    ("a <lastmod> of month 13", "<url><loc>{base}/p2.html</loc><lastmod>2026-13-45</lastmod></url>", 3),
    ("a <lastmod> with a 1,000-digit year", "<url><loc>{base}/p2.html</loc><lastmod>{year}-01-01</lastmod></url>", 3),
    ("a 2 MB <lastmod>", "<url><loc>{base}/p2.html</loc><lastmod>{huge}</lastmod></url>", 3),
    ("a <loc> in CDATA with newlines", "<url><loc><![CDATA[\n  {base}/p2.html\n ]]></loc></url>", 3),
    ("a <loc> with escaped ampersands", "<url><loc>{base}/p2.html?a=1&amp;b=2</loc></url>", 3),
    ("a javascript: <loc>", "<url><loc>javascript:alert(1)</loc></url>", 2),
    ("a <loc> with port 99999", "<url><loc>http://127.0.0.1:99999/x.html</loc></url>", 2),
], ids=lambda v: v if isinstance(v, str) and " " in v else None)
def test_one_bad_sitemap_entry_costs_that_entry_only(listings, name, entry, fetched):
    _articles(listings.site, 3)
    base = listings.site.base
    listings.site.routes["/p2.html?a=1&b=2"] = listings.site.routes["/p2.html"]
    text = entry.format(base=base, long="x" * 3000, year="9" * 1000, huge=" " * (2 * 1024 * 1024))
    listings.site.put("/sitemap.xml", urlset([f"{base}/p0.html", f"{base}/p1.html"]).replace(
        "</urlset>", text + "</urlset>"), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    started = time.monotonic()
    listings.poll()
    assert time.monotonic() - started < 20
    record = listings.record("/sitemap.xml")
    assert record["last_status"] != "failed", record
    assert len(set(listings.fetched())) == len(listings.fetched()) == fetched, (listings.fetched(), record)


# ------------------------------------------------------------ feeds


@pytest.mark.parametrize("name,link", [
    ("a javascript: link", "javascript:alert(document.cookie)"),
    ("a link with port 99999", "http://127.0.0.1:99999/x.html"),
    ("a link with a space in the host", "http://exa mple.com/x.html"),
    ("a data: link", "data:text/html,<script>alert(1)</script>"),
], ids=lambda v: v if " " in v else None)
def test_a_feed_item_with_an_unusable_link_fails_alone(listings, name, link):
    site = listings.site
    items = _articles(site, 2)
    xml = feed_xml(site.base, items).replace(
        "</channel>", f"<item><title>bad</title><link><![CDATA[{link}]]></link><guid>bad</guid></item></channel>")
    site.put("/feed.xml", xml, "application/rss+xml")
    listings.add("/feed.xml")
    listings.poll()
    record = listings.record("/feed.xml")
    assert sorted(listings.fetched()) == [f"{site.base}/p0.html", f"{site.base}/p1.html"]
    assert record["last_status"].startswith("partial: 2 new") and link.split(":")[0] in record["last_error"], record


def test_two_items_of_one_feed_linking_one_page_are_one_document(listings):
    site = listings.site
    items = _articles(site, 2) + [{"guid": "again", "path": "/p0.html#comments"}]
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    listings.add("/feed.xml")
    listings.poll()
    assert sorted(listings.fetched()) == [f"{site.base}/p0.html", f"{site.base}/p1.html"]
    assert site.hits["/p0.html"] == 1


def test_a_listing_removed_and_added_again_does_not_duplicate_a_shared_page(listings):
    from shared.ingest.listings import remove_listing

    site = listings.site
    items = _articles(site, 2)
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    site.put("/sitemap.xml", urlset([f"{site.base}/p0.html", f"{site.base}/p1.html"]), "application/xml")
    feed = listings.add("/feed.xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    remove_listing(listings.state, feed, publisher=listings.deps.publisher, clock=listings.clock)
    listings.add("/feed.xml")
    listings.poll()
    # the sitemap kept both pages; the feed back holds them again (fetched again under the same
    # document ids, its own ledger having been forgotten), without a second document
    fetched = [m.document_id for m in listings.deps.publisher.messages if type(m).__name__ == "DocumentFetched"]
    assert len(set(fetched)) == 2 and listings.deleted() == []


# ------------------------------------------------------------ data files


def _home_with_documents(tmp_path):
    from tests.support import cli_json, run_cli, topic_paragraphs

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(2):
        (docs / f"d{n}.txt").write_text("\n\n".join(topic_paragraphs(f"vexillum{n}", 4, seed=n)))
    home = tmp_path / "home"
    run_cli(home, "ingest", str(docs))
    assert cli_json(home, "stats")["documents"] == 2
    return home, docs


def test_a_garbage_write_ahead_log_is_ignored_and_nothing_is_lost(tmp_path):
    from tests.support import cli_json, run_cli

    home, _ = _home_with_documents(tmp_path)
    (home / "ragbus.db-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(range(256)) * 40)
    stats = run_cli(home, "stats", "--json", check=False)
    assert stats.returncode == 0, stats.stderr
    assert cli_json(home, "stats")["documents"] == 2


def test_stray_index_folders_are_ignored_and_search_answers(tmp_path):
    """A per-generation cache of the index before segments, and a segment folder no manifest names
    (a copy or a crash left them): neither is read as part of the index."""
    from tests.support import run_cli

    home, _ = _home_with_documents(tmp_path)
    for folder in (home / "index" / "cache" / "gen-000000000001", home / "index" / "segments" / "seg-stray"):
        folder.mkdir(parents=True)
        for name in ("chunk_ids.json", "complete", "vectors.f32", "manifest.json"):
            (folder / name).write_bytes(b"\x00garbage")
    search = run_cli(home, "search", "vexillum1", "--json", check=False)
    assert search.returncode == 0 and "vexillum1" in search.stdout, search.stdout + search.stderr


def test_a_state_file_that_is_another_database_is_refused_not_used_as_a_new_store(tmp_path):
    import shutil

    from tests.support import run_cli

    home, _ = _home_with_documents(tmp_path)
    shutil.copy(home / "bus.db", home / "ragbus.db")  # a real SQLite file, the wrong one
    for suffix in ("-wal", "-shm"):
        (home / f"ragbus.db{suffix}").unlink(missing_ok=True)
    proc = run_cli(home, "stats", check=False)
    text = (proc.stdout + proc.stderr).replace("\n", "")
    assert proc.returncode == 1 and str(home / "ragbus.db") in text, text


def test_a_feed_item_whose_link_moves_keeps_the_old_page_another_listing_still_lists(listings):
    site = listings.site
    items = _articles(site, 3)
    site.put("/feed.xml", feed_xml(site.base, items[:2]), "application/rss+xml")
    listings.add("/feed.xml")
    listings.poll()  # the feed finds p0 and p1 first
    site.put("/sitemap.xml", urlset([f"{site.base}/p0.html"]), "application/xml")
    listings.add("/sitemap.xml", "sitemap")
    listings.poll()
    (p0_id,) = [m.document_id for m in listings.deps.publisher.messages if m.url.endswith("/p0.html")]
    # the feed's item p0 now links p2: p0 stays (the sitemap lists it), p2 comes in as its own document
    moved = [dict(items[0], path="/p2.html"), items[1]]
    site.put("/feed.xml", feed_xml(site.base, moved), "application/rss+xml")
    listings.poll()
    assert listings.deleted() == []
    (p2,) = [m for m in listings.deps.publisher.messages if getattr(m, "url", "").endswith("/p2.html")]
    assert p2.document_id != p0_id
    # the sitemap drops p0: now it goes, and the feed item (now about p2) keeps its ledger record
    site.put("/sitemap.xml", urlset([f"{site.base}/p1.html"]), "application/xml")
    listings.poll()
    assert listings.deleted() == [p0_id]
    assert listings.state.get(state_collections.PROCESSED_ITEMS, p0_id)["page"] == f"{site.base}/p2.html"
    before = len(listings.fetched())
    listings.poll()
    assert len(listings.fetched()) == before and listings.deleted() == [p0_id]
