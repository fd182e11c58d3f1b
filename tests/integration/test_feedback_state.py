"""Feedback kept in the query record on both runtimes' state stores: SQLite (embedded) and Firestore
(the emulator): one rating per client, a second replacing the first, the answer and its record left as
they were, a pending query refused, an unknown id refused, and the record's feedback readable by the
same code on either store."""

from __future__ import annotations

import pytest

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.contract.ports import StateStore
from shared.query import api
from shared.query.feedback import (
    MAX_RATINGS_PER_QUERY,
    QueryNotEnded,
    client_key,
    feedback_counts,
    give_feedback,
    validate_feedback,
)
from shared.query.record import QueryRecord
from shared.query.state import read_record
from tests.fakes import FakeClock, RecordingPublisher
from tests.integration.test_conversation_state import store  # noqa: F401 - SQLite and Firestore (emulator)

pytestmark = pytest.mark.integration

CITATIONS = [{"id": 1, "title": "BM25", "url": "https://example.org/bm25", "document_id": "d1", "chunk_id": "c1"},
             {"id": 2, "title": "Dense", "url": "https://example.org/dense", "document_id": "d2", "chunk_id": "c2"}]


@pytest.fixture
def deps(store: StateStore) -> Deps:  # noqa: F811
    return Deps(Settings(), publisher=RecordingPublisher(), state=store, clock=FakeClock())


def answered(deps: Deps, question: str = "What is BM25?") -> str:
    record = api.submit_query(deps, question)

    def change(doc):
        found = QueryRecord.from_doc(doc)
        found.answer, found.status, found.outcome = "BM25 ranks documents [1][2].", "answered", "answered"
        found.citations = [dict(c) for c in CITATIONS]
        return found.to_doc()

    deps.state.update(state_collections.QUERIES, record.id, change)
    return record.id


def test_a_rating_is_kept_with_the_answer_and_a_second_replaces_the_first(deps):
    query_id = answered(deps)
    before = read_record(deps.state, query_id)
    record, replaced = give_feedback(deps, query_id, validate_feedback(
        {"rating": "down", "comment": "cites the wrong page", "wrong_citations": [2], "expected": "a ranking function"}),
        client="client:a")
    assert not replaced
    assert record.feedback == [{"client": client_key("client:a"), "rating": "down", "comment": "cites the wrong page",
                                "wrong_citations": [2], "expected": "a ranking function",
                                "at": deps.clock.now().isoformat()}]
    deps.clock.advance(5)
    record, replaced = give_feedback(deps, query_id, validate_feedback({"rating": "up"}), client="client:a")
    assert replaced
    assert [(e["rating"], e["comment"]) for e in record.feedback] == [("up", None)]
    give_feedback(deps, query_id, validate_feedback({"rating": "down"}), client="address:10.0.0.9")
    stored = read_record(deps.state, query_id)
    assert feedback_counts(stored) == {"up": 1, "down": 1}
    # the answer, its citations and everything else are as they were
    after = stored.to_doc()
    assert {k: v for k, v in after.items() if k != "feedback"} == before.to_doc()
    assert "client:a" not in str(after) and "10.0.0.9" not in str(after)  # only hashes are kept


def test_unknown_ids_pending_queries_and_foreign_citation_numbers_are_refused(deps):
    with pytest.raises(api.QueryNotFound, match="no query with id 'nope'"):
        give_feedback(deps, "nope", validate_feedback({"rating": "up"}), client="c")
    pending = api.submit_query(deps, "What is BM25?").id
    with pytest.raises(QueryNotEnded, match="still pending"):
        give_feedback(deps, pending, validate_feedback({"rating": "down"}), client="c")
    query_id = answered(deps)
    with pytest.raises(InvalidInput, match="names 7, which the answer does not cite .its citations: 1, 2"):
        give_feedback(deps, query_id, validate_feedback({"rating": "down", "wrong_citations": [7]}), client="c")
    assert read_record(deps.state, query_id).feedback == []
    assert "feedback" not in read_record(deps.state, query_id).to_doc()  # a record never rated keeps its shape


def test_a_query_past_its_deadline_is_ended_and_then_can_be_rated(deps):
    query_id = api.submit_query(deps, "What is BM25?").id
    deps.clock.advance(deps.settings.query_timeout_s + 1)
    record, _ = give_feedback(deps, query_id, validate_feedback({"rating": "down", "comment": "never answered"}),
                              client="c")
    assert record.status == "timed_out" and feedback_counts(record) == {"up": 0, "down": 1}


def test_ratings_per_query_are_bounded_oldest_dropped(deps):
    query_id = answered(deps)
    for n in range(MAX_RATINGS_PER_QUERY + 3):
        give_feedback(deps, query_id, validate_feedback({"rating": "up"}), client=f"client:{n}")
    kept = read_record(deps.state, query_id).feedback
    assert len(kept) == MAX_RATINGS_PER_QUERY
    assert kept[0]["client"] == client_key("client:3") and kept[-1]["client"] == client_key(
        f"client:{MAX_RATINGS_PER_QUERY + 2}")
