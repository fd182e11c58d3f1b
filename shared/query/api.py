"""The query operations every front door shares: HTTP gateway, CLI and MCP.

They take a :class:`~shared.contract.deps.Deps` and plain values, validate what a
user sent, and read or write the query record whose shape
:mod:`shared.query.record` documents (typed as :class:`~shared.query.record.QueryRecord`). Nothing here knows about
HTTP, ASGI or MCP, so each front door only parses its own protocol and calls
these functions; a bad input raises :class:`~shared.contract.errors.InvalidInput` whose
message says what was wrong and what to send instead.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import unicodedata
import uuid
from typing import Any

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, PermanentError, RetryableError
from shared.contract.filters import FilterError, Filters, firestore_prefilter_refusal
from shared.contract.messages import QuerySubmitted
from shared.contract.ports import Doc, embed_queries
from shared.contract.text import fold_width, json_kind, shown, without_bidi_controls
from shared.observability import tracing
from shared.query.conversation import (
    ConversationNotFound as ConversationNotFound,  # the front doors' name
)
from shared.query.conversation import (
    conversation_turns,
    history_doc,
    join_conversation,
    validate_conversation_id,
    validate_history,
)
from shared.query.plain_answer import plain_answer_text
from shared.query.record import QueryRecord
from shared.query.state import expire_if_overdue, fail_query, read_record

log = logging.getLogger("ragbus.gateway")

TOP_K_RANGE = (1, 50)
MAX_ITERATIONS_RANGE = (0, 5)
# A query may be given more time than the default, but not unbounded time: the
# record's deadline is what guarantees that every reader stops waiting.
TIMEOUT_RANGE_S = (1.0, 600.0)
# Polling the state store: start quick so a fast answer returns promptly, then
# back off so a long wait costs a few reads a second, not hundreds.
POLL_MIN_S = 0.02
POLL_MAX_S = 0.05


class QueryNotFound(PermanentError, LookupError):
    """No query record has this id."""


# ------------------------------------------------------------------ input


def validate_query_text(query: Any, *, max_chars: int, field: str = "query") -> str:
    """The query text as it will be stored, or :class:`InvalidInput` saying what is wrong.

    Windows line endings are normalised (a pasted question often has them); any
    other control character is refused rather than silently dropped, because it
    usually means the client sent binary or mis-encoded text.
    """
    if not isinstance(query, str):
        raise InvalidInput(
            f"'{field}' must be a string, got {json_kind(query)}; "
            f'send the question as text, e.g. {{"{field}": "What is BM25?"}}'
        )
    # "ｂｍ２５" is searched as "bm25"; a bidirectional override would show the question reordered
    text = without_bidi_controls(fold_width(query.replace("\r\n", "\n"))).strip()
    if not text:
        raise InvalidInput(f"'{field}' is empty; send a question of 1 to {max_chars} characters")
    if len(text) > max_chars:
        raise InvalidInput(
            f"'{field}' has {len(text)} characters, more than the limit of {max_chars}; "
            "shorten the question (ask about one thing at a time)"
        )
    for position, char in enumerate(text):
        if char in "\t\n":
            continue
        category = unicodedata.category(char)
        if category == "Cc":
            raise InvalidInput(
                f"'{field}' contains the control character U+{ord(char):04X} at position "
                f"{position}; send plain text (tabs and newlines are fine)"
            )
        if category == "Cs":
            raise InvalidInput(
                f"'{field}' contains an unpaired surrogate U+{ord(char):04X} at position "
                f"{position}; send valid UTF-8 text"
            )
    if not any(unicodedata.category(char)[0] in "LN" for char in text):
        # "?!?!...;;;" has nothing to search for or grade; the loop would only guess at it
        raise InvalidInput(f"'{field}' has no letters or digits ({text[:40]!r}); ask the question in words")
    return text


def validate_int(value: Any, field: str, bounds: tuple[int, int]) -> int:
    """An integer within ``bounds`` (inclusive), or :class:`InvalidInput`."""
    low, high = bounds
    # bool is an int in Python, but `"top_k": true` is a client bug worth naming.
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise InvalidInput(
            f"'{field}' must be a whole number from {low} to {high}, got {json_kind(value)} {shown(value)}"
        )
    if not low <= value <= high:
        raise InvalidInput(f"'{field}' is {shown(value)}; send a whole number from {low} to {high}")
    return int(value)


def validate_seconds(value: Any, field: str, bounds: tuple[float, float]) -> float:
    """A finite number of seconds within ``bounds`` (inclusive), or :class:`InvalidInput`."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(
            f"'{field}' must be a number of seconds from {low:g} to {high:g}, got "
            f"{json_kind(value)} {shown(value)}"
        )
    if not low <= value <= high:
        raise InvalidInput(f"'{field}' is {value:g}; send a number of seconds from {low:g} to {high:g}")
    return float(value)


