"""Every topic name, in one place. infra/ declares the same set (a test checks)."""

from __future__ import annotations

FEED_POLL_REQUESTED = "feed-poll-requested"
DOCUMENT_FETCHED = "document-fetched"
DOCUMENT_DELETED = "document-deleted"
DOCUMENT_CLEANED = "document-cleaned"
DOCUMENT_INDEXED = "document-indexed"
QUERY_SUBMITTED = "query-submitted"
QUERY_TRANSFORMED = "query-transformed"
CONTEXTS_RETRIEVED = "contexts-retrieved"
QUERY_GRADED = "query-graded"
ANSWER_READY = "answer-ready"

ALL_TOPICS: tuple[str, ...] = (
    FEED_POLL_REQUESTED,
    DOCUMENT_FETCHED,
    DOCUMENT_DELETED,
    DOCUMENT_CLEANED,
    DOCUMENT_INDEXED,
    QUERY_SUBMITTED,
    QUERY_TRANSFORMED,
    CONTEXTS_RETRIEVED,
    QUERY_GRADED,
    ANSWER_READY,
)


def dead_letter_topic(topic: str) -> str:
    """The dead-letter topic paired with ``topic``."""
    return f"{topic}-dead-letter"
