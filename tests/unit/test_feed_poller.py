"""Feed poller and feed registry with fakes of every port (a dict-backed Fetcher)."""

from __future__ import annotations

import base64
import json
import socket
from datetime import UTC, datetime

import pytest

from services.feed_poller.handler import handle, poll_listing
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import FetchRefused, InvalidInput, PermanentError, RetryableError
from shared.contract.ids import feed_id, feed_item_id
from shared.contract.messages import DocumentDeleted, DocumentFetched, FeedPollRequested, encode
from shared.contract.ports import FetchResult
from shared.ingest import processed_items
from shared.ingest.listings import (
    LISTING_FIELDS,
    add_listing,
    get_listing,
    list_listings,
    validate_listing_url,
)
from tests.fakes import FakeClock, InMemoryBlobStore, InMemoryStateStore, RecordingPublisher

FEED = "https://blog.example/feed.xml"
ATOM = "https://atom.example/atom.xml"


def rss(items, *, channel_title="Blog"):
    body = "".join(
        "<item>"
        + (f"<guid>{i['guid']}</guid>" if i.get("guid") else "")
        + f"<title>{i['title']}</title>"
        + (f"<link>{i['link']}</link>" if i.get("link") else "")
        + f"<pubDate>Sun, 01 Nov 2026 10:00:00 GMT</pubDate><description>{i.get('summary', 's')}</description>"
        "</item>"
        for i in items
    )
    return (
        f"<?xml version='1.0' encoding='UTF-8'?><rss version='2.0'><channel><title>{channel_title}</title>"
        f"<link>https://blog.example/</link><description>d</description>{body}</channel></rss>"
    ).encode()


def item(n, **extra):
    return {"guid": f"g{n}", "title": f"Post {n}", "link": f"https://blog.example/p{n}", **extra}


class FakeFetcher:
    """Answers by URL: a FetchResult, an exception to raise, or bytes (served as HTML)."""

    def __init__(self):
        self.responses = {}
        self.calls: list[tuple[str, dict]] = []

    def feed(self, url, body, *, content_type="application/rss+xml", etag=None, last_modified=None):
        self.responses[url] = FetchResult(url, 200, content_type, None, body, etag, last_modified)

    def page(
        self,
        url,
        body=b"<html><body><p>article</p></body></html>",
        *,
        charset="utf-8",
        final_url=None,
        content_type="text/html",
    ):
        self.responses[url] = FetchResult(final_url or url, 200, content_type, charset, body)

    def fetch(self, url, *, accept, etag=None, last_modified=None):
        self.calls.append(
            (url, {"accept": tuple(accept), "etag": etag, "last_modified": last_modified})
        )
        answer = self.responses.get(url)
        if answer is None:
            raise PermanentError(f"GET {url} returned HTTP 404; the page is missing or forbidden")
        if isinstance(answer, Exception):
            raise answer
        if answer.etag and etag == answer.etag:
            return FetchResult(url, 304, "", None, b"", etag=etag)
        return answer

    def urls(self):
        return [u for u, _ in self.calls]


@pytest.fixture
def world():
    class World:
        state = InMemoryStateStore()
        blobs = InMemoryBlobStore()
        publisher = RecordingPublisher()
        fetcher = FakeFetcher()
        clock = FakeClock()
        settings = Settings()

        def poll(self, url=FEED, **overrides):
            return poll_listing(url, self.deps(**overrides))

        def deps(self, **overrides):
            return Deps(
                overrides.get("settings", self.settings),
                publisher=overrides.get("publisher", self.publisher),
                state=self.state,
                blobs=self.blobs,
                fetcher=self.fetcher,
                clock=self.clock,
            )

        def fetched(self):
            return self.publisher.of_type(DocumentFetched)

        def deleted(self):
            return self.publisher.of_type(DocumentDeleted)

        def feed_record(self, url=FEED):
            return get_listing(self.state, url)

    return World()


def serve(world, items, url=FEED, **kwargs):
    world.fetcher.feed(url, rss(items), **kwargs)
    for i in items:
        if i.get("link") and i["link"] not in world.fetcher.responses:
            world.fetcher.page(i["link"], f"<html><body><p>{i['title']}</p></body></html>".encode())


