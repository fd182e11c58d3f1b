"""Feed poller: turn ``FeedPollRequested`` into ``DocumentFetched`` / ``DocumentDeleted``.

It polls every registered listing: RSS/Atom feeds and sitemaps. A kind of
listing is a parser plus one entry in :data:`LISTINGS`; everything after the
parse (fetching pages, change detection, removal) is shared, and so is the
ingestion step behind it (:mod:`shared.ingest.step`).

For each feed: a conditional GET (stored ETag / Last-Modified), parse with
feedparser (RSS 2.0, Atom, RDF), then per entry:

- identity is (feed URL, guid or link): ``document_id = feed_item_id(feed, guid)``;
- change detection hashes the entry's own fields (title, link, dates, summary,
  content), so unchanged pages are never fetched again;
- new, changed or pending entries get their article page fetched, stored raw in
  the blob store and announced with ``DocumentFetched`` (claim -> publish -> mark,
  see :mod:`shared.ingest.processed_items` for why a kill mid-poll loses nothing);
- with ``removed_item_policy == "remove"`` an item gone from a feed that parsed
  cleanly with at least one entry gets ``DocumentDeleted(reason="left feed")``.
  A feed that failed, was malformed, or came back empty never removes anything.

A sitemap (:mod:`services.feed_poller.sitemaps`) lists pages instead: a page's
identity is its URL, and its ``<lastmod>`` is what change detection compares.

One feed's failure is recorded on that feed (``last_error``) and does not stop
the others. The message is acknowledged unless every feed failed retryably.

Work per feed is bounded: at most ``max_items_per_poll`` items are fetched per
poll, newest first (the rest on later polls); titles are cut to
``max_title_chars``; a guid or link over ``_MAX_ID_CHARS`` is refused; an item
the fetcher refused (address, size, type, redirects) is not fetched again until
it changes; and one poll of a feed runs at a time (a lease on the feed record),
so two overlapping polls do the work once.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urljoin

import feedparser

from services.feed_poller import sitemaps
from services.feed_poller.sitemaps import read_sitemap
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.errors import InvalidInput, PermanentError, RagbusError, RetryableError
from shared.contract.ids import content_hash, feed_item_id
from shared.contract.messages import FeedPollRequested, Message, SourceKind
from shared.contract.ports import BlobStore, Clock, Fetcher, FetchResult, Publisher, StateStore
from shared.contract.text import clip_metadata
from shared.ingest import feeds, processed_items
from shared.ingest.step import Content, Item, announce, retract_missing
from shared.ingest.url_guard import normalise_url

if TYPE_CHECKING:
    from shared.contract.deps import Deps

log = logging.getLogger("ragbus.feed_poller")

# text/html and text/plain are accepted because real feeds are often served with
# the wrong type; feedparser then decides whether the bytes are a feed at all.
FEED_MEDIA_TYPES = (
    "application/rss+xml",
    "application/atom+xml",
    "application/rdf+xml",
    "application/x-rss+xml",
    "application/xml",
    "text/xml",
    "text/html",
    "text/plain",
)
PAGE_MEDIA_TYPES = ("text/html", "application/xhtml+xml")

# feedparser flags these but the feed itself is well-formed.
_BENIGN_BOZO = (feedparser.CharacterEncodingOverride, feedparser.NonXMLContentType)
_MAX_RECORDED_ERRORS = 5
_MAX_ID_CHARS = 2048  # guid and link: longer is no identifier but a payload
POLL_LEASE_S = 900.0  # a poll of one feed holds it this long at most (unless its process dies)

Outcome = Literal["ok", "not_modified", "partial", "failed", "busy"]


@dataclass
class PollReport:
    """What one poll of one feed did."""

    feed_url: str
    outcome: Outcome = "ok"
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    pending: int = 0  # same hash, an earlier run did not finish: published again
    removed: int = 0
    duplicates: int = 0
    skipped: int = 0  # entries with neither guid nor link (or absurdly long ones): nothing to identify them by
    rejected: list[str] = field(default_factory=list)  # why an entry was skipped, when it said something unusable
    deferred: int = 0  # over max_items_per_poll: left for the next poll
    refused: int = 0  # refused by the fetcher before, unchanged since: not fetched again
    elsewhere: int = 0  # pages another listing found first: one document, indexed from there
    entries: int = 0
    published: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    item_errors: list[str] = field(default_factory=list)
    error: str | None = None
    retryable: bool = False
    cacheable: bool = True  # False: a 304 would not prove the listing unchanged (a sitemap index)

    @property
    def summary(self) -> str:
        if self.outcome == "failed":
            return "failed"
        if self.outcome == "not_modified":
            return "not modified"
        if self.outcome == "busy":
            return "skipped: another poll of this feed is running"
        text = f"{self.new} new, {self.changed} changed, {self.removed} removed"
        if self.deferred:
            text += f", {self.deferred} left for the next poll (RAGBUS_MAX_ITEMS_PER_POLL)"
        if self.refused:
            text += f", {self.refused} refused earlier and unchanged"
        if self.pending:
            text += f", {self.pending} re-sent"
        if self.elsewhere:
            text += f", {self.elsewhere} already indexed from another listing"
        if self.item_errors:
            text += f", {len(self.item_errors)} failed"
        if self.rejected:
            shown = "; ".join(self.rejected[:_MAX_RECORDED_ERRORS])
            more = len(self.rejected) - _MAX_RECORDED_ERRORS
            text += f", {len(self.rejected)} skipped ({shown}{f'; and {more} more' if more > 0 else ''})"
        if self.entries == 0:
            text += " (feed is empty; nothing removed)"
        return f"{self.outcome}: {text}"


@dataclass(frozen=True)
class _Entry:
    guid: str
    link: str | None
    title: str
    published: str | None
    item_hash: str
    metadata: dict[str, str | list[str]] = field(default_factory=dict)


#: Categories kept per item (a feed may list hundreds; each becomes a restrict token in Vertex AI).
MAX_CATEGORIES = 20


def _metadata(raw: Any) -> dict[str, str | list[str]]:
    """The item's author and categories (RSS ``<author>``/``<dc:creator>``/``<category>``, Atom
    ``<author>``/``<category term>``): what a search's ``where author=...`` / ``category=...`` matches.
    Not part of the item's hash, so an item indexed before keeps its hash (and is not fetched again)."""
    out: dict[str, str | list[str]] = {}
    author = raw.get("author")
    if isinstance(author, str) and author.strip():
        out["author"] = author.strip()
    terms: list[str] = []
    for tag in raw.get("tags") or []:
        term = tag.get("term") if hasattr(tag, "get") else None
        if isinstance(term, str) and term.strip() and term.strip() not in terms:
            terms.append(term.strip())
    if terms:
        out["category"] = terms[:MAX_CATEGORIES]
    return out


