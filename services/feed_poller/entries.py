"""What every listing reader gives the poll: the entries a listing holds, and how it read."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Entry:
    """One item of a listing: identified within it by ``guid``, fetched again when ``item_hash`` changes."""

    guid: str
    link: str | None  # the page to fetch, as written (resolved against the listing's URL)
    title: str  # "" when the page states its own
    published: str | None
    item_hash: str
    metadata: dict[str, str | list[str]] = field(default_factory=dict)  # keys the listing sets (--where)


@dataclass
class Reading:
    """A listing's entries as its reader found them, with what it had to leave out and why."""

    entries: list[Entry]
    skipped: int = 0  # entries with nothing usable to identify them by
    rejected: list[str] = field(default_factory=list)  # why an entry was skipped, when it said something unusable
    duplicates: int = 0
    cacheable: bool = True  # False: a 304 would not prove the listing unchanged (a sitemap index)