# ------------------------------------------------------------- operations


def submit_query(
    deps: Deps,
    query: Any,
    *,
    top_k: Any = None,
    max_iterations: Any = None,
    timeout_s: Any = None,
    field: str = "query",
    filters: Any = None,
    conversation_id: Any = None,
    history: Any = None,
) -> QueryRecord:
    """Create a query record and start the loop; return the record as created.
    ``field`` names the question in error messages (what the caller sent it as).

    The query is a turn of ``conversation_id`` (a new conversation when None; the record's
    ``conversation_id`` is always set). ``history`` is the conversation so far for a caller that
    holds it itself (``[{"question", "answer"}]``, oldest first, bounded by
    ``RAGBUS_CONVERSATION_MAX_TURNS``/``_MAX_CHARS``); a stored conversation's turns win over it.

    Raises :class:`InvalidInput` for bad arguments, :class:`ConversationNotFound` for an unknown
    ``conversation_id``, and
    :class:`~shared.contract.errors.RetryableError` when the bus cannot take the
    message (the record is then ended as failed, so nobody waits on it).
    """
    settings = deps.settings
    text = validate_query_text(query, max_chars=settings.max_query_chars, field=field)
    top_k = settings.top_k if top_k is None else validate_int(top_k, "top_k", TOP_K_RANGE)
    max_iterations = (settings.max_iterations if max_iterations is None
                      else validate_int(max_iterations, "max_iterations", MAX_ITERATIONS_RANGE))
    timeout_s = (settings.query_timeout_s if timeout_s is None
                 else validate_seconds(timeout_s, "timeout_s", TIMEOUT_RANGE_S))
    search_filters = validate_filters(filters, deps)
    continued = validate_conversation_id(conversation_id)
    earlier_turns = validate_history(
        history, max_turns=settings.conversation_max_turns, max_chars=settings.conversation_max_chars
    )
    query_id = uuid.uuid4().hex
    # The query's trace starts here: the record keeps its id, and the
    # QuerySubmitted PRODUCER span (and so every stage after it) is a child.
    with tracing.tracer().start_as_current_span(
        "gateway submit",
        attributes={"rag.query_id": query_id, "rag.top_k": top_k, "rag.max_iterations": max_iterations,
                    **({"rag.filters": search_filters.key} if search_filters is not None else {})},
    ) as span:
        now = deps.clock.now()
        conversation, turns_before = join_conversation(
            deps.state, continued, query_id, now=now, retention_days=settings.query_ttl_days
        )
        span.set_attribute("rag.conversation_id", conversation)
        span.set_attribute("rag.conversation_turn", turns_before + 1)
        record = QueryRecord.new(
            query_id,
            text,
            top_k=top_k,
            max_iterations=max_iterations,
            max_model_calls=settings.max_model_calls,
            now=now,
            timeout_s=timeout_s,
            trace_id=tracing.current_trace_id(),
            retention_days=settings.query_ttl_days,
        )
        if search_filters is not None:
            record.filters = search_filters.to_dict()
        record.conversation_id = conversation
        if continued is None and earlier_turns:
            record.history = history_doc(earlier_turns)
        # A question with no earlier turn stands alone as typed; a follow-up's is the transformer's.
        record.standalone_question = text if turns_before == 0 and record.history is None else None
        if not deps.state.create(state_collections.QUERIES, query_id, record.to_doc()):
            # A random 128-bit id colliding means something else is badly wrong.
            raise RetryableError(f"query id {query_id} already exists; submit the query again")
        _start_loop(deps, query_id)
    log.info(
        "query %s submitted (%d chars, top_k=%d, max_iterations=%d)",
        query_id, len(text), top_k, max_iterations,
    )
    return record


