"""Cleaner: raw document bytes in, main text with a metadata header out.

For every ``DocumentFetched`` the cleaner reads the raw bytes from the blob
store, decodes them (a page's declared charset is often wrong), extracts the
main text by the reader the registry of formats names for its media type
(:mod:`shared.formats.registry`: HTML through trafilatura, Markdown through markdown-it,
reStructuredText through docutils, PDF through PDFium, Office files and e-books, plain text as
is; a binary kind in a bounded process of its own), prepends the metadata header and stores the
result at ``clean/{document_id}/{content_hash}.txt`` (and, for a kind with pages, slides or rows,
where each passage stands at ``...positions.json``) before publishing ``DocumentCleaned``. Running twice for the same (document, content hash)
publishes the same message and writes the same bytes.

A document with no main text is a permanent error: the message is
dead-lettered with the reason and the document's previously indexed chunks
stay as they were (the cleaner never touches the index).
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, PermanentError
from shared.contract.messages import DocumentCleaned, DocumentFetched, Message
from shared.contract.text import build_header, clip_metadata, split_header
from shared.formats.gzipped import GZIP_SIGNATURE, GzipRefused, compressed_name, gunzip
from shared.formats.passages import Reading, lay_out
from shared.formats.registry import Limits, by_media_type, chosen, readable
from shared.formats.sandbox import Bounds, read_isolated, too_deep
from shared.formats.text import (  # noqa: F401  (decode_bytes: the cleaner's tests read it here)
    CleanDocument,
    binary_reason,
    decode_bytes,
)
from shared.ingest import processed_items
from shared.ingest.files import DEFAULT_MAX_BYTES
from shared.observability.tracing import annotate

log = logging.getLogger("ragbus.cleaner")


def clean_key(document_id: str, content_hash: str) -> str:
    return f"clean/{document_id}/{content_hash}.txt"


def _title_from_url(url: str) -> str:
    path = PurePosixPath(unquote(urlsplit(url).path or url))
    return path.stem.replace("-", " ").replace("_", " ").strip() if path.name else ""


# --------------------------------------------------------------- handler


def clean_content(raw: bytes, content_type: str, url: str, settings: Settings | None = None) -> CleanDocument:
    """The main text of ``raw`` according to its media type (the passages laid out, no positions)."""
    reading = read_content(raw, content_type, url, settings)
    body, _ = lay_out(reading.passages)
    return CleanDocument(body=body, title=reading.title, published=reading.published)


def read_content(raw: bytes, content_type: str, url: str, settings: Settings | None = None) -> Reading:
    """``raw`` read by its kind's reader (:mod:`shared.formats.registry`); a binary kind, or a text file over its
    kind's ``in_process_bytes`` (:data:`~shared.formats.registry.ISOLATED_OVER_BYTES`; reStructuredText's is
    :data:`~shared.formats.registry.RST_ISOLATED_OVER_BYTES`), in a bounded process of its own.
    :class:`InvalidInput` for a kind ragbus does not read."""
    kind = by_media_type(content_type)
    if kind is None or kind.refused:
        why = kind.refused if kind is not None else (
            f"ragbus reads {', '.join(k.name for k in readable())} (convert the document to one of these, "
            "or leave it out of the feed/folder)")
        raise InvalidInput(f"content type {content_type!r} cannot be cleaned: {why}")
    settings = settings or Settings()
    limits = format_limits(settings)
    kind = chosen(kind, limits)  # RAGBUS_PDF_READER
    if not kind.binary and len(raw) <= kind.in_process_bytes:
        try:
            return kind.load()(raw, content_type, url, limits)
        except RecursionError:
            raise too_deep(kind.name) from None
    bounds = Bounds(seconds=settings.parse_seconds, memory_bytes=settings.parse_memory_mb * 1024 * 1024)
    return read_isolated(kind, raw, content_type, url, limits, bounds)


def format_limits(settings: Settings) -> Limits:
    return Limits(max_pages=settings.max_pages, ocr=settings.ocr, ocr_max_pages=settings.ocr_max_pages,
                  zip_max_entries=settings.zip_max_entries, zip_max_bytes=settings.zip_max_mb * 1024 * 1024,
                  zip_max_ratio=settings.zip_max_ratio, max_rows=settings.max_rows, pdf_reader=settings.pdf_reader,
                  documentai_processor=settings.documentai_processor or "",
                  documentai_endpoint=settings.documentai_endpoint or "", documentai_pages=settings.documentai_pages,
                  documentai_timeout_s=settings.documentai_timeout_s)


def positions_key(document_id: str, content_hash: str) -> str:
    return f"clean/{document_id}/{content_hash}.positions.json"


def clean_document(message: DocumentFetched, ports: Deps) -> DocumentCleaned | None:
    """Clean one fetched document, store the clean text (and where its passages stand: pages,
    slides, rows) and announce it; None when the document was deleted (or sent anew) since it was
    fetched: deletes win, and the work is dropped here.

    Titles and the date are untrusted metadata, cut to ``RAGBUS_MAX_TITLE_CHARS``: the header
    goes into the first chunk and the title into every chunk's record."""
    stale = processed_items.stale(ports.state, message.document_id, content_hash=message.content_hash,
                                  revision=message.revision)
    if stale:
        log.info("%s: not cleaned: %s", message.document_id, stale)
        annotate(skipped=stale)
        return None
    # Cleaning is deterministic, so a redelivery rewrites the same bytes under the
    # same key and announces the same event: no separate "already done" check needed.
    key = clean_key(message.document_id, message.content_hash)
    blobs = ports.blobs
    try:
        raw = blobs.get(message.raw_ref)
    except KeyError as exc:
        raise PermanentError(
            f"document {message.document_id} ({message.url}): raw bytes {message.raw_ref!r} are not in "
            "the blob store; fetch the document again"
        ) from exc

    if message.source == "gcs" and compressed_name(message.raw_ref)[1] and raw[:2] == GZIP_SIGNATURE:
        raw = gcs_gunzipped(message, raw)  # (served decompressed, as one stored with Content-Encoding: gzip is, as is)
    kind = by_media_type(message.content_type)
    textual = kind is None or not kind.binary
    why = binary_reason(raw) if textual else None
    if why:
        raise InvalidInput(_binary_error(message, raw, why))
    try:
        reading = read_content(raw, message.content_type, message.url, ports.settings)
    except InvalidInput as exc:
        raise InvalidInput(f"document {message.document_id} ({message.url}): {exc}; it is left out of the index "
                           "and anything indexed for it before stays as it was") from None
    body, marks = lay_out(reading.passages)
    why = binary_reason(raw, body) if textual else None
    if why:
        raise InvalidInput(_binary_error(message, raw, why))
    if not body.strip():
        unread = f"; {reading.unread} part(s) not read: {reading.unread_reason}" if reading.unread else ""
        raise InvalidInput(
            f"document {message.document_id} ({message.url}) has no main text after cleaning "
            f"({len(raw)} bytes of {message.content_type}{unread}); it is left out of the index and "
            "anything indexed for it before stays as it was"
        )
    # A title the source states (a feed item's) is the publisher's own; else what the document
    # says about itself (<title>, front matter, first heading); else the name it was found under.
    candidates = (message.title.strip(), reading.title, message.fallback_title.strip())
    title = next((t for t in candidates if t), "") or _title_from_url(message.url) or "Untitled"
    title = clip_metadata(title, ports.settings.max_title_chars)
    # a feed's date is the publisher's; a file's (its modification time) yields to one it states
    dates = (reading.published, message.published) if message.source == "file" else (message.published,
                                                                                      reading.published)
    published = clip_metadata(next((d for d in dates if d), None), 64) or None
    header = build_header(title, published, message.url)
    text = header + body + "\n"
    ref = blobs.put(key, text.encode("utf-8"), "text/plain; charset=utf-8")
    positions_ref = ""
    if any(position for _, position in marks):
        shifted = [[offset + len(header), position] for offset, position in marks]
        positions_ref = blobs.put(positions_key(message.document_id, message.content_hash),
                                  json.dumps({"marks": shifted}).encode("utf-8"), "application/json")
    stated, _ = split_header(text)
    event = _cleaned_event(message, ref, stated.title if stated else title, published, len(text),
                           positions_ref=positions_ref, reading=reading)
    log.info("%s: cleaned %d bytes of %s into %d characters%s", message.document_id, len(raw),
             message.content_type, len(text),
             f" ({reading.unread} part(s) not read: {reading.unread_reason})" if reading.unread else "")
    ports.publisher.publish(event)
    return event


