"""The feed registry: one record per feed URL in the ``feeds`` collection.

Key: :func:`shared.ids.feed_id` of the normalised URL. Record::

    url, added_at, last_poll, last_status, last_error, etag, last_modified, items

``add_feed`` checks the URL with the same guard the fetcher applies on every
request (:mod:`shared.url_guard`), so a feed on a private address is refused
when it is added, not only when it is first polled.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared import collections, processed_items
from shared.errors import InvalidInput
from shared.ids import feed_id
from shared.messages import DocumentDeleted
from shared.ports import Clock, Doc, Publisher, StateStore
from shared.url_guard import Resolver, check_url, normalise_url

FEED_FIELDS = (
    "url",
    "added_at",
    "last_poll",
    "last_status",
    "last_error",
    "etag",
    "last_modified",
    "items",
)


def validate_feed_url(
    url: str, *, allow_loopback: bool, resolver: Resolver = socket.getaddrinfo
) -> str:
    """The normalised feed URL, after checking scheme, host and every address.

    Raises :class:`~shared.errors.InvalidInput` (bad scheme, no host, unresolvable
    name) or :class:`~shared.errors.FetchRefused` (private, link-local, loopback
    unless ``allow_loopback``...).
    """
    normal, _ = check_url(url, allow_loopback=allow_loopback, resolver=resolver)
    return normal


def feed_key(url: str) -> str:
    """The registry key of ``url`` (normalised first, so spellings agree)."""
    return feed_id(normalise_url(url))


def new_feed_record(url: str, now: datetime) -> Doc:
    return {
        "url": url,
        "added_at": now.isoformat(),
        "last_poll": None,
        "last_status": None,
        "last_error": None,
        "etag": None,
        "last_modified": None,
        "items": 0,
    }


def add_feed(
    state: StateStore,
    url: str,
    *,
    allow_loopback: bool,
    now: datetime,
    resolver: Resolver = socket.getaddrinfo,
) -> dict:
    """Register ``url`` (validated and normalised); return its record.

    Adding a feed that is already registered returns the existing record unchanged.
    """
    normal = validate_feed_url(url, allow_loopback=allow_loopback, resolver=resolver)
    record = new_feed_record(normal, now)
    state.create(collections.FEEDS, feed_id(normal), record)
    return state.get(collections.FEEDS, feed_id(normal)) or record


def get_feed(state: StateStore, url: str) -> dict | None:
    return state.get(collections.FEEDS, feed_key(url))


def remove_feed(
    state: StateStore, url: str, *, publisher: Publisher, clock: Clock, keep_documents: bool = False
) -> list[str]:
    """Unregister ``url``; unless ``keep_documents``, also delete the documents its items
    became (``DocumentDeleted(reason="feed removed")``). Returns the deleted document ids.

    Raises :class:`InvalidInput` when no such feed is registered (a typo deletes nothing).
    """
    record = get_feed(state, url)
    if record is None:
        raise InvalidInput(f"no feed {url!r} is registered; `ragbus feeds list` shows the registered ones")
    deleted: list[str] = []
    if not keep_documents:
        for item in processed_items.records(state, {"feed_url": record["url"], "source": "feed"}):
            # Publish first, forget second, as the poller does for items that left a feed:
            # a crash in between re-sends the delete, which the indexer handles idempotently.
            publisher.publish(DocumentDeleted(
                document_id=item["document_id"], reason="feed removed", requested_at=clock.now()))
            processed_items.forget(state, item["document_id"])
            deleted.append(item["document_id"])
    state.delete(collections.FEEDS, feed_key(record["url"]))
    return deleted


def list_feeds(state: StateStore) -> list[dict]:
    """Every registered feed, ordered by URL, with every field of the record."""
    feeds = state.list(collections.FEEDS)
    out = [{name: feed.get(name) for name in FEED_FIELDS} | feed for feed in feeds]
    return sorted(out, key=lambda feed: feed["url"] or "")


def record_poll(state: StateStore, url: str, *, now: datetime, changes: Mapping[str, Any]) -> dict:
    """Merge the outcome of a poll into the feed's record (creating it if absent)."""
    normal = normalise_url(url)

    def merge(current: Doc | None) -> Doc:
        base = current if current is not None else new_feed_record(normal, now)
        return {**base, **changes, "last_poll": now.isoformat()}

    return state.update(collections.FEEDS, feed_id(normal), merge) or {}