# ------------------------------------------------------------------ entry point


def handle(message: Message, deps: Deps) -> None:
    """Handle a ``FeedPollRequested``; raise RetryableError if every feed failed retryably."""
    if not isinstance(message, FeedPollRequested):
        raise PermanentError(
            f"feed_poller cannot handle {type(message).__name__}; it consumes FeedPollRequested only"
        )
    reports = poll_feeds(
        message.feed_urls,
        state=deps.state,
        blobs=deps.blobs,
        publisher=deps.publisher,
        fetcher=deps.fetcher,
        clock=deps.clock,
        settings=deps.settings,
    )
    failed = [r for r in reports if r.outcome == "failed"]
    if reports and len(failed) == len(reports) and all(r.retryable for r in failed):
        raise RetryableError(
            "every feed failed with a transient error: "
            + "; ".join(f"{r.feed_url}: {r.error}" for r in failed)
        )


def poll_feeds(
    feed_urls: Sequence[str],
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    fetcher: Fetcher,
    clock: Clock,
    settings: Settings,
) -> list[PollReport]:
    """Poll ``feed_urls`` (every registered feed when empty), one report each."""
    urls = list(feed_urls) or [f["url"] for f in feeds.list_feeds(state)]
    if not urls:
        log.info("poll requested but no feed is registered; add one with `ragbus feeds add URL`")
    reports: list[PollReport] = []
    seen: set[str] = set()
    for url in urls:
        try:
            normal = normalise_url(url)
        except InvalidInput as exc:
            log.warning("skipping feed %r: %s", url, exc)
            reports.append(PollReport(feed_url=url, outcome="failed", error=str(exc)))
            continue
        if normal in seen:
            continue
        seen.add(normal)
        try:
            report = poll_feed(normal, state=state, blobs=blobs, publisher=publisher, fetcher=fetcher,
                               clock=clock, settings=settings)
        except RagbusError:
            raise  # the bus or the state store: the message is retried
        except Exception as exc:
            # A value this code did not foresee in this listing's bytes: its failure, recorded on it,
            # and the other listings are polled all the same. Were the state store broken, recording
            # fails too and that error aborts the poll (the message is retried).
            log.exception("feed %s: unexpected error", normal)
            report = _fail(state, PollReport(feed_url=normal), clock,
                           f"poll failed on an unexpected value: {type(exc).__name__}: {exc}", False)
        reports.append(report)
    return reports


