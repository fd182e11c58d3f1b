"""infra/ declares exactly the topics the code publishes to."""

from pathlib import Path

import hcl2

from shared import topics

INFRA = Path(__file__).resolve().parents[2] / "infra"


def _locals() -> dict:
    merged: dict = {}
    for tf in INFRA.glob("*.tf"):
        with tf.open() as handle:
            for block in hcl2.load(handle).get("locals", []):
                merged.update(block)
    return merged


def test_terraform_topics_equal_code_topics():
    declared = [t.strip('"') for t in _locals()["topics"]]
    assert sorted(declared) == sorted(topics.ALL_TOPICS)
    assert len(declared) == len(set(declared))


def test_dead_letter_topic_name():
    assert topics.dead_letter_topic("query-graded") == "query-graded-dead-letter"
