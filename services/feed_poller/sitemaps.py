"""Reading sitemaps (sitemaps.org protocol 0.9): the pages a site lists, with their ``<lastmod>``.

A sitemap is either a ``<urlset>`` of pages or a ``<sitemapindex>`` of further
sitemaps; an index is followed one level down (the protocol does not nest
indexes, so a nested one is refused rather than followed). Everything else the
poller does with a sitemap (fetching pages, change detection, removal) is the
ingestion step every polled listing shares: this module only reads XML.

The input is untrusted, and every bound is checked while reading, never after:

- the XML is read by a streaming parser (lxml, fed a piece at a time, with a
  target that keeps one ``<url>`` at a time and builds no tree) that resolves no
  entity, loads no DTD and touches no network;
  a document type declaration is refused wherever it appears (after a long
  comment, in UTF-16): a sitemap never needs one, and it is how entity-expansion
  attacks start;
- a gzip file (``sitemap.xml.gz``, which the protocol allows) is decompressed a
  piece at a time and refused past :data:`MAX_UNCOMPRESSED_BYTES` (the
  protocol's 50 MB), so a gzip bomb costs one piece of memory, not its size;
- the count of entries is checked as each is read: a listing over
  :data:`MAX_PAGES` pages in all, or an index of more than
  :data:`MAX_CHILD_SITEMAPS` sitemaps, is refused as a whole as soon as the
  count passes the cap (a large index stops at the child that passes it):
  cutting it short would make the poller retract the pages it left out;
- child sitemaps are fetched through the same guarded fetcher as everything
  else (address guard, size cap, timeouts).

A page is known by its normalised URL (:func:`shared.ingest.url_guard.normalise_url`),
so ``/p1.html``, ``/p1.html#part`` and ``/./p1.html`` are one page. One unusable
``<loc>`` or ``<lastmod>`` costs that entry only, with its reason kept.
"""

from __future__ import annotations

import json
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urljoin

from lxml import etree

from services.feed_poller.entries import Entry, Reading
from shared.contract.errors import InvalidInput, PermanentError, RetryableError
from shared.contract.ids import content_hash
from shared.contract.ports import Fetcher, FetchResult
from shared.ingest.url_guard import normalise_url

# application/x-gzip and application/gzip: a sitemap.xml.gz as servers label it (sitemaps.org
# allows gzip); octet-stream, as others do. Whatever the label, the bytes must be a sitemap.
#: A feed's own types are let through so that a feed registered as a sitemap is named as one
#: (by its root element) rather than refused for its content type with no hint.
FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/x-rss+xml")
MEDIA_TYPES = ("application/xml", "text/xml", "application/x-sitemap+xml",
               "application/x-gzip", "application/gzip", "application/octet-stream", *FEED_TYPES)
#: Root elements of RSS 2.0 (and 0.9x), Atom and RSS 1.0 (RDF).
_FEED_ROOTS = ("rss", "feed", "RDF")
MAX_PAGES = 50_000  # the protocol's limit for one sitemap file
MAX_CHILD_SITEMAPS = 50
MAX_UNCOMPRESSED_BYTES = 50 * 1024 * 1024  # the protocol's limit for one file, uncompressed (52,428,800 bytes)
_PIECE = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_REASONS = 20
_MAX_FIELD_CHARS = 8192

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
    read: int = 0  # entries read so far, against the MAX_PAGES cap
    rejected: list[str] = field(default_factory=list)  # why <loc>s were skipped (the first few)


def read_sitemap(result: FetchResult, fetch: Fetch) -> Sitemap:
    """The pages ``result`` lists, following a sitemap index one level down.

    Raises :class:`InvalidInput` for anything that is not a usable sitemap (the
    message names the URL and the problem) and when a child sitemap cannot be
    fetched: without every child the listing is incomplete, and an incomplete
    listing must not retract anything.
    """
    out = Sitemap(pages=[])
    seen: set[str] = set()
    kind, entries = _parse(result.url, result.body, cap=MAX_PAGES)
    if kind == "urlset":
        _add_pages(out, seen, result.url, entries)
        return out
    out.is_index = True
    children = list(entries)  # an index is at most MAX_CHILD_SITEMAPS short entries: holding them is cheap
    for loc, _ in children:
        try:
            child_url = urljoin(result.url, loc)
        except ValueError as exc:
            raise InvalidInput(f"sitemap index {result.url} lists {loc!r}, which is not a URL ({exc})") from None
        try:
            child = fetch(child_url)
        except (PermanentError, RetryableError) as exc:
            raise InvalidInput(f"child sitemap {child_url} of {result.url} could not be fetched: {exc}") from exc
        child_kind, child_entries = _parse(child.url, child.body, cap=MAX_PAGES - out.read, index=result.url)
        if child_kind != "urlset":
            raise InvalidInput(
                f"{child_url}, listed by the sitemap index {result.url}, is itself an index; "
                "sitemap indexes are followed one level only"
            )
        _add_pages(out, seen, child.url, child_entries)
    return out


