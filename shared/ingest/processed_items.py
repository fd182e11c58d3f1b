"""The processed-items ledger: one record per document (feed item or file), keyed
by its derived document id, holding the content hash last sent downstream.

Ingestion runs claim -> publish -> mark for every document:

- :func:`claim` decides atomically (one ``state.update`` transaction, so overlapping
  polls and redeliveries agree) whether the document is new, changed, unchanged
  or left pending by an earlier run, and records the claim;
- the caller stores the raw bytes and publishes ``DocumentFetched``;
- :func:`mark_published` records that the hash went out.

The three steps are not one transaction. A run killed after the claim but before
the mark leaves the record ``claimed``; the next run finds the same hash not yet
``published`` and publishes again. Downstream stages are idempotent by
(document_id, content_hash), so the repeat is harmless and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from shared.contract import state_collections
from shared.contract.ports import Doc, StateStore

Claim = Literal["new", "changed", "unchanged", "pending"]

CLAIMED = "claimed"
PUBLISHED = "published"
FAILED = "failed"


def claim(
    state: StateStore,
    document_id: str,
    item_hash: str,
    *,
    now: datetime,
    fields: Mapping[str, Any],
) -> Claim:
    """Claim ``document_id`` at ``item_hash``; say what the caller must do.

    ``unchanged``: the same hash was published, do nothing. ``new``, ``changed``
    or ``pending`` (same hash, earlier run did not finish): fetch and publish.
    """
    decision: dict[str, Claim] = {}

    def decide(current: Doc | None) -> Doc | None:
        # May run more than once under contention: keep it pure apart from
        # recording the decision of the (last, committed) run.
        if current is None:
            decision["kind"] = "new"
            return {
                **fields,
                "document_id": document_id,
                "item_hash": item_hash,
                "status": CLAIMED,
                "claimed_at": now.isoformat(),
                "published_at": None,
                "error": None,
            }
        if current.get("item_hash") == item_hash:
            if current.get("status") == PUBLISHED:
                decision["kind"] = "unchanged"
                return None
            decision["kind"] = "pending"
        else:
            decision["kind"] = "changed"
        return {
            **current,
            **fields,
            "item_hash": item_hash,
            "previous_hash": current.get("item_hash")
            if decision["kind"] == "changed"
            else current.get("previous_hash"),
            "status": CLAIMED,
            "claimed_at": now.isoformat(),
        }

    state.update(state_collections.PROCESSED_ITEMS, document_id, decide)
    return decision["kind"]


def mark_published(
    state: StateStore, document_id: str, item_hash: str, *, now: datetime, fields: Mapping[str, Any]
) -> None:
    """Record that ``item_hash`` of ``document_id`` was published downstream."""

    def mark(current: Doc | None) -> Doc | None:
        # A newer claim (another hash) owns the record now; leave it to that run.
        if current is None or current.get("item_hash") != item_hash:
            return None
        return {
            **current,
            **fields,
            "status": PUBLISHED,
            "published_at": now.isoformat(),
            "error": None,
        }

    state.update(state_collections.PROCESSED_ITEMS, document_id, mark)


def mark_failed(
    state: StateStore, document_id: str, item_hash: str, *, now: datetime, error: str,
    permanent: bool = False,
) -> None:
    """Record why ``item_hash`` could not be fetched; a later run tries it again, unless
    the failure was ``permanent`` (then only once the item changes)."""

    def mark(current: Doc | None) -> Doc | None:
        if current is None or current.get("item_hash") != item_hash:
            return None
        return {**current, "status": FAILED, "error": error, "failed_at": now.isoformat(),
                "permanent": permanent}

    state.update(state_collections.PROCESSED_ITEMS, document_id, mark)


def records(state: StateStore, where: Mapping[str, Any]) -> list[Doc]:
    """Every ledger record matching ``where`` (e.g. ``{"feed_url": url}``)."""
    return state.list(state_collections.PROCESSED_ITEMS, where)


def forget(state: StateStore, document_id: str) -> bool:
    """Drop the record once its ``DocumentDeleted`` went out."""
    return state.delete(state_collections.PROCESSED_ITEMS, document_id)
