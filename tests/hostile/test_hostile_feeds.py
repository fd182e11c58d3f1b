"""Hostile feeds and pages against the real poller and fetcher on 127.0.0.1: each is refused or
contained with a clear recorded error, and what an earlier good poll stored stays as it was."""

from __future__ import annotations

import time

import pytest

from shared.contract import state_collections
from tests.hostile.servers import hostile_server
from tests.hostile.test_input_bounds import Poller, _articles, feed_xml

BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{n} "{("&lol" + str(n - 1) + ";") * 10 if n > 1 else "&lol;" * 10}">'
              for n in range(1, 10))
    + ']><rss version="2.0"><channel><title>&lol9;</title></channel></rss>'
)
XXE = ('<?xml version="1.0"?><!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
       '<rss version="2.0"><channel><title>t</title><item><title>&xxe;</title><guid>x</guid>'
       '<link>{base}/p0.html</link></item></channel></rss>')


@pytest.fixture
def polled(tmp_path):
    """A feed polled once while good (two items stored), ready to turn hostile."""
    with hostile_server() as site:
        items = _articles(site, 2)
        site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
        poller = Poller(tmp_path, site)
        assert poller.poll().new == 2
        yield poller, site


def _nothing_lost(poller) -> None:
    records = poller.state.list(state_collections.PROCESSED_ITEMS)
    assert sorted(r["guid"] for r in records) == ["p0", "p1"]
    assert not [m for m in poller.publisher.messages if type(m).__name__ == "DocumentDeleted"]
    guids = poller.fetched_guids()
    assert len(guids) == len(set(guids))  # nothing announced twice


def _last_error(poller) -> str:
    return poller.state.list(state_collections.FEEDS)[0]["last_error"] or ""


@pytest.mark.parametrize("body,content_type,expected", [
    ("<rss><channel><item><title>broken", "application/rss+xml", "malformed XML"),
    ("<!doctype html><html><body><p>a web page</p></body></html>", "text/html", "fix the feed or remove it"),
    (BILLION_LAUGHS, "application/rss+xml", ""),
    ("\x00\x01\x02 binary", "application/xml", ""),
    ("", "application/rss+xml", ""),
])
def test_a_broken_feed_changes_and_removes_nothing(polled, body, content_type, expected):
    poller, site = polled
    site.put("/feed.xml", body, content_type)
    started = time.monotonic()
    report = poller.poll()
    assert time.monotonic() - started < 5
    assert report.removed == 0 and report.new == 0
    if expected:
        assert report.outcome == "failed" and expected in _last_error(poller)
    _nothing_lost(poller)


def test_an_external_entity_is_never_resolved(polled):
    poller, site = polled
    site.put("/feed.xml", XXE.format(base=site.base), "application/rss+xml")
    poller.poll()
    stored = repr(poller.state.list(state_collections.PROCESSED_ITEMS)) + repr(poller.publisher.messages)
    assert "root:" not in stored


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_feed_that_errors_is_retryable_and_removes_nothing(polled, status):
    poller, site = polled

    def failing(h):
        h.send_response(status)
        h.send_header("Retry-After", "0")
        h.end_headers()

    site.routes["/feed.xml"] = failing
    report = poller.poll()
    assert report.outcome == "failed" and report.retryable and f"HTTP {status}" in _last_error(poller)
    _nothing_lost(poller)


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.8/feed.xml",
                                    "http://[fec0::1]/feed.xml", "file:///etc/passwd"])
def test_a_feed_that_redirects_inward_is_refused(polled, target):
    poller, site = polled

    def redirect(h):
        h.send_response(302)
        h.send_header("Location", target)
        h.end_headers()

    site.routes["/feed.xml"] = redirect
    report = poller.poll()
    assert report.outcome == "failed" and "refused" in _last_error(poller)
    _nothing_lost(poller)


def test_a_feed_over_the_byte_cap_is_refused(polled):
    poller, site = polled
    site.put("/feed.xml", "<rss>" + "x" * (6 * 1024 * 1024) + "</rss>", "application/rss+xml")
    report = poller.poll()
    assert report.outcome == "failed" and "cap" in _last_error(poller)
    _nothing_lost(poller)


def test_items_pointing_inward_fail_alone_and_the_rest_is_fetched(polled):
    poller, site = polled
    items = _articles(site, 3)
    items += [{"guid": "meta", "path": "/x"}, {"guid": "private", "path": "/y"}]
    xml = feed_xml(site.base, items).replace(f"{site.base}/x", "http://169.254.169.254/x") \
        .replace(f"{site.base}/y", "http://192.168.1.1/y")
    site.put("/feed.xml", xml, "application/rss+xml")
    report = poller.poll()
    assert report.outcome == "partial" and report.new == 1 and len(report.item_errors) == 2
    assert "link-local" in _last_error(poller) and "private" in _last_error(poller)
    assert {"p0", "p1", "p2"} <= {r["guid"] for r in poller.state.list(state_collections.PROCESSED_ITEMS)}


def test_duplicate_guids_are_announced_once(polled):
    poller, site = polled
    items = _articles(site, 2) + [{"guid": "p0", "path": "/p1.html"}] * 3
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    report = poller.poll()
    assert report.duplicates == 3
    _nothing_lost(poller)


def test_a_page_redirect_loop_fails_the_item_only(polled):
    poller, site = polled

    def loop(h):
        h.send_response(302)
        h.send_header("Location", "/p1.html" if h.path == "/p0.html" else "/p0.html")
        h.end_headers()

    items = _articles(site, 2)
    items[0]["title"] = "changed"  # both items changed, both pages loop
    site.routes["/p0.html"] = loop
    site.routes["/p1.html"] = loop
    site.put("/feed.xml", feed_xml(site.base, items), "application/rss+xml")
    report = poller.poll()
    assert "redirect loop" in _last_error(poller) and report.removed == 0
