"""The two ways out of a dead-letter queue: redrive (retry) a dead letter, or purge it.

A retry publishes the kept message again to the topic it came from, as it was (its type,
schema version and idempotency key), and forgets the dead letter: the stages handle it as
any message, so work whose cause was fixed meanwhile (a cleaner that now reads the page, a
model server back up) is really done again, and a message that fails again becomes a new
dead letter with its new reason. Every reader of the topic receives it, as with Pub/Sub's
own redrive; handlers are idempotent, so the readers that had handled it change nothing.

A purge forgets the dead letter. A document it was about is marked dropped at that content
hash on its ledger record, so ``ragbus ingest``/``poll`` neither wait for it nor report it
failed again; a changed document is tried afresh.

One letter that cannot be redriven (its kept body was cut, or its type is unknown to this
code) is reported alone; the others are retried all the same.

Retries running at once (two `POST /v1/dead-letters/retry`, two `ragbus dead-letters retry
--all`) each take a letter before publishing it (a lease on its record, one transaction): one of
them retries it, the others leave it, so a letter is published again once, not once a request.
A retry that dies between taking and publishing leaves the letter to the next retry once its
lease ran out.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, SchemaError
from shared.contract.messages import Message, decode
from shared.contract.ports import StateStore
from shared.contract.redaction import redact
from shared.contract.text import shown

log = logging.getLogger("ragbus.dead_letters")

#: how much of a message body a dead letter keeps (shared.runtime.dispatch.keep_dead_letter)
KEPT_BODY_CHARS = 4000


#: how long a retry holds a dead letter it took (publishing it takes well under a second)
RETRY_LEASE_S = 120.0


@dataclass
class Redrive:
    """What a retry or purge did: the dead letters it handled, and those it could not, with why."""

    done: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    #: what the retried messages were about (document or query ids): whose new dead letters are this retry's
    subjects: set[str] = field(default_factory=set)

    def to_doc(self, verb: str) -> dict[str, Any]:
        return {verb: self.done, "refused": [{"id": k, "error": v} for k, v in self.refused.items()]}


def letters(state: StateStore) -> list[dict[str, Any]]:
    """Every dead letter, oldest first, each with its ``id`` (its key in the state store)."""
    kept = [{"id": letter_key(d), **d} for d in state.list(state_collections.DEAD_LETTERS)]
    return sorted(kept, key=lambda d: (d.get("at") or "", d["id"]))


def as_shown(kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kept`` as a person or client is shown it: a message's data (kept whole, since a retry
    publishes it again) with its credentials redacted, as its reason already is. A poll of
    ``https://host/feed?feed_token=...`` that failed keeps the token in its data."""
    return [{**d, "data": redact(d["data"])} if isinstance(d.get("data"), str) else d for d in kept]


def letter_key(letter: dict[str, Any]) -> str:
    """The key a dead letter is kept under (as shared.runtime.dispatch.keep_dead_letter makes it)."""
    return f"{letter.get('subscription')}:{letter.get('message_id') or letter.get('idempotency_key') or ''}"


def short_id(letter: dict[str, Any]) -> str:
    """What a person types: the message id's first 12 characters (the id itself when there is none)."""
    message_id = str(letter.get("message_id") or "")
    return message_id[:12] if message_id else str(letter.get("id"))


def select(state: StateStore, given: str | None, *, every: bool) -> list[dict[str, Any]]:
    """The dead letters ``given`` names (a whole id, or a unique prefix of a message id), or all of them.

    Raises :class:`InvalidInput` for neither or both, an id that matches none, or a prefix that
    matches several."""
    if every == bool(given):
        raise InvalidInput("give one dead letter's id (as `ragbus dead-letters` shows it) or --all, not "
                           + ("both" if every else "neither"))
    kept = letters(state)
    if every:
        return kept
    given = (given or "").strip()
    exact = [d for d in kept if d.get("id") == given]
    if exact:
        return exact
    matches = [d for d in kept if given and str(d.get("message_id") or "").startswith(given)]
    if len(matches) > 1:
        raise InvalidInput(f"{len(matches)} dead letters start with {shown(given)}; give more characters")
    if not matches:
        raise InvalidInput(f"no dead letter {shown(given)}; `ragbus dead-letters` lists them with their ids")
    return matches


