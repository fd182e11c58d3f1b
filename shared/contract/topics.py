"""Every topic name, derived from the message classes (each declares its ``TOPIC`` once).

The constants are the names the registry of stages and the services write; infra/ declares
the same set (a test checks).
"""

from __future__ import annotations

from shared.contract.messages import (
    MESSAGE_TYPES,
    AnswerReady,
    ContextsRetrieved,
    DocumentCleaned,
    DocumentDeleted,
    DocumentFetched,
    DocumentIndexed,
    FeedPollRequested,
    QueryGraded,
    QuerySubmitted,
    QueryTransformed,
)

FEED_POLL_REQUESTED = FeedPollRequested.TOPIC
DOCUMENT_FETCHED = DocumentFetched.TOPIC
DOCUMENT_DELETED = DocumentDeleted.TOPIC
DOCUMENT_CLEANED = DocumentCleaned.TOPIC
DOCUMENT_INDEXED = DocumentIndexed.TOPIC
QUERY_SUBMITTED = QuerySubmitted.TOPIC
QUERY_TRANSFORMED = QueryTransformed.TOPIC
CONTEXTS_RETRIEVED = ContextsRetrieved.TOPIC
QUERY_GRADED = QueryGraded.TOPIC
ANSWER_READY = AnswerReady.TOPIC



def __getattr__(name: str) -> tuple[str, ...]:
    """``ALL_TOPICS``: one topic per message class, in the order they are registered, read when asked
    for: the registry of stages (:mod:`shared.runtime.stages`) adds the hop of a stage another one
    follows as it is imported, and what imports the registry sees those too."""
    if name == "ALL_TOPICS":
        return tuple(cls.TOPIC for cls in MESSAGE_TYPES.values())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dead_letter_topic(topic: str) -> str:
    """The dead-letter topic paired with ``topic``."""
    return f"{topic}-dead-letter"
