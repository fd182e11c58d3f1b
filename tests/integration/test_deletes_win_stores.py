"""Deletes win on both runtimes' state stores: the cases of tests/unit/test_deletes_win.py run on
SQLite (the embedded runtime) and on the Firestore emulator (the cloud), whose transactions make
the claim and the tombstone atomic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shared.adapters.gcp.firestore_state import FirestoreStateStore
from shared.adapters.local.state import SqliteStateStore
from tests.unit.test_deletes_win import (  # noqa: F401 - collected here, on this module's `world`
    World,
    test_a_dead_letter_retried_after_the_delete_does_not_bring_the_document_back,
    test_a_delete_handled_before_the_clean_of_an_earlier_fetch_wins,
    test_a_delete_landing_between_the_indexers_check_and_its_write_is_undone,
    test_a_feed_removed_during_its_poll_stays_removed_and_none_of_its_documents_stay,
    test_a_re_ingest_after_the_delete_is_the_next_revision_and_indexed,
    test_a_replayed_finalize_of_a_deleted_generation_is_refused_and_a_newer_one_indexed,
    test_an_ingest_that_began_before_the_delete_cannot_claim_a_file_after_it,
    test_claims_racing_a_delete_in_another_thread_end_buried_every_one,
    test_status_counts_a_document_deleted_meanwhile_as_removed_not_pending,
)


@pytest.fixture(params=["sqlite", "firestore"])
def world(request: pytest.FixtureRequest, tmp_path) -> Iterator[World]:
    if request.param == "sqlite":
        store = SqliteStateStore(tmp_path / "state.db")
        yield World(store)
        store.close()
    else:
        client = request.getfixturevalue("firestore_client")
        yield World(FirestoreStateStore(client, namespace=f"t{uuid.uuid4().hex[:8]}"))
