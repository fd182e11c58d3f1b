"""infra/ declares exactly the topics the code publishes to, each with its dead-letter topic."""

from pathlib import Path

import hcl2

from shared.contract import topics

INFRA = Path(__file__).resolve().parents[2] / "infra"


def _parsed() -> list[dict]:
    out = []
    for tf in sorted(INFRA.glob("*.tf")):
        with tf.open() as handle:
            out.append(hcl2.load(handle))
    return out


def _locals() -> dict:
    merged: dict = {}
    for parsed in _parsed():
        for block in parsed.get("locals", []):
            merged.update(block)
    return merged


def _resource(rtype: str, name: str) -> dict:
    for parsed in _parsed():
        for block in parsed.get("resource", []):
            body = block.get(f'"{rtype}"', {}).get(f'"{name}"')
            if body is not None:
                return body
    raise AssertionError(f"{rtype}.{name} is not declared in infra/")


def test_terraform_topics_equal_code_topics():
    declared = [t.strip('"') for t in _locals()["topics"]]
    assert sorted(declared) == sorted(topics.ALL_TOPICS)
    assert len(declared) == len(set(declared))


def test_dead_letter_topic_name():
    assert topics.dead_letter_topic("query-graded") == "query-graded-dead-letter"


def test_every_topic_has_a_dead_letter_topic_named_as_in_the_code():
    dead_letter = _resource("google_pubsub_topic", "dead_letter")
    assert dead_letter["for_each"] == "${toset(local.topics)}"
    template = dead_letter["name"].strip('"')
    for topic in topics.ALL_TOPICS:
        assert template.replace("${each.value}", topic) == topics.dead_letter_topic(topic)


def test_every_dead_letter_topic_has_an_inbox_that_keeps_a_week():
    inbox = _resource("google_pubsub_subscription", "dead_letter_inbox")
    assert inbox["for_each"] == "${toset(local.topics)}"
    assert inbox["topic"] == "${google_pubsub_topic.dead_letter[each.value].id}"
    assert inbox["message_retention_duration"].strip('"') == "604800s"
