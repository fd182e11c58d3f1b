"""Filters over document metadata: which chunks a search may return, decided before ranking.

A :class:`Filters` value is the small filter language of every surface (CLI flags, the
HTTP ``filters`` object and query parameters, the MCP tools' typed arguments, the query
record). Its conditions are ANDed:

- ``source``: a prefix of where a document came from: a feed or sitemap URL, ``gs://bucket/prefix``
  or a file folder. It matches a chunk whose ``origin`` (the feed/sitemap URL, the bucket, the
  file's folder) or ``url`` (the page, ``gs://`` object or ``file://`` path) starts with it.
- ``since`` / ``until``: the document's published time, ``since <= published < until``. Given as
  ISO 8601 (a date alone for ``until`` means the end of that day) or relative to the clock:
  ``7d``, ``12h``, ``2w``, ``3m`` (months of 30 days), ``1y`` (365 days), meaning that long ago.
  Relative values are resolved when parsed, so one query's filter means one absolute range
  however long it runs. A chunk with no published date never matches a date condition.
- ``kind``: how the document entered (``feed``, ``sitemap``, ``file``, ``gcs``: a chunk's ``source``).
- ``where``: ``key=value`` pairs, exact equality on a metadata key a source set, or on a chunk field
  (``title``, ``url``, ``origin``, ``document_id``).

``matches`` evaluates the filter over a chunk's stored fields (:meth:`Chunk.fields`), so every
index adapter that keeps those fields can pre-filter with it; the GCP indexes translate it to
their native restricts instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import unquote

from shared.contract.sources import SOURCE_KINDS
from shared.contract.text import shown as _shown

#: Chunk fields ``where`` may name besides the chunk's metadata.
WHERE_FIELDS = ("title", "url", "origin", "document_id", "source")
_RELATIVE = re.compile(r"^\s*(\d{1,5})\s*([hdwmy])\s*$", re.IGNORECASE)
_UNIT_DAYS = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "y": 365}
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")  # fullmatch: "$" would let a trailing newline through
_MAX_VALUE = 1024
_MAX_WHERE = 16


class FilterError(ValueError):
    """A filter that cannot be understood; the message names the field and what to write."""


@dataclass(frozen=True)
class Filters:
    source: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    kind: str | None = None
    where: tuple[tuple[str, str], ...] = field(default=())

    # ---------------------------------------------------------------- parsing

    @classmethod
    def parse(
        cls,
        *,
        now: datetime,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        kind: str | None = None,
        where: Mapping[str, Any] | Iterable[str] | None = None,
    ) -> Filters:
        """Filters from user input (strings as typed), relative dates resolved against ``now``.

        Raises :class:`FilterError` naming the field at fault.
        """
        if now.tzinfo is None:
            raise ValueError("now must be an aware datetime")
        since_at = _instant("since", since, now, end_of_day=False)
        until_at = _instant("until", until, now, end_of_day=True)
        if since_at is not None and until_at is not None and since_at >= until_at:
            raise FilterError(
                f"since ({since_at.isoformat()}) is not before until ({until_at.isoformat()}): nothing could match"
            )
        return cls(
            source=_source(source),
            since=since_at,
            until=until_at,
            kind=_kind(kind),
            where=_where(where),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, now: datetime) -> Filters:
        """The ``filters`` object of the HTTP API and the query record (keys: source, since, until,
        kind, where); unknown keys are refused."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise FilterError("filters must be an object with source, since, until, kind and where")
        unknown = sorted(set(data) - {"source", "since", "until", "kind", "where"})
        if unknown:
            named = ", ".join(map(_shown, unknown[:5]))
            raise FilterError(f"filters: unknown key(s) {named}; use source, since, until, kind, where")
        for name in ("source", "since", "until", "kind"):
            if data.get(name) is not None and not isinstance(data[name], str):
                raise FilterError(f"filters.{name} must be a string")
        return cls.parse(now=now, source=data.get("source"), since=data.get("since"), until=data.get("until"),
                         kind=data.get("kind"), where=data.get("where"))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (absolute times); :meth:`from_dict` reads it back to an equal value."""
        out: dict[str, Any] = {}
        if self.source is not None:
            out["source"] = self.source
        if self.since is not None:
            out["since"] = self.since.isoformat()
        if self.until is not None:
            out["until"] = self.until.isoformat()
        if self.kind is not None:
            out["kind"] = self.kind
        if self.where:
            out["where"] = dict(self.where)
        return out

    def replace(self, **changes: Any) -> Filters:
        from dataclasses import replace

        return replace(self, **changes)

    # ------------------------------------------------------------- properties

    @property
    def is_empty(self) -> bool:
        return self.source is None and self.since is None and self.until is None and self.kind is None and not self.where

    @property
    def has_dates(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def key(self) -> str:
        """A stable string naming this filter (equal filters, equal keys), for caches."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def describe(self) -> str:
        """One line for pages and logs."""
        parts = []
        if self.source is not None:
            parts.append(f"source {self.source}")
        if self.since is not None:
            parts.append(f"since {self.since.date().isoformat()}")
        if self.until is not None:
            parts.append(f"until {self.until.date().isoformat()}")
        if self.kind is not None:
            parts.append(f"kind {self.kind}")
        parts.extend(f"{k}={v}" for k, v in self.where)
        return ", ".join(parts) or "none"

    # --------------------------------------------------------------- matching

    def matches(self, fields: Mapping[str, Any]) -> bool:
        """Whether a chunk with these stored fields passes every condition."""
        if self.source is not None:
            origin = str(fields.get("origin") or "")
            url = str(fields.get("url") or "")
            # a file's URL (file:///docs/a%20b.txt) is its path too: --source names one file by either
            path = unquote(url[len("file://"):]) if url.startswith("file://") else ""
            if not (_under(origin, self.source) or _under(url, self.source) or path and _under(path, self.source)):
                return False
        if self.kind is not None and fields.get("source") != self.kind:
            return False
        if self.has_dates:
            published = published_at(fields.get("published"))
            if published is None:
                return False
            if self.since is not None and published < self.since:
                return False
            if self.until is not None and published >= self.until:
                return False
        if self.where:
            metadata = fields.get("metadata") or {}
            for key, value in self.where:
                found = metadata.get(key) if key in metadata else fields.get(key) if key in WHERE_FIELDS else None
                if isinstance(found, (list, tuple)):  # several values (categories): any one of them
                    if value not in [str(v) for v in found]:
                        return False
                elif found is None or str(found) != value:
                    return False
        return True