def request(*urls):
    return FeedPollRequested(
        request_id="r1", feed_urls=list(urls), requested_at=datetime(2026, 11, 1, tzinfo=UTC)
    )


def test_a_feed_items_title_loses_terminal_escapes_and_bidi_overrides_whole():
    # the ESC went and its parameters stayed: "\x1b[31mRed alert\x1b[0m" was stored as "[31mRed alert[0m"
    from shared.contract.text import clip_metadata

    assert clip_metadata("\x1b[31mRed\x1b[0m alert \u202eon\u202c \x1b]8;;https://x.example\x07now\x1b]8;;\x07", 500) \
        == "Red alert on now"


# ------------------------------------------------------------------ happy path


def test_new_items_are_fetched_stored_and_published(world):
    serve(world, [item(1), item(2)])
    report = world.poll()
    assert (report.outcome, report.new, report.changed, report.removed) == ("ok", 2, 0, 0)
    first, _ = world.fetched()
    assert first.document_id == feed_item_id(FEED, "g1")
    assert (first.source, first.origin, first.guid, first.url, first.title) == (
        "feed",
        FEED,
        "g1",
        "https://blog.example/p1",
        "Post 1",
    )
    assert first.published == "2026-11-01T10:00:00+00:00"
    assert first.content_type == "text/html; charset=utf-8"
    assert world.blobs.get(first.raw_ref) == b"<html><body><p>Post 1</p></body></html>"
    assert first.raw_ref == f"mem:raw/{first.document_id}/{first.content_hash}"
    record = world.state.get(state_collections.PROCESSED_ITEMS, first.document_id)
    assert record["status"] == "published" and record["item_hash"] == first.content_hash
    feed = world.feed_record()
    assert feed["last_status"] == "ok: 2 new, 0 changed, 0 removed"
    assert feed["last_error"] is None and feed["items"] == 2
    assert feed["last_poll"] == world.clock.now().isoformat()
    # article pages are asked for as HTML first, then as any file kind the registry of formats reads
    accepted = world.fetcher.calls[1][1]["accept"]
    assert accepted[:2] == ("text/html", "application/xhtml+xml") and "application/pdf" in accepted


def test_atom_feeds_are_read(world):
    atom = (
        b"<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'><title>A</title>"
        b"<id>urn:a</id><updated>2026-10-01T00:00:00Z</updated>"
        b"<entry><id>urn:a:1</id><title>One</title><link href='https://atom.example/1'/>"
        b"<updated>2026-10-02T08:30:00Z</updated><summary>s</summary></entry></feed>"
    )
    world.fetcher.feed(ATOM, atom, content_type="application/atom+xml")
    world.fetcher.page("https://atom.example/1")
    report = world.poll(ATOM)
    assert report.new == 1
    (message,) = world.fetched()
    assert message.guid == "urn:a:1" and message.published == "2026-10-02T08:30:00+00:00"


def test_an_item_s_author_and_categories_travel_as_metadata_bounded(world):
    """What `--where author=...` / `--where category=...` match; not part of the item's hash."""
    long = "x" * 900
    rss_body = (
        "<?xml version='1.0' encoding='UTF-8'?><rss version='2.0' xmlns:dc='http://purl.org/dc/elements/1.1/'>"
        "<channel><title>Blog</title><link>https://blog.example/</link><description>d</description>"
        "<item><guid>g1</guid><title>Post 1</title><link>https://blog.example/p1</link>"
        "<dc:creator>Ada Lovelace</dc:creator><category>CUDA</category><category> Graphs </category>"
        "<category>CUDA</category><description>s</description></item>"
        "<item><guid>g2</guid><title>Post 2</title><link>https://blog.example/p2</link>"
        + f"<dc:creator>{long}</dc:creator>" + "".join(f"<category>c{n}</category>" for n in range(30))
        + "<description>s</description></item>"
        "<item><guid>g3</guid><title>Post 3</title><link>https://blog.example/p3</link>"
        "<description>s</description></item></channel></rss>"
    )
    world.fetcher.feed(FEED, rss_body.encode())
    for n in (1, 2, 3):
        world.fetcher.page(f"https://blog.example/p{n}")
    world.poll()
    first, second, third = sorted(world.fetched(), key=lambda m: m.guid)
    assert first.metadata == {"author": "Ada Lovelace", "category": ["CUDA", "Graphs"]}
    assert second.metadata["category"] == [f"c{n}" for n in range(20)]
    assert len(second.metadata["author"]) == world.settings.max_title_chars  # cut as titles are
    assert third.metadata == {}
    world.fetcher.feed(FEED, rss_body.replace("Ada Lovelace", "A. Lovelace").encode())
    world.poll()
    assert len(world.fetched()) == 3  # the hash did not change: nothing fetched again


