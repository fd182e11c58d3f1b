"""The registry of polled listings: one record per feed or sitemap URL in the ``feeds`` collection.

Key: :func:`shared.contract.ids.feed_id` of the normalised URL. Record::

    url, added_at, last_poll, last_status, last_error, etag, last_modified, items[, kind]

``kind`` names the listing's kind (:data:`shared.contract.sources.LISTING_KINDS`); a record
without it is a feed (so records written before sitemaps existed read as what they are).

``add_listing`` checks the URL with the same guard the fetcher applies on every
request (:mod:`shared.ingest.url_guard`), so a feed on a private address is refused
when it is added, not only when it is first polled.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.contract import state_collections
from shared.contract.errors import FetchRefused, InvalidInput
from shared.contract.ids import feed_id
from shared.contract.ports import Clock, Doc, Publisher, StateStore
from shared.contract.redaction import REDACTED, redact
from shared.contract.sources import DEFAULT_LISTING_KIND, LISTING_KINDS
from shared.ingest.owners import owner_alive, this_process
from shared.ingest.step import retract_missing
from shared.ingest.url_guard import Resolver, check_url, normalise_url

LISTING_FIELDS = (
    "url",
    "added_at",
    "last_poll",
    "last_status",
    "last_error",
    "etag",
    "last_modified",
    "items",
)


def validate_listing_url(
    url: str, *, allow_loopback: bool, resolver: Resolver = socket.getaddrinfo
) -> str:
    """The normalised feed URL, after checking scheme, host and every address.

    Raises :class:`~shared.contract.errors.InvalidInput` (bad scheme, no host, unresolvable
    name) or :class:`~shared.contract.errors.FetchRefused` (private, link-local, loopback
    unless ``allow_loopback``...).
    """
    normal, _ = check_url(url, allow_loopback=allow_loopback, resolver=resolver)
    return normal


def listing_key(url: str) -> str:
    """The registry key of ``url`` (normalised first, so spellings agree)."""
    return feed_id(normalise_url(url))


#: A name in :data:`shared.contract.sources.LISTING_KINDS`.
Kind = str


def kind_of(record: Mapping[str, Any]) -> Kind:
    """What a registry record is: the registered kind it names, else a feed."""
    kind = record.get("kind")
    return kind if isinstance(kind, str) and kind in LISTING_KINDS else DEFAULT_LISTING_KIND


def new_listing_record(url: str, now: datetime, kind: Kind = DEFAULT_LISTING_KIND) -> Doc:
    record: Doc = {
        "url": url,
        "added_at": now.isoformat(),
        "last_poll": None,
        "last_status": None,
        "last_error": None,
        "etag": None,
        "last_modified": None,
        "items": 0,
    }
    if kind != DEFAULT_LISTING_KIND:
        record["kind"] = kind
    return record


def add_listing(
    state: StateStore,
    url: str,
    *,
    allow_loopback: bool,
    now: datetime,
    resolver: Resolver = socket.getaddrinfo,
    kind: Kind = DEFAULT_LISTING_KIND,
) -> dict:
    """Register ``url`` (validated and normalised) as a ``kind``; return its record.

    Adding a URL that is already registered as that kind returns the existing record
    unchanged; one registered as the other kind is refused (InvalidInput).
    """
    _check_kind(kind)
    normal = validate_listing_url(url, allow_loopback=allow_loopback, resolver=resolver)
    record = new_listing_record(normal, now, kind)
    # --allow-loopback given for a listing on loopback sticks to that listing (a later plain
    # `ragbus poll` fetches it); it is not recorded for a public one, whose items must not
    # reach this machine's own services
    loopback = allow_loopback and _on_loopback(normal, resolver)
    if loopback:
        record["allow_loopback"] = True
    state.create(state_collections.FEEDS, feed_id(normal), record)
    stored = state.get(state_collections.FEEDS, feed_id(normal)) or record
    if kind_of(stored) != kind:
        raise InvalidInput(
            f"{shown_url(normal)} is already registered as a {kind_of(stored)}; remove it with "
            f"`ragbus {LISTING_KINDS[kind_of(stored)].plural} remove {shown_url(normal)}` first"
        )
    if loopback and not stored.get("allow_loopback"):
        stored = state.update(state_collections.FEEDS, feed_id(normal),
                              lambda r: r and {**r, "allow_loopback": True}) or stored
    return stored


def _check_kind(kind: str) -> None:
    if kind not in LISTING_KINDS:
        raise InvalidInput(f"kind {kind!r}: use one of {', '.join(LISTING_KINDS)}")


def _on_loopback(url: str, resolver: Resolver) -> bool:
    try:
        validate_listing_url(url, allow_loopback=False, resolver=resolver)
    except FetchRefused:
        return True
    return False


def get_listing(state: StateStore, url: str) -> dict | None:
    return state.get(state_collections.FEEDS, listing_key(url))


def shown_url(url: str) -> str:
    """A listing's URL as it is shown (`feeds list`, `feeds add`, spans): a credential its query carries
    (``?token=``, ``&sig=``, ``&api_key=``) as ``[redacted]``. The record keeps the URL as given, which polls fetch."""
    return redact(url)


def registered_url(state: StateStore, typed: str, kind: Kind | None = None) -> str:
    """The registered listing URL ``typed`` names: ``typed`` itself, or the URL of the one listing (of ``kind``, when
    given) that :func:`shown_url` shows as ``typed`` (copied from `feeds list`, its credential ``[redacted]``); else
    ``typed`` as it is. Raises :class:`InvalidInput` when several listings show so (the same address with different
    tokens): only the full URL tells them apart."""
    if REDACTED not in typed:
        return typed
    try:
        if get_listing(state, typed) is not None:
            return typed
    except InvalidInput:
        pass
    matches = [f["url"] for f in list_listings(state, kind) if f.get("url") and shown_url(f["url"]) == typed]
    if len(matches) > 1:
        raise InvalidInput(f"{typed!r} is how {len(matches)} registered listings are shown (their credentials "
                           "differ); give the full URL")
    return matches[0] if matches else typed


def remove_listing(
    state: StateStore, url: str, *, publisher: Publisher, clock: Clock, keep_documents: bool = False,
    kind: Kind | None = DEFAULT_LISTING_KIND,
) -> list[str]:
    """Unregister ``url`` (a listing of ``kind``; of any kind when None); unless ``keep_documents``,
    also delete the documents its items became (``DocumentDeleted(reason="<kind> removed")``).
    Returns the deleted document ids.

    Raises :class:`InvalidInput` when no such listing is registered (a typo deletes nothing).
    """
    url = registered_url(state, url, kind)  # as `feeds list` shows it too
    record = get_listing(state, url)
    if record is None or kind not in (None, kind_of(record)):
        what, where = (kind, LISTING_KINDS[kind].plural) if kind else ("listing", "sources")
        raise InvalidInput(f"no {what} {shown_url(url)!r} is registered; `ragbus {where} list` shows the registered "
                           "ones")
    deleted: list[str] = []
    if not keep_documents:
        kind = kind_of(record)
        deleted = retract_missing({"feed_url": record["url"], "source": kind}, (), f"{kind} removed",
                                  state=state, publisher=publisher, clock=clock)
    state.delete(state_collections.FEEDS, listing_key(record["url"]))
    return deleted


def list_listings(state: StateStore, kind: Kind | None = None) -> list[dict]:
    """Every registered listing (only those of ``kind`` when given), ordered by URL, with
    every field of the record."""
    feeds = [f for f in state.list(state_collections.FEEDS) if kind is None or kind_of(f) == kind]
    out = [{name: feed.get(name) for name in LISTING_FIELDS} | feed for feed in feeds]
    return sorted(out, key=lambda feed: feed["url"] or "")


def record_poll(state: StateStore, url: str, *, now: datetime, changes: Mapping[str, Any],
                registered: str | None = None) -> dict:
    """Merge the outcome of a poll into the feed's record (creating it if absent), or, with
    ``registered`` (the ``added_at`` the poll found), only into that same registration: a
    listing removed while it was polled stays removed, and one added again is not the poll's."""
    normal = normalise_url(url)

    def merge(current: Doc | None) -> Doc | None:
        if registered is not None and (current is None or current.get("added_at") != registered):
            return None
        base = current if current is not None else new_listing_record(normal, now)
        error = changes.get("last_error")  # shown by `feeds list` and the API: no ?token= its address named
        return {**base, **changes, **({"last_error": redact(error)} if error else {}), "last_poll": now.isoformat()}

    return state.update(state_collections.FEEDS, feed_id(normal), merge) or {}