# ------------------------------------------------------------------ one feed


def poll_feed(
    feed_url: str,
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    fetcher: Fetcher,
    clock: Clock,
    settings: Settings,
) -> PollReport:
    """Poll one feed; every failure is recorded on the feed and returned, never raised
    (except failures of the bus or the state store, which abort so the message retries)."""
    url = normalise_url(feed_url)
    token = feeds.take_poll_lease(state, url, now=clock.now(), lease_s=POLL_LEASE_S)
    if token is None:
        log.info("feed %s: another poll of it is running; skipped", url)
        return PollReport(feed_url=url, outcome="busy")
    try:
        return _poll_feed(url, state=state, blobs=blobs, publisher=publisher, fetcher=fetcher,
                          clock=clock, settings=settings)
    finally:
        feeds.release_poll_lease(state, url, token)


def _poll_feed(
    url: str,
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    fetcher: Fetcher,
    clock: Clock,
    settings: Settings,
) -> PollReport:
    report = PollReport(feed_url=url)
    record = feeds.get_feed(state, url) or {}
    kind = feeds.kind_of(record)
    listing = LISTINGS[kind]
    if record.get("allow_loopback"):  # registered with --allow-loopback: its pages live there too
        fetcher = fetcher.allowing_loopback()
    try:
        result = fetcher.fetch(
            url,
            accept=listing.media_types,
            etag=record.get("etag"),
            last_modified=record.get("last_modified"),
        )
    except RagbusError as exc:
        return _fail(
            state,
            report,
            clock,
            f"fetching the feed failed: {exc}",
            isinstance(exc, RetryableError),
        )
    except Exception as exc:
        log.exception("unexpected error fetching feed %s", url)
        return _fail(
            state, report, clock, f"fetching the feed failed: {type(exc).__name__}: {exc}", True
        )

    if result.not_modified:
        report.outcome = "not_modified"
        report.entries = int(record.get("items") or 0)
        feeds.record_poll(
            state,
            url,
            now=clock.now(),
            changes={
                "last_status": report.summary,
                "last_error": None,
                "etag": result.etag or record.get("etag"),
                "last_modified": result.last_modified or record.get("last_modified"),
            },
        )
        log.info("feed %s not modified", url)
        return report

    try:
        entries = listing.read(url, result, report, fetcher)
    except InvalidInput as exc:
        return _fail(state, report, clock, str(exc), False)
    entries = _bounded(url, entries, report, settings.max_title_chars)

    try:
        for entry in _this_poll(entries, report, state, url, settings.max_items_per_poll):
            _process_entry(
                url,
                entry,
                report,
                state=state,
                blobs=blobs,
                publisher=publisher,
                fetcher=fetcher,
                clock=clock,
                source=kind,
            )
        if settings.removed_item_policy == "remove" and entries:
            _remove_missing(
                url,
                {e.guid for e in entries},
                report,
                state=state,
                publisher=publisher,
                clock=clock,
                source=kind,
            )
    except RagbusError as exc:
        # The bus or the state store failed mid-poll: what was claimed stays
        # pending and is re-sent on the next run.
        return _fail(
            state, report, clock, f"poll interrupted: {exc}", isinstance(exc, RetryableError)
        )

    if report.item_errors:
        report.outcome = "partial"
    changes: dict[str, Any] = {
        "last_status": report.summary,
        "last_error": _item_error_summary(report) if report.item_errors else None,
        "items": report.entries,
    }
    # Keep the old validators while any item failed or waits its turn: a 304 next time
    # would hide it from the retry (or the turn) the next poll is meant to give it.
    if not report.item_errors and not report.deferred and report.cacheable:
        changes["etag"] = result.etag
        changes["last_modified"] = result.last_modified
    feeds.record_poll(state, url, now=clock.now(), changes=changes)
    log.info("feed %s: %s", url, report.summary)
    return report


