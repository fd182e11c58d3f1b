"""Reading RSS 2.0, Atom and RDF feeds (feedparser) into entries.

An entry's identity in its feed is its guid, else its link resolved against the feed's URL;
change detection hashes the entry's own fields (title, link, dates, summary, content), so an
unchanged article is never fetched again. A feed that is malformed or is no feed at all is
refused whole (InvalidInput): nothing is changed or removed because of it. One unusable entry
costs that entry only, with its reason kept.
"""

from __future__ import annotations

import io
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

import feedparser

from services.feed_poller.entries import Entry, Reading
from shared.contract.errors import InvalidInput
from shared.contract.ids import content_hash
from shared.contract.ports import Fetcher, FetchResult

log = logging.getLogger("ragbus.feed_poller")

# text/html and text/plain are accepted because real feeds are often served with
# the wrong type; feedparser then decides whether the bytes are a feed at all.
MEDIA_TYPES = (
    "application/rss+xml",
    "application/atom+xml",
    "application/rdf+xml",
    "application/x-rss+xml",
    "application/xml",
    "text/xml",
    "text/html",
    "text/plain",
    # let through so that a sitemap registered as a feed is named as one, not refused for its type
    "application/x-sitemap+xml",
)
#: The root element of a sitemap or sitemap index, with or without a namespace prefix.
_SITEMAP_ROOT = re.compile(rb"<(?:[\w.-]+:)?(?:urlset|sitemapindex)[\s>/]")

# feedparser flags these but the feed itself is well-formed.
_BENIGN_BOZO = (feedparser.CharacterEncodingOverride, feedparser.NonXMLContentType)
#: Categories kept per item (a feed may list hundreds; each becomes a restrict token in Vertex AI).
MAX_CATEGORIES = 20


def read_feed(url: str, result: FetchResult, fetcher: Fetcher) -> Reading:
    """The feed's entries, de-duplicated by guid; InvalidInput when it is not a usable feed."""
    # No content-location: feedparser would then also "resolve" a relative guid
    # such as "post-42" into a URL, changing the item's identity. Links are
    # resolved against the feed's URL below instead.
    headers = {"content-type": result.content_type}
    if result.charset:
        headers["content-type"] += f"; charset={result.charset}"
    # A BytesIO, never a str: feedparser treats a str as a URL or a file path.
    parsed = feedparser.parse(io.BytesIO(result.body), response_headers=headers)
    problem = parsed.get("bozo_exception")
    if parsed.get("bozo") and not isinstance(problem, _BENIGN_BOZO):
        raise InvalidInput(
            f"feed {url} is malformed XML ({type(problem).__name__}: {problem}); nothing was "
            f"changed or removed, fix the feed or remove it"
        )
    if not parsed.get("version") and not parsed.entries:
        if _SITEMAP_ROOT.search(result.body[:4096]):
            raise InvalidInput(
                f"{url} is a sitemap, not an RSS or Atom feed; remove it and add it as a sitemap: "
                "`ragbus sources add URL --kind sitemap` (or `ragbus sitemaps add URL`)"
            )
        raise InvalidInput(
            f"{url} is not an RSS or Atom feed (got {result.content_type or 'no content type'}, "
            f"{len(result.body)} bytes); check that the URL points at the feed, not a web page"
        )
    reading = Reading(entries=[])
    seen: set[str] = set()
    for raw in parsed.entries:
        try:
            joined = _joined(result.url, raw["link"]) if raw.get("link") else None
        except InvalidInput as exc:
            _reject(url, reading, f"entry {_shown(raw.get('id') or raw.get('title'))}: {exc}")
            continue
        link = joined  # fetched and shown as written; its normalised form is the page's identity
        guid = raw.get("id") or joined  # as before: an item's identity in its feed does not move
        if not guid:
            reading.skipped += 1
            log.warning(
                "feed %s: entry %r has neither guid nor link; skipped", url, raw.get("title", "")
            )
            continue
        if guid in seen:
            reading.duplicates += 1
            log.warning("feed %s: duplicate guid %r ignored (the first entry wins)", url, guid)
            continue
        try:
            entry = _entry(guid, link, joined, raw)
        except (ValueError, TypeError, OverflowError) as exc:  # a field feedparser passed through unread
            _reject(url, reading, f"entry {_shown(guid)}: {type(exc).__name__}: {exc}")
            continue
        seen.add(guid)
        reading.entries.append(entry)
    return reading


def _joined(base: str, link: str) -> str:
    """``link`` resolved against ``base``; InvalidInput when it cannot be (``http://[oops/``)."""
    try:
        return urljoin(base, link.strip())
    except ValueError as exc:
        raise InvalidInput(f"link {_shown(link)} is not a valid URL ({exc})") from None


def _shown(value: Any) -> str:
    text = str(value or "")
    return repr(text if len(text) <= 120 else text[:117] + "...")


def _reject(url: str, reading: Reading, reason: str) -> None:
    reading.skipped += 1
    reading.rejected.append(reason)
    log.warning("feed %s: %s; skipped", url, reason)


def _entry(guid: str, link: str | None, joined: str | None, raw: Any) -> Entry:
    own_fields = {
        "title": raw.get("title", ""),
        # as written (resolved), not normalised: the hash of an unchanged item stays what it was
        "link": joined or "",
        # dict.get: FeedParserDict.get("updated") falls back to "published" with
        # a deprecation warning; the entry's own fields are wanted here.
        "updated": dict.get(raw, "updated", ""),
        "published": dict.get(raw, "published", ""),
        "summary": raw.get("summary", ""),
        "content": [c.get("value", "") for c in raw.get("content", [])],
    }
    when = dict.get(raw, "published_parsed") or dict.get(raw, "updated_parsed")
    published = None
    if when:
        try:
            published = datetime(*when[:6], tzinfo=UTC).isoformat()
        except (ValueError, OverflowError, TypeError):
            # year 0 and the like: the article is still an article, only its date is unknown
            log.warning("entry %r: date %r is out of range; kept without a date", raw.get("id"), when)
    return Entry(
        guid=guid,
        link=link,
        title=own_fields["title"],
        published=published,
        item_hash=content_hash(json.dumps(own_fields, sort_keys=True, ensure_ascii=False)),
        metadata=_metadata(raw),
    )


def _metadata(raw: Any) -> dict[str, str | list[str]]:
    """The item's author and categories (RSS ``<author>``/``<dc:creator>``/``<category>``, Atom
    ``<author>``/``<category term>``): what a search's ``where author=...`` / ``category=...`` matches.
    Not part of the item's hash, so an item indexed before keeps its hash (and is not fetched again)."""
    out: dict[str, str | list[str]] = {}
    author = raw.get("author")
    if isinstance(author, str) and author.strip():
        out["author"] = author.strip()
    terms: list[str] = []
    for tag in raw.get("tags") or []:
        term = tag.get("term") if hasattr(tag, "get") else None
        if isinstance(term, str) and term.strip() and term.strip() not in terms:
            terms.append(term.strip())
    if terms:
        out["category"] = terms[:MAX_CATEGORIES]
    return out