def _parse(url: str, body: bytes, *, cap: int, index: str | None = None) -> tuple[str, Iterator[tuple[str, str]]]:
    """("urlset" | "sitemapindex", its (loc, lastmod) entries as they are read) of one sitemap file.

    ``cap``: how many entries may still be read before the listing is refused (``index``: the
    sitemap index ``url`` belongs to, named in that refusal)."""
    reader = _Reader(url, body)
    kind = reader.root()
    if kind in _FEED_ROOTS:
        raise InvalidInput(
            f"{url} is not a sitemap but an RSS or Atom feed (its root element is <{kind}>); remove it and add it "
            "as a feed: `ragbus sources add URL --kind feed` (or `ragbus feeds add URL`)"
        )
    if kind not in ("urlset", "sitemapindex"):
        raise InvalidInput(
            f"{url} is not a sitemap (its root element is <{kind}>, expected <urlset> or <sitemapindex>); "
            "check that the URL points at sitemap.xml"
        )
    if kind == "sitemapindex":
        cap = MAX_CHILD_SITEMAPS

    def entries() -> Iterator[tuple[str, str]]:
        count = 0
        for loc, lastmod in reader.entries("url" if kind == "urlset" else "sitemap"):
            count += 1
            if count > cap:
                if kind == "sitemapindex":
                    raise InvalidInput(
                        f"sitemap index {url} lists more than the {MAX_CHILD_SITEMAPS} sitemaps this poller "
                        "follows; register the child sitemaps one by one")
                if index:
                    raise InvalidInput(
                        f"sitemap index {index} lists more than {MAX_PAGES} pages in all (passed while reading "
                        f"{url}); register its parts separately")
                raise InvalidInput(f"sitemap {url} lists more than {MAX_PAGES} entries, the protocol's limit; "
                                   "split it into several sitemaps")
            yield loc, lastmod

    return kind, entries()


class _DocumentType(Exception):
    """The sitemap declares a document type (raised from inside the parser, before its subset is read)."""


class _Entries:
    """The parser's target: it keeps nothing but the entries not yet taken (no tree is built).

    A document type declaration stops the parse the moment the parser meets it, before
    any entity in it is declared, let alone expanded."""

    def __init__(self) -> None:
        self.ready: deque[tuple[str, str, dict[str, str]]] = deque()
        self._depth = 0
        self._entry: tuple[str, dict[str, str]] | None = None
        self._field: str | None = None
        self._text: list[str] = []
        self._length = 0

    def doctype(self, *_: object) -> None:
        raise _DocumentType

    def start(self, tag: str, attrib: object) -> None:
        self._depth += 1
        if self._depth == 1:
            self.ready.append(("root", _local(tag), {}))
        elif self._depth == 2:
            self._entry = (_local(tag), {})
        elif self._depth == 3:
            self._field, self._text, self._length = _local(tag), [], 0

    def data(self, text: str) -> None:
        # a field is kept up to _MAX_FIELD_CHARS: a longer <loc> is no URL, and it must not grow without bound
        if self._depth == 3 and self._length < _MAX_FIELD_CHARS:
            self._text.append(text[:_MAX_FIELD_CHARS - self._length])
            self._length += len(text)

    def end(self, tag: str) -> None:
        if self._depth == 3 and self._entry is not None and self._field is not None:
            self._entry[1].setdefault(self._field, "".join(self._text).strip())
            self._field = None
        elif self._depth == 2 and self._entry is not None:
            self.ready.append(("entry", *self._entry))
            self._entry = None
        self._depth -= 1

    def close(self) -> None:
        return None


