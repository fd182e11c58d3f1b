"""Sending every document again, when the index lost what the state store says it holds.

The index is derived data: every document it held came from a source whose ledger
record (:mod:`shared.ingest.processed_items`) says it was published. When the index is
found new while the state store lists indexed documents (its file was damaged and set
aside, emptied or deleted), :func:`resend_all` makes the next run rebuild it: each
document's ``documents`` record is dropped, each published ledger record goes back to
``claimed`` (a later ``ingest`` or poll finds it pending and sends it again, see
:func:`shared.ingest.processed_items.claim`), and each listing's validators are dropped
so that a poll reads it whole instead of taking a 304 for "nothing to do".
"""

from __future__ import annotations

import logging
from typing import Any

from shared.contract import state_collections
from shared.contract.ports import Doc, StateStore
from shared.ingest import processed_items
from shared.ingest.listings import listing_key

log = logging.getLogger("ragbus.runtime")


def resend_all(state: StateStore) -> int:
    """Mark every indexed document to be sent again; return how many the state store listed."""
    documents = state.list(state_collections.DOCUMENTS)
    for record in processed_items.records(state, {"status": processed_items.PUBLISHED}):
        if record.get("alias"):
            continue  # another record keeps its page; that one is sent again

        def pending(current: Doc | None) -> Doc | None:
            if current is None or current.get("status") != processed_items.PUBLISHED:
                return None
            return {**current, "status": processed_items.CLAIMED}

        state.update(state_collections.PROCESSED_ITEMS, record["document_id"], pending)
    for listing in state.list(state_collections.FEEDS):

        def unvalidated(current: Doc | None) -> Doc | None:
            if current is None:
                return None
            return {**current, "etag": None, "last_modified": None}

        state.update(state_collections.FEEDS, listing_key(listing["url"]), unvalidated)
    for document in documents:
        state.delete(state_collections.DOCUMENTS, document["document_id"])
    return len(documents)


def resend_if_index_lost(index: Any, state: StateStore) -> Any:
    """``index``, after marking every document to be sent again when it was found new (its
    ``started_new``: its file damaged and set aside, emptied or deleted) while the state store lists
    indexed documents, so the next poll and ingest rebuild it instead of calling them unchanged."""
    if not getattr(index, "started_new", False) or not state.count(state_collections.DOCUMENTS):
        return index
    count = resend_all(state)
    aside = f" (the damaged file is kept as {index.set_aside})" if getattr(index, "set_aside", None) else ""
    log.warning("the index at %s is new but the state store listed %d indexed document(s)%s; they are marked to "
                "be sent again: `ragbus poll` re-reads every feed and sitemap, and `ragbus ingest` on the same "
                "files sends them again (serve re-polls by itself)", getattr(index, "path", "?"), count, aside)
    return index
