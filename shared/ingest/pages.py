"""Which listings hold a web page: one document per page, however many listings name it.

A page's identity is its normalised URL (:func:`shared.ingest.url_guard.normalise_url`),
across sources: a page listed by a feed and by a sitemap, or by a sitemap index and by
its child registered separately, is one document. Each listing keeps its own ledger
record (:mod:`shared.ingest.processed_items`: its own change detection, its own removal),
and this registry (collection ``pages``, one record per page) says which of those records
hold the page and under which document id the index has it::

    url, document_id, holders: {ledger document id: listing URL}

The first listing to claim a page fetches it and indexes it under its own document id;
a listing that claims it while that record still exists only records that it holds the
page too (its ledger record gets ``indexed_as`` = that id and ``alias`` = True). A page
leaves the index only when its last holder lets it go: removing one listing never
deletes a page another listing still lists.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from shared.contract import state_collections
from shared.contract.ports import Doc, StateStore


def page_key(url: str) -> str:
    return "page-" + hashlib.sha256(url.encode()).hexdigest()[:32]


def hold(state: StateStore, url: str, holder: str, listing: str, document_id: str | None = None) -> str:
    """Record that ledger record ``holder`` (of ``listing``) holds page ``url``; return the
    document id the page is indexed under (when no one else holds it: ``document_id``, by
    default ``holder`` itself)."""
    out: dict[str, str] = {}
    fresh = document_id or holder

    def add(current: Doc | None) -> Doc | None:
        holders = dict((current or {}).get("holders") or {})
        document_id = (current or {}).get("document_id") if holders else None
        out["document_id"] = document_id or fresh
        if holders.get(holder) == listing and document_id:
            return None
        holders[holder] = listing
        return {"url": url, "document_id": out["document_id"], "holders": holders}

    state.update(state_collections.PAGES, page_key(url), add)
    return out["document_id"]


@dataclass(frozen=True)
class Released:
    document_id: str  # what the index has the page under
    last: bool  # no holder is left: the document must go


def release(state: StateStore, url: str, holder: str) -> Released | None:
    """Let ``holder`` go of page ``url``; None when the registry does not know the page (a
    record written before it existed: its own document id is the page's)."""
    out: dict[str, Released] = {}

    def drop(current: Doc | None) -> Doc | None:
        if current is None:
            return None
        holders = {k: v for k, v in (current.get("holders") or {}).items() if k != holder}
        out["released"] = Released(current.get("document_id") or holder, not holders)
        return {**current, "holders": holders}

    # a page no one holds keeps its record (holders empty, which hold() reads as free): deleting it
    # after the update would race with a listing taking the page in between
    state.update(state_collections.PAGES, page_key(url), drop)
    return out.get("released")
