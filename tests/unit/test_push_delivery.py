"""Raw Pub/Sub pushes through functions-framework: delivery attempts and dead letters.

functions-framework turns a raw push envelope into a CloudEvent and drops its
``deliveryAttempt`` and ``subscription``; the stages read them from the raw
body. These tests post envelopes as Pub/Sub does, through functions-framework's
own Flask app (``create_app`` on the root main.py), so the conversion is the real one.
"""

from __future__ import annotations

import base64

import pytest
from functions_framework import create_app

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import QuerySubmitted, QueryTransformed, encode
from shared.query.state import new_query_record
from shared.runtime import functions
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher
from tests.support import REPO

pytestmark = pytest.mark.unit


@pytest.fixture
def deps(monkeypatch):
    d = Deps(Settings(max_delivery_attempts=5), publisher=RecordingPublisher(), state=InMemoryStateStore(),
             clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", d)
    d.state.put(state_collections.QUERIES, "q1", new_query_record(
        "q1", "what is BM25?", top_k=5, max_iterations=1, max_model_calls=5, now=d.clock.now(), timeout_s=60))
    return d


def _client(target: str):
    return create_app(target=target, source=str(REPO / "main.py"), signature_type="cloudevent").test_client()


def _push(message, *, attempt: int | None, subscription: str, extra_attributes=None, message_id="m1"):
    data, attributes = encode(message)
    body = {
        "message": {"data": base64.b64encode(data).decode(), "messageId": message_id,
                    "attributes": {**attributes, **(extra_attributes or {})},
                    "publishTime": "2099-01-01T00:00:00Z"},
        "subscription": f"projects/p/subscriptions/{subscription}",
    }
    if attempt is not None:
        body["deliveryAttempt"] = attempt
    return body


@pytest.fixture
def failing_transformer(monkeypatch):
    seen = []

    def boom(message, deps):
        raise ConnectionError("model endpoint unreachable")

    consumer = functions.consumer_for("transformer", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: boom))
    real = functions.handle_delivery

    def spy(*args, **kwargs):
        seen.append(kwargs["attempt"])
        return real(*args, **kwargs)

    monkeypatch.setattr(functions, "handle_delivery", spy)
    return seen


def test_the_stage_sees_the_attempt_of_the_raw_push_body(deps, failing_transformer):
    client = _client("transformer")
    response = client.post("/projects/p/topics/query-submitted",
                           json=_push(QuerySubmitted(query_id="q1"), attempt=3,
                                      subscription="transformer.query-submitted"))
    assert response.status_code == 500  # redelivered: attempts are left
    assert failing_transformer == [3]
    assert deps.state.count(state_collections.DEAD_LETTERS) == 0
    assert deps.state.get(state_collections.QUERIES, "q1")["status"] == "pending"


def test_the_last_allowed_attempt_records_the_error_and_fails_the_query(deps, failing_transformer):
    client = _client("transformer")
    response = client.post("/projects/p/topics/query-submitted",
                           json=_push(QuerySubmitted(query_id="q1"), attempt=5,
                                      subscription="transformer.query-submitted"))
    assert response.status_code == 200  # acknowledged: Pub/Sub would only forward it without the error
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["attempts"] == 5 and letter["subscription"] == "transformer.query-submitted"
    assert "model endpoint unreachable" in letter["error"] and "attempt 5 of 5" in letter["error"]
    record = deps.state.get(state_collections.QUERIES, "q1")
    assert record["status"] == "failed"
    assert "model endpoint unreachable" in record["error"]


def test_a_push_without_an_attempt_counts_as_the_first(deps, failing_transformer):
    response = _client("transformer").post(
        "/", json=_push(QuerySubmitted(query_id="q1"), attempt=None, subscription="transformer.query-submitted"))
    assert response.status_code == 500
    assert failing_transformer == [1]


def test_the_dead_letter_function_records_the_reason_and_fails_the_query(deps):
    client = _client("dead_letters")
    body = _push(QueryTransformed(query_id="q1", iteration=0), attempt=1,
                 subscription="dead_letters.query-transformed-dead-letter", message_id="dl-7",
                 extra_attributes={"CloudPubSubDeadLetterSourceSubscription": "retriever.query-transformed",
                                   "CloudPubSubDeadLetterSourceSubscriptionProject": "p",
                                   "CloudPubSubDeadLetterSourceDeliveryCount": "7"})
    response = client.post("/projects/p/topics/query-transformed-dead-letter", json=body)
    assert response.status_code == 200
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["subscription"] == "retriever.query-transformed" and letter["topic"] == "query-transformed"
    assert letter["attempts"] == 7 and letter["type"] == "QueryTransformed"
    assert "after 7 delivery attempts on retriever.query-transformed" in letter["error"]
    record = deps.state.get(state_collections.QUERIES, "q1")
    assert record["status"] == "failed" and "retriever gave up" in record["error"]
    # a redelivered dead letter is the same record
    assert client.post("/projects/p/topics/query-transformed-dead-letter", json=body).status_code == 200
    assert deps.state.count(state_collections.DEAD_LETTERS) == 1


def test_a_dead_letter_without_pubsubs_attributes_is_named_from_its_topic(deps):
    # what the emulator forwards: no CloudPubSubDeadLetterSource* attributes, no attempt
    body = _push(QuerySubmitted(query_id="q1"), attempt=None,
                 subscription="dead_letters.query-submitted-dead-letter")
    response = _client("dead_letters").post("/", json=body)
    assert response.status_code == 200
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["subscription"] == "transformer.query-submitted"
    assert letter["attempts"] == 5 and "the subscription's limit" in letter["error"]
    assert deps.state.get(state_collections.QUERIES, "q1")["status"] == "failed"
