"""Listing poller: turn ``FeedPollRequested`` into ``DocumentFetched`` / ``DocumentDeleted``.

It polls every registered listing, whatever its kind (RSS/Atom feeds, sitemaps): how a kind
is read into entries is its :class:`~services.feed_poller.listings.Listing`; everything
after the read is this module's, the same for every kind, and so is the ingestion step
behind it (:mod:`shared.ingest.step`).

For each listing: a conditional GET (stored ETag / Last-Modified), the kind's read, then per
entry:

- identity is (listing URL, guid): ``document_id = feed_item_id(listing, guid)``;
- change detection compares the entry's hash (a feed entry's own fields, a sitemap page's
  ``<lastmod>``), so unchanged pages are never fetched again;
- new, changed or pending entries get their content obtained (their page fetched), stored
  raw in the blob store and announced with ``DocumentFetched`` (claim -> publish -> mark,
  see :mod:`shared.ingest.processed_items` for why a kill mid-poll loses nothing);
- with ``removed_item_policy == "remove"`` an item gone from a listing that was read
  cleanly with at least one entry gets ``DocumentDeleted(reason="left <kind>")``.
  A listing that failed, was malformed, or came back empty never removes anything.

One listing's failure is recorded on that listing (``last_error``) and does not stop
the others. The message is acknowledged unless every listing failed retryably.

Work per listing is bounded: at most ``max_items_per_poll`` items are fetched per
poll, newest first (the rest on later polls); titles are cut to
``max_title_chars``; a guid or link over ``_MAX_ID_CHARS`` is refused; an item
the fetcher refused (address, size, type, redirects) is not fetched again until
it changes; and one poll of a listing runs at a time (a lease on its record),
so two overlapping polls do the work once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from services.feed_poller.entries import Entry, Reading
from services.feed_poller.listings import LISTINGS, Listing
from shared.contract import state_collections
from shared.contract.errors import InvalidInput, PermanentError, RagbusError, RetryableError
from shared.contract.ids import feed_item_id
from shared.contract.messages import FeedPollRequested, Message
from shared.contract.ports import FetchResult, StateStore
from shared.contract.text import clip_metadata
from shared.ingest import listings, processed_items
from shared.ingest.step import Item, announce, retract_missing
from shared.ingest.url_guard import normalise_url

if TYPE_CHECKING:
    from shared.contract.deps import Deps

log = logging.getLogger("ragbus.feed_poller")

_MAX_RECORDED_ERRORS = 5
_MAX_ID_CHARS = 2048  # guid and link: longer is no identifier but a payload
POLL_LEASE_S = 900.0  # a poll of one listing holds it this long at most (unless its process dies)

PollOutcome = Literal["ok", "not_modified", "partial", "failed", "busy", "removed"]


@dataclass
class PollReport:
    """What one poll of one listing did."""

    listing_url: str
    outcome: PollOutcome = "ok"
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
    deleted_meanwhile: int = 0  # items deleted (their listing removed) after this poll began
    registered: str | None = None  # the listing's added_at when the poll began: which registration it polls

    @property
    def summary(self) -> str:
        if self.outcome == "failed":
            return "failed"
        if self.outcome == "not_modified":
            return "not modified"
        if self.outcome == "busy":
            return "skipped: another poll of this feed is running"
        if self.outcome == "removed":
            return f"removed while it was polled: {len(self.deleted)} of its documents deleted"
        text = f"{self.new} new, {self.changed} changed, {self.removed} removed"
        if self.deferred:
            text += f", {self.deferred} left for the next poll (RAGBUS_MAX_ITEMS_PER_POLL)"
        if self.refused:
            text += f", {self.refused} refused earlier and unchanged"
        if self.pending:
            text += f", {self.pending} re-sent"
        if self.elsewhere:
            text += f", {self.elsewhere} already indexed from another listing"
        if self.deleted_meanwhile:
            text += f", {self.deleted_meanwhile} deleted while it was polled (not sent again)"
        if self.item_errors:
            text += f", {len(self.item_errors)} failed"
        if self.rejected:
            shown = "; ".join(self.rejected[:_MAX_RECORDED_ERRORS])
            more = len(self.rejected) - _MAX_RECORDED_ERRORS
            text += f", {len(self.rejected)} skipped ({shown}{f'; and {more} more' if more > 0 else ''})"
        if self.entries == 0:
            text += " (feed is empty; nothing removed)"
        return f"{self.outcome}: {text}"

    def took(self, reading: Reading) -> None:
        """Count what the listing's reader found and left out."""
        self.skipped += reading.skipped
        self.rejected.extend(reading.rejected)
        self.duplicates += reading.duplicates
        self.cacheable = reading.cacheable
        self.entries = len(reading.entries)


# ------------------------------------------------------------------ entry point


def handle(message: Message, deps: Deps) -> None:
    """Handle a ``FeedPollRequested``; raise RetryableError if every listing failed retryably."""
    if not isinstance(message, FeedPollRequested):
        raise PermanentError(
            f"feed_poller cannot handle {type(message).__name__}; it consumes FeedPollRequested only"
        )
    reports = poll_listings(message.feed_urls, deps)
    failed = [r for r in reports if r.outcome == "failed"]
    if reports and len(failed) == len(reports) and all(r.retryable for r in failed):
        raise RetryableError(
            "every feed failed with a transient error: "
            + "; ".join(f"{r.listing_url}: {r.error}" for r in failed)
        )