def firestore_prefilter_refusal(filters: Filters) -> str | None:
    """Why Firestore vector search cannot pre-filter on ``filters``; None when it can.

    The Firestore index (shared/adapters/gcp/firestore_index.py) keeps source prefixes and metadata
    ``key=value`` pairs in array fields, and a composite index (which a pre-filtered vector search
    needs) holds at most one array field (cloud.google.com/firestore/docs/concepts/index-overview),
    so one array-contains clause per search; chunk fields named by
    ``where`` have no composite index with the vector field. The gateway refuses these when a query
    is submitted and the adapter when it searches: filtering the top k afterwards would silently
    return too few chunks.
    """
    chunk_fields = [key for key, _ in filters.where if key in WHERE_FIELDS]
    if chunk_fields:
        return (
            f"the Firestore index cannot pre-filter on where {', '.join(chunk_fields)}: a chunk field has no "
            "composite index with the vector field; filter by source, kind, date or a metadata key (author, "
            "category), or use RAGBUS_INDEX=vertex"
        )
    if filters.where and (len(filters.where) > 1 or filters.source is not None):
        asked = [f"where {key}" for key, _ in filters.where] + (["source"] if filters.source is not None else [])
        return (
            f"the Firestore index pre-filters on one of source and a where key at a time, not {' and '.join(asked)} "
            "(one array-contains per query); drop one, or use RAGBUS_INDEX=vertex"
        )
    return None


def published_at(value: Any) -> datetime | None:
    """A stored published value (ISO 8601 date or datetime) as an aware UTC datetime; None when
    absent or unreadable (such a chunk has no date to filter on)."""
    if not value:
        return None
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _under(value: str, prefix: str) -> bool:
    if not value.startswith(prefix):
        return False
    # A Cloud Storage prefix is a string prefix (as the bucket lists objects); any other source
    # (a URL, a folder) ends at a path boundary, so /docs is not /docs-old and .../rss not .../rss2.
    if prefix.startswith("gs://") or prefix.endswith("/") or len(value) == len(prefix):
        return True
    return value[len(prefix)] in "/?#"


def source_tokens(value: str) -> list[str]:
    """The prefixes of a stored origin or URL that a ``source`` filter can name exactly: the value
    itself, and each prefix ending at or just before a ``/`` of its path. Indexes that match tokens,
    not prefixes (Vertex AI Vector Search restricts), store these."""
    if not value:
        return []
    start = value.find("://")
    start = start + 3 if start >= 0 else 0
    tokens = {value}
    for n in range(start, len(value)):
        if value[n] == "/":
            if n > start:
                tokens.add(value[:n])
            tokens.add(value[: n + 1])
    return sorted(tokens)