def test_poll_twice_publishes_nothing_the_second_time(world):
    serve(world, [item(1), item(2)])
    world.poll()
    world.poll()
    assert len(world.fetched()) == 2
    assert world.feed_record()["last_status"] == "ok: 0 new, 0 changed, 0 removed"
    # no article page was fetched again
    assert world.fetcher.urls().count("https://blog.example/p1") == 1


def test_conditional_get_uses_stored_validators_and_304_changes_nothing(world):
    serve(world, [item(1)], etag='"e1"', last_modified="Sun, 01 Nov 2026 10:00:00 GMT")
    world.poll()
    assert world.feed_record()["etag"] == '"e1"'
    report = world.poll()
    assert report.outcome == "not_modified"
    assert world.fetcher.calls[-1] == (
        FEED,
        {
            "accept": world.fetcher.calls[0][1]["accept"],
            "etag": '"e1"',
            "last_modified": "Sun, 01 Nov 2026 10:00:00 GMT",
        },
    )
    assert len(world.fetched()) == 1 and world.deleted() == []
    feed = world.feed_record()
    assert feed["last_status"] == "not modified" and feed["etag"] == '"e1"' and feed["items"] == 1


def test_changed_item_is_republished_under_the_same_document_id(world):
    serve(world, [item(1), item(2)])
    world.poll()
    old = world.fetched()[0]
    serve(world, [item(1, title="Post 1, revised"), item(2)])
    report = world.poll()
    assert (report.new, report.changed, report.unchanged) == (0, 1, 1)
    new = world.fetched()[-1]
    assert new.document_id == old.document_id and new.content_hash != old.content_hash
    assert new.title == "Post 1, revised"
    record = world.state.get(state_collections.PROCESSED_ITEMS, new.document_id)
    assert record["item_hash"] == new.content_hash and record["previous_hash"] == old.content_hash
    assert world.feed_record()["last_status"] == "ok: 0 new, 1 changed, 0 removed"


def test_summary_change_counts_as_a_change(world):
    serve(world, [item(1, summary="first")])
    world.poll()
    serve(world, [item(1, summary="second")])
    assert world.poll().changed == 1


def test_duplicate_guids_keep_the_first(world, caplog):
    serve(
        world,
        [item(1), {**item(1), "title": "Impostor", "link": "https://blog.example/other"}, item(2)],
    )
    report = world.poll()
    assert report.duplicates == 1 and report.new == 2
    assert [m.title for m in world.fetched()] == ["Post 1", "Post 2"]
    assert "https://blog.example/other" not in world.fetcher.urls()
    assert "duplicate guid 'g1'" in caplog.text


def test_link_is_the_identity_when_there_is_no_guid(world):
    serve(world, [{"title": "No guid", "link": "https://blog.example/noguid"}])
    world.poll()
    (message,) = world.fetched()
    assert message.guid == "https://blog.example/noguid"
    assert message.document_id == feed_item_id(FEED, "https://blog.example/noguid")


def test_final_url_after_redirect_is_published(world):
    serve(world, [item(1)])
    world.fetcher.page("https://blog.example/p1", final_url="https://www.blog.example/p1")
    world.poll()
    assert world.fetched()[0].url == "https://www.blog.example/p1"


# ------------------------------------------------------------------ removals


def test_removed_item_is_deleted_under_the_remove_policy(world):
    serve(world, [item(1), item(2)])
    world.poll()
    serve(world, [item(1)])
    report = world.poll()
    assert report.removed == 1
    (deleted,) = world.deleted()
    assert deleted.document_id == feed_item_id(FEED, "g2") and deleted.reason == "left feed"
    assert processed_items.is_tombstone(world.state.get(state_collections.PROCESSED_ITEMS, deleted.document_id))
    assert world.feed_record()["last_status"] == "ok: 0 new, 0 changed, 1 removed"


