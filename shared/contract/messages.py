"""Every message that crosses a topic: typed, versioned, with an idempotency key.

Messages are small records (claim check: big payloads live in the blob store or
the query's state, messages carry references). Commands are imperative
(``FeedPollRequested`` is the one request), events past tense.

On the wire a message is its JSON body plus attributes ``type``,
``schema_version`` and ``idempotency_key`` (trace context is added beside
them by the tracing layer). :func:`decode` refuses an unknown type or version
with a :class:`~shared.contract.errors.SchemaError`, which is permanent: the message is
dead-lettered with that reason instead of being retried forever.

Changing a message's fields bumps its ``SCHEMA_VERSION``; the class then lists
in ``READS_OLDER`` how to read each earlier version it still accepts, so
messages already on the bus when a new build rolls out are handled, not
dead-lettered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from shared.contract.errors import SchemaError
from shared.contract.sources import SOURCE_KINDS

#: Every message class by its name (the wire's ``type`` attribute), in the order declared:
#: a subclass of :class:`Message` is registered as it is defined.
MESSAGE_TYPES: dict[str, type[Message]] = {}


class Message(BaseModel):
    """Base of every message. Subclasses set TOPIC (the one place a topic is named: topics.py,
    the registry of stages and infra/ follow it) and SCHEMA_VERSION."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    TOPIC: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int] = 1
    # Earlier versions this build still reads: version -> the body rewritten in the current shape.
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__dict__.get("GENERIC"):
            return  # a base whose subclasses name the topics (QueryHop)
        topic = cls.__dict__.get("TOPIC")
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"message {cls.__name__} names no TOPIC")
        taken = next((other for other in MESSAGE_TYPES.values() if other.TOPIC == topic), None)
        if cls.__name__ in MESSAGE_TYPES or taken is not None:
            raise TypeError(f"message {cls.__name__}: its name or topic {topic!r} is already taken")
        MESSAGE_TYPES[cls.__name__] = cls

    def idempotency_key(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


# ---------------------------------------------------------------- ingestion

#: Where a document came from: a polled listing's kind, a local file, a Cloud Storage object
#: (:mod:`shared.contract.sources` lists them).
SourceKind = Literal[SOURCE_KINDS]  # type: ignore[valid-type]


class FeedPollRequested(Message):
    """Poll these feeds now (all registered feeds when ``feed_urls`` is empty)."""

    TOPIC: ClassVar[str] = "feed-poll-requested"
    request_id: str
    feed_urls: list[str] = []
    requested_at: datetime

    def idempotency_key(self) -> str:
        return f"poll/{self.request_id}"


def _fetched_v1(body: dict[str, Any]) -> dict[str, Any]:
    """Version 1 put a file's or object's name in ``title``; only a feed's title was its own."""
    if body.get("source") == "feed":
        return body
    return {**body, "title": "", "fallback_title": body.get("title", "")}


class DocumentFetched(Message):
    """Raw bytes of a document are in the blob store, ready to be cleaned.

    ``title`` is a title the source itself states (a feed item's), which wins over
    what the document says; ``fallback_title`` is only a name (a file's), used when
    the document states no title of its own.
    """

    TOPIC: ClassVar[str] = "document-fetched"
    # version 3: metadata (a version 2 body is one without any); version 4: revision (none before)
    SCHEMA_VERSION: ClassVar[int] = 4
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
        1: _fetched_v1, 2: dict, 3: dict}
    document_id: str
    source: SourceKind
    origin: str  # the feed or sitemap URL, the file's directory or the bucket
    guid: str  # the feed item's guid, the page URL, or the file path / object name
    url: str
    title: str = ""
    fallback_title: str = ""
    published: str | None = None  # ISO 8601 when known
    raw_ref: str
    content_type: str
    content_hash: str
    fetched_at: datetime
    # keys the source set (a feed item's author and categories), what a search's `where` matches
    metadata: dict[str, str | list[str]] = {}
    # the ledger's revision of the document (shared.ingest.processed_items): a delete of this
    # revision or a later one makes the message stale; None on a message from before revisions
    revision: int | None = None

    def idempotency_key(self) -> str:
        return f"{self.document_id}/{self.content_hash}/fetched"