def still_registered(state: StateStore, url: str, registered: str | None) -> bool:
    """Whether the listing ``url`` is registered still, as it was when ``added_at`` was ``registered``."""
    record = get_listing(state, url)
    return record is not None and record.get("added_at") == registered


def take_poll_lease(state: StateStore, url: str, *, now: datetime, lease_s: float,
                    registered_only: bool = False) -> str | None:
    """Hold ``url`` for one poll; a token to release it with, or None when another poll
    holds it (until its lease runs out, or at once if its process is gone), or, with
    ``registered_only``, when it is not registered (removed since the poll was asked for)."""
    normal = normalise_url(url)
    token = uuid.uuid4().hex
    taken: dict[str, bool] = {}

    def take(current: Doc | None) -> Doc | None:
        if current is None and registered_only:
            taken["ok"] = False
            return None
        base = current if current is not None else new_listing_record(normal, now)
        lease = base.get("poll_lease") or {}
        held = (lease.get("token") and lease.get("until", "") > now.isoformat()
                and owner_alive(str(lease.get("owner", ""))))
        taken["ok"] = not held
        if held:
            return None
        until = datetime.fromtimestamp(now.timestamp() + lease_s, now.tzinfo)
        return {**base, "poll_lease": {"token": token, "owner": this_process(),
                                       "until": until.isoformat()}}

    state.update(state_collections.FEEDS, feed_id(normal), take)
    return token if taken.get("ok") else None


def release_poll_lease(state: StateStore, url: str, token: str) -> None:
    def release(current: Doc | None) -> Doc | None:
        if current is None or (current.get("poll_lease") or {}).get("token") != token:
            return None
        return {k: v for k, v in current.items() if k != "poll_lease"}

    state.update(state_collections.FEEDS, feed_id(normalise_url(url)), release)
