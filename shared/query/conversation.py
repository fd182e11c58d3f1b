"""Conversations: which queries are turns of one, and the history a follow-up is read with.

A conversation is one small document in the ``conversations`` collection:
``{conversation_id, created_at, updated_at, expire_at, turns: [query_id, ...]}``, its
turns oldest first. The questions and answers stay in the query records (a claim check:
messages carry only the query id), so the transformer of any runtime reads a follow-up's
history from the same store the front doors write, and no document grows with the text of
a conversation: the conversation holds ids (at most :data:`MAX_TURNS`), a query record at
most ``RAGBUS_CONVERSATION_MAX_CHARS`` of history a caller sent with it.

A caller that holds the conversation itself (an OpenAI-style client sends every message
each time) passes it as ``history``; when a query names a stored conversation too, the
stored turns win.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.contract import state_collections
from shared.contract.errors import InvalidInput, PermanentError
from shared.contract.ports import ConversationTurn, Doc, StateStore
from shared.contract.text import json_kind
from shared.query.reading.followup import standalone_question
from shared.query.record import QueryRecord, later, past_expiry
from shared.query.state import expire_if_overdue

__all__ = [
    "ConversationNotFound",
    "ConversationTurn",
    "History",
    "MAX_TURNS",
    "bound_history",
    "conversation_turns",
    "history_doc",
    "join_conversation",
    "read_history",
    "validate_conversation_id",
    "validate_history",
]

#: Turns one conversation may hold: its document lists their ids (33 bytes each in
#: Firestore, far below the 1 MiB limit) and reading it whole stays a few batched reads.
MAX_TURNS = 500
_ID = re.compile(r"[0-9a-f]{32}")
ANSWERED = frozenset({"answered", "answered_with_caveat"})
_CUT = " …"


class ConversationNotFound(PermanentError, LookupError):
    """No conversation has this id (never started, or expired with its queries)."""


@dataclass(frozen=True)
class History:
    """The earlier turns a query is read with (bounded, oldest first), and what could not be read."""

    turns: tuple[ConversationTurn, ...] = ()
    note: str | None = None


# ------------------------------------------------------------------ input


def validate_conversation_id(value: Any) -> str | None:
    """A conversation id as sent (None: start a new conversation), or an error naming the problem.

    An id this system could not have issued is reported as not found, as an unknown one is."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(
            f"'conversation_id' must be a string (the id an earlier answer returned), got {json_kind(value)}"
        )
    if not _ID.fullmatch(value):
        raise ConversationNotFound(
            f"no conversation with id {value[:80]!r}; send the conversation_id an earlier answer "
            "returned, or none to start a new conversation"
        )
    return value


def _text(value: Any, field: str, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"'{field}' must be a string, got {json_kind(value)}")
    text = value.replace("\r\n", "\n").strip()
    if required and not text:
        raise InvalidInput(f"'{field}' is empty; every earlier turn needs its question")
    for position, char in enumerate(text):
        if char not in "\t\n" and unicodedata.category(char) in ("Cc", "Cs"):
            raise InvalidInput(
                f"'{field}' contains the character U+{ord(char):04X} at position {position}; send plain text"
            )
    return text


