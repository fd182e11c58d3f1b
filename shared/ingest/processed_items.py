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

Deletes win. Every claim that sends a document anew gives it the next ``revision`` (1, 2, ...),
which travels on its messages; a delete does not forget the record but turns it into a
tombstone (:func:`bury`: ``deleted``, the ``revision`` deleted, ``deleted_at``). So:

- a message of a revision the tombstone covers (a fetch, clean or index started before the
  delete, a redelivery, a dead letter retried after it) is stale (:func:`stale`), and the
  cleaner and the indexer drop it;
- a run that started before the delete cannot claim the document again (``claim`` says
  ``deleted``), nor can a Cloud Storage event of a generation not newer than the deleted one;
- a run started after the delete (a re-ingest) claims the next revision, which is live again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from shared.contract import state_collections
from shared.contract.errors import RagbusError
from shared.contract.ids import feed_id
from shared.contract.ports import Doc, StateStore
from shared.contract.redaction import redact
from shared.contract.sources import LISTING_KINDS
from shared.ingest.owners import owner_alive, this_process
from shared.ingest.url_guard import normalise_url

Claim = Literal["new", "changed", "unchanged", "pending", "deleted"]  # Claimed.kind

CLAIMED = "claimed"
PUBLISHED = "published"
FAILED = "failed"
DELETED = "deleted"


@dataclass(frozen=True)
class Claimed:
    """What :func:`claim` decided, and the revision the document is sent at."""

    kind: Claim
    revision: int = 0


def is_tombstone(record: Doc | None) -> bool:
    """Whether ``record`` says its document was deleted (see :func:`bury`)."""
    return bool(record and record.get("deleted"))


