"""The kinds of listing the poller reads: one :class:`Listing` per kind registered in
:data:`shared.contract.sources.LISTING_KINDS`, which says how to read its bytes into entries
and how to obtain an entry's content (by default, fetching the page it links).

Everything after the read (change detection, the per-poll bound, fetching, removal, the
ingestion step) is the poll's (:mod:`services.feed_poller.handler`), the same for every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.feed_poller import sitemaps, syndication
from services.feed_poller.entries import Entry, Reading
from shared.contract.errors import PermanentError
from shared.contract.ports import Fetcher, FetchResult
from shared.contract.sources import LISTING_KINDS
from shared.formats.registry import readable_media_types
from shared.ingest.step import Content

#: what an entry's link may be: a page, or a file of any kind the registry of formats reads (a PDF)
PAGE_MEDIA_TYPES = ("text/html", "application/xhtml+xml",
                    *(m for m in readable_media_types() if m not in ("text/html", "application/xhtml+xml")))


def fetch_page(entry: Entry, fetcher: Fetcher) -> Content:
    """The page an entry links, fetched through the guarded fetcher."""
    if not entry.link:
        raise PermanentError("the entry has no link to an article page")
    page = fetcher.fetch(entry.link, accept=PAGE_MEDIA_TYPES)
    return Content(
        url=page.url,
        # The declared charset travels with the type (the bytes are passed through as
        # received, right or wrong); the cleaner decides how to decode.
        content_type=page.content_type + (f"; charset={page.charset}" if page.charset else ""),
        stored_type=page.content_type,
        body=page.body,
        title=entry.title,
        published=entry.published,
        ledger={"url": page.url},
        metadata=entry.metadata,
    )


@dataclass(frozen=True)
class Listing:
    """How the poller reads one kind of registered listing."""

    media_types: tuple[str, ...]  # what the listing's own fetch accepts
    # the listing's bytes as entries (``Fetcher``: for what the listing refers to, a sitemap
    # index's sitemaps); raises InvalidInput when they are no such listing
    read: Callable[[str, FetchResult, Fetcher], Reading]
    obtain: Callable[[Entry, Fetcher], Content] = fetch_page  # an entry's content


LISTINGS: dict[str, Listing] = {
    "feed": Listing(syndication.MEDIA_TYPES, syndication.read_feed),
    "sitemap": Listing(sitemaps.MEDIA_TYPES, sitemaps.read_pages),
}

if set(LISTINGS) != set(LISTING_KINDS):
    # a registered kind without a reader would be registered, listed and never polled
    raise RuntimeError(f"listing kinds registered in shared/contract/sources.py {sorted(LISTING_KINDS)} and read "
                       f"by the poller {sorted(LISTINGS)} differ; each kind needs both")