def poll_listings(listing_urls: Sequence[str], ports: Deps) -> list[PollReport]:
    """Poll ``listing_urls`` (every registered listing when empty), one report each."""
    # every registered listing: one removed while the others are polled is not polled (nor registered again)
    registered_only = not listing_urls
    urls = list(listing_urls) or [f["url"] for f in listings.list_listings(ports.state)]
    if not urls:
        log.info("poll requested but no feed is registered; add one with `ragbus feeds add URL`")
    reports: list[PollReport] = []
    seen: set[str] = set()
    for url in urls:
        try:
            normal = normalise_url(url)
        except InvalidInput as exc:
            log.warning("skipping feed %r: %s", url, exc)
            reports.append(PollReport(listing_url=url, outcome="failed", error=str(exc)))
            continue
        if normal in seen:
            continue
        seen.add(normal)
        try:
            report = _leased_poll(normal, ports, registered_only=registered_only)
        except RagbusError:
            raise  # the bus or the state store: the message is retried
        except Exception as exc:
            # A value this code did not foresee in this listing's bytes: its failure, recorded on it,
            # and the other listings are polled all the same. Were the state store broken, recording
            # fails too and that error aborts the poll (the message is retried).
            log.exception("feed %s: unexpected error", normal)
            report = _fail(ports, PollReport(listing_url=normal),
                           f"poll failed on an unexpected value: {type(exc).__name__}: {exc}", False)
        reports.append(report)
    return reports


# ------------------------------------------------------------------ one listing


def poll_listing(listing_url: str, ports: Deps) -> PollReport:
    """Poll one listing; every failure is recorded on the listing and returned, never raised
    (except failures of the bus or the state store, which abort so the message retries)."""
    return _leased_poll(normalise_url(listing_url), ports)


def _leased_poll(url: str, ports: Deps, *, registered_only: bool = False) -> PollReport:
    token = listings.take_poll_lease(ports.state, url, now=ports.clock.now(), lease_s=POLL_LEASE_S,
                                     registered_only=registered_only)
    if token is None:
        if registered_only and listings.get_listing(ports.state, url) is None:
            log.info("feed %s: removed before its turn; not polled", url)
            return PollReport(listing_url=url, outcome="removed")
        log.info("feed %s: another poll of it is running; skipped", url)
        return PollReport(listing_url=url, outcome="busy")
    try:
        return _poll(url, ports)
    finally:
        listings.release_poll_lease(ports.state, url, token)


def _poll(url: str, ports: Deps) -> PollReport:
    report = PollReport(listing_url=url, registered=(listings.get_listing(ports.state, url) or {}).get("added_at"))
    record = listings.get_listing(ports.state, url) or {}
    kind = listings.kind_of(record)
    listing = LISTINGS[kind]
    if record.get("allow_loopback"):  # registered with --allow-loopback: its pages live there too
        ports = ports.replacing(fetcher=ports.fetcher.allowing_loopback())
    result = _fetch_listing(url, kind, listing, record, report, ports)
    if result is None:
        return report
    if result.not_modified:
        return _not_modified(url, record, result, report, ports)
    try:
        reading = listing.read(url, result, ports.fetcher)
    except InvalidInput as exc:
        return _fail(ports, report, str(exc), False)
    report.took(reading)
    entries = _bounded(url, reading.entries, report, ports.settings.max_title_chars)
    started = ports.clock.now()
    try:
        for entry in _this_poll(entries, report, ports.state, url, ports.settings.max_items_per_poll):
            if not listings.still_registered(ports.state, url, report.registered):
                break
            _process_entry(url, entry, report, listing, ports, source=kind, started=started)
        if not listings.still_registered(ports.state, url, report.registered):
            return _removed_meanwhile(url, report, ports, source=kind)
        if ports.settings.removed_item_policy == "remove" and entries:
            _remove_missing(url, {e.guid for e in entries}, report, ports, source=kind)
    except RagbusError as exc:
        # The bus or the state store failed mid-poll: what was claimed stays
        # pending and is re-sent on the next run.
        return _fail(ports, report, f"poll interrupted: {exc}", isinstance(exc, RetryableError))
    return _record_outcome(url, result, report, ports)


def _removed_meanwhile(url: str, report: PollReport, ports: Deps, *, source: str) -> PollReport:
    """The listing was removed while this poll ran: what the poll announced after the removal
    looked is deleted too (the removal deleted the rest), and nothing is recorded on it."""
    report.outcome = "removed"
    report.deleted.extend(retract_missing({"feed_url": url, "source": source}, (), f"{source} removed",
                                          state=ports.state, publisher=ports.publisher, clock=ports.clock))
    log.info("feed %s: %s", url, report.summary)
    return report


