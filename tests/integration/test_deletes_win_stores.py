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
    test_a_dead_letter_keeps_its_document_s_tombstone_from_expiring,
    test_a_dead_letter_retried_after_the_delete_does_not_bring_the_document_back,
    test_a_delete_handled_before_the_clean_of_an_earlier_fetch_wins,
    test_a_delete_landing_between_the_indexers_check_and_its_write_is_undone,
    test_a_feed_removed_during_its_poll_stays_removed_and_none_of_its_documents_stay,
    test_a_re_ingest_after_the_delete_is_the_next_revision_and_indexed,
    test_a_replayed_finalize_of_a_deleted_generation_is_refused_and_a_newer_one_indexed,
    test_a_tombstone_expires_once_its_delete_is_carried_out,
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


def test_a_tombstone_s_expiry_is_a_firestore_timestamp_the_ttl_policy_reads(firestore_client, tmp_path):
    # the emulator applies no TTL: what is checked is the field the policy (infra/firestore.tf) reads
    from datetime import datetime

    from shared.adapters.gcp.firestore_state import encode_key
    from shared.contract import state_collections
    from tests.unit.test_deletes_win import _delete, _folder, _ingest

    store = FirestoreStateStore(firestore_client, namespace=f"t{uuid.uuid4().hex[:8]}")
    world = World(store)
    folder = _folder(tmp_path, n=1)
    (document_id,) = [m.document_id for m in _ingest(world, folder)]
    world.drain()
    _delete(world, folder)
    world.drain()
    raw = firestore_client.collection(store.collection_id(state_collections.PROCESSED_ITEMS)).document(
        encode_key(document_id)).get().to_dict()
    assert raw["deleted"] is True and isinstance(raw["expire_at"], datetime), raw
