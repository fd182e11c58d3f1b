"""Choosing dead letters to retry or purge by the id a user (or an API client) gives."""

from __future__ import annotations

import pytest

from services.dead_letters.redrive import select
from shared.contract.errors import InvalidInput
from tests.fakes import InMemoryStateStore


def test_an_unknown_id_from_outside_is_echoed_bounded():
    # POST /v1/dead-letters/<60,000 characters>/retry answered 404 quoting all of them
    with pytest.raises(InvalidInput) as refused:
        select(InMemoryStateStore(), "x" * 60_000, every=False)
    assert "no dead letter 'xxxx" in str(refused.value) and len(str(refused.value)) < 200


def test_a_short_unknown_id_is_named_whole():
    with pytest.raises(InvalidInput, match="no dead letter 'feedface'"):
        select(InMemoryStateStore(), "feedface", every=False)