def test_removed_item_is_kept_under_the_keep_policy(world):
    serve(world, [item(1), item(2)])
    world.poll()
    serve(world, [item(1)])
    report = world.poll(settings=Settings(removed_item_policy="keep"))
    assert report.removed == 0 and world.deleted() == []
    assert (
        world.state.get(state_collections.PROCESSED_ITEMS, feed_item_id(FEED, "g2"))["status"]
        == "published"
    )


def test_items_of_other_feeds_are_never_removed(world):
    other = "https://other.example/rss"
    serve(world, [item(1)])
    world.fetcher.feed(other, rss([item(9)]))
    world.fetcher.page("https://blog.example/p9")
    world.poll()
    world.poll(other)
    world.poll()
    assert world.deleted() == []


def test_empty_feed_removes_nothing(world):
    serve(world, [item(1), item(2)])
    world.poll()
    world.fetcher.feed(FEED, rss([]))
    report = world.poll()
    assert report.outcome == "ok" and report.removed == 0 and world.deleted() == []
    assert "feed is empty; nothing removed" in world.feed_record()["last_status"]


# ------------------------------------------------------------------ bad feeds


@pytest.mark.parametrize(
    "body, content_type, message",
    [
        (rss([item(1), item(2)])[:-60], "application/rss+xml", "malformed XML"),
        (
            b"<?xml version='1.0'?><rss><channel><item><title>trunc",
            "application/rss+xml",
            "malformed XML",
        ),
        (
            b"<html><head><title>Home</title></head><body><p>Welcome</p></body></html>",
            "text/html",
            "not an RSS or Atom feed",
        ),
        (b"", "application/xml", "not an RSS or Atom feed"),
        (b"\x00\xff\xfe garbage", "application/xml", "malformed XML"),
    ],
    ids=["truncated", "truncated-item", "html-page", "empty-body", "binary"],
)
def test_a_bad_feed_is_a_recorded_error_and_nothing_is_removed(world, body, content_type, message):
    serve(world, [item(1), item(2)], etag='"good"')
    world.poll()
    world.fetcher.feed(FEED, body, content_type=content_type, etag='"bad"')
    report = world.poll()
    assert report.outcome == "failed" and not report.retryable
    feed = world.feed_record()
    assert message in feed["last_error"] and FEED in feed["last_error"]
    assert feed["last_status"] == "failed" and feed["etag"] == '"good"'
    assert world.deleted() == [] and len(world.fetched()) == 2
    assert world.state.count(state_collections.PROCESSED_ITEMS) == 2


@pytest.mark.parametrize(
    "error, retryable",
    [
        (PermanentError(f"GET {FEED} returned HTTP 404; the page is missing or forbidden"), False),
        (RetryableError(f"GET {FEED} failed after 4 attempts: HTTP 500; it may work later"), True),
        (RetryableError(f"GET {FEED} failed after 4 attempts: timed out (ReadTimeout)"), True),
        (FetchRefused(f"redirect loop: {FEED} -> https://blog.example/x -> {FEED}"), False),
        (
            FetchRefused("refusing to fetch from 'blog.example': 10.0.0.1 is a private address"),
            False,
        ),
    ],
)
def test_feed_fetch_errors_are_recorded_on_the_feed(world, error, retryable):
    serve(world, [item(1)])
    world.poll()
    world.fetcher.responses[FEED] = error
    report = world.poll()
    assert report.outcome == "failed" and report.retryable is retryable
    feed = world.feed_record()
    assert str(error) in feed["last_error"] and feed["last_status"] == "failed"
    assert world.deleted() == [] and world.state.count(state_collections.PROCESSED_ITEMS) == 1


# ------------------------------------------------------------------ bad pages