def validate_history(history: Any, *, max_turns: int, max_chars: int) -> list[ConversationTurn]:
    """The earlier turns a caller sent (``[{"question": str, "answer": str}, ...]``, oldest first),
    checked and bounded by :func:`bound_history`; ``[]`` for None.

    Only the turns the bounds keep are checked, so a long chat's old turns cost nothing."""
    if history is None:
        return []
    if not isinstance(history, list):
        raise InvalidInput(
            f"'history' must be a list of {{\"question\", \"answer\"}} objects, oldest first, got "
            f"{json_kind(history)}"
        )
    first = max(0, len(history) - max_turns)
    turns: list[ConversationTurn] = []
    for position in range(first, len(history)):
        item = history[position]
        if not isinstance(item, dict):
            raise InvalidInput(
                f"'history[{position}]' must be an object with 'question' and 'answer', got {json_kind(item)}"
            )
        unknown = sorted(set(item) - {"question", "answer"})
        if unknown:
            raise InvalidInput(f"'history[{position}]' has unknown field(s) {', '.join(unknown)}; "
                               "send 'question' and 'answer' only")
        turns.append(ConversationTurn(
            question=_text(item.get("question"), f"history[{position}].question", required=True),
            answer=_text(item.get("answer"), f"history[{position}].answer", required=False),
        ))
    return bound_history(turns, max_turns=max_turns, max_chars=max_chars)


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word where one is near."""
    if len(text) <= limit:
        return text
    if limit <= len(_CUT):
        return text[:limit]
    head = text[: limit - len(_CUT)]
    space = head.rfind(" ")
    if space > len(head) * 0.6:
        head = head[:space]
    return head.rstrip() + _CUT


def bound_history(
    turns: Sequence[ConversationTurn], *, max_turns: int, max_chars: int
) -> list[ConversationTurn]:
    """The newest turns, at most ``max_turns`` and ``max_chars`` characters of questions and answers.

    The newest turn is the one a follow-up leans on, so it is always kept: cut to fit when it is
    alone over the budget (its question first, its answer with what is left). Older turns are
    kept whole while they fit, then dropped."""
    kept: list[ConversationTurn] = []
    left = max_chars
    for turn in reversed(list(turns)[-max_turns:] if max_turns > 0 else []):
        size = len(turn.question) + len(turn.answer)
        if size <= left:
            kept.append(turn)
            left -= size
            continue
        if not kept:
            question = _cut(turn.question, max_chars)
            kept.append(ConversationTurn(question=question, answer=_cut(turn.answer, max_chars - len(question))
                                         if max_chars > len(question) else ""))
        break
    kept.reverse()
    return kept


# ------------------------------------------------------------ the document


def join_conversation(
    state: StateStore, conversation_id: str | None, query_id: str, *, now: datetime, retention_days: int
) -> tuple[str, int]:
    """Add ``query_id`` as the newest turn of ``conversation_id`` (a new conversation for None).

    Returns the conversation's id and how many turns it had before this one. The conversation
    expires with its newest query (``expire_at``, Firestore's TTL in gcp). Raises
    :class:`ConversationNotFound` for an id that does not exist and :class:`InvalidInput` for one
    already holding :data:`MAX_TURNS` turns.
    """
    at = now.isoformat()
    expire_at = later(now, timedelta(days=retention_days)).isoformat()
    if conversation_id is None:
        conversation_id = uuid.uuid4().hex
        doc = {"conversation_id": conversation_id, "created_at": at, "updated_at": at, "expire_at": expire_at,
               "turns": [query_id]}
        if not state.create(state_collections.CONVERSATIONS, conversation_id, doc):
            raise PermanentError(f"conversation id {conversation_id} already exists; submit the query again")
        return conversation_id, 0

    seen: dict[str, Any] = {}

    def append(doc: Doc | None) -> Doc | None:
        seen.clear()
        if doc is None:
            seen["missing"] = True
            return None
        if _expired(doc, now):
            seen["missing"] = True  # past its expire_at: gone, whether or not a sweep or TTL deleted it yet
            return None
        turns = list(doc.get("turns") or [])
        seen["before"] = len(turns)
        if query_id in turns:
            return None  # the same submission again: already a turn
        if len(turns) >= MAX_TURNS:
            seen["full"] = True
            return None
        return {**doc, "turns": [*turns, query_id], "updated_at": at, "expire_at": expire_at}

    state.update(state_collections.CONVERSATIONS, conversation_id, append)
    if seen.get("missing"):
        raise ConversationNotFound(
            f"no conversation with id {conversation_id!r} (it never existed or has expired); "
            "send no conversation_id to start a new one"
        )
    if seen.get("full"):
        raise InvalidInput(
            f"conversation {conversation_id} already has {MAX_TURNS} turns, the most one may hold; "
            "send no conversation_id to start a new one"
        )
    return conversation_id, int(seen.get("before", 0))


def _expired(doc: Doc, now: datetime) -> bool:
    """Past its ``expire_at``: Firestore's TTL deletes such a document within a day or so, the embedded
    runtime's sweep within the hour; until then it is refused as if gone."""
    return past_expiry(doc.get("expire_at"), now)


def conversation_turns(state: StateStore, conversation_id: str, now: datetime) -> list[QueryRecord]:
    """The records of the conversation's turns that are still stored, oldest first; a turn past its
    deadline is ended as timed out first (as reading one query does). Raises
    :class:`ConversationNotFound`."""
    doc = state.get(state_collections.CONVERSATIONS, conversation_id)
    if doc is None or _expired(doc, now):
        raise ConversationNotFound(
            f"no conversation with id {conversation_id!r} (it never existed or has expired)"
        )
    ids = [str(i) for i in doc.get("turns") or []]
    stored = state.get_many(state_collections.QUERIES, ids) if ids else {}
    records: list[QueryRecord] = []
    for query_id in ids:
        if query_id not in stored:
            continue  # expired before the conversation, or never written (its submission failed)
        record = QueryRecord.from_doc(stored[query_id])
        if not record.ended and record.deadline_passed(now):
            record = expire_if_overdue(state, query_id, now) or record
        records.append(record)
    return records


def read_history(state: StateStore, record: QueryRecord, *, max_turns: int, max_chars: int) -> History:
    """The earlier turns ``record`` is read with, bounded, oldest first.

    From the stored conversation when the query is a turn of one that had turns before it
    (their standalone questions, and their answers when they answered), else from the history
    the caller sent. A turn that failed, timed out or abstained still carries its question (the
    subject a follow-up leans on) with no answer; a turn no longer stored is left out and named in
    the note, as is a conversation that no longer exists."""
    supplied = _as_stored(record.history)
    if not record.conversation_id:
        return History(tuple(bound_history(supplied, max_turns=max_turns, max_chars=max_chars)))
    doc = state.get(state_collections.CONVERSATIONS, record.conversation_id)
    if doc is None:
        return History(tuple(bound_history(supplied, max_turns=max_turns, max_chars=max_chars)),
                       note=f"conversation {record.conversation_id} no longer exists; its earlier turns were not read")
    ids = [str(i) for i in doc.get("turns") or []]
    earlier = ids[: ids.index(record.id)] if record.id in ids else []
    if not earlier:
        return History(tuple(bound_history(supplied, max_turns=max_turns, max_chars=max_chars)))
    wanted = earlier[-max_turns:]
    stored = state.get_many(state_collections.QUERIES, wanted)
    turns: list[ConversationTurn] = []
    if wanted[0] == ids[0] and ids[0] in stored:
        first = QueryRecord.from_doc(stored[ids[0]])  # the turn that started it may carry a caller's history
        turns.extend(_as_stored(first.history))
    missing = 0
    for query_id in wanted:
        if query_id not in stored:
            missing += 1
            continue
        turn = QueryRecord.from_doc(stored[query_id])
        answer = turn.answer if turn.outcome in ANSWERED and turn.answer else ""
        turns.append(ConversationTurn(question=turn.question, answer=answer))
    note = f"{missing} earlier turn(s) of the conversation are no longer stored" if missing else None
    return History(tuple(bound_history(turns, max_turns=max_turns, max_chars=max_chars)), note=note)


def _as_stored(history: list[dict[str, str]] | None) -> list[ConversationTurn]:
    """A caller's history as stored turns read: each question as it stands on its own (the offline rule
    with the turns before it), as a stored turn keeps its standalone question; so a chat client that
    sends the whole conversation is read as a conversation kept here is ("Which tool picks the ids in
    those ranges?" leans on the standalone form of "And which one for ordinary user accounts?")."""
    turns: list[ConversationTurn] = []
    for turn in history or []:
        if isinstance(turn, dict) and turn.get("question"):
            question = str(turn.get("question") or "")
            standing = standalone_question(question, turns).question if turns else question
            turns.append(ConversationTurn(standing, str(turn.get("answer") or "")))
    return turns


def history_doc(turns: Sequence[ConversationTurn]) -> list[dict[str, str]]:
    """Turns as a query record stores them."""
    return [{"question": t.question, "answer": t.answer} for t in turns]