def _fail(
    state: StateStore, report: PollReport, clock: Clock, error: str, retryable: bool
) -> PollReport:
    report.outcome = "failed"
    report.error = error
    report.retryable = retryable
    log.warning(
        "feed %s failed (%s): %s", report.feed_url, "retryable" if retryable else "permanent", error
    )
    feeds.record_poll(
        state,
        report.feed_url,
        now=clock.now(),
        changes={
            "last_status": "failed",
            "last_error": error,
        },
    )
    return report


def _item_error_summary(report: PollReport) -> str:
    shown = report.item_errors[:_MAX_RECORDED_ERRORS]
    more = len(report.item_errors) - len(shown)
    text = (f"{len(report.item_errors)} item(s) failed and will be retried (next poll; an item the "
            "fetcher refused, once it changes): ") + "; ".join(shown)
    return text + (f"; and {more} more" if more > 0 else "")


# ------------------------------------------------------------------ bounds


def _bounded(url: str, entries: list[_Entry], report: PollReport, max_title_chars: int) -> list[_Entry]:
    """Entries with their titles cut to ``max_title_chars`` (the hash saw the whole title:
    a change is a change), without those whose guid or link is no identifier but a payload."""
    out = []
    for entry in entries:
        if len(entry.guid or "") > _MAX_ID_CHARS or len(entry.link or "") > _MAX_ID_CHARS:
            report.skipped += 1
            report.entries -= 1
            log.warning("feed %s: an entry's guid or link is over %d characters; skipped", url, _MAX_ID_CHARS)
            continue
        metadata = {key: [clip_metadata(v, max_title_chars) for v in value] if isinstance(value, list)
                    else clip_metadata(value, max_title_chars) for key, value in entry.metadata.items()}
        out.append(dataclasses.replace(entry, title=clip_metadata(entry.title, max_title_chars), metadata=metadata))
    return out


def _this_poll(entries: list[_Entry], report: PollReport, state: StateStore, feed_url: str,
               limit: int) -> list[_Entry]:
    """The entries this poll handles: every unchanged one (cheap, no fetch) and, of those
    that need a fetch, the ``limit`` newest; items the fetcher refused and unchanged since
    are left out."""
    work, quiet = [], []
    for entry in entries:
        record = state.get(state_collections.PROCESSED_ITEMS, feed_item_id(feed_url, entry.guid)) or {}
        if record.get("item_hash") == entry.item_hash:
            if record.get("status") == processed_items.PUBLISHED:
                quiet.append(entry)
                continue
            if record.get("status") == processed_items.FAILED and record.get("permanent"):
                report.refused += 1
                continue
        work.append(entry)
    report.deferred = max(0, len(work) - limit)
    if report.deferred:
        # the newest now (undated ones after dated ones, in feed order: sorted() is
        # stable), handled in feed order; the rest on later polls
        chosen = {id(e) for e in sorted(work, key=lambda e: e.published or "", reverse=True)[:limit]}
        work = [e for e in work if id(e) in chosen]
        log.warning("feed %s: %d items need fetching; %d now (RAGBUS_MAX_ITEMS_PER_POLL), the rest on later polls",
                    feed_url, len(work) + report.deferred, limit)
    return quiet + work


# ------------------------------------------------------------------ parsing


