"""status_of: which documents are indexed, pending or failed, and which failures have a dead letter."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.contract import state_collections
from shared.ingest import processed_items
from shared.ingest.progress import status_of
from tests.fakes import InMemoryStateStore

NOW = datetime(2026, 11, 24, tzinfo=UTC)


def _claim(state: InMemoryStateStore, document_id: str, item_hash: str = "h1") -> None:
    processed_items.claim(state, document_id, item_hash, now=NOW, fields={"source": "feed"})


def test_a_fetch_that_failed_is_failed_and_unfetched_but_a_dead_lettered_document_is_not_unfetched():
    state = InMemoryStateStore()
    for document_id in ("indexed", "lettered", "unfetched", "pending"):
        _claim(state, document_id)
    processed_items.mark_published(state, "indexed", "h1", now=NOW, fields={})
    state.put(state_collections.DOCUMENTS, "indexed", {"content_hash": "h1"})
    processed_items.mark_published(state, "lettered", "h1", now=NOW, fields={})
    state.put(state_collections.DEAD_LETTERS, "m1", {"data": {"document_id": "lettered"}})
    processed_items.mark_failed(state, "unfetched", "h1", now=NOW, error="HTTP 404", permanent=True)

    status = status_of(state, ["indexed", "lettered", "unfetched", "pending"])

    assert status.indexed == {"indexed"}
    assert status.failed == {"lettered", "unfetched"}
    assert status.unfetched == {"unfetched"}  # no dead letter names it: `ragbus dead-letters` cannot say why
    assert status.pending == {"pending"}
    assert status.total == 4
