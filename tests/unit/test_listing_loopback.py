"""`--allow-loopback` sticks to the listing it was given for, and to no other (issue 25)."""

from __future__ import annotations

import socket

import pytest

from shared.adapters.http_fetch import SafeFetcher
from shared.contract.errors import FetchRefused
from shared.ingest.listings import add_listing, get_listing
from tests.fakes import FakeClock, InMemoryStateStore

pytestmark = pytest.mark.unit


def _resolver(address: str):
    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
    return resolve


def test_a_listing_on_loopback_remembers_it_was_allowed_there():
    state, now = InMemoryStateStore(), FakeClock().now()
    add_listing(state, "http://127.0.0.1:8766/feed.xml", allow_loopback=True, now=now)
    add_listing(state, "http://127.0.0.1:8767/sitemap.xml", allow_loopback=True, now=now, kind="sitemap")
    assert get_listing(state, "http://127.0.0.1:8766/feed.xml")["allow_loopback"] is True
    assert get_listing(state, "http://127.0.0.1:8767/sitemap.xml")["allow_loopback"] is True


def test_a_public_listing_added_with_the_flag_does_not_keep_it():
    # its items must not reach this machine's own services later
    state = InMemoryStateStore()
    add_listing(state, "https://news.example/feed.xml", allow_loopback=True, now=FakeClock().now(),
             resolver=_resolver("93.184.215.14"))
    assert "allow_loopback" not in get_listing(state, "https://news.example/feed.xml")


def test_adding_again_with_the_flag_records_it_on_the_existing_listing():
    state, now = InMemoryStateStore(), FakeClock().now()
    url = "http://localhost:8766/feed.xml"
    with pytest.raises(FetchRefused):
        add_listing(state, url, allow_loopback=False, now=now)
    add_listing(state, url, allow_loopback=True, now=now)
    assert get_listing(state, url)["allow_loopback"] is True


def test_the_fetcher_allowed_on_loopback_is_another_one_with_the_same_settings():
    fetcher = SafeFetcher(timeout_s=3, max_bytes=1234)
    allowed = fetcher.allowing_loopback()
    assert allowed is not fetcher and allowed.allow_loopback and not fetcher.allow_loopback
    assert (allowed.timeout_s, allowed.max_bytes) == (3, 1234)
    assert allowed.allowing_loopback() is allowed