class DocumentDeleted(Message):
    """A document left its feed or its file/object was deleted: drop its chunks.

    ``generation`` (version 2) is the Cloud Storage generation of the deleted object,
    so a late or redelivered delete never removes a newer generation's document.
    ``revision`` (version 3) is the ledger's revision deleted: a replayed delete never
    removes what a later ingest indexed.
    """

    TOPIC: ClassVar[str] = "document-deleted"
    SCHEMA_VERSION: ClassVar[int] = 3
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: dict, 2: dict}
    document_id: str
    reason: str
    requested_at: datetime
    generation: str | None = None
    revision: int | None = None

    def idempotency_key(self) -> str:
        return f"{self.document_id}/deleted/{self.requested_at.isoformat()}"


class DocumentCleaned(Message):
    """Main text extracted, metadata header prepended; the text is in the blob store."""

    TOPIC: ClassVar[str] = "document-cleaned"
    # version 2: metadata, passed on from DocumentFetched (a version 1 body is one without any);
    # version 3: revision, passed on too;
    # version 4: positions_ref, unread and unread_reason (an older body is a text without positions)
    SCHEMA_VERSION: ClassVar[int] = 4
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: dict, 2: dict, 3: dict}
    document_id: str
    source: SourceKind
    origin: str
    url: str
    title: str
    published: str | None = None
    clean_ref: str
    content_hash: str
    characters: int
    metadata: dict[str, str | list[str]] = {}
    revision: int | None = None
    # where each passage of the clean text stands (pages, slides, rows): a JSON blob, "" for none
    positions_ref: str = ""
    unread: int = 0  # pages (slides, rows) the reader could not read or cut at a bound
    unread_reason: str = ""

    def idempotency_key(self) -> str:
        return f"{self.document_id}/{self.content_hash}/cleaned"


class DocumentIndexed(Message):
    """The document's chunks are searchable (and its older chunks replaced)."""

    TOPIC: ClassVar[str] = "document-indexed"
    document_id: str
    content_hash: str
    chunk_ids: list[str]

    def idempotency_key(self) -> str:
        return f"{self.document_id}/{self.content_hash}/indexed"


# -------------------------------------------------------------------- query


class QuerySubmitted(Message):
    """A query record was created by the gateway; start the loop."""

    TOPIC: ClassVar[str] = "query-submitted"
    query_id: str

    def idempotency_key(self) -> str:
        return f"{self.query_id}/submitted"


def _hop_v1(body: dict[str, Any]) -> dict[str, Any]:
    """Version 1 of a hop (QueryTransformed, ContextsRetrieved) also carried what the record holds
    (the query and sub-queries, the context count); a consumer reads them from the record, so
    they are dropped. Kept while a version-1 message can still be delivered: Pub/Sub keeps an
    unacknowledged message 7 days (infra/pubsub.tf's message_retention_duration), so until the
    build after the first deploy of version 2 that is older than 7 days."""
    return {k: v for k, v in body.items() if k in ("query_id", "iteration")}


class QueryHop(Message):
    """A query stage recorded iteration ``iteration`` in the query's record: the next stage reads
    what it needs from there (claim check), so the hop carries nothing else.

    One class for every hop of the loop that routes on nothing: each hop's topic is its producing
    stage's (:func:`hop_message` makes the subclass named after the topic, once; the registry of
    stages makes one per stage that another stage follows). Typed messages remain where a hop
    routes on data (:class:`QueryGraded`'s decision) and for ingestion.
    """

    GENERIC: ClassVar[bool] = True
    SCHEMA_VERSION: ClassVar[int] = 2
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: _hop_v1}
    query_id: str
    iteration: int

    def idempotency_key(self) -> str:
        return f"{self.query_id}/{self.iteration}/{self.TOPIC}"