def _parse(url: str, result: FetchResult, report: PollReport) -> list[_Entry]:
    """The feed's entries, de-duplicated by guid; InvalidInput when it is not a usable feed."""
    # No content-location: feedparser would then also "resolve" a relative guid
    # such as "post-42" into a URL, changing the item's identity. Links are
    # resolved against the feed's URL below instead.
    headers = {"content-type": result.content_type}
    if result.charset:
        headers["content-type"] += f"; charset={result.charset}"
    # A BytesIO, never a str: feedparser treats a str as a URL or a file path.
    parsed = feedparser.parse(io.BytesIO(result.body), response_headers=headers)
    problem = parsed.get("bozo_exception")
    if parsed.get("bozo") and not isinstance(problem, _BENIGN_BOZO):
        raise InvalidInput(
            f"feed {url} is malformed XML ({type(problem).__name__}: {problem}); nothing was "
            f"changed or removed, fix the feed or remove it"
        )
    if not parsed.get("version") and not parsed.entries:
        raise InvalidInput(
            f"{url} is not an RSS or Atom feed (got {result.content_type or 'no content type'}, "
            f"{len(result.body)} bytes); check that the URL points at the feed, not a web page"
        )
    entries: list[_Entry] = []
    seen: set[str] = set()
    for raw in parsed.entries:
        try:
            joined = _joined(result.url, raw["link"]) if raw.get("link") else None
        except InvalidInput as exc:
            _reject(url, report, f"entry {_shown(raw.get('id') or raw.get('title'))}: {exc}")
            continue
        link = joined  # fetched and shown as written; its normalised form is the page's identity
        guid = raw.get("id") or joined  # as before: an item's identity in its feed does not move
        if not guid:
            report.skipped += 1
            log.warning(
                "feed %s: entry %r has neither guid nor link; skipped", url, raw.get("title", "")
            )
            continue
        if guid in seen:
            report.duplicates += 1
            log.warning("feed %s: duplicate guid %r ignored (the first entry wins)", url, guid)
            continue
        try:
            entry = _entry(guid, link, joined, raw)
        except (ValueError, TypeError, OverflowError) as exc:  # a field feedparser passed through unread
            _reject(url, report, f"entry {_shown(guid)}: {type(exc).__name__}: {exc}")
            continue
        seen.add(guid)
        entries.append(entry)
    report.entries = len(entries)
    return entries


def _joined(base: str, link: str) -> str:
    """``link`` resolved against ``base``; InvalidInput when it cannot be (``http://[oops/``)."""
    try:
        return urljoin(base, link.strip())
    except ValueError as exc:
        raise InvalidInput(f"link {_shown(link)} is not a valid URL ({exc})") from None


def _normal_page(link: str | None) -> str | None:
    """The page ``link`` names, as every listing knows it (its normalised URL); None for a link
    that is no http(s) URL (the fetcher refuses it as the item's own error)."""
    if not link:
        return None
    try:
        return normalise_url(link)
    except InvalidInput:
        return None


def _shown(value: Any) -> str:
    text = str(value or "")
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _reject(url: str, report: PollReport, reason: str) -> None:
    report.skipped += 1
    report.rejected.append(reason)
    log.warning("feed %s: %s; skipped", url, reason)


def _entry(guid: str, link: str | None, joined: str | None, raw: Any) -> _Entry:
    own_fields = {
        "title": raw.get("title", ""),
        # as written (resolved), not normalised: the hash of an unchanged item stays what it was
        "link": joined or "",
        # dict.get: FeedParserDict.get("updated") falls back to "published" with
        # a deprecation warning; the entry's own fields are wanted here.
        "updated": dict.get(raw, "updated", ""),
        "published": dict.get(raw, "published", ""),
        "summary": raw.get("summary", ""),
        "content": [c.get("value", "") for c in raw.get("content", [])],
    }
    when = dict.get(raw, "published_parsed") or dict.get(raw, "updated_parsed")
    published = None
    if when:
        try:
            published = datetime(*when[:6], tzinfo=UTC).isoformat()
        except (ValueError, OverflowError, TypeError):
            # year 0 and the like: the article is still an article, only its date is unknown
            log.warning("entry %r: date %r is out of range; kept without a date", raw.get("id"), when)
    return _Entry(
        guid=guid,
        link=link,
        title=own_fields["title"],
        published=published,
        item_hash=content_hash(json.dumps(own_fields, sort_keys=True, ensure_ascii=False)),
        metadata=_metadata(raw),
    )