def _fetch_listing(url: str, kind: str, listing: Listing, record: dict[str, Any], report: PollReport,
                   ports: Deps) -> FetchResult | None:
    """The listing's bytes (or its 304); None when the fetch failed, recorded on ``report``."""
    try:
        return ports.fetcher.fetch(url, accept=listing.media_types, etag=record.get("etag"),
                                   last_modified=record.get("last_modified"))
    except RagbusError as exc:
        _fail(ports, report, f"fetching the {kind} failed: {exc}", isinstance(exc, RetryableError))
    except Exception as exc:
        log.exception("unexpected error fetching %s %s", kind, url)
        _fail(ports, report, f"fetching the {kind} failed: {type(exc).__name__}: {exc}", True)
    return None


def _not_modified(url: str, record: dict[str, Any], result: FetchResult, report: PollReport,
                  ports: Deps) -> PollReport:
    report.outcome = "not_modified"
    report.entries = int(record.get("items") or 0)
    listings.record_poll(ports.state, url, now=ports.clock.now(), registered=report.registered, changes={
        "last_status": report.summary,
        "last_error": None,
        "etag": result.etag or record.get("etag"),
        "last_modified": result.last_modified or record.get("last_modified"),
    })
    log.info("feed %s not modified", url)
    return report


def _record_outcome(url: str, result: FetchResult, report: PollReport, ports: Deps) -> PollReport:
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
    listings.record_poll(ports.state, url, now=ports.clock.now(), changes=changes, registered=report.registered)
    log.info("feed %s: %s", url, report.summary)
    return report


def _fail(ports: Deps, report: PollReport, error: str, retryable: bool) -> PollReport:
    report.outcome = "failed"
    report.error = error
    report.retryable = retryable
    log.warning(
        "feed %s failed (%s): %s", report.listing_url, "retryable" if retryable else "permanent", error
    )
    listings.record_poll(ports.state, report.listing_url, now=ports.clock.now(), registered=report.registered,
                         changes={"last_status": "failed", "last_error": error})
    return report


def _item_error_summary(report: PollReport) -> str:
    shown = report.item_errors[:_MAX_RECORDED_ERRORS]
    more = len(report.item_errors) - len(shown)
    text = (f"{len(report.item_errors)} item(s) failed and will be retried (next poll; an item the "
            "fetcher refused, once it changes): ") + "; ".join(shown)
    return text + (f"; and {more} more" if more > 0 else "")


# ------------------------------------------------------------------ bounds


def _bounded(url: str, entries: list[Entry], report: PollReport, max_title_chars: int) -> list[Entry]:
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


def _this_poll(entries: list[Entry], report: PollReport, state: StateStore, listing_url: str,
               limit: int) -> list[Entry]:
    """The entries this poll handles: every unchanged one (cheap, no fetch) and, of those
    that need a fetch, the ``limit`` newest; items the fetcher refused and unchanged since
    are left out."""
    work, quiet = [], []
    for entry in entries:
        record = state.get(state_collections.PROCESSED_ITEMS, feed_item_id(listing_url, entry.guid)) or {}
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
                    listing_url, len(work) + report.deferred, limit)
    return quiet + work


# ------------------------------------------------------------------ items


def _process_entry(url: str, entry: Entry, report: PollReport, listing: Listing, ports: Deps, *,
                   source: str, started: datetime | None = None) -> None:
    document_id = feed_item_id(url, entry.guid)
    item = Item(
        document_id=document_id,
        source=source,
        origin=url,
        guid=entry.guid,
        item_hash=entry.item_hash,
        ledger={"feed_url": url, "guid": entry.guid, "link": entry.link, "title": entry.title},
        trace={"guid": entry.guid, "feed_url": url},
        trace_name="feed item",
        page=_normal_page(entry.link),
    )
    done = announce(item, lambda: listing.obtain(entry, ports.fetcher), state=ports.state,
                    publisher=ports.publisher, clock=ports.clock, blobs=ports.blobs, started=started)
    if done.claim == "unchanged":
        report.unchanged += 1
    elif done.claim == "deleted":
        report.deleted_meanwhile += 1
    elif done.elsewhere is not None:
        report.elsewhere += 1
    elif done.error is not None:
        message = f"{entry.link or entry.guid}: {done.error}"
        log.warning("feed %s: item failed: %s", report.listing_url, message)
        report.item_errors.append(message)
    else:
        report.published.append(document_id)
        if done.claim == "new":
            report.new += 1
        elif done.claim == "changed":
            report.changed += 1
        else:
            report.pending += 1


def _normal_page(link: str | None) -> str | None:
    """The page ``link`` names, as every listing knows it (its normalised URL); None for a link
    that is no http(s) URL (the fetcher refuses it as the item's own error)."""
    if not link:
        return None
    try:
        return normalise_url(link)
    except InvalidInput:
        return None


def _remove_missing(url: str, current_guids: set[str], report: PollReport, ports: Deps, *, source: str) -> None:
    gone = retract_missing({"feed_url": url, "source": source}, current_guids, f"left {source}",
                           state=ports.state, publisher=ports.publisher, clock=ports.clock)
    report.removed += len(gone)
    report.deleted.extend(gone)