def hop_message(topic: str) -> type[QueryHop]:
    """The :class:`QueryHop` of ``topic``, made (and registered) the first time it is asked for; its
    name, the wire's ``type``, is the topic in CamelCase ("query-transformed": QueryTransformed)."""
    name = "".join(part.capitalize() for part in topic.replace("_", "-").split("-"))
    found = MESSAGE_TYPES.get(name)
    if found is not None:
        if not (isinstance(found, type) and issubclass(found, QueryHop) and found.TOPIC == topic):
            raise TypeError(f"hop topic {topic!r}: its name {name} is taken by another message")
        return found
    return type(name, (QueryHop,), {"__module__": __name__, "__doc__": f"A hop on {topic}.",
                                    "GENERIC": False, "TOPIC": topic, "__annotations__": {}})


#: The loop's two hops that existed as classes of their own (their old bodies read by ``_hop_v1``).
QueryTransformed = hop_message("query-transformed")
ContextsRetrieved = hop_message("contexts-retrieved")


def _graded_v1(body: dict[str, Any]) -> dict[str, Any]:
    """Version 1 also carried the grade's scores, which no consumer read; drop them."""
    dropped = {"score", "relevance", "completeness", "grounded", "should_refine"}
    return {k: v for k, v in body.items() if k not in dropped}


class QueryGraded(Message):
    """Iteration ``iteration`` was graded and the grader decided what happens next.

    The grade itself is in the query's record (claim check): the transformer
    and the synthesizer read it from there, so the message carries only the
    decision they route on.
    """

    TOPIC: ClassVar[str] = "query-graded"
    SCHEMA_VERSION: ClassVar[int] = 2
    READS_OLDER: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {1: _graded_v1}
    query_id: str
    iteration: int
    decision: Literal["refine", "accept", "abstain", "exhausted"]

    def idempotency_key(self) -> str:
        return f"{self.query_id}/{self.iteration}/graded"


class AnswerReady(Message):
    """The query ended; its record holds the outcome, answer and citations."""

    TOPIC: ClassVar[str] = "answer-ready"
    query_id: str
    outcome: str

    def idempotency_key(self) -> str:
        return f"{self.query_id}/answer"


def encode(message: Message) -> tuple[bytes, dict[str, str]]:
    """The wire form of ``message``: JSON body and string attributes."""
    attributes = {
        "type": type(message).__name__,
        "schema_version": str(message.SCHEMA_VERSION),
        "idempotency_key": message.idempotency_key(),
    }
    return message.model_dump_json().encode("utf-8"), attributes


def decode(data: bytes, attributes: dict[str, str]) -> Message:
    """Parse a message from the wire, refusing what this code cannot understand."""
    type_name = attributes.get("type")
    if not type_name:
        raise SchemaError("message has no 'type' attribute; it was not published by ragbus")
    cls = MESSAGE_TYPES.get(type_name)
    if cls is None:
        raise SchemaError(f"unknown message type {type_name!r}; known: {sorted(MESSAGE_TYPES)}")
    version = attributes.get("schema_version", "")
    upgrade = next((fn for old, fn in cls.READS_OLDER.items() if version == str(old)), None)
    if version != str(cls.SCHEMA_VERSION) and upgrade is None:
        readable = ", ".join(str(v) for v in sorted({*cls.READS_OLDER, cls.SCHEMA_VERSION}))
        raise SchemaError(
            f"{type_name} schema_version {version!r} is not supported (this build reads "
            f"version {readable}); upgrade the consumer or republish"
        )
    try:
        body: Any = json.loads(data.decode("utf-8"))
        if upgrade is not None and isinstance(body, dict):
            body = upgrade(body)
        return cls.model_validate(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{type_name} body is not UTF-8 JSON: {exc}") from exc
    except ValidationError as exc:
        raise SchemaError(f"{type_name} body does not match schema v{version}: {exc}") from exc
