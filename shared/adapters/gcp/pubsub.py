"""The Publisher port on Google Cloud Pub/Sub, and the admin calls that lay out topics.

The client honours ``PUBSUB_EMULATOR_HOST`` by itself (plain-text channel, no
credentials), so the same code talks to the emulator in tests and to Pub/Sub
in the cloud.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core import retry as gretry
from google.cloud import pubsub_v1
from google.cloud.pubsub_v1.types import (
    BatchSettings,
    LimitExceededBehavior,
    PublisherOptions,
    PublishFlowControl,
)

from shared.contract.errors import ConfigError, RetryableError
from shared.contract.messages import Message, encode

log = logging.getLogger("ragbus.pubsub")

#: Errors worth another attempt inside one publish: the service was busy or a
#: connection dropped. NotFound / PermissionDenied / InvalidArgument are not
#: here: retrying them only burns the timeout.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.Aborted,
    gexc.ResourceExhausted,
    gexc.Unknown,
)

#: A stage publishes one or a few messages per invocation and then returns, so
#: waiting the client's usual batching window buys nothing; 10 ms still lets the
#: sub-queries of one iteration share a request.
DEFAULT_BATCH_SETTINGS = BatchSettings(max_bytes=1_000_000, max_latency=0.01, max_messages=100)

#: Block (rather than fail, or grow without bound) when this many messages or
#: bytes are waiting to be sent; a stuck bus then slows the producer down.
DEFAULT_FLOW_CONTROL = PublishFlowControl(
    message_limit=1000,
    byte_limit=10 * 1024 * 1024,
    limit_exceeded_behavior=LimitExceededBehavior.BLOCK,
)

# The keyword arguments PublisherClient.publish takes besides attributes.
_RESERVED_ATTRIBUTES = frozenset({"topic", "data", "ordering_key", "retry", "timeout"})


def publish_retry(deadline_s: float) -> gretry.Retry:
    """Exponential backoff on :data:`TRANSIENT_ERRORS`, giving up after ``deadline_s``."""
    return gretry.Retry(
        predicate=gretry.if_exception_type(*TRANSIENT_ERRORS),
        initial=0.1,
        maximum=5.0,
        multiplier=2.0,
        timeout=deadline_s,
    )


def topic_path(project: str, topic: str) -> str:
    """``projects/P/topics/T`` for a bare topic name; a full path is returned as given."""
    if topic.startswith("projects/"):
        return topic
    return f"projects/{project}/topics/{topic}"


def subscription_path(project: str, subscription: str) -> str:
    if subscription.startswith("projects/"):
        return subscription
    return f"projects/{project}/subscriptions/{subscription}"


class PubSubPublisher:
    """Publishes ragbus messages to ``projects/<project>/topics/<message.TOPIC>``.

    One ``PublisherClient`` is built on first use and reused (it owns a gRPC
    channel and a batching thread). ``publish`` waits for the server's message
    id at most ``publish_timeout_s``; anything short of that success becomes a
    :class:`~shared.contract.errors.RetryableError` naming the topic, so the message
    being handled is redelivered rather than lost.
    """

    def __init__(
        self,
        project: str,
        *,
        publish_timeout_s: float = 30.0,
        batch_settings: BatchSettings = DEFAULT_BATCH_SETTINGS,
        flow_control: PublishFlowControl = DEFAULT_FLOW_CONTROL,
        client: pubsub_v1.PublisherClient | None = None,
    ) -> None:
        if not project:
            raise ConfigError("PubSubPublisher needs a project id (set GOOGLE_CLOUD_PROJECT)")
        self.project = project
        self.publish_timeout_s = publish_timeout_s
        self._batch_settings = batch_settings
        self._flow_control = flow_control
        self._retry = publish_retry(publish_timeout_s)
        self._client = client
        self._lock = threading.Lock()

    @property
    def client(self) -> pubsub_v1.PublisherClient:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = pubsub_v1.PublisherClient(
                        batch_settings=self._batch_settings,
                        publisher_options=PublisherOptions(
                            flow_control=self._flow_control,
                            retry=self._retry,
                            timeout=self.publish_timeout_s,
                        ),
                    )
        return self._client

    def topic_path(self, topic: str) -> str:
        return topic_path(self.project, topic)

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        data, attrs = encode(message)
        attrs.update(attributes or {})
        clash = _RESERVED_ATTRIBUTES & attrs.keys()
        if clash:
            # They would be taken as PublisherClient.publish's own arguments.
            raise ValueError(f"attribute names {sorted(clash)} are reserved by the Pub/Sub client")
        path = self.topic_path(type(message).TOPIC)
        try:
            future = self.client.publish(
                path, data, retry=self._retry, timeout=self.publish_timeout_s, **attrs
            )
            message_id = future.result(timeout=self.publish_timeout_s)
        except gexc.NotFound as exc:
            raise RetryableError(
                f"Pub/Sub topic {path} does not exist: create it (terraform apply, or "
                f"ragbus up --emulators) — {exc.message}"
            ) from exc
        except gexc.PermissionDenied as exc:
            raise RetryableError(
                f"not allowed to publish to {path}: grant roles/pubsub.publisher to this "
                f"function's service account — {exc.message}"
            ) from exc
        except TimeoutError as exc:  # concurrent.futures.TimeoutError is TimeoutError on 3.11
            raise RetryableError(
                f"publishing {type(message).__name__} to {path} got no answer within "
                f"{self.publish_timeout_s:.0f}s; the message will be redelivered"
            ) from exc
        except gexc.GoogleAPICallError as exc:
            raise RetryableError(
                f"publishing {type(message).__name__} to {path} failed: {exc}"
            ) from exc
        log.debug(
            "published %s to %s as %s",
            type(message).__name__,
            path,
            message_id,
            extra={
                "topic": path,
                "message_id": message_id,
                "idempotency_key": attrs["idempotency_key"],
            },
        )
        return str(message_id)

    def close(self) -> None:
        """Send what is batched and stop the client's background thread."""
        with self._lock:
            if self._client is not None:
                self._client.stop()
                self._client = None


