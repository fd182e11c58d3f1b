"""Where documents come from: the kinds of polled listing, one registry, and the pushed sources.

A polled listing is a URL registered in the ``feeds`` collection that ``ragbus poll`` fetches
and reads into entries. Each kind is one :class:`ListingKind` row in :data:`LISTING_KINDS` plus
its reader in :mod:`services.feed_poller.listings`; everything else is derived from the row:
the ``ragbus <plural>`` commands and ``ragbus sources``, which ledger records count as polled
(:func:`shared.ingest.step.polled_items`), the ``source`` a document carries
(:data:`shared.contract.messages.SourceKind`), the kinds a filter accepts and the OpenAPI enum.
Pushed sources (a folder, a Cloud Storage bucket) are not polled; they announce their own items.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ListingKind:
    """One kind of polled listing, and how commands and messages speak of it."""

    name: str  # the record's ``kind`` and its documents' ``source``: "sitemap"
    plural: str  # its command group, ``ragbus sitemaps``, and how messages count it
    described: str  # what it is, in its group's help: "sitemaps (sitemap.xml or a sitemap index)"
    add_help: str  # what ``ragbus <plural> add`` does
    fetched: str  # what ``ragbus poll`` fetches of it ("run ragbus poll to fetch <fetched>")
    items: str  # what its entries are, as ``list`` heads their count: "items", "pages"


LISTING_KINDS: dict[str, ListingKind] = {kind.name: kind for kind in (
    ListingKind("feed", "feeds", "RSS/Atom feeds", "Register a feed URL (RSS 2.0 or Atom).", "it", "items"),
    ListingKind("sitemap", "sitemaps", "sitemaps (sitemap.xml or a sitemap index)",
                "Register a sitemap URL (sitemap.xml, or a sitemap index); `ragbus poll` fetches its pages.",
                "its pages", "pages"),
)}
#: The kind of a registry record that names none (records written before sitemaps existed).
DEFAULT_LISTING_KIND = "feed"
#: Sources that announce their own items: a folder of files (``ragbus ingest``), a Cloud Storage bucket.
PUSHED_SOURCES = ("file", "gcs")
#: Every ``source`` a document can have.
SOURCE_KINDS = (*LISTING_KINDS, *PUSHED_SOURCES)
