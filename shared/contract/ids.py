"""Derived ids: the same input always yields the same id, so redelivery is harmless."""

from __future__ import annotations

import hashlib


def _digest(*parts: str, size: int = 16) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:size]


def content_hash(data: bytes | str) -> str:
    """sha256 of the content, hex."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def feed_item_id(feed_url: str, guid: str) -> str:
    """Document id of a feed item: stable per (feed, guid)."""
    return "feed-" + _digest(feed_url, guid)


def file_document_id(path: str) -> str:
    """Document id of an ingested file or object: stable per absolute path / object name."""
    return "file-" + _digest(path)


def chunk_id(document_id: str, content_hash_: str, ordinal: int) -> str:
    return f"{document_id}:{content_hash_[:12]}:{ordinal}"


def feed_id(feed_url: str) -> str:
    return _digest(feed_url)