def retry(deps: Deps, chosen: list[dict[str, Any]]) -> Redrive:
    """Publish each chosen dead letter's message again, then forget the dead letter; a letter
    another retry took meanwhile (or already forgot) is left to it."""
    out = Redrive()
    for letter in chosen:
        key = str(letter["id"])
        try:
            message = _message(letter)
        except InvalidInput as exc:
            out.refused[key] = str(exc)
            continue
        if not _take(deps, key):
            log.info("dead letter %s: another retry took it; left to that one", key)
            continue
        # publish first: a crash before the delete leaves the dead letter to retry again
        deps.publisher.publish(message)
        deps.state.delete(state_collections.DEAD_LETTERS, key)
        subject = subject_of(letter)
        if subject:
            out.subjects.add(subject)
        log.info("dead letter %s retried: %s published again to %s", key, type(message).__name__,
                 letter.get("topic"))
        out.done.append(key)
    return out


def _take(deps: Deps, key: str) -> bool:
    """Take the dead letter ``key`` for this retry (a lease on its record); False when it is gone
    or another retry holds it."""
    now = deps.clock.now()
    token = uuid.uuid4().hex
    taken: dict[str, bool] = {}

    def take(current: dict[str, Any] | None) -> dict[str, Any] | None:
        lease = (current or {}).get("retrying") or {}
        taken["ok"] = current is not None and not (lease.get("until") and lease["until"] > now.isoformat())
        if not taken["ok"]:
            return None
        until = now + timedelta(seconds=RETRY_LEASE_S)
        return {**current, "retrying": {"token": token, "until": until.isoformat()}}

    deps.state.update(state_collections.DEAD_LETTERS, key, take)
    return taken["ok"]


def subject_of(letter: dict[str, Any]) -> str | None:
    """What a dead letter's message was about: its document id, query id or poll request."""
    return _document_id(letter) or _body_field(letter, "query_id") or _body_field(letter, "request_id")


def purge(deps: Deps, chosen: list[dict[str, Any]]) -> Redrive:
    """Forget each chosen dead letter; a document it was about is dropped at its current content."""
    out = Redrive()
    for letter in chosen:
        key = str(letter["id"])
        document_id = _document_id(letter)
        if document_id:
            deps.state.update(state_collections.PROCESSED_ITEMS, document_id, _dropped)
        deps.state.delete(state_collections.DEAD_LETTERS, key)
        out.done.append(key)
    return out


def _dropped(claim: dict[str, Any] | None) -> dict[str, Any] | None:
    if claim is None or not claim.get("item_hash"):
        return None  # nothing to mark: forgotten already
    return {**claim, "dropped_hash": claim["item_hash"]}


def _document_id(letter: dict[str, Any]) -> str | None:
    return _body_field(letter, "document_id")


def _body_field(letter: dict[str, Any], name: str) -> str | None:
    try:
        body = json.loads(str(letter.get("data") or ""))
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) and value else None


def _message(letter: dict[str, Any]) -> Message:
    data = str(letter.get("data") or "")
    if len(data) >= KEPT_BODY_CHARS:
        raise InvalidInput(f"dead letter {letter.get('id')}: only the first {KEPT_BODY_CHARS} characters of its "
                           "message were kept, so it cannot be published again; purge it and send the work "
                           "again (`ragbus ingest`, `poll` or the question)")
    attributes = {k: str(letter[k]) for k in ("type", "schema_version", "idempotency_key") if letter.get(k)}
    try:
        return decode(data.encode("utf-8"), attributes)
    except (SchemaError, ValueError) as exc:
        raise InvalidInput(f"dead letter {letter.get('id')} cannot be published again: {exc}") from None