def gcs_gunzipped(message: DocumentFetched, raw: bytes) -> bytes:
    """The document a Cloud Storage object named ``doc.md.gz`` holds gzip-compressed, decompressed once and no
    further than the cap one document has (:data:`~shared.ingest.files.DEFAULT_MAX_BYTES`), as `ragbus ingest`
    reads such a file: a gzip bomb is refused once the cap is passed, never inflated whole. :class:`InvalidInput`
    (dead-lettered with the reason) when it is over the cap, not gzip, damaged or compressed twice."""
    refused = f"document {message.document_id} ({message.url})"
    kept = "it is left out of the index and anything indexed for it before stays as it was"
    if len(raw) > DEFAULT_MAX_BYTES:
        raise InvalidInput(f"{refused} is {len(raw)} bytes, over the {DEFAULT_MAX_BYTES}-byte cap for one document; "
                           f"{kept}")
    try:
        data, trailing = gunzip(io.BytesIO(raw), DEFAULT_MAX_BYTES)
    except GzipRefused as exc:
        raise InvalidInput(f"{refused} {exc}; {kept}") from None
    if trailing:
        log.warning("%s: bytes after its gzip data are not gzip; ignored, as gzip -d ignores them", refused)
    return data


def _binary_error(message: DocumentFetched, raw: bytes, why: str) -> str:
    return (f"document {message.document_id} ({message.url}) looks like binary data, not "
            f"{message.content_type} ({why}; {len(raw)} bytes); it was refused before chunking, "
            "and anything indexed for it before stays as it was")


def _cleaned_event(message: DocumentFetched, ref: str, title: str, published: str | None,
                   characters: int, *, positions_ref: str = "", reading: Reading | None = None) -> DocumentCleaned:
    return DocumentCleaned(
        document_id=message.document_id,
        source=message.source,
        origin=message.origin,
        url=message.url,
        title=title,
        published=published,
        clean_ref=ref,
        content_hash=message.content_hash,
        characters=characters,
        metadata=message.metadata,
        revision=message.revision,
        positions_ref=positions_ref,
        unread=reading.unread if reading else 0,
        unread_reason=reading.unread_reason if reading else "",
    )


def handle(message: Message, deps: Deps) -> None:
    """Entry point for the runtime: ``DocumentFetched`` -> ``DocumentCleaned``."""
    if not isinstance(message, DocumentFetched):
        raise InvalidInput(f"the cleaner handles DocumentFetched, not {type(message).__name__}")
    clean_document(message, deps)
