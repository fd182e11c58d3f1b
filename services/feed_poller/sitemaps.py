"""Reading sitemaps (sitemaps.org protocol 0.9): the pages a site lists, with their ``<lastmod>``.

A sitemap is either a ``<urlset>`` of pages or a ``<sitemapindex>`` of further
sitemaps; an index is followed one level down (the protocol does not nest
indexes, so a nested one is refused rather than followed). Everything else the
poller does with a sitemap (fetching pages, change detection, removal) is the
ingestion step every polled listing shares: this module only reads XML.

The input is untrusted: a document type declaration is refused (a sitemap never
needs one, and it is how entity-expansion attacks start), child sitemaps are
fetched through the same guarded fetcher as everything else (address guard,
size cap, timeouts), and a listing over :data:`MAX_PAGES` pages or an index of
more than :data:`MAX_CHILD_SITEMAPS` sitemaps is refused as a whole: cutting it
short would make the poller retract the pages it left out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

from shared.contract.errors import InvalidInput, PermanentError, RetryableError
from shared.contract.ports import FetchResult

MEDIA_TYPES = ("application/xml", "text/xml", "application/x-sitemap+xml")
MAX_PAGES = 50_000  # the protocol's limit for one sitemap file
MAX_CHILD_SITEMAPS = 50

_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)

Fetch = Callable[[str], FetchResult]


@dataclass(frozen=True)
class Page:
    """One ``<url>`` of a sitemap."""

    url: str
    lastmod: str  # as written ("" when absent): it is what change detection compares
    published: str | None  # ``lastmod`` as ISO 8601 UTC when it parses


@dataclass
class Sitemap:
    pages: list[Page]
    is_index: bool = False
    skipped: int = 0  # <loc>s that are not http(s) URLs
    duplicates: int = 0


def read_sitemap(result: FetchResult, fetch: Fetch) -> Sitemap:
    """The pages ``result`` lists, following a sitemap index one level down.

    Raises :class:`InvalidInput` for anything that is not a usable sitemap (the
    message names the URL and the problem) and when a child sitemap cannot be
    fetched: without every child the listing is incomplete, and an incomplete
    listing must not retract anything.
    """
    kind, entries = _parse(result.url, result.body)
    if kind == "urlset":
        return _pages(result.url, [(result.url, entries)])
    if len(entries) > MAX_CHILD_SITEMAPS:
        raise InvalidInput(
            f"sitemap index {result.url} lists {len(entries)} sitemaps, more than the "
            f"{MAX_CHILD_SITEMAPS} this poller follows; register the child sitemaps one by one"
        )
    listed = []
    for loc, _ in entries:
        child_url = urljoin(result.url, loc)
        try:
            child = fetch(child_url)
        except (PermanentError, RetryableError) as exc:
            raise InvalidInput(f"child sitemap {child_url} of {result.url} could not be fetched: {exc}") from exc
        child_kind, child_entries = _parse(child.url, child.body)
        if child_kind != "urlset":
            raise InvalidInput(
                f"{child_url}, listed by the sitemap index {result.url}, is itself an index; "
                "sitemap indexes are followed one level only"
            )
        listed.append((child.url, child_entries))
    sitemap = _pages(result.url, listed)
    sitemap.is_index = True
    return sitemap


def _parse(url: str, body: bytes) -> tuple[str, list[tuple[str, str]]]:
    """("urlset" | "sitemapindex", [(loc, lastmod)]) of one sitemap file."""
    if _DOCTYPE.search(body[:4096]):
        raise InvalidInput(f"sitemap {url} declares a document type; sitemaps never need one, so it is refused")
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise InvalidInput(
            f"sitemap {url} is malformed XML ({exc}); nothing was changed or removed, fix the sitemap or remove it"
        ) from exc
    kind = _local(root.tag)
    if kind not in ("urlset", "sitemapindex"):
        raise InvalidInput(
            f"{url} is not a sitemap (its root element is <{kind}>, expected <urlset> or <sitemapindex>); "
            "check that the URL points at sitemap.xml"
        )
    child = "url" if kind == "urlset" else "sitemap"
    entries = []
    for element in root:
        if _local(element.tag) != child:
            continue
        fields = {_local(f.tag): (f.text or "").strip() for f in element}
        if fields.get("loc"):
            entries.append((fields["loc"], fields.get("lastmod", "")))
        if len(entries) > MAX_PAGES:
            raise InvalidInput(f"sitemap {url} lists more than {MAX_PAGES} entries, the protocol's limit; "
                               "split it into several sitemaps")
    return kind, entries


def _pages(url: str, listed: list[tuple[str, list[tuple[str, str]]]]) -> Sitemap:
    out = Sitemap(pages=[])
    seen: set[str] = set()
    for base, entries in listed:
        for loc, lastmod in entries:
            page_url = urljoin(base, loc)
            if urlsplit(page_url).scheme not in ("http", "https"):
                out.skipped += 1
                continue
            if page_url in seen:
                out.duplicates += 1
                continue
            seen.add(page_url)
            out.pages.append(Page(url=page_url, lastmod=lastmod, published=_w3c_datetime(lastmod)))
    if len(out.pages) > MAX_PAGES:
        raise InvalidInput(f"sitemap {url} lists more than {MAX_PAGES} pages in all; register its parts separately")
    return out


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _w3c_datetime(value: str) -> str | None:
    """``<lastmod>`` (W3C datetime: a date, or a date and time with a zone) as ISO 8601 UTC."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat()