@pytest.mark.parametrize(
    "error",
    [
        FetchRefused(
            "refusing to fetch from '169.254.169.254': 169.254.169.254 is a link-local address"
        ),
        FetchRefused(
            "GET https://blog.example/p2 is 52428800 bytes (Content-Length), over the 5242880-byte cap"
        ),
        FetchRefused("GET https://blog.example/p2 returned content type 'application/pdf'"),
        PermanentError("GET https://blog.example/p2 returned HTTP 404"),
        RetryableError("GET https://blog.example/p2 failed after 4 attempts: HTTP 503"),
    ],
)
def test_a_bad_page_is_recorded_on_item_and_feed_and_retried_while_it_may_work(world, error):
    serve(world, [item(1), item(2), item(3)], etag='"v1"')
    world.fetcher.responses["https://blog.example/p2"] = error
    report = world.poll()
    assert report.outcome == "partial" and report.new == 2 and len(report.item_errors) == 1
    record = world.state.get(state_collections.PROCESSED_ITEMS, feed_item_id(FEED, "g2"))
    assert record["status"] == "failed" and record["error"] == str(error)
    feed = world.feed_record()
    assert str(error) in feed["last_error"] and "retried" in feed["last_error"]
    assert feed["last_status"] == "partial: 2 new, 0 changed, 0 removed, 1 failed"
    # the etag is not kept, so the next poll reads the feed again and retries the item
    assert feed["etag"] is None

    world.fetcher.page("https://blog.example/p2")
    report = world.poll()
    if not isinstance(error, FetchRefused):  # an HTTP error may pass: tried again on the next poll
        assert report.outcome == "ok" and report.pending == 1 and report.new == 0
        assert [m.guid for m in world.fetched()] == ["g1", "g3", "g2"]
        assert world.feed_record()["last_error"] is None and world.feed_record()["etag"] == '"v1"'
        return
    # refused for good: not fetched again while the item is unchanged (issue 10) ...
    assert report.outcome == "ok" and report.refused == 1 and report.pending == 0
    assert [m.guid for m in world.fetched()] == ["g1", "g3"]
    assert "1 refused earlier and unchanged" in world.feed_record()["last_status"]
    # ... and fetched again once it changes
    serve(world, [item(1), item(2, title="Post 2, corrected"), item(3)], etag='"v2"')
    report = world.poll()
    assert report.changed == 1 and [m.guid for m in world.fetched()] == ["g1", "g3", "g2"]


def test_an_item_linking_a_pdf_is_fetched_as_one_for_the_cleaner_to_read(world):
    serve(world, [item(1)])
    world.fetcher.page("https://blog.example/p1", b"%PDF-1.7 ...", charset=None, content_type="application/pdf")
    assert world.poll().new == 1
    (message,) = world.fetched()
    assert message.content_type == "application/pdf" and world.blobs.get(message.raw_ref) == b"%PDF-1.7 ..."


def test_an_empty_article_page_is_still_published(world):
    serve(world, [item(1)])
    world.fetcher.page("https://blog.example/p1", b"")
    report = world.poll()
    assert report.new == 1
    (message,) = world.fetched()
    assert world.blobs.get(message.raw_ref) == b""


def test_non_utf8_pages_pass_through_as_bytes_with_their_declared_charset(world):
    latin1 = "<html><body><p>Café crème</p></body></html>".encode("latin-1")
    serve(world, [item(1), item(2)])
    world.fetcher.page("https://blog.example/p1", latin1, charset="iso-8859-1")
    world.fetcher.page("https://blog.example/p2", latin1, charset="utf-8")  # mislabelled
    world.poll()
    first, second = world.fetched()
    assert (
        world.blobs.get(first.raw_ref) == latin1
        and first.content_type == "text/html; charset=iso-8859-1"
    )
    assert (
        world.blobs.get(second.raw_ref) == latin1
        and second.content_type == "text/html; charset=utf-8"
    )


def test_a_non_utf8_feed_is_read(world):
    body = (
        rss([item(1, title="Caf\u00e9")])
        .replace(b"UTF-8", b"ISO-8859-1")
        .decode()
        .encode("latin-1")
    )
    world.fetcher.feed(FEED, body)
    world.fetcher.page("https://blog.example/p1")
    world.poll()
    assert world.fetched()[0].title == "Café"