def source_token(prefix: str) -> str:
    """The token of :func:`source_tokens` every value under ``prefix`` carries (for a Cloud Storage
    prefix that ends mid-name, its folder: the caller then checks the exact prefix itself)."""
    if prefix.startswith("gs://") and not prefix.endswith("/"):
        return prefix[: prefix.rfind("/") + 1] if prefix.count("/") > 2 else prefix
    return prefix


def _source(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        raise FilterError("source is empty: give a feed or sitemap URL, gs://bucket/prefix or a folder")
    if len(value) > _MAX_VALUE:
        raise FilterError(f"source is {len(value)} characters; at most {_MAX_VALUE}")
    if not value.isprintable():
        # a NUL or an escape matches no stored source: a client bug, refused like the question's
        raise FilterError(f"source {_shown(value)} contains a control character; send plain text")
    if "://" in value:
        scheme = value.split("://", 1)[0].lower()
        if scheme not in ("http", "https", "gs", "file"):
            raise FilterError(f"source {_shown(value)}: use an http(s) URL, gs://bucket/prefix or a folder")
        if scheme == "file":
            return _folder(unquote(value[len("file://"):]))
        host = value.split("://", 1)[1].split("/", 1)[0]
        if not host:  # "gs://" or "https://" would admit nothing, silently
            raise FilterError(f"source {_shown(value)} names no {'bucket' if scheme == 'gs' else 'host'}: use "
                              "gs://bucket/prefix or the feed's or sitemap's URL")
        if "@" in host:
            # No feed or sitemap is stored with credentials (adding one is refused), so this matches
            # nothing, and the record, the event and the span would keep the password.
            raise FilterError("source carries credentials; remove the user:password@ part")
        return value
    return _folder(value)


def _folder(value: str) -> str:
    path = os.path.abspath(os.path.expanduser(value))
    return path if path == "/" else path.rstrip("/")


def _kind(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip().lower()
    if value not in SOURCE_KINDS:
        raise FilterError(f"kind {_shown(value)}: use one of {', '.join(SOURCE_KINDS)}")
    return value


def _where(value: Mapping[str, Any] | Iterable[str] | None) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    pairs: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(item, str | int | float | bool) or item is None:
                raise FilterError(f"where {_shown(key)}: the value must be a string or number")
            pairs.append((str(key), str(item).lower() if isinstance(item, bool) else str(item)))
    elif isinstance(value, str):
        raise FilterError("where must be a list of key=value or an object")
    else:
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise FilterError(f"where {_shown(item)}: write key=value")
            key, _, text = item.partition("=")
            pairs.append((key.strip(), text.strip()))
    if len(pairs) > _MAX_WHERE:
        raise FilterError(f"where has {len(pairs)} conditions; at most {_MAX_WHERE}")
    out: dict[str, str] = {}
    for key, text in pairs:
        if not _KEY.fullmatch(key):
            raise FilterError(f"where key {_shown(key)}: letters, digits, _ . - only, starting with a letter")
        if not text:
            raise FilterError(f"where {key}=: the value is empty")
        if len(text) > _MAX_VALUE:
            raise FilterError(f"where {key}: the value is {len(text)} characters; at most {_MAX_VALUE}")
        if not text.isprintable():
            raise FilterError(
                f"where {key}: the value {_shown(text)} contains a control character; send plain text")
        if key in out and out[key] != text:
            raise FilterError(f"where {key} is given twice with different values: nothing could match")
        out[key] = text
    return tuple(sorted(out.items()))


def _instant(name: str, value: str | date | None, now: datetime, *, end_of_day: bool) -> datetime | None:
    # A well-formed value can still leave datetime's years 1-9999 ("99999y", the day after
    # 9999-12-31, a time zone's offset at 0001-01-01): an error naming it, not an OverflowError.
    try:
        return _instant_within_range(name, value, now, end_of_day=end_of_day)
    except OverflowError:
        raise FilterError(f"{name} {_shown(value)} falls outside the years 1 to 9999") from None


def _instant_within_range(
    name: str, value: str | date | None, now: datetime, *, end_of_day: bool
) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        start = datetime(value.year, value.month, value.day, tzinfo=UTC)
        return start + timedelta(days=1) if end_of_day else start
    text = str(value).strip()
    if not text:
        raise FilterError(f"{name} is empty: give a date (2025-06-01), a time or an age such as 7d")
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2).lower()
        return now.astimezone(UTC) - timedelta(days=amount * _UNIT_DAYS[unit])
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise FilterError(f"{name} {_shown(text)} is not a calendar date") from None
        return _instant_within_range(name, day, now, end_of_day=end_of_day)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(
            f"{name} {_shown(text)}: use a date (2025-06-01), an ISO 8601 time or an age such as 12h, 7d, 2w, 3m, 1y"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