def revision_of(record: Doc | None) -> int:
    """The revision ``record`` holds (0 for a record written before revisions existed)."""
    value = (record or {}).get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def generation_number(value: object) -> int | None:
    """A Cloud Storage generation (a decimal string on the wire) as a number; None when it is none."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _refused_by(tombstone: Doc, started: datetime | None, generation: int | None) -> bool:
    """Whether ``tombstone`` outlaws a claim by a run that started at ``started`` (or of an object
    ``generation``): the delete came after that run began, or deleted that generation or a newer one."""
    deleted_at = tombstone.get("deleted_at")
    if started is not None and isinstance(deleted_at, str):
        try:
            if datetime.fromisoformat(deleted_at) > started:
                return True
        except ValueError:
            pass
    buried = generation_number(tombstone.get("generation"))
    return generation is not None and buried is not None and buried >= generation


def claim(
    state: StateStore,
    document_id: str,
    item_hash: str,
    *,
    now: datetime,
    fields: Mapping[str, Any],
    started: datetime | None = None,
    generation: int | None = None,
) -> Claimed:
    """Claim ``document_id`` at ``item_hash``; say what the caller must do (``kind``), and at which
    revision.

    ``unchanged``: the same hash was published, do nothing. ``new``, ``changed``
    or ``pending`` (same hash, earlier run did not finish): fetch and publish.
    ``deleted``: the document was deleted after the run that found it ``started`` (or the
    Cloud Storage ``generation`` found is not newer than the one deleted): send nothing.
    """
    decision: dict[str, Claimed] = {}

    def decide(current: Doc | None) -> Doc | None:
        # May run more than once under contention: keep it pure apart from
        # recording the decision of the (last, committed) run.
        if is_tombstone(current):
            assert current is not None
            if _refused_by(current, started, generation):
                decision["out"] = Claimed("deleted", revision_of(current))
                return None
            current = {"revision": revision_of(current)}  # sent again after its delete: a new revision
        if current is None or "item_hash" not in current:
            revision = revision_of(current) + 1
            decision["out"] = Claimed("new", revision)
            return {
                **fields,
                "document_id": document_id,
                "item_hash": item_hash,
                "revision": revision,
                "status": CLAIMED,
                "claimed_at": now.isoformat(),
                "published_at": None,
                "error": None,
            }
        revision = revision_of(current)
        if current.get("item_hash") == item_hash:
            if current.get("status") == PUBLISHED:
                decision["out"] = Claimed("unchanged", revision)
                return None
            kind: Claim = "pending"
        else:
            kind, revision = "changed", revision + 1
        decision["out"] = Claimed(kind, revision)
        return {
            **current,
            **fields,
            "item_hash": item_hash,
            "revision": revision,
            "previous_hash": current.get("item_hash") if kind == "changed" else current.get("previous_hash"),
            "status": CLAIMED,
            "claimed_at": now.isoformat(),
        }

    state.update(state_collections.PROCESSED_ITEMS, document_id, decide)
    return decision["out"]


def mark_published(
    state: StateStore, document_id: str, item_hash: str, *, now: datetime, fields: Mapping[str, Any]
) -> None:
    """Record that ``item_hash`` of ``document_id`` was published downstream."""

    def mark(current: Doc | None) -> Doc | None:
        # A newer claim (another hash) owns the record now, or a delete: leave it to them.
        if current is None or is_tombstone(current) or current.get("item_hash") != item_hash:
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
        if current is None or is_tombstone(current) or current.get("item_hash") != item_hash:
            return None
        return {**current, "status": FAILED, "error": redact(error), "failed_at": now.isoformat(),
                "permanent": permanent}

    state.update(state_collections.PROCESSED_ITEMS, document_id, mark)


def records(state: StateStore, where: Mapping[str, Any]) -> list[Doc]:
    """Every live ledger record matching ``where`` (e.g. ``{"feed_url": url}``); no tombstone."""
    return [r for r in state.list(state_collections.PROCESSED_ITEMS, where) if not is_tombstone(r)]


def tombstones(state: StateStore, where: Mapping[str, Any]) -> list[Doc]:
    """Every tombstone matching ``where``."""
    return [r for r in state.list(state_collections.PROCESSED_ITEMS, where) if is_tombstone(r)]


def forget(state: StateStore, document_id: str) -> bool:
    """Drop the record: its document is not deleted, the record only stops holding it (a page
    another listing still holds); a delete buries the record instead (:func:`bury`)."""
    return state.delete(state_collections.PROCESSED_ITEMS, document_id)


#: What a tombstone keeps of the live record: where the document came from, so that a delete of
#: its folder or listing finds it again (and finishes a delete a crash interrupted).
_KEPT = ("source", "path", "origin", "root", "feed_url", "guid", "page", "generation")


def bury(
    state: StateStore, document_id: str, *, now: datetime, reason: str,
    fields: Mapping[str, Any] | None = None, generation: str | None = None, announcing: bool = False,
) -> Doc:
    """Turn the record of ``document_id`` into a tombstone (creating one when there is no record);
    return it. The tombstone holds the revision deleted (the record's latest, or what the index
    lists when that is later: a page indexed under a record since dropped): every message of it
    or an older one is stale from now on. Burying a tombstone again keeps it, with the later
    time (a run that started before this delete cannot bring the document back either).

    ``announcing``: the caller publishes the delete next; a live record's tombstone names this
    process as owing it (``unannounced``) until :func:`announced`, so that a delete that died in
    between is finished by the next (:func:`unannounced`), and one still at work is left alone."""
    out: dict[str, Doc] = {}
    indexed = revision_of(state.get(state_collections.DOCUMENTS, document_id))

    def buried(current: Doc | None) -> Doc:
        kept = {k: current[k] for k in _KEPT if current and current.get(k) is not None}
        live = bool(current) and not is_tombstone(current)
        owed = {"unannounced": this_process()} if announcing and live else (
            {"unannounced": current["unannounced"]} if current and "unannounced" in current else {})
        # buried again (a second delete sends nothing): the expiry the first one's delete gave it stays
        expiry = {"expire_at": current["expire_at"]} if not live and current and current.get("expire_at") else {}
        tombstone = {
            **kept,
            **(fields or {}),
            **({"generation": generation} if generation else {}),
            "document_id": document_id,
            "deleted": True,
            "status": DELETED,
            "revision": max(revision_of(current), indexed),
            "deleted_at": now.isoformat(),
            "reason": reason,
            "was_live": live,
            **owed,
            **expiry,
        }
        out["tombstone"] = tombstone
        return tombstone

    state.update(state_collections.PROCESSED_ITEMS, document_id, buried)
    return out["tombstone"]


#: Days Pub/Sub keeps a message not yet acknowledged (``message_retention_duration`` in infra/pubsub.tf): a
#: tombstone that may expire outlives every message it may still have to refuse.
PUBSUB_RETENTION_DAYS = 7


def let_expire(state: StateStore, document_id: str, *, keep_days: int) -> None:
    """The delete of ``document_id`` is carried out (its chunks are gone): give its tombstone an ``expire_at``,
    ``keep_days`` (at least :data:`PUBSUB_RETENTION_DAYS`) after its delete. On Google Cloud, Firestore's TTL
    policy on the field (infra/firestore.tf) deletes the tombstone then; the embedded runtime's sweep has its
    own rule (:func:`shared.runtime.retention.purge_tombstones`). A tombstone a dead letter names gets none:
    a retried letter is dropped as stale only while the tombstone stands (see :func:`keep_for_letter`). The
    letters are looked for again after the stamp: a letter is stored before its :func:`keep_for_letter`, so
    whichever of the two runs last sees the other's write."""
    if state.list(state_collections.DEAD_LETTERS, {"document_id": document_id}, limit=1):
        return
    days = max(keep_days, PUBSUB_RETENTION_DAYS)

    def stamped(current: Doc | None) -> Doc | None:
        if not is_tombstone(current) or current is None:
            return None  # ingested again meanwhile (live), or never recorded
        try:
            deleted_at = datetime.fromisoformat(str(current.get("deleted_at")))
        except ValueError:
            return None  # not a time: kept
        return {**current, "expire_at": (deleted_at + timedelta(days=days)).isoformat()}

    state.update(state_collections.PROCESSED_ITEMS, document_id, stamped)
    if state.list(state_collections.DEAD_LETTERS, {"document_id": document_id}, limit=1):
        keep_for_letter(state, document_id)  # a letter kept between the check and the stamp: unstamp


