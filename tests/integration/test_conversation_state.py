"""Conversations on both runtimes' state stores: SQLite (embedded) and Firestore (the emulator).

The same submit, history read and listing on each store, so the embedded runtime and
`up --emulators` see the same turns; on Firestore also what only it can check: the
conversation's expire_at is a timestamp its TTL policy reads, a conversation longer than one
batched read comes back whole, and the largest documents a conversation writes stay under the
1 MiB limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.adapters.gcp.firestore_state import (
    MAX_DOCUMENT_BYTES,
    FirestoreStateStore,
    document_size,
)
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.ports import ConversationTurn, StateStore
from shared.query import api
from shared.query.conversation import MAX_TURNS, read_history
from shared.query.record import QueryRecord
from shared.query.state import fail_query, read_record
from tests.fakes import FakeClock, RecordingPublisher

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "firestore"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    if request.param == "sqlite":
        sqlite = SqliteStateStore(tmp_path / "state.db")
        yield sqlite
        sqlite.close()
    else:
        client = request.getfixturevalue("firestore_client")
        yield FirestoreStateStore(client, namespace=f"t{uuid.uuid4().hex[:8]}")


@pytest.fixture
def deps(store: StateStore) -> Deps:
    return Deps(Settings(), publisher=RecordingPublisher(), state=store, clock=FakeClock())


def _answer(deps: Deps, query_id: str, text: str) -> None:
    def change(doc):
        record = QueryRecord.from_doc(doc)
        record.answer, record.status, record.outcome = text, "answered", "answered"
        return record.to_doc()

    deps.state.update(state_collections.QUERIES, query_id, change)


def test_a_conversation_reads_the_same_on_every_store(deps: Deps) -> None:
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    _answer(deps, first.id, "The default ack deadline is 10 seconds [1].")
    second = api.submit_query(deps, "And what is its maximum?", conversation_id=first.conversation_id)
    fail_query(deps.state, second.id, "a stage kept crashing", deps.clock.now())
    third = api.submit_query(deps, "How do I change it?", conversation_id=first.conversation_id)

    stored = read_record(deps.state, third.id)
    assert (stored.conversation_id, stored.standalone_question) == (first.conversation_id, None)
    history = read_history(deps.state, stored, max_turns=6, max_chars=6000)
    assert history.turns == (
        ConversationTurn("What is the ack deadline in Pub/Sub?", "The default ack deadline is 10 seconds [1]."),
        ConversationTurn("And what is its maximum?", ""),  # failed: its question, no answer
    )
    listed = api.get_conversation(deps, first.conversation_id)
    assert [t["query_id"] for t in listed["turns"]] == [first.id, second.id, third.id]
    assert [t["status"] for t in listed["turns"]] == ["answered", "failed", "pending"]

    deps.state.delete(state_collections.CONVERSATIONS, first.conversation_id)
    assert "no longer exists" in read_history(deps.state, stored, max_turns=6, max_chars=6000).note
    with pytest.raises(api.ConversationNotFound):
        api.submit_query(deps, "And its default?", conversation_id=first.conversation_id)


def test_firestore_keeps_expire_at_as_a_timestamp_for_its_ttl(firestore_client) -> None:
    store = FirestoreStateStore(firestore_client, namespace=f"t{uuid.uuid4().hex[:8]}")
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=store, clock=FakeClock())
    record = api.submit_query(deps, "What is BM25?")

    raw = store.client.collection(store.collection_id(state_collections.CONVERSATIONS)).document(
        record.conversation_id).get().to_dict()
    assert hasattr(raw["expire_at"], "tzinfo")  # a datetime, which the TTL policy reads; a string it ignores
    assert store.get(state_collections.CONVERSATIONS, record.conversation_id)["expire_at"] == record.expire_at


def test_a_long_conversation_is_listed_whole_from_firestore(firestore_client) -> None:
    store = FirestoreStateStore(firestore_client, namespace=f"t{uuid.uuid4().hex[:8]}")
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=store, clock=FakeClock())
    first = api.submit_query(deps, "What is BM25?")
    ids = [first.id]
    template = read_record(store, first.id).to_doc()
    for n in range(1, 320):  # past one get_all batch (300)
        query_id = f"{n:032x}"
        store.put(state_collections.QUERIES, query_id, {**template, "id": query_id, "original_query": f"q{n}?"})
        ids.append(query_id)
    store.update(state_collections.CONVERSATIONS, first.conversation_id, lambda doc: {**doc, "turns": ids})

    turns = api.get_conversation(deps, first.conversation_id)["turns"]
    assert [t["query_id"] for t in turns] == ids


def test_the_largest_conversation_documents_fit_firestore(firestore_client) -> None:
    store = FirestoreStateStore(firestore_client, namespace=f"t{uuid.uuid4().hex[:8]}")
    settings = Settings(conversation_max_turns=50, conversation_max_chars=100_000)
    deps = Deps(settings, publisher=RecordingPublisher(), state=store, clock=FakeClock())
    sent = [{"question": "q" * 1_900 + "?", "answer": "a" * 40_000} for _ in range(200)]
    record = api.submit_query(deps, "And its maximum?", history=sent)
    stored = store.get(state_collections.QUERIES, record.id)
    assert sum(len(t["question"]) + len(t["answer"]) for t in stored["history"]) <= 100_000

    full = {"conversation_id": record.conversation_id, "created_at": record.created_at,
            "updated_at": record.created_at, "expire_at": record.expire_at,
            "turns": [uuid.uuid4().hex for _ in range(MAX_TURNS)]}
    store.put(state_collections.CONVERSATIONS, record.conversation_id, full)  # the write Firestore accepts
    assert document_size(state_collections.CONVERSATIONS, record.conversation_id, full) < MAX_DOCUMENT_BYTES // 20
