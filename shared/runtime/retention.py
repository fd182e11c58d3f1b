"""What the embedded runtime keeps, and for how long (issue 35, problem 8).

In the cloud, Pub/Sub drops acknowledged messages, Firestore's TTL policy deletes query records and
conversations past their ``expire_at``, and Cloud Trace keeps spans for its own period. The embedded
runtime has none of those, so without this sweep a long-running ``ragbus serve`` grows until the disk
is full: 372 queries made ``ragbus.db`` 7.9 MB, every delivered bus message was kept, and spans
piled up. :func:`sweep` does the same three jobs on the local files; :class:`LocalRuntime
<shared.runtime.local.LocalRuntime>` runs it when it starts and every :data:`SWEEP_INTERVAL_S`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from shared.adapters.local.bus import SqliteBus
from shared.adapters.local.spans import SqliteSpanStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings

log = logging.getLogger("ragbus.retention")

SWEEP_INTERVAL_S = 3600.0
#: The collections whose documents carry ``expire_at`` (Firestore's TTL fields in infra/firestore.tf).
EXPIRING = (state_collections.QUERIES, state_collections.CONVERSATIONS)


@dataclass(frozen=True)
class Swept:
    """How much one sweep deleted."""

    messages: int = 0
    records: int = 0
    spans: int = 0

    def __bool__(self) -> bool:
        return bool(self.messages or self.records or self.spans)


def sweep(settings: Settings, bus: SqliteBus, state: SqliteStateStore, now: datetime) -> Swept:
    """Delete delivered bus messages older than ``bus_retention_s``, query records and conversations
    past their ``expire_at``, and spans older than ``trace_retention_days``."""
    messages = bus.purge_acknowledged(older_than_s=settings.bus_retention_s)
    records = sum(state.delete_expired(collection, now.isoformat()) for collection in EXPIRING)
    spans = 0
    if settings.traces_path.exists():
        store = SqliteSpanStore(settings.traces_path)
        try:
            cutoff_s = now.timestamp() - settings.trace_retention_days * 86400
            spans = store.delete_ended_before(int(cutoff_s * 1e9))
        finally:
            store.shutdown()
    swept = Swept(messages, records, spans)
    if swept:
        log.info("retention: deleted %d delivered message(s), %d expired record(s), %d old span(s)",
                 messages, records, spans)
    return swept


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
