"""bench/capacity.py --measure: Gemini's tokens per call read from the stand-in's usage fields."""

from __future__ import annotations

import pytest

from bench import capacity
from tests.integration.fake_gemini import THINKING_TOKENS

pytestmark = pytest.mark.integration


def test_tokens_per_call_are_the_usage_the_stand_in_reports_thinking_included():
    measured = capacity.measure(("LOW", "HIGH"))["levels"]
    for operation in capacity.OPERATIONS:
        low = measured["LOW"][operation]
        assert low["usable"] and low["input"] > 400  # the prompt, counted from what was sent
        assert THINKING_TOKENS["LOW"] < low["output"] < THINKING_TOKENS["LOW"] + 400
        assert measured["HIGH"][operation]["input"] == low["input"]
    # at HIGH the thinking outgrows the headroom: the limit is spent and no answer is written
    assert not any(measured["HIGH"][op]["usable"] for op in capacity.OPERATIONS)
