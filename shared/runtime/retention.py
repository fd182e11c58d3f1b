"""What the embedded runtime keeps, and for how long (issue 35, problem 8).

In the cloud, Pub/Sub drops acknowledged messages, Firestore's TTL policy deletes query records and
conversations past their ``expire_at``, and Cloud Trace keeps spans for its own period. The embedded
runtime has none of those, so without this sweep a long-running ``ragbus serve`` grows until the disk
is full: 372 queries made ``ragbus.db`` 7.9 MB, every delivered bus message was kept, and spans
piled up. :func:`sweep` does the same three jobs on the local files, and deletes the tombstones of old
deletes (:func:`purge_tombstones`); :class:`LocalRuntime
<shared.runtime.local.LocalRuntime>` runs it when it starts and every :data:`SWEEP_INTERVAL_S`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.adapters.local.bus import SqliteBus
from shared.adapters.local.spans import SqliteSpanStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings

log = logging.getLogger("ragbus.retention")

SWEEP_INTERVAL_S = 3600.0
#: The collections whose documents carry ``expire_at`` (Firestore's TTL fields in infra/firestore.tf). Tombstones
#: carry one too, but here :func:`purge_tombstones` decides: the local bus may hold a message for a runtime stopped
#: longer than Pub/Sub keeps one.
EXPIRING = (state_collections.QUERIES, state_collections.CONVERSATIONS)


@dataclass(frozen=True)
class Swept:
    """How much one sweep deleted."""

    messages: int = 0
    records: int = 0
    spans: int = 0
    tombstones: int = 0

    def __bool__(self) -> bool:
        return bool(self.messages or self.records or self.spans or self.tombstones)


def sweep(settings: Settings, bus: SqliteBus, state: SqliteStateStore, now: datetime) -> Swept:
    """Delete delivered bus messages older than ``bus_retention_s``, query records and conversations
    past their ``expire_at``, spans older than ``trace_retention_days`` and tombstones older than
    ``tombstone_retention_days``."""
    messages = bus.purge_acknowledged(older_than_s=settings.bus_retention_s)
    records = sum(state.delete_expired(collection, now.isoformat()) for collection in EXPIRING)
    spans = 0
    if settings.traces_path.exists():
        store = SqliteSpanStore(settings.traces_path)
        try:
            spans = store.delete_older_than(settings.trace_retention_days, now.timestamp())
        finally:
            store.shutdown()
    tombstones = purge_tombstones(state, now - timedelta(days=settings.tombstone_retention_days), bus.pending_data())
    swept = Swept(messages, records, spans, tombstones)
    if swept:
        log.info("retention: deleted %d delivered message(s), %d expired record(s), %d old span(s), "
                 "%d old tombstone(s)", messages, records, spans, tombstones)
    return swept


def purge_tombstones(state: SqliteStateStore, before: datetime, pending: list[str]) -> int:
    """Delete the ledger's tombstones of deletes made before ``before``
    (:mod:`shared.ingest.processed_items`): every delete, and every item a feed pages out, left one
    record for good, and each poll of a feed lists its own. A tombstone stays while a dead letter or a
    ``pending`` message (one the bus has still to deliver: a runtime stopped for a month) names its
    document, since either is dropped as stale only while the tombstone says so, and while its delete's
    message is owed (the next delete of its folder or listing sends it); a run that began before the
    delete is long over by then. A document ingested again after the purge starts anew."""
    letters = " ".join([*(str(d.get("data", "")) for d in state.list(state_collections.DEAD_LETTERS)), *pending])
    purged = 0
    for tombstone in state.list(state_collections.PROCESSED_ITEMS, {"deleted": True}):
        deleted_at, document_id = tombstone.get("deleted_at"), str(tombstone.get("document_id", ""))
        try:
            old = datetime.fromisoformat(str(deleted_at)) < before
        except (ValueError, TypeError):  # not a time, or one without its zone: kept
            continue
        if old and document_id and "unannounced" not in tombstone and f'"{document_id}"' not in letters:
            purged += state.delete_matching(state_collections.PROCESSED_ITEMS, document_id,
                                            {"deleted": True, "deleted_at": deleted_at})
    return purged


def sweep_quietly(settings: Settings, bus: SqliteBus, state: object, now: datetime) -> Swept | None:
    """:func:`sweep` for a runtime's background thread: a state store that is not SQLite (a test's
    fake) is left alone, and a failure (a locked or full database) is logged and tried next time."""
    if not isinstance(state, SqliteStateStore):
        return None
    started = time.monotonic()
    try:
        return sweep(settings, bus, state, now)
    except Exception as exc:  # noqa: BLE001 - the next sweep tries again; the work goes on meanwhile
        log.warning("retention sweep failed after %.1f s (tried again in %.0f s): %s",
                    time.monotonic() - started, SWEEP_INTERVAL_S, exc)
        return None