def keep_for_letter(state: StateStore, document_id: str) -> None:
    """A dead letter names ``document_id``: its tombstone, if it has one, no longer expires (a retry of the
    letter after the tombstone went would bring the deleted document back)."""
    state.update(state_collections.PROCESSED_ITEMS, document_id,
                 lambda current: {k: v for k, v in current.items() if k != "expire_at"}
                 if current is not None and "expire_at" in current else None)


def announced(state: StateStore, document_id: str) -> None:
    """The delete of ``document_id`` went out: its tombstone owes nothing any more."""
    state.update(state_collections.PROCESSED_ITEMS, document_id,
                 lambda current: {k: v for k, v in current.items() if k != "unannounced"}
                 if is_tombstone(current) and current and "unannounced" in current else None)


def abandoned(state: StateStore, document_id: str) -> None:
    """This process will not send the delete it owes (its publish failed): any later delete may."""
    state.update(state_collections.PROCESSED_ITEMS, document_id,
                 lambda current: {**current, "unannounced": ""}
                 if is_tombstone(current) and current and current.get("unannounced") else None)


def unannounced(tombstones: Iterable[Doc]) -> list[str]:
    """Of these tombstones, the documents whose delete is owed by a process that is gone (or that
    gave it up): the next delete of their folder or listing sends it."""
    return sorted(str(t["document_id"]) for t in tombstones
                  if "unannounced" in t and not (t["unannounced"] and owner_alive(str(t["unannounced"]))))


def stale(state: StateStore, document_id: str, *, content_hash: str, revision: int | None) -> str | None:
    """Why a message about ``document_id`` at ``content_hash`` and ``revision`` must not change the
    index (a delete came after it, or the source sent a newer version meanwhile), or None.

    ``revision`` None: a message published before revisions existed (a kept dead letter)."""
    record = state.get(state_collections.PROCESSED_ITEMS, document_id)
    gone = _deleted(state, record, revision)
    if gone or record is None or is_tombstone(record):
        return gone
    if record.get("item_hash") and record["item_hash"] != content_hash:
        return f"stale version {content_hash[:12]}: the current one is {str(record['item_hash'])[:12]}"
    current = revision_of(record)
    if revision is not None and revision < current:
        return f"stale revision {revision}: the current one is {current}"
    return None


def deleted(state: StateStore, document_id: str, revision: int | None) -> str | None:
    """Why ``revision`` of ``document_id`` is deleted (a tombstone covers it, or its listing was
    removed), or None."""
    return _deleted(state, state.get(state_collections.PROCESSED_ITEMS, document_id), revision)


def _deleted(state: StateStore, record: Doc | None, revision: int | None) -> str | None:
    if record is None:
        return None  # a record dropped while its page stays (another listing holds it)
    if is_tombstone(record):
        current = revision_of(record)
        if revision is None or revision <= current:
            return f"deleted ({record.get('reason') or 'no reason recorded'}) at revision {current}"
        return None
    listing = record.get("feed_url")
    if listing and record.get("source") in LISTING_KINDS and _unregistered(state, str(listing)):
        return f"its {record.get('source')} {listing} is no longer registered"
    return None


def _unregistered(state: StateStore, url: str) -> bool:
    try:
        key = feed_id(normalise_url(url))  # the registry's key (shared.ingest.listings.listing_key)
    except RagbusError:
        return False
    return state.get(state_collections.FEEDS, key) is None