def _start_loop(deps: Deps, query_id: str) -> None:
    """Publish the stored query's ``QuerySubmitted``; when the bus refuses it, end the query as failed
    (nobody waits on it) and raise :class:`RetryableError`."""
    try:
        deps.publisher.publish(QuerySubmitted(query_id=query_id))
    except Exception as exc:
        reason = f"could not start the query loop: {exc}"
        fail_query(deps.state, query_id, reason, deps.clock.now())
        log.error("query %s: publish failed: %s", query_id, exc)
        if isinstance(exc, RetryableError):
            raise
        raise RetryableError(f"the bus did not accept the query ({exc}); try again shortly") from exc


def get_query(deps: Deps, query_id: str) -> QueryRecord | None:
    """The query's record, or None (never stored, or past its ``expire_at``); a query past its
    deadline is ended as timed out first.

    Reading is what enforces the deadline, so no reader waits on a hung query
    even when every stage has died.
    """
    record = read_record(deps.state, query_id)
    now = deps.clock.now()
    if record is None or record.expired(now):
        return None  # past its expire_at: gone, whether or not the sweep or the TTL deleted it yet
    if record.ended:
        return record
    if record.deadline_passed(now):
        expire_if_overdue(deps.state, query_id, now)
        record = read_record(deps.state, query_id)
    return record


def get_conversation(deps: Deps, conversation_id: Any) -> Doc:
    """The conversation's turns still stored, oldest first:
    ``{"conversation_id", "turns": [{"query_id", "question", "standalone_question", "status",
    "outcome", "answer", "citations", "created_at"}]}``. Raises :class:`ConversationNotFound`."""
    conversation = validate_conversation_id(conversation_id)
    if conversation is None:
        raise InvalidInput("'conversation_id' is missing; send the id an earlier answer returned")
    records = conversation_turns(deps.state, conversation, deps.clock.now())
    return {
        "conversation_id": conversation,
        "turns": [
            {
                "query_id": r.id,
                "question": r.original_query,
                "standalone_question": r.standalone_question,
                "status": r.status,
                "outcome": r.outcome,
                "answer": r.answer,
                "citations": list(r.citations),
                "created_at": r.created_at,
            }
            for r in records
        ],
    }


def wait_for_query(deps: Deps, query_id: str, wait_s: float) -> QueryRecord:
    """Poll the record until it ends or ``wait_s`` elapses; return it as last read.

    Uses ``deps.clock`` to sleep, so a fake clock makes waiting instant in tests.
    Raises :class:`QueryNotFound` for an unknown id.
    """
    clock = deps.clock
    give_up_at = clock.monotonic() + max(0.0, wait_s)
    interval = POLL_MIN_S
    while True:
        record = get_query(deps, query_id)
        if record is None:
            raise QueryNotFound(f"no query with id {shown(query_id)}; submit one first")
        if record.ended:
            return record
        remaining = give_up_at - clock.monotonic()
        if remaining <= 0:
            return record
        clock.sleep(min(interval, remaining))
        interval = min(interval * 2, POLL_MAX_S)


async def wait_for_query_async(deps: Deps, query_id: str, wait_s: float,
                               stop: threading.Event | None = None) -> QueryRecord:
    """:func:`wait_for_query` for an event loop: reads in a worker thread, sleeps without blocking.

    Measured in wall time (not ``deps.clock``) because it bounds how long an
    HTTP request stays open, whatever clock the system runs on. Once ``stop`` is set (the
    server is stopping) it returns the record as it is, ended or not, within one poll.
    """
    import anyio

    give_up_at = time.monotonic() + max(0.0, wait_s)
    interval = POLL_MIN_S
    while True:
        record = await anyio.to_thread.run_sync(get_query, deps, query_id)
        if record is None:
            raise QueryNotFound(f"no query with id {shown(query_id)}; submit one first")
        if record.ended:
            return record
        remaining = give_up_at - time.monotonic()
        if remaining <= 0 or stop is not None and stop.is_set():
            return record
        await anyio.sleep(min(interval, remaining))
        interval = min(interval * 2, POLL_MAX_S)


