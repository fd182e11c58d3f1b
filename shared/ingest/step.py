"""The one ingestion step every source takes: announce a document, or retract it.

A source (a feed, a sitemap, a folder of files, a Cloud Storage bucket) only
finds items and says what each one is; this module does the rest, the same way
for all of them:

- :func:`announce`: claim the item in the processed-items ledger at its content
  hash (:mod:`shared.ingest.processed_items`); when it is new, changed or left pending by
  an earlier run, obtain its content, store the raw bytes in the blob store
  (unless they are stored already, like a GCS object), publish
  ``DocumentFetched`` and mark the claim published. An unchanged item costs one
  ledger transaction and nothing else. Claim -> publish -> mark is what makes a
  run killed half-way lose nothing (see :mod:`shared.ingest.processed_items`).
- :func:`retract`: bury the ledger record (a tombstone, so that deletes win: see
  :mod:`shared.ingest.processed_items`), then publish ``DocumentDeleted`` (a crash in
  between leaves it owed, and the next delete sends it);
  :func:`retract_missing` does it for every item of a listing (a feed, a sitemap) that
  is gone from it.

Each announced item is a trace of its own, linked to the request that found it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.contract import state_collections
from shared.contract.errors import FetchRefused, PermanentError, RetryableError
from shared.contract.messages import DocumentDeleted, DocumentFetched, SourceKind
from shared.contract.ports import BlobStore, Clock, Publisher, StateStore
from shared.contract.sources import LISTING_KINDS
from shared.ingest import pages, processed_items
from shared.ingest.processed_items import Claim
from shared.observability.tracing import item_trace

log = logging.getLogger("ragbus.ingestion")



@dataclass(frozen=True)
class Item:
    """One document a source found, identified and hashed by the source."""

    document_id: str
    source: SourceKind
    origin: str  # the feed or sitemap URL, the file's directory, the bucket
    guid: str  # what identifies it within its origin (feed guid, page URL, path, object)
    item_hash: str  # changes exactly when the document must be fetched and indexed again
    ledger: Mapping[str, Any] = field(default_factory=dict)  # kept on its ledger record
    trace: Mapping[str, Any] = field(default_factory=dict)  # attributes of its item trace
    trace_name: str = ""  # "<source> item" when empty
    page: str | None = None  # a web page's normalised URL: one document however many listings hold it


@dataclass(frozen=True)
class Content:
    """What an item turned out to hold, as the source obtained it."""

    url: str
    content_type: str  # as announced (a charset travels with it; the cleaner decodes)
    body: bytes | None = None  # stored under raw/<document_id>/<item_hash>
    raw_ref: str | None = None  # or: where the bytes already are (a GCS object)
    stored_type: str | None = None  # media type stored with the blob (content_type when None)
    title: str = ""  # a title the source itself states (a feed item's); wins over the document's
    fallback_title: str = ""  # only a name (a file's); used when the document states none
    published: str | None = None
    ledger: Mapping[str, Any] = field(default_factory=dict)  # kept on the ledger once published
    metadata: Mapping[str, str | list[str]] = field(default_factory=dict)  # keys the source set (--where)


@dataclass(frozen=True)
class Announced:
    """What :func:`announce` did with one item."""

    claim: Claim
    message: DocumentFetched | None = None
    error: str | None = None  # why its content could not be obtained (a later run retries)
    elsewhere: str | None = None  # the page is indexed from another listing, under this document id

    @property
    def published(self) -> bool:
        return self.message is not None


def announce(
    item: Item,
    obtain: Callable[[], Content],
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    blobs: BlobStore | None = None,
    started: datetime | None = None,
    generation: int | None = None,
) -> Announced:
    """Claim ``item``; unless it is unchanged, obtain its content and publish ``DocumentFetched``.

    ``obtain`` raises :class:`~shared.contract.errors.PermanentError` or
    :class:`~shared.contract.errors.RetryableError` when the content cannot be had (a page
    that fails to fetch); the claim is then marked failed with the reason and a
    later run tries again. Failures of the ledger, the blob store or the bus
    propagate, leaving the claim pending for the next run.

    ``started``: when the run that found the item began; a document deleted since is not
    claimed again by it (``claim == "deleted"``), nor is an object ``generation`` not newer
    than one deleted.
    """
    before = state.get(state_collections.PROCESSED_ITEMS, item.document_id) if item.page else None
    if processed_items.is_tombstone(before):
        before = None
    claimed = processed_items.claim(
        state, item.document_id, item.item_hash, now=clock.now(),
        fields={"source": item.source, **item.ledger, **({"page": item.page} if item.page else {})},
        started=started, generation=generation,
    )
    claim = claimed.kind
    if claim in ("unchanged", "deleted"):
        if claim == "deleted":
            log.info("%s (%s): deleted after this run began; not sent again", item.guid, item.document_id)
        return Announced(claim)
    target = item.document_id
    if item.page:
        target = _hold_page(item, item.page, before, state=state, publisher=publisher, clock=clock)
        if _indexed_elsewhere(item, target, claim, state=state, clock=clock):
            return Announced(claim, elsewhere=target)
    with item_trace(item.trace_name or f"{item.source} item", document_id=item.document_id, claim=claim, **item.trace):
        try:
            content = obtain()
        except (PermanentError, RetryableError) as exc:
            # refused (address, size, type, redirects): the same item would be refused again,
            # so it waits until it changes; any other failure is tried on the next run
            processed_items.mark_failed(state, item.document_id, item.item_hash, now=clock.now(), error=str(exc),
                                        permanent=isinstance(exc, FetchRefused))
            return Announced(claim, error=str(exc))
        message = _publish(item, content, target, claimed.revision, state=state, publisher=publisher, clock=clock,
                           blobs=blobs)
    log.info("%s %s (%s)", claim, item.guid, item.document_id)
    return Announced(claim, message)


def _hold_page(item: Item, page: str, before: Mapping[str, Any] | None, *, state: StateStore, publisher: Publisher,
               clock: Clock) -> str:
    """The document id ``item``'s web ``page`` is indexed under, held for it (pages.hold); when the
    item linked another page before, that page is released and, held by no other listing, dropped."""
    moved_from = (before or {}).get("page")
    preferred = item.document_id
    if moved_from and moved_from != page:
        # the item now links another page: its old page goes unless another listing holds it
        released = pages.release(state, moved_from, item.document_id)
        if released is not None and released.last and released.document_id != item.document_id:
            _drop_page_document(released.document_id, moved_from, "link moved", state=state,
                                publisher=publisher, clock=clock)
        elif released is not None and not released.last and released.document_id == item.document_id:
            # other listings still read the old page under this item's id: the new page needs its own
            preferred = f"{item.document_id}-{pages.page_key(page)[5:17]}"
    return pages.hold(state, page, item.document_id, item.origin, document_id=preferred)


def _indexed_elsewhere(item: Item, target: str, claim: str, *, state: StateStore, clock: Clock) -> bool:
    """Whether another listing found this page first and keeps it current under ``target``: this
    one then holds it too (its claim marked published as an alias), and nothing is fetched."""
    primary = state.get(state_collections.PROCESSED_ITEMS, target) if target != item.document_id else None
    if primary is None or processed_items.is_tombstone(primary):
        return False
    processed_items.mark_published(state, item.document_id, item.item_hash, now=clock.now(),
                                   fields={"indexed_as": target, "alias": True})
    log.info("%s %s: indexed already as %s (another listing)", claim, item.guid, target)
    return True


def _publish(item: Item, content: Content, target: str, revision: int, *, state: StateStore,
             publisher: Publisher, clock: Clock, blobs: BlobStore | None) -> DocumentFetched:
    """Store the content's bytes (unless they are stored already), publish ``DocumentFetched`` under
    ``target`` and mark the claim published."""
    raw_ref = content.raw_ref
    if raw_ref is None:
        if blobs is None or content.body is None:
            raise ValueError(f"{item.document_id}: content without bytes or a reference to them")
        raw_ref = blobs.put(f"raw/{target}/{item.item_hash}", content.body,
                            content.stored_type or content.content_type)
    now = clock.now()
    message = DocumentFetched(
        document_id=target,
        source=item.source,
        origin=item.origin,
        guid=item.guid,
        url=content.url,
        title=content.title,
        fallback_title=content.fallback_title,
        published=content.published,
        raw_ref=raw_ref,
        content_type=content.content_type,
        content_hash=item.item_hash,
        fetched_at=now,
        metadata=dict(content.metadata),
        revision=revision if target == item.document_id else None,
    )
    publisher.publish(message)
    held = {"indexed_as": target, "alias": False} if item.page else {}
    processed_items.mark_published(
        state, item.document_id, item.item_hash, now=now, fields={**content.ledger, "raw_ref": raw_ref, **held})
    return message


def retract(
    document_id: str, reason: str, *, state: StateStore, publisher: Publisher, clock: Clock,
    generation: str | None = None, if_live: bool = False, fields: Mapping[str, Any] | None = None,
) -> DocumentDeleted | None:
    """Bury the ledger record of ``document_id`` (a tombstone: deletes win, see
    :mod:`shared.ingest.processed_items`), then announce that it is gone (``DocumentDeleted``).

    The tombstone comes first: from then on no fetch, clean or index of the revision deleted can
    bring the document back, whatever order the stages see the messages in. A crash before the
    publish leaves a tombstone that owes its message; deleting its folder again sends it
    (:func:`shared.ingest.processed_items.unannounced`).

    ``generation``: the Cloud Storage generation deleted, so the indexer can ignore a late delete.
    ``if_live``: publish (and return) nothing when the record was no live one: a tombstone
    already (another delete running at the same time buried it, and its message is that delete's
    to send), or none (a file never ingested: its tombstone only keeps earlier runs from claiming
    it). ``fields``: kept on the tombstone (where a document without a record came from).
    """
    tombstone = processed_items.bury(state, document_id, now=clock.now(), reason=reason, generation=generation,
                                     announcing=True, fields=fields)
    if if_live and not tombstone.get("was_live"):
        return None
    message = DocumentDeleted(document_id=document_id, reason=reason, requested_at=clock.now(),
                              generation=generation, revision=processed_items.revision_of(tombstone))
    try:
        publisher.publish(message)
    except BaseException:
        processed_items.abandoned(state, document_id)  # the next delete sends it
        raise
    processed_items.announced(state, document_id)
    return message


def retract_missing(
    where: Mapping[str, Any],
    present: Iterable[str],
    reason: str,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
) -> list[str]:
    """Retract every ledger record matching ``where`` whose guid is not in ``present``;
    return their document ids."""
    keep = set(present)
    gone = []
    for record in processed_items.records(state, where):
        if record.get("guid") in keep:
            continue
        if record.get("page"):
            deleted = _let_go(record["page"], record["document_id"], reason, state=state, publisher=publisher,
                              clock=clock)
            if deleted is None:
                # the page stays, indexed under this record's id or another's: the record only lets go
                processed_items.forget(state, record["document_id"])
            elif deleted != record["document_id"]:
                # its page went under another id: this record is buried too, so that a poll that
                # began before cannot claim the item again
                processed_items.bury(state, record["document_id"], now=clock.now(), reason=reason)
            if deleted:
                gone.append(deleted)
            continue
        if retract(record["document_id"], reason, state=state, publisher=publisher, clock=clock, if_live=True):
            gone.append(record["document_id"])  # (not when a removal beside this one buried it first)
    return gone


def _let_go(page: str, holder: str, reason: str, *, state: StateStore, publisher: Publisher,
            clock: Clock) -> str | None:
    """``holder`` no longer holds ``page``; retract the page's document when no other listing
    holds it, and return that document id (None when the page stays)."""
    released = pages.release(state, page, holder)
    if released is None:  # recorded before the page registry: the page is its own document
        retract(holder, reason, state=state, publisher=publisher, clock=clock)
        return holder
    if not released.last:
        log.info("%s: %s, but another listing still lists %s; kept", holder, reason, page)
        return None
    _drop_page_document(released.document_id, page, reason, state=state, publisher=publisher, clock=clock)
    return released.document_id


def _drop_page_document(document_id: str, page: str, reason: str, *, state: StateStore, publisher: Publisher,
                        clock: Clock) -> None:
    """Retract ``page``'s document; the ledger record of the same id is forgotten only when it is
    that page's (an item whose link moved keeps its record, now about its new page)."""
    record = state.get(state_collections.PROCESSED_ITEMS, document_id)
    if record is None or record.get("page") in (None, page) or processed_items.is_tombstone(record):
        retract(document_id, reason, state=state, publisher=publisher, clock=clock)
        return
    publisher.publish(DocumentDeleted(document_id=document_id, reason=reason, requested_at=clock.now()))


def polled_items(state: StateStore, listing_urls: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Ledger records of items found in polled listings (every registered kind, keyed by
    ``feed_url``): all of them, or only those of ``listing_urls`` when given."""
    wanted = None if listing_urls is None else set(listing_urls)
    return [record for source in LISTING_KINDS for record in processed_items.records(state, {"source": source})
            if wanted is None or record.get("feed_url") in wanted]
