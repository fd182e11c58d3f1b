import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from shared.contract import messages, topics
from shared.contract.errors import SchemaError


def _fetched(**over):
    base = dict(
        document_id="feed-1", source="feed", origin="http://f", guid="g1", url="http://f/a",
        raw_ref="blob:raw/1", content_type="text/html", content_hash="abc",
        fetched_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    base.update(over)
    return messages.DocumentFetched(**base)


def test_round_trip_keeps_every_field_and_attributes():
    msg = _fetched(title="T")
    data, attrs = messages.encode(msg)
    assert attrs == {"type": "DocumentFetched", "schema_version": "4", "idempotency_key": "feed-1/abc/fetched"}
    assert messages.decode(data, attrs) == msg


def test_every_message_type_has_a_known_topic():
    assert [cls.TOPIC for cls in messages.MESSAGE_TYPES.values()] == list(topics.ALL_TOPICS)
    assert len(set(topics.ALL_TOPICS)) == len(topics.ALL_TOPICS)


def test_a_message_class_declares_its_topic_once_and_is_registered():
    from typing import ClassVar

    try:
        class ThrowawayProbe(messages.Message):
            TOPIC: ClassVar[str] = "throwaway-probe"
            query_id: str

            def idempotency_key(self) -> str:
                return f"{self.query_id}/probe"

        assert messages.MESSAGE_TYPES["ThrowawayProbe"] is ThrowawayProbe
        data, attrs = messages.encode(ThrowawayProbe(query_id="q"))
        assert messages.decode(data, attrs) == ThrowawayProbe(query_id="q")
        with pytest.raises(TypeError, match="'throwaway-probe' is already taken"):
            class Again(messages.Message):
                TOPIC: ClassVar[str] = "throwaway-probe"
        with pytest.raises(TypeError, match="names no TOPIC"):
            class Nameless(messages.Message):
                query_id: str
    finally:
        messages.MESSAGE_TYPES.pop("ThrowawayProbe", None)


@pytest.mark.parametrize(
    "attrs, needle",
    [
        ({"schema_version": "1"}, "no 'type'"),
        ({"type": "Nope", "schema_version": "1"}, "unknown message type"),
        ({"type": "DocumentFetched", "schema_version": "5"}, "schema_version '5' is not supported"),
    ],
)
def test_decode_refuses_what_it_cannot_understand(attrs, needle):
    data, _ = messages.encode(_fetched())
    with pytest.raises(SchemaError, match=needle):
        messages.decode(data, attrs)


def test_decode_refuses_a_body_that_does_not_match():
    _, attrs = messages.encode(_fetched())
    with pytest.raises(SchemaError, match="does not match"):
        messages.decode(b'{"document_id": 3}', attrs)
    with pytest.raises(SchemaError, match="not UTF-8 JSON"):
        messages.decode(b"\xff\xfe", attrs)


def test_messages_are_immutable_and_reject_unknown_fields():
    with pytest.raises(ValidationError, match="extra_field"):
        _fetched(extra_field=1)
    msg = _fetched()
    with pytest.raises(ValidationError, match="frozen"):
        msg.title = "x"


def test_query_graded_carries_only_what_its_consumers_route_on():
    msg = messages.QueryGraded(query_id="q1", iteration=2, decision="refine")
    data, attrs = messages.encode(msg)
    assert attrs["schema_version"] == "2"
    assert json.loads(data) == {"query_id": "q1", "iteration": 2, "decision": "refine"}
    assert messages.decode(data, attrs) == msg


def test_a_version_1_query_graded_already_on_the_bus_still_decodes():
    old = {"query_id": "q1", "iteration": 0, "score": 0.4, "relevance": 0.5, "completeness": 0.3,
           "grounded": True, "should_refine": True, "decision": "refine"}
    attrs = {"type": "QueryGraded", "schema_version": "1", "idempotency_key": "q1/0/graded"}
    decoded = messages.decode(json.dumps(old).encode(), attrs)
    assert decoded == messages.QueryGraded(query_id="q1", iteration=0, decision="refine")
    with pytest.raises(SchemaError, match="reads version 1, 2"):
        messages.decode(json.dumps(old).encode(), {**attrs, "schema_version": "3"})


def test_a_version_1_document_deleted_still_decodes_and_version_2_carries_the_generation():
    old = {"document_id": "d1", "reason": "left its feed", "requested_at": "2026-11-01T00:00:00+00:00"}
    attrs = {"type": "DocumentDeleted", "schema_version": "1", "idempotency_key": "d1/deleted"}
    decoded = messages.decode(json.dumps(old).encode(), attrs)
    assert decoded.document_id == "d1" and decoded.generation is None
    data, new_attrs = messages.encode(messages.DocumentDeleted(**{**old, "generation": "17"}))
    assert new_attrs["schema_version"] == "3"
    assert messages.decode(data, new_attrs).generation == "17"
    decoded = messages.decode(json.dumps({**old, "generation": "17"}).encode(), {**attrs, "schema_version": "2"})
    assert decoded.generation == "17" and decoded.revision is None


def test_documents_carry_their_source_s_metadata_and_older_versions_on_the_bus_decode_without():
    msg = _fetched(metadata={"author": "Ada", "category": ["CUDA", "Graphs"]})
    data, attrs = messages.encode(msg)
    assert messages.decode(data, attrs).metadata == {"author": "Ada", "category": ["CUDA", "Graphs"]}
    old = {k: v for k, v in json.loads(messages.encode(_fetched(title="T"))[0]).items() if k != "metadata"}
    decoded = messages.decode(json.dumps(old).encode(), {**attrs, "schema_version": "2"})
    assert decoded.metadata == {} and decoded.title == "T"
    cleaned = {"document_id": "feed-1", "source": "feed", "origin": "http://f", "url": "http://f/a", "title": "T",
               "clean_ref": "blob:clean/1", "content_hash": "abc", "characters": 10}
    attrs = {"type": "DocumentCleaned", "schema_version": "1", "idempotency_key": "feed-1/abc/cleaned"}
    assert messages.decode(json.dumps(cleaned).encode(), attrs).metadata == {}
    data, attrs = messages.encode(messages.DocumentCleaned(**cleaned, metadata={"author": "Ada"}))
    assert attrs["schema_version"] == "4" and messages.decode(data, attrs).metadata == {"author": "Ada"}


def test_document_messages_carry_the_ledgers_revision_and_older_versions_decode_without_one():
    msg = _fetched(revision=3)
    data, attrs = messages.encode(msg)
    assert messages.decode(data, attrs).revision == 3
    old = {k: v for k, v in json.loads(data).items() if k != "revision"}
    assert messages.decode(json.dumps(old).encode(), {**attrs, "schema_version": "3"}).revision is None
    cleaned = {"document_id": "feed-1", "source": "feed", "origin": "http://f", "url": "http://f/a", "title": "T",
               "clean_ref": "blob:clean/1", "content_hash": "abc", "characters": 10}
    attrs = {"type": "DocumentCleaned", "schema_version": "2", "idempotency_key": "feed-1/abc/cleaned"}
    assert messages.decode(json.dumps(cleaned).encode(), attrs).revision is None


def test_a_cleaned_document_carries_where_its_passages_stand_and_older_versions_decode_without():
    cleaned = {"document_id": "feed-1", "source": "feed", "origin": "http://f", "url": "http://f/a", "title": "T",
               "clean_ref": "blob:clean/1", "content_hash": "abc", "characters": 10}
    data, attrs = messages.encode(messages.DocumentCleaned(**cleaned, positions_ref="blob:p", unread=2,
                                                           unread_reason="scans"))
    assert attrs["schema_version"] == "4" and messages.decode(data, attrs).positions_ref == "blob:p"
    # version 3 (before positions): a text without pages, nothing left unread
    decoded = messages.decode(json.dumps(cleaned).encode(), {**attrs, "schema_version": "3"})
    assert decoded.positions_ref == "" and decoded.unread == 0
