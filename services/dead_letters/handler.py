"""What Pub/Sub dead-lettered: recorded with its reason, and its query ended ``failed``.

A push subscription on every dead-letter topic (``dead_letters.<topic>-dead-letter``,
infra/pubsub.tf and the emulator topology) delivers here. A message reaches a
dead-letter topic when its stage never acknowledged it within the subscription's
delivery attempts: the function crashed, ran out of memory or time, or (on the
emulator, whose pushes carry no attempt count) kept failing. Stages record the
dead letters they decide on themselves (a permanent error, or the last allowed
attempt); this function keeps the rest, so no dead letter goes unrecorded and no
query waits for its deadline on a message nobody will handle.

Pub/Sub adds ``CloudPubSubDeadLetterSource*`` attributes to a forwarded message
(the source subscription and how often it was delivered); when they are missing
the dead-letter topic names the source topic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.contract.deps import Deps
from shared.runtime.dispatch import keep_dead_letter
from shared.runtime.stages import CONSUMERS

log = logging.getLogger("ragbus.dead_letters")

SOURCE_SUBSCRIPTION = "CloudPubSubDeadLetterSourceSubscription"
SOURCE_DELIVERY_COUNT = "CloudPubSubDeadLetterSourceDeliveryCount"
SOURCE_ERROR = "CloudPubSubDeadLetterSourceDeliveryErrorMessage"
_PUBSUB_PREFIX = "CloudPubSubDeadLetter"
DEAD_LETTER_SUFFIX = "-dead-letter"
#: The stage name dead letters are recorded under when no consumer can be named.
STAGE = "dead_letters"


@dataclass(frozen=True)
class Source:
    """Where a dead letter came from."""

    subscription: str
    topic: str
    stage: str


def source_of(attributes: dict[str, str], dead_letter_topic: str) -> Source:
    """The subscription, topic and stage that gave up on the message."""
    topic = dead_letter_topic.removesuffix(DEAD_LETTER_SUFFIX)
    named = attributes.get(SOURCE_SUBSCRIPTION, "").rsplit("/", 1)[-1]
    for consumer in CONSUMERS:
        if consumer.subscription == named:
            return Source(consumer.subscription, consumer.topic, consumer.stage)
    readers = [c for c in CONSUMERS if c.topic == topic]
    if len(readers) == 1:
        return Source(readers[0].subscription, topic, readers[0].stage)
    # Two stages read the topic (query-graded) and Pub/Sub did not say which gave up.
    stages = "+".join(sorted(c.stage for c in readers)) or STAGE
    return Source(named or f"{stages}.{topic}", topic, stages)


def record(
    data: bytes,
    attributes: dict[str, str],
    *,
    dead_letter_topic: str,
    message_id: str,
    deps: Deps,
) -> Source:
    """Keep one dead-lettered message with its reason and attempt count; fail its query."""
    source = source_of(attributes, dead_letter_topic)
    count = attributes.get(SOURCE_DELIVERY_COUNT, "")
    attempts = int(count) if count.isdigit() else deps.settings.max_delivery_attempts
    known = "" if count.isdigit() else " (the subscription's limit; Pub/Sub did not report the count)"
    reason = (f"Pub/Sub dead-lettered the message after {attempts} delivery attempts{known} "
              f"on {source.subscription}")
    if attributes.get(SOURCE_ERROR):
        reason += f": {attributes[SOURCE_ERROR]}"
    original = {k: v for k, v in attributes.items() if not k.startswith(_PUBSUB_PREFIX)}
    log.error("dead letter %s from %s: %s", message_id, source.subscription, reason)
    keep_dead_letter(deps, subscription=source.subscription, topic=source.topic, stage=source.stage,
                     data=data, attributes=original, error=reason, attempts=attempts,
                     message_id=message_id)
    return source
