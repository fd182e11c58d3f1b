"""Feedback a person gives on an answer: a rating (up or down), an optional comment, the citations
that were wrong and the answer that was expected, kept in the query record beside the answer.

Every front door (HTTP, MCP, CLI, chat, page) calls :func:`give_feedback`; the record keeps one
rating per client under ``feedback`` (a second rating from the same client replaces the first):

``feedback: [{client, rating, comment, wrong_citations, expected, at}]``

``client`` is a hash of whoever rated (see :func:`client_key`), never the address or name itself.
A comment and an expected answer are user text: bounded (:data:`MAX_COMMENT_CHARS`,
:data:`MAX_EXPECTED_CHARS`), stored as data, shown as text (the page sets ``textContent``),
never put into a prompt (no stage reads ``feedback``).

A rating is also a span (``gateway feedback``, with a ``feedback`` event, naming the query and its trace
id rather than inside that trace: a rating given an hour later would otherwise stretch the query's
duration in ``ragbus traces --slow`` and Cloud Trace)
and the metric ``ragbus.feedback`` (by rating and outcome).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, PermanentError
from shared.contract.text import shown, without_bidi_controls
from shared.observability import metrics, tracing
from shared.query.record import QueryRecord

RATINGS = ("up", "down")
#: A comment's and an expected answer's length, in characters; longer is refused, not cut.
MAX_COMMENT_CHARS = 2000
MAX_EXPECTED_CHARS = 2000
#: Ratings kept per query (one per client), and their bytes together (UTF-8 JSON); past either the oldest
#: ratings are dropped, so a record holding the loop's largest contents still fits one Firestore document
#: (1 MiB; tests/unit/test_query_record_size.py). One rating at its limits is about 16 KB: six always fit.
MAX_RATINGS_PER_QUERY = 100
MAX_FEEDBACK_BYTES = 96 * 1024
#: Ratings one client may give per minute (the gateway answers 429 with Retry-After past it).
RATINGS_PER_MINUTE = 30
#: A client id a caller names itself (``X-Ragbus-Client``): what it may hold.
MAX_CLIENT_ID_CHARS = 64
FIELDS = ("rating", "comment", "wrong_citations", "expected")


class QueryNotEnded(PermanentError):
    """The query has no answer yet to rate."""


@dataclass(frozen=True)
class Feedback:
    """One rating as a caller sent it, checked."""

    rating: str
    comment: str | None = None
    wrong_citations: tuple[int, ...] = ()
    expected: str | None = None

    def to_doc(self, client: str, at: str) -> dict[str, Any]:
        return {"client": client, "rating": self.rating, "comment": self.comment,
                "wrong_citations": list(self.wrong_citations), "expected": self.expected, "at": at}


def validate_feedback(body: Any) -> Feedback:
    """``{rating, comment?, wrong_citations?, expected?}`` as a :class:`Feedback`, or
    :class:`InvalidInput` naming what is wrong."""
    if not isinstance(body, dict):
        raise InvalidInput('send a JSON object like {"rating": "down", "comment": "why"}')
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(map(shown, unknown))}; send only {', '.join(FIELDS)}")
    rating = body.get("rating")
    if rating is None:
        raise InvalidInput('missing \'rating\'; send {"rating": "up"} or {"rating": "down"}')
    if rating not in RATINGS:
        raise InvalidInput(f"'rating' must be \"up\" or \"down\", got {shown(rating)}")
    wrong = body.get("wrong_citations")
    if wrong is None:
        wrong = []
    if not isinstance(wrong, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in wrong):
        raise InvalidInput(f"'wrong_citations' must be a list of citation numbers like [2], got {shown(wrong)}")
    if len(wrong) > MAX_RATINGS_PER_QUERY:
        raise InvalidInput(f"'wrong_citations' lists {len(wrong)} numbers; an answer has far fewer citations")
    return Feedback(
        rating=rating,
        comment=_user_text(body.get("comment"), "comment", MAX_COMMENT_CHARS),
        wrong_citations=tuple(sorted(set(wrong))),
        expected=_user_text(body.get("expected"), "expected", MAX_EXPECTED_CHARS),
    )


def _user_text(value: Any, field: str, limit: int) -> str | None:
    """Text a person typed: None when absent or blank; refused when too long or holding a control
    character other than a tab or newline (binary, or terminal escapes aimed at `ragbus trace`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"'{field}' must be text, got {shown(value)}")
    text = without_bidi_controls(value.replace("\r\n", "\n")).strip()
    if len(text) > limit:
        raise InvalidInput(f"'{field}' has {len(text)} characters, more than the limit of {limit}; shorten it")
    for position, char in enumerate(text):
        category = unicodedata.category(char)
        if char not in "\t\n" and category in ("Cc", "Cs"):
            raise InvalidInput(f"'{field}' contains the control character U+{ord(char):04X} at position "
                               f"{position}; send plain text (tabs and newlines are fine)")
    return text or None