# ------------------------------------------------------------------ admin


def ensure_topics(
    project: str, topics: Iterable[str], *, client: pubsub_v1.PublisherClient | None = None
) -> list[str]:
    """Create each topic unless it exists; return their paths."""
    owned = client is None
    client = client or pubsub_v1.PublisherClient()
    paths = []
    try:
        for topic in topics:
            path = topic_path(project, topic)
            try:
                client.create_topic(request={"name": path})
                log.info("created topic %s", path)
            except gexc.AlreadyExists:
                pass
            paths.append(path)
    finally:
        if owned:
            client.stop()
    return paths


def _subscription_request(
    project: str,
    name: str,
    topic: str,
    *,
    push_endpoint: str | None,
    dead_letter_topic: str | None,
    max_delivery_attempts: int,
    ack_deadline_s: float,
    min_backoff_s: float,
    max_backoff_s: float,
) -> dict[str, Any]:
    # Pub/Sub's own limits, checked here so a bad setting is named before the
    # API answers with a bare InvalidArgument.
    if not 10 <= ack_deadline_s <= 600:
        raise ConfigError(f"ack deadline {ack_deadline_s}s must be between 10 and 600 seconds")
    if not 0 <= min_backoff_s <= max_backoff_s <= 600:
        raise ConfigError(
            f"retry backoff {min_backoff_s}s..{max_backoff_s}s must satisfy 0 <= min <= max <= 600"
        )
    request: dict[str, Any] = {
        "name": subscription_path(project, name),
        "topic": topic_path(project, topic),
        "ack_deadline_seconds": int(ack_deadline_s),
        "retry_policy": {
            "minimum_backoff": timedelta(seconds=min_backoff_s),
            "maximum_backoff": timedelta(seconds=max_backoff_s),
        },
    }
    if push_endpoint:
        request["push_config"] = {"push_endpoint": push_endpoint}
    if dead_letter_topic:
        if not 5 <= max_delivery_attempts <= 100:
            raise ConfigError(
                f"max delivery attempts {max_delivery_attempts} must be between 5 and 100 "
                "when a dead-letter topic is set"
            )
        request["dead_letter_policy"] = {
            "dead_letter_topic": topic_path(project, dead_letter_topic),
            "max_delivery_attempts": max_delivery_attempts,
        }
    return request


def _ensure_subscription(request: dict[str, Any], client: pubsub_v1.SubscriberClient | None) -> str:
    owned = client is None
    client = client or pubsub_v1.SubscriberClient()
    try:
        client.create_subscription(request=request)
        log.info("created subscription %s on %s", request["name"], request["topic"])
    except gexc.AlreadyExists:
        pass
    finally:
        if owned:
            client.close()
    return str(request["name"])


def ensure_push_subscription(
    project: str,
    name: str,
    topic: str,
    push_endpoint: str,
    *,
    dead_letter_topic: str | None,
    max_delivery_attempts: int = 5,
    ack_deadline_s: float = 60.0,
    min_backoff_s: float = 10.0,
    max_backoff_s: float = 600.0,
    client: pubsub_v1.SubscriberClient | None = None,
) -> str:
    """A push subscription delivering ``topic`` to ``push_endpoint``, with dead-lettering.

    Idempotent: an existing subscription of that name is left as it is.
    Returns the subscription path.
    """
    return _ensure_subscription(
        _subscription_request(
            project,
            name,
            topic,
            push_endpoint=push_endpoint,
            dead_letter_topic=dead_letter_topic,
            max_delivery_attempts=max_delivery_attempts,
            ack_deadline_s=ack_deadline_s,
            min_backoff_s=min_backoff_s,
            max_backoff_s=max_backoff_s,
        ),
        client,
    )


def ensure_pull_subscription(
    project: str,
    name: str,
    topic: str,
    *,
    dead_letter_topic: str | None = None,
    max_delivery_attempts: int = 5,
    ack_deadline_s: float = 60.0,
    min_backoff_s: float = 10.0,
    max_backoff_s: float = 600.0,
    client: pubsub_v1.SubscriberClient | None = None,
) -> str:
    """A pull subscription on ``topic`` (observers, dead-letter readers, tests). Idempotent."""
    return _ensure_subscription(
        _subscription_request(
            project,
            name,
            topic,
            push_endpoint=None,
            dead_letter_topic=dead_letter_topic,
            max_delivery_attempts=max_delivery_attempts,
            ack_deadline_s=ack_deadline_s,
            min_backoff_s=min_backoff_s,
            max_backoff_s=max_backoff_s,
        ),
        client,
    )