def test_an_entry_without_link_is_recorded_not_crashed(world):
    serve(world, [{"guid": "urn:only-guid", "title": "No link"}, item(2)])
    report = world.poll()
    # feedparser takes a permalink guid as the link; the fetcher refuses it as a page
    assert report.new == 1 and report.item_errors[0].startswith("urn:only-guid: ")
    record = world.state.get(state_collections.PROCESSED_ITEMS, feed_item_id(FEED, "urn:only-guid"))
    assert record["status"] == "failed"


# ------------------------------------------------------------------ crash safety


class Crash(BaseException):
    """Stands in for SIGKILL: no handler in the code under test catches it."""


class CrashingPublisher(RecordingPublisher):
    def __init__(self, crash_on: int):
        super().__init__()
        self.crash_on = crash_on

    def publish(self, message, attributes=None):
        if len(self.messages) + 1 == self.crash_on:
            raise Crash()
        return super().publish(message, attributes)


def test_redelivery_after_a_crash_between_claim_and_publish_republishes(world):
    serve(world, [item(1), item(2), item(3)])
    crashing = CrashingPublisher(crash_on=2)
    with pytest.raises(Crash):
        handle(request(FEED), world.deps(publisher=crashing))
    assert [m.guid for m in crashing.messages] == ["g1"]
    claimed = world.state.get(state_collections.PROCESSED_ITEMS, feed_item_id(FEED, "g2"))
    assert claimed["status"] == "claimed"

    handle(request(FEED), world.deps())  # the redelivery
    assert [m.guid for m in world.fetched()] == ["g2", "g3"]
    assert all(r["status"] == "published" for r in world.state.list(state_collections.PROCESSED_ITEMS))
    handle(request(FEED), world.deps())
    assert len(world.fetched()) == 2


def test_a_bus_failure_aborts_the_feed_and_the_message_is_retried(world):
    class DownBus(RecordingPublisher):
        def publish(self, message, attributes=None):
            raise RetryableError("the bus is unreachable")

    serve(world, [item(1)])
    with pytest.raises(RetryableError, match="bus is unreachable"):
        handle(request(FEED), world.deps(publisher=DownBus()))
    assert "poll interrupted" in world.feed_record()["last_error"]
    handle(request(FEED), world.deps())
    assert [m.guid for m in world.fetched()] == ["g1"]


# ------------------------------------------------------------------ the message


def test_empty_request_polls_every_registered_feed_and_one_failure_does_not_stop_others(world):
    other = "https://other.example/rss"
    def loopback_ok(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    add_listing(world.state, other, allow_loopback=False, now=world.clock.now(), resolver=loopback_ok)
    add_listing(world.state, FEED, allow_loopback=False, now=world.clock.now(), resolver=loopback_ok)
    world.fetcher.responses[FEED] = RetryableError("GET feed failed after 4 attempts: HTTP 500")
    world.fetcher.feed(other, rss([item(9)]))
    world.fetcher.page("https://blog.example/p9")
    handle(request(), world.deps())  # acked: one feed succeeded
    assert [m.guid for m in world.fetched()] == ["g9"]
    feeds = {f["url"]: f for f in list_listings(world.state)}
    assert "HTTP 500" in feeds[FEED]["last_error"] and feeds[other]["last_error"] is None


def test_every_feed_failing_retryably_raises_for_redelivery(world):
    world.fetcher.responses[FEED] = RetryableError("GET feed failed after 4 attempts: timed out")
    with pytest.raises(RetryableError, match="every feed failed"):
        handle(request(FEED), world.deps())


def test_a_permanently_failing_feed_is_acked(world):
    world.fetcher.responses[FEED] = PermanentError("GET feed returned HTTP 404")
    handle(request(FEED), world.deps())
    assert "HTTP 404" in world.feed_record()["last_error"]


def test_no_registered_feeds_is_a_no_op(world):
    handle(request(), world.deps())
    assert world.publisher.messages == [] and world.fetcher.calls == []


def test_an_invalid_url_in_the_request_does_not_stop_the_others(world):
    serve(world, [item(1)])
    handle(request("ftp://nope.example/feed", FEED), world.deps())
    assert len(world.fetched()) == 1


def test_other_message_types_are_refused(world):
    message = DocumentDeleted(document_id="x", reason="r", requested_at=world.clock.now())
    with pytest.raises(PermanentError, match="FeedPollRequested only"):
        handle(message, world.deps())


def test_main_entry_point_dispatches_a_pubsub_push_event(world, monkeypatch):
    from cloudevents.http import CloudEvent

    from shared.runtime import functions
    from tests.support import root_main

    main = root_main()  # the feed poller's target is made from the registry
    serve(world, [item(1)])
    monkeypatch.setattr(functions, "_deps", world.deps())
    data, attributes = encode(request(FEED))
    event = CloudEvent(
        {"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//pubsub/test"},
        {
            "message": {
                "data": base64.b64encode(data).decode(),
                "attributes": attributes,
                "messageId": "m1",
            }
        },
    )
    main.feed_poller(event)
    assert [m.guid for m in world.fetched()] == ["g1"]

    world.fetcher.responses[FEED] = RetryableError("timed out")
    with pytest.raises(RuntimeError, match="will redeliver"):
        main.feed_poller(event)

    bad = CloudEvent(
        {"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//pubsub/test"},
        {
            "message": {
                "data": base64.b64encode(b"{}").decode(),
                "attributes": {"type": "Nope"},
                "messageId": "m2",
            }
        },
    )
    main.feed_poller(bad)  # acknowledged, kept as a dead letter
    (letter,) = world.state.list(state_collections.DEAD_LETTERS)
    assert "unknown message type" in letter["error"]


# ------------------------------------------------------------------ registry


def public(host, port, type=0):
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]