def validate_filters(filters: Any, deps: Deps) -> Filters | None:
    """``filters`` as a :class:`Filters` (a ``Filters``, or the ``filters`` object of the API:
    source, since, until, kind, where), relative times resolved against ``deps.clock``; None when
    empty. Raises :class:`InvalidInput` naming the field at fault, or the combination the
    deployed Firestore index cannot pre-filter (one array condition: source or one metadata key)."""
    if filters is None:
        return None
    if not isinstance(filters, Filters):
        try:
            filters = Filters.from_dict(filters, now=deps.clock.now())
        except FilterError as exc:  # "filters must be an object", "filters.since must be a string": named once
            message = str(exc)
            raise InvalidInput(message if message.startswith("filters") else f"filters: {message}") from None
    if deps.settings.runtime == "gcp" and deps.settings.index_backend == "firestore":
        # refused here, as the caller's error, not later in the retriever as a failed query
        refusal = firestore_prefilter_refusal(filters)
        if refusal is not None:
            raise InvalidInput(f"filters: {refusal}")
    return None if filters.is_empty else filters


def search_documents(
    deps: Deps, text: Any, k: Any = None, *, field: str = "q", filters: Any = None
) -> list[dict[str, Any]]:
    """Retrieval only: the ``k`` chunks nearest ``text`` (hybrid search) among those ``filters``
    admits, best first. ``field`` names the text in error messages (what the caller sent it as)."""
    query = validate_query_text(text, max_chars=deps.settings.max_query_chars, field=field)
    k = deps.settings.top_k if k is None else validate_int(k, "k", TOP_K_RANGE)
    search_filters = validate_filters(filters, deps)
    vector = embed_queries(deps.embedder, [query])[0]
    if search_filters is None:
        results = deps.index.search(query, vector, k)
    else:
        results = deps.index.search(query, vector, k, filters=search_filters)
    return [
        {
            "rank": rank,
            "score": float(hit.score),
            "text": shown_passage(hit.chunk.text, hit.chunk.url),
            "document_id": hit.chunk.document_id,
            "chunk_id": hit.chunk.chunk_id,
            "title": hit.chunk.title,
            "url": hit.chunk.url,
            "published": hit.chunk.published,
            **({"position": hit.chunk.position} if hit.chunk.position else {}),
        }
        for rank, hit in enumerate(results, start=1)
    ]


def shown_passage(text: str, url: str | None) -> str:
    """A retrieved chunk's text as search results show it: the clean text a reader of an answer sees
    (:func:`~shared.query.plain_answer.plain_answer_text`: no tag, image, or link but to the chunk's own
    source), its line breaks (the Title/Published/Source header's too) kept."""
    return plain_answer_text(text, [url] if url else (), lines=True)


# ------------------------------------------------------------ summaries


def answer_summary(record: QueryRecord) -> Doc:
    """What a caller asking a question needs: the answer, its citations, how it ended."""
    return {
        "id": record.id,
        "status": record.status,
        "outcome": record.outcome,
        "answer": record.answer,
        "citations": list(record.citations),
        "iterations": len(record.iterations),
        "error": record.error,
    }


def contexts_summary(record: QueryRecord) -> Doc:
    """What a caller searching needs: the best iteration's contexts and grade."""
    best = record.best_entry()
    if best is None:
        kept: Doc = {"best_iteration": None, "query": record.current_query, "added_terms": None, "grade": None,
                     "contexts": []}
    else:
        doc = best.to_doc()
        contexts = [{**c, "text": shown_passage(c["text"], c.get("url"))} if "text" in c else c
                    for c in doc["contexts"]]
        kept = {"best_iteration": best.iteration, "query": doc["query"], "added_terms": best.added_terms,
                "grade": doc["grade"], "contexts": contexts}
    return {
        "id": record.id,
        "status": record.status,
        "outcome": record.outcome,
        "iterations": len(record.iterations),
        **kept,
        "error": record.error,
    }
