"""PubSubPublisher and the subscription helpers against Google's Pub/Sub emulator."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from google.cloud import pubsub_v1

from shared.adapters.gcp.pubsub import (
    PubSubPublisher,
    ensure_pull_subscription,
    ensure_push_subscription,
    ensure_topics,
    subscription_path,
    topic_path,
)
from shared.contract.errors import ConfigError, RetryableError
from shared.contract.messages import FeedPollRequested, QuerySubmitted, decode, encode
from shared.contract.ports import Publisher

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _pull(
    subscriber: pubsub_v1.SubscriberClient, path: str, want: int, within_s: float = 20.0
) -> list:
    received: list = []
    deadline = time.monotonic() + within_s
    while len(received) < want and time.monotonic() < deadline:
        response = subscriber.pull(request={"subscription": path, "max_messages": 10}, timeout=5.0)
        if response.received_messages:
            subscriber.acknowledge(
                request={
                    "subscription": path,
                    "ack_ids": [m.ack_id for m in response.received_messages],
                }
            )
            received.extend(m.message for m in response.received_messages)
    return received


@pytest.fixture
def suffix() -> str:
    # Topics live for the whole emulator session: unique names keep tests apart.
    return uuid.uuid4().hex[:8]


def test_publish_then_pull_round_trips_body_and_attributes(
    pubsub_project: str, suffix: str
) -> None:
    topic = f"query-submitted-{suffix}"
    ensure_topics(pubsub_project, [topic])
    sub = ensure_pull_subscription(pubsub_project, f"transformer-{suffix}", topic)
    assert sub == subscription_path(pubsub_project, f"transformer-{suffix}")

    # Route the message type to the test's topic name, as a deployment with a
    # topic prefix would.
    class TestQuerySubmitted(QuerySubmitted):
        TOPIC = topic

    publisher = PubSubPublisher(pubsub_project, publish_timeout_s=10.0)
    assert isinstance(publisher, Publisher)
    message = TestQuerySubmitted(query_id="q-123")
    message_ids = [
        publisher.publish(message, {"traceparent": TRACEPARENT, "tracestate": "ragbus=1"}),
        publisher.publish(TestQuerySubmitted(query_id="q-456")),
    ]
    assert all(message_ids) and len(set(message_ids)) == 2
    publisher.close()

    with pubsub_v1.SubscriberClient() as subscriber:
        received = _pull(subscriber, sub, want=2)
    by_id = {m.message_id: m for m in received}
    assert set(by_id) == set(message_ids)

    first = by_id[message_ids[0]]
    data, _ = encode(message)
    assert first.data == data
    assert dict(first.attributes) == {
        "type": "TestQuerySubmitted",
        "schema_version": "1",
        "idempotency_key": "q-123/submitted",
        "traceparent": TRACEPARENT,
        "tracestate": "ragbus=1",
    }
    assert dict(by_id[message_ids[1]].attributes)["idempotency_key"] == "q-456/submitted"
    assert "traceparent" not in by_id[message_ids[1]].attributes


def test_a_registered_message_decodes_after_the_trip(pubsub_project: str, suffix: str) -> None:
    # The real topic name of FeedPollRequested, in this test's emulator project.
    project = f"{pubsub_project}-{suffix}"
    ensure_topics(project, [FeedPollRequested.TOPIC])
    sub = ensure_pull_subscription(project, "feed-poller", FeedPollRequested.TOPIC)
    message = FeedPollRequested(
        request_id="r-1",
        feed_urls=["https://example.org/feed.xml"],
        requested_at=datetime(2026, 11, 1, tzinfo=UTC),
    )
    publisher = PubSubPublisher(project, publish_timeout_s=10.0)
    publisher.publish(message, {"traceparent": TRACEPARENT})
    publisher.close()

    with pubsub_v1.SubscriberClient() as subscriber:
        [received] = _pull(subscriber, sub, want=1)
    assert decode(received.data, dict(received.attributes)) == message
    assert received.attributes["traceparent"] == TRACEPARENT


def test_publishing_to_a_missing_topic_is_retryable_and_names_the_topic(
    pubsub_project: str, suffix: str
) -> None:
    class Nowhere(QuerySubmitted):
        TOPIC = f"no-such-topic-{suffix}"

    publisher = PubSubPublisher(pubsub_project, publish_timeout_s=5.0)
    started = time.monotonic()
    with pytest.raises(RetryableError) as caught:
        publisher.publish(Nowhere(query_id="q-1"))
    elapsed = time.monotonic() - started
    assert topic_path(pubsub_project, f"no-such-topic-{suffix}") in str(caught.value)
    assert "does not exist" in str(caught.value)
    assert elapsed < 5.0 + 2.0, f"publish took {elapsed:.1f}s; the timeout is 5s"
    publisher.close()


def test_reserved_attribute_names_are_refused(pubsub_project: str) -> None:
    publisher = PubSubPublisher(pubsub_project)
    with pytest.raises(ValueError, match="reserved"):
        publisher.publish(QuerySubmitted(query_id="q-1"), {"timeout": "1"})


def test_push_subscription_with_dead_letter_policy(pubsub_project: str, suffix: str) -> None:
    topic, dead = f"contexts-retrieved-{suffix}", f"contexts-retrieved-{suffix}-dead-letter"
    assert ensure_topics(pubsub_project, [topic, dead]) == [
        topic_path(pubsub_project, topic),
        topic_path(pubsub_project, dead),
    ]
    again = ensure_topics(pubsub_project, [topic])  # idempotent
    assert again == [topic_path(pubsub_project, topic)]

    endpoint = "http://127.0.0.1:9/grader"  # nothing is published, so nothing is pushed
    kwargs = {
        "dead_letter_topic": dead,
        "max_delivery_attempts": 5,
        "ack_deadline_s": 20,
        "min_backoff_s": 0.5,
        "max_backoff_s": 60,
    }
    path = ensure_push_subscription(pubsub_project, f"grader-{suffix}", topic, endpoint, **kwargs)
    assert (
        ensure_push_subscription(pubsub_project, f"grader-{suffix}", topic, endpoint, **kwargs)
        == path
    )

    with pubsub_v1.SubscriberClient() as subscriber:
        sub = subscriber.get_subscription(request={"subscription": path})
    assert sub.topic == topic_path(pubsub_project, topic)
    assert sub.push_config.push_endpoint == endpoint
    assert sub.ack_deadline_seconds == 20
    assert sub.dead_letter_policy.dead_letter_topic == topic_path(pubsub_project, dead)
    assert sub.dead_letter_policy.max_delivery_attempts == 5
    assert sub.retry_policy.minimum_backoff.total_seconds() == 0.5
    assert sub.retry_policy.maximum_backoff.total_seconds() == 60


def test_subscription_settings_outside_pubsub_limits_are_named(pubsub_project: str) -> None:
    with pytest.raises(ConfigError, match="max delivery attempts 2"):
        ensure_push_subscription(
            pubsub_project,
            "s",
            "t",
            "http://127.0.0.1:9/",
            dead_letter_topic="d",
            max_delivery_attempts=2,
        )
    with pytest.raises(ConfigError, match="ack deadline"):
        ensure_pull_subscription(pubsub_project, "s", "t", ack_deadline_s=5)