def validate_client_id(value: Any) -> str | None:
    """A client id a caller names itself (``X-Ragbus-Client``): 1-64 printable ASCII characters."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_CLIENT_ID_CHARS or not all(
            33 <= ord(c) < 127 for c in value):
        raise InvalidInput(f"a client id is 1 to {MAX_CLIENT_ID_CHARS} printable ASCII characters without spaces, "
                           f"got {shown(value)}")
    return value


def client_key(client: str) -> str:
    """What the record keeps of a client: a hash, so no address or chosen name is stored."""
    return hashlib.sha256(client.encode("utf-8")).hexdigest()[:16]


def strip_completion_prefix(query_id: str) -> str:
    """The query id of an id ``/v1/chat/completions`` returned (``chatcmpl-<query id>``), else as given."""
    return query_id.removeprefix("chatcmpl-")


def give_feedback(deps: Deps, query_id: str, feedback: Feedback, *, client: str) -> tuple[QueryRecord, bool]:
    """Keep ``feedback`` from ``client`` with the query's answer (replacing that client's earlier rating);
    the record as stored after it, and whether an earlier rating of that client was replaced.

    Raises :class:`~shared.query.api.QueryNotFound` for an unknown id, :class:`QueryNotEnded` while
    the query has no answer yet, and :class:`InvalidInput` for a wrong-citation number the answer
    does not have.
    """
    from shared.query.api import QueryNotFound, get_query

    record = get_query(deps, query_id)  # ends an overdue query first, so it can be rated
    if record is None:
        raise QueryNotFound(f"no query with id {shown(query_id)}; rate a query an answer returned")
    key = client_key(client)
    checked: dict[str, Any] = {}

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        checked.clear()
        stored = None if doc is None else QueryRecord.from_doc(doc)
        if stored is None or stored.expired(deps.clock.now()):
            checked["missing"] = True
            return None
        if not stored.ended:
            checked["pending"] = stored.status
            return None
        numbers = {c.get("id") for c in stored.citations}
        unknown = [n for n in feedback.wrong_citations if n not in numbers]
        if unknown:
            checked["unknown"] = unknown
            return None
        at = deps.clock.now().isoformat()
        kept = [entry for entry in stored.feedback if entry.get("client") != key]
        checked["replaced"] = len(kept) != len(stored.feedback)
        stored.feedback = within_budget(kept + [feedback.to_doc(key, at)])
        return stored.to_doc()

    saved = deps.state.update(state_collections.QUERIES, record.id, change)
    if checked.get("missing"):
        raise QueryNotFound(f"no query with id {shown(query_id)}; rate a query an answer returned")
    if "pending" in checked:
        raise QueryNotEnded(f"query {record.id} is still {checked['pending']}; rate its answer once it has ended")
    if "unknown" in checked:
        numbers = sorted(c.get("id") for c in record.citations)
        raise InvalidInput(f"'wrong_citations' names {', '.join(map(str, checked['unknown']))}, which the answer "
                           f"does not cite (its citations: {', '.join(map(str, numbers)) or 'none'})")
    assert saved is not None
    stored = QueryRecord.from_doc(saved)
    replaced = bool(checked.get("replaced"))
    _observe(stored, feedback, replaced=replaced)
    return stored, replaced


def within_budget(ratings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest ``ratings`` within :data:`MAX_RATINGS_PER_QUERY` and :data:`MAX_FEEDBACK_BYTES`."""
    kept = ratings[-MAX_RATINGS_PER_QUERY:]
    sizes = [len(json.dumps(entry, ensure_ascii=False).encode("utf-8")) for entry in kept]
    while len(kept) > 1 and sum(sizes) > MAX_FEEDBACK_BYTES:
        kept, sizes = kept[1:], sizes[1:]
    return kept


def _observe(record: QueryRecord, feedback: Feedback, *, replaced: bool) -> None:
    """The rating as a span with a ``feedback`` event, linked to the query's trace, and as a metric."""
    outcome = record.outcome or record.status
    with tracing.tracer().start_as_current_span(
        "gateway feedback",
        # rag.query_id is left off: a span carrying it is counted as part of the query's own trace
        attributes={"rag.feedback_for": record.id, "rag.feedback_trace_id": record.trace_id or "",
                    "rag.outcome": outcome, "rag.feedback.rating": feedback.rating},
    ) as span:
        # the comment stays in the record only: spans leave for Cloud Trace
        span.add_event("feedback", {"rating": feedback.rating, "replaced": replaced,
                                    "has_comment": feedback.comment is not None,
                                    "wrong_citations": list(feedback.wrong_citations),
                                    "has_expected": feedback.expected is not None})
    metrics.feedback_given(feedback.rating, outcome)


def feedback_counts(record: QueryRecord) -> dict[str, int]:
    """How many clients rated the answer up and down."""
    counts = {rating: 0 for rating in RATINGS}
    for entry in record.feedback:
        if entry.get("rating") in counts:
            counts[entry["rating"]] += 1
    return counts


def latest_feedback(record: QueryRecord) -> dict[str, Any] | None:
    """The most recent rating of the answer (what `ragbus trace` and the eval export show)."""
    return record.feedback[-1] if record.feedback else None
