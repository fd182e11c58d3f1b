"""Whether ingestion has finished, read from state alone (works in both runtimes).

A document is done when its ``documents`` record carries the content hash its
``processed_items`` claim was published with, or when it failed: a dead letter
names it, or its fetch failed (the claim is marked ``failed`` and nothing was
published, so there is no dead letter; the feed's or sitemap's error says why).
The embedded runtime can also ask its bus, but the gcp runtime has only this.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from shared.contract import state_collections
from shared.contract.ports import StateStore
from shared.ingest import processed_items
from shared.ingest.step import polled_items


@dataclass
class IngestionStatus:
    indexed: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    #: the part of ``failed`` whose fetch failed: never published, so no dead letter names it
    unfetched: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    #: failed, and its dead letter purged (`ragbus dead-letters purge`) at this content
    dropped: set[str] = field(default_factory=set)
    #: deleted (a tombstone), and the index no longer lists what was deleted
    removed: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return len(self.indexed) + len(self.failed) + len(self.pending) + len(self.removed)


def status_of(state: StateStore, document_ids: Iterable[str]) -> IngestionStatus:
    letters = " ".join(str(d.get("data", "")) for d in state.list(state_collections.DEAD_LETTERS))
    out = IngestionStatus()
    for document_id in document_ids:
        claim = state.get(state_collections.PROCESSED_ITEMS, document_id)
        indexed_as = (claim or {}).get("indexed_as") or document_id  # a page another listing found first
        if claim and claim.get("alias") and not processed_items.is_tombstone(claim):
            # done when the record that keeps the page current is done (or gone: nothing to wait for)
            claim = state.get(state_collections.PROCESSED_ITEMS, indexed_as)
            if claim is None:
                out.indexed.add(document_id)
                continue
        document = state.get(state_collections.DOCUMENTS, indexed_as)
        if processed_items.is_tombstone(claim):
            # deleted: done once the index no longer lists the revision deleted (a later one is
            # a re-ingest's)
            unfinished = document is not None and (processed_items.revision_of(document)
                                                   <= processed_items.revision_of(claim))
            (out.pending if unfinished else out.removed).add(document_id)
        elif claim is None:  # forgotten: a page another listing holds, or a record from before tombstones
            (out.pending if document is not None else out.indexed).add(document_id)
        elif document is not None and document.get("content_hash") == claim.get("item_hash"):
            out.indexed.add(document_id)
        elif document_id in letters or indexed_as in letters:
            out.failed.add(document_id)
        elif claim.get("dropped_hash") and claim.get("dropped_hash") == claim.get("item_hash"):
            out.dropped.add(document_id)  # its dead letter was purged: nothing to wait for or report
        elif claim.get("status") == "failed":
            out.failed.add(document_id)
            out.unfetched.add(document_id)
        else:
            out.pending.add(document_id)
    return out


def failures(state: StateStore, document_ids: Iterable[str]) -> dict[str, str]:
    """Why each of ``document_ids`` that has a dead letter failed: its latest letter's error."""
    wanted = set(document_ids)
    out: dict[str, tuple[str, str]] = {}
    for letter in state.list(state_collections.DEAD_LETTERS):
        document_id = str(letter.get("idempotency_key") or "").split("/", 1)[0]
        if document_id in wanted and (document_id not in out or str(letter.get("at")) > out[document_id][0]):
            out[document_id] = (str(letter.get("at")), str(letter.get("error") or ""))
    return {k: error for k, (_, error) in out.items()}


def touched_since(state: StateStore, since: datetime, feed_urls: Iterable[str] | None = None) -> set[str]:
    """Document ids of feed and sitemap items claimed or published at or after ``since``."""
    out = set()
    for record in polled_items(state, feed_urls or None):
        stamps = [record.get("claimed_at"), record.get("published_at")]
        if any(s and datetime.fromisoformat(s) >= since for s in stamps):
            out.add(record["document_id"])
    return out
