"""How long the openai provider waits before retrying a 429/5xx: the server's Retry-After, bounded."""

import httpx
import pytest

from shared.adapters.http_model import BACKOFF_S, MAX_RETRY_AFTER_S, retry_after

pytestmark = pytest.mark.unit


def _response(value):
    return httpx.Response(429, headers={} if value is None else {"Retry-After": value})


@pytest.mark.parametrize(("value", "wait"), [
    ("2", 2.0),
    ("100000", MAX_RETRY_AFTER_S),                      # bounded
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),             # an HTTP date in the past: no wait
    ("-1", BACKOFF_S), ("nan", BACKOFF_S), ("soon", BACKOFF_S), (None, BACKOFF_S),  # backoff, no crash
])
def test_retry_after_is_read_and_bounded(value, wait):
    assert retry_after(_response(value), 1) == wait


def test_without_a_header_the_backoff_doubles():
    assert retry_after(None, 3) == BACKOFF_S * 4