# ------------------------------------------------------------------ listings


@dataclass(frozen=True)
class Listing:
    """How the poller reads one kind of registered listing into entries."""

    media_types: tuple[str, ...]
    read: Callable[[str, FetchResult, PollReport, Fetcher], list[_Entry]]


def _feed_entries(url: str, result: FetchResult, report: PollReport, fetcher: Fetcher) -> list[_Entry]:
    return _parse(url, result, report)


def _sitemap_entries(url: str, result: FetchResult, report: PollReport, fetcher: Fetcher) -> list[_Entry]:
    sitemap = read_sitemap(result, lambda child: fetcher.fetch(child, accept=sitemaps.MEDIA_TYPES))
    report.skipped += sitemap.skipped
    report.rejected.extend(sitemap.rejected)
    report.duplicates += sitemap.duplicates
    report.cacheable = not sitemap.is_index  # a 304 for an index says nothing about its sitemaps
    report.entries = len(sitemap.pages)
    # A page is fetched again exactly when its <lastmod> changes; the page states its own title.
    return [
        _Entry(guid=page.url, link=page.url, title="", published=page.published,
               item_hash=content_hash(json.dumps({"url": page.url, "lastmod": page.lastmod}, sort_keys=True)))
        for page in sitemap.pages
    ]


LISTINGS: dict[feeds.Kind, Listing] = {
    "feed": Listing(FEED_MEDIA_TYPES, _feed_entries),
    "sitemap": Listing(sitemaps.MEDIA_TYPES, _sitemap_entries),
}


# ------------------------------------------------------------------ items


def _process_entry(
    feed_url: str,
    entry: _Entry,
    report: PollReport,
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    fetcher: Fetcher,
    clock: Clock,
    source: SourceKind = "feed",
) -> None:
    document_id = feed_item_id(feed_url, entry.guid)
    item = Item(
        document_id=document_id,
        source=source,
        origin=feed_url,
        guid=entry.guid,
        item_hash=entry.item_hash,
        ledger={"feed_url": feed_url, "guid": entry.guid, "link": entry.link, "title": entry.title},
        trace={"guid": entry.guid, "feed_url": feed_url},
        trace_name="feed item",
        page=_normal_page(entry.link),
    )

    def fetch_page() -> Content:
        if not entry.link:
            raise PermanentError("the entry has no link to an article page")
        page = fetcher.fetch(entry.link, accept=PAGE_MEDIA_TYPES)
        return Content(
            url=page.url,
            # The declared charset travels with the type (the bytes are passed through as
            # received, right or wrong); the cleaner decides how to decode.
            content_type=page.content_type + (f"; charset={page.charset}" if page.charset else ""),
            stored_type=page.content_type,
            body=page.body,
            title=entry.title,
            published=entry.published,
            ledger={"url": page.url},
            metadata=entry.metadata,
        )

    done = announce(item, fetch_page, state=state, publisher=publisher, clock=clock, blobs=blobs)
    if done.claim == "unchanged":
        report.unchanged += 1
    elif done.elsewhere is not None:
        report.elsewhere += 1
    elif done.error is not None:
        message = f"{entry.link or entry.guid}: {done.error}"
        log.warning("feed %s: item failed: %s", report.feed_url, message)
        report.item_errors.append(message)
    else:
        report.published.append(document_id)
        if done.claim == "new":
            report.new += 1
        elif done.claim == "changed":
            report.changed += 1
        else:
            report.pending += 1


def _remove_missing(
    feed_url: str,
    current_guids: set[str],
    report: PollReport,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    source: SourceKind = "feed",
) -> None:
    gone = retract_missing({"feed_url": feed_url, "source": source}, current_guids, f"left {source}",
                           state=state, publisher=publisher, clock=clock)
    report.removed += len(gone)
    report.deleted.extend(gone)