class _Reader:
    """One sitemap file read as a stream: the root element's name, then one entry at a time.

    The parser resolves no entity, loads no DTD, reads nothing from the network and
    builds no tree; a DOCTYPE is refused where the parser meets it, however far into
    the file or in whatever encoding."""

    def __init__(self, url: str, body: bytes) -> None:
        self.url = url
        self._pieces = _pieces(url, body)
        self._target = _Entries()
        self._parser = etree.XMLParser(
            target=self._target, resolve_entities=False, no_network=True, huge_tree=False,
            load_dtd=False, dtd_validation=False, remove_comments=True, remove_pis=True)
        self._done = False

    def _next(self) -> tuple[str, str, dict[str, str]] | None:
        while not self._target.ready:
            if self._done:
                return None
            piece = next(self._pieces, None)
            try:
                if piece is None:
                    self._done = True
                    self._parser.close()
                else:
                    self._parser.feed(piece)
            except _DocumentType:
                raise InvalidInput(f"sitemap {self.url} declares a document type; sitemaps never need one, "
                                   "so it is refused") from None
            except etree.XMLSyntaxError as exc:
                raise InvalidInput(
                    f"sitemap {self.url} is malformed XML ({exc}); nothing was changed or removed, "
                    "fix the sitemap or remove it") from None
        return self._target.ready.popleft()

    def root(self) -> str:
        event = self._next()
        if event is None:
            raise InvalidInput(f"sitemap {self.url} is empty; nothing was changed or removed")
        return event[1]

    def entries(self, name: str) -> Iterator[tuple[str, str]]:
        while (event := self._next()) is not None:
            _, tag, fields = event
            if tag == name and fields.get("loc"):
                yield fields["loc"], fields.get("lastmod", "")


def _pieces(url: str, body: bytes) -> Iterator[bytes]:
    """``body`` a piece at a time, decompressed when it is gzip (bounded while decompressing)."""
    if not body.startswith(_GZIP_MAGIC):
        if len(body) > MAX_UNCOMPRESSED_BYTES:
            raise InvalidInput(f"sitemap {url} is over {MAX_UNCOMPRESSED_BYTES} bytes, the protocol's limit")
        for start in range(0, len(body), _PIECE):
            yield body[start:start + _PIECE]
        return
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total = 0
    pending = body
    while pending or not inflate.eof:
        try:
            piece = inflate.decompress(pending, _PIECE)
        except zlib.error as exc:
            raise InvalidInput(f"sitemap {url} is a damaged gzip file ({exc})") from None
        pending = inflate.unconsumed_tail
        total += len(piece)
        if total > MAX_UNCOMPRESSED_BYTES:
            raise InvalidInput(
                f"sitemap {url} decompresses to more than {MAX_UNCOMPRESSED_BYTES} bytes, the protocol's limit "
                "for one sitemap; refused (stopped decompressing there)")
        if piece:
            yield piece
        elif not pending:
            if not inflate.eof:
                raise InvalidInput(f"sitemap {url} is a truncated gzip file")
            break


def _add_pages(out: Sitemap, seen: set[str], base: str, entries: Iterator[tuple[str, str]]) -> None:
    for loc, lastmod in entries:
        out.read += 1
        try:
            page_url = normalise_url(urljoin(base, loc))
        except ValueError as exc:  # urljoin: "Invalid IPv6 URL"
            _reject(out, f"<loc> {_shown(loc)} is not a URL ({exc})")
            continue
        except InvalidInput as exc:
            # another scheme (ftp:, mailto:) is simply not a page to fetch; anything else says why
            _reject(out, None if "scheme" in str(exc) else f"<loc> {_shown(loc)}: {exc}")
            continue
        if page_url in seen:
            out.duplicates += 1
            continue
        seen.add(page_url)
        out.pages.append(Page(url=page_url, lastmod=lastmod, published=_w3c_datetime(lastmod)))


def _reject(out: Sitemap, reason: str | None) -> None:
    out.skipped += 1
    if reason and len(out.rejected) < _MAX_REASONS:
        out.rejected.append(reason)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 120 else value[:117] + "...")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _w3c_datetime(value: str) -> str | None:
    """``<lastmod>`` (W3C datetime: a date, or a date and time with a zone) as ISO 8601 UTC."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.astimezone(UTC).isoformat()
    except (ValueError, OverflowError):  # 9999-12-31T23:59:59-05:00 is past the last representable instant
        return None


def read_pages(url: str, result: FetchResult, fetcher: Fetcher) -> Reading:
    """A sitemap (or an index's sitemaps) as entries, for the poller: a page's identity is its
    URL and it is fetched again exactly when its ``<lastmod>`` changes; the page states its own title."""
    sitemap = read_sitemap(result, lambda child: fetcher.fetch(child, accept=MEDIA_TYPES))
    entries = [
        Entry(guid=page.url, link=page.url, title="", published=page.published,
              item_hash=content_hash(json.dumps({"url": page.url, "lastmod": page.lastmod}, sort_keys=True)))
        for page in sitemap.pages
    ]
    # a 304 for an index says nothing about its sitemaps
    return Reading(entries, skipped=sitemap.skipped, rejected=sitemap.rejected, duplicates=sitemap.duplicates,
                   cacheable=not sitemap.is_index)