def test_add_listing_normalises_and_is_idempotent(world):
    record = add_listing(
        world.state,
        "HTTPS://Blog.Example:443/feed.xml#top",
        allow_loopback=False,
        now=world.clock.now(),
        resolver=public,
    )
    assert record["url"] == FEED and record["added_at"] == world.clock.now().isoformat()
    assert world.state.get(state_collections.FEEDS, feed_id(FEED)) == record
    world.clock.advance(60)
    again = add_listing(
        world.state, FEED, allow_loopback=False, now=world.clock.now(), resolver=public
    )
    assert again["added_at"] == record["added_at"]
    (listed,) = list_listings(world.state)
    assert set(listed) >= set(LISTING_FIELDS)
    assert json.dumps(listed)  # plain JSON


@pytest.mark.parametrize(
    "url, error, message",
    [
        ("ftp://blog.example/feed", InvalidInput, "only http:// and https://"),
        ("https:///feed", InvalidInput, "no host"),
        ("http://10.0.0.1/feed", FetchRefused, "private"),
        ("http://169.254.169.254/latest", FetchRefused, "link-local"),
        ("http://127.0.0.1:8080/feed", FetchRefused, "loopback"),
        ("http://localhost/feed", FetchRefused, "loopback"),
        ("http://[::ffff:192.168.0.1]/feed", FetchRefused, "private"),
    ],
)
def test_add_listing_refuses_bad_urls_clearly(world, url, error, message):
    with pytest.raises(error, match=message):
        add_listing(world.state, url, allow_loopback=False, now=world.clock.now(), resolver=public)
    assert list_listings(world.state) == []


def test_loopback_feeds_only_when_allowed():
    def loop(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    assert (
        validate_listing_url("http://127.0.0.1:8000/f", allow_loopback=True, resolver=loop)
        == "http://127.0.0.1:8000/f"
    )
    with pytest.raises(FetchRefused, match="10.1.1.1 is a private"):
        validate_listing_url("http://10.1.1.1/f", allow_loopback=True, resolver=loop)


def test_an_entry_with_neither_link_nor_permalink_is_a_recorded_item_error(world):
    body = rss([item(2)]).replace(
        b"<item>",
        b"<item><guid isPermaLink='false'>tag:x</guid><title>Orphan</title></item><item>",
        1,
    )
    world.fetcher.feed(FEED, body)
    world.fetcher.page("https://blog.example/p2")
    report = world.poll()
    assert report.new == 1 and report.item_errors == [
        "tag:x: the entry has no link to an article page"
    ]
    assert (
        world.state.get(state_collections.PROCESSED_ITEMS, feed_item_id(FEED, "tag:x"))["status"]
        == "failed"
    )
