"""The one registry of document formats: a file's suffix or a response's media type -> the reader
that turns its bytes into passages (:mod:`shared.formats.passages`).

Every way in reads it: ``ragbus ingest`` (which suffixes are documents), the GCS trigger (an
object's media type), the feed poller (which linked files it fetches), the cleaner (which reader
runs), and the generated lists in the CLI help, docs/formats.md and docs/architecture.md. A new file kind
is one reader and one row of :data:`KINDS`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from shared.formats.passages import Reading


@dataclass(frozen=True)
class Limits:
    """Bounds on reading one file (settings: ``RAGBUS_MAX_PAGES`` and the rest)."""

    max_pages: int = 1000  # pages (slides, sheets' rows / 100) read; the rest are cut and counted
    ocr: bool = True  # read a page without a text layer by OCR when an engine is installed
    ocr_max_pages: int = 50  # pages of one file read by OCR (about 2 s each)
    zip_max_entries: int = 10_000  # an OOXML/EPUB/ODT container's entries
    zip_max_bytes: int = 200 * 1024 * 1024  # their expanded total
    zip_max_ratio: int = 200  # one entry's expanded size over its compressed size
    max_rows: int = 100_000  # a spreadsheet's rows, all sheets together
    # RAGBUS_PDF_READER=documentai: PDFs read by Document AI's layout parser (READER_CHOICES)
    pdf_reader: str = "local"
    documentai_processor: str = ""  # projects/P/locations/L/processors/ID
    documentai_endpoint: str = ""  # the API base ("": the processor location's own)
    documentai_pages: int = 15  # pages of one request
    documentai_timeout_s: float = 60.0  # one request, its retries included


#: A text file (HTML, Markdown, plain text, reStructuredText, CSV/TSV) larger than this is read in a bounded
#: process of its own too (``RAGBUS_PARSE_SECONDS``, ``RAGBUS_PARSE_MEMORY_MB``), as a binary kind always is: a
#: 300 kB page of 30,000 attributes on one element kept the cleaner's thread 40 s (lxml, htmldate and jusText
#: cost their count squared), an 8.4 MB page 45 s, and nothing can stop a thread. A smaller file is read in the
#: cleaner's own process, where that markup costs at most 13 s (3 s at 64 KiB; load 9 on 2 cores) and a
#: typical 40 kB page 0.04 s, against 0.8 s in a process of its own (2.6% of /usr/share/doc's text files
#: are larger; 7.7% over 64 KiB).
ISOLATED_OVER_BYTES = 128 * 1024

#: A reStructuredText file larger than this is read in a bounded process of its own: docutils' inline parser
#: costs the square of a run of text without a space (a URL-like 'a-a-a-...', 'a:a:', 'a/a/'), 4 KiB of it
#: 1.7 s, 8 KiB 5.4 s, 16 KiB 14 s and 32 KiB over 20 s of the cleaner's own thread, 128 KiB about 13 minutes,
#: where nothing could stop it. Under this bound a file costs the thread at most about 2 s; over it, 0.8 s more.
RST_ISOLATED_OVER_BYTES = 4 * 1024

#: reader(raw bytes, media type with its parameters, url, limits) -> Reading
Reader = Callable[[bytes, str, str, Limits], Reading]


@dataclass(frozen=True)
class FileKind:
    """One kind of document file: its names, its reader, and how it is read."""

    name: str
    suffixes: tuple[str, ...]  # lower case, with the dot; the first is the usual one
    media_types: tuple[str, ...]  # the first is announced for a file of this kind
    reader: str  # "module:function", imported on first use (a PDF library loads only for PDFs)
    binary: bool = False  # read in a separate, bounded process (shared.formats.sandbox), never decoded as text
    numbered_parts: bool = False  # a file split in parts names them with its suffix and -1, -2 ... (find.info-2)
    refused: str = ""  # why files of this kind are refused by name (a legacy binary format)
    in_process_bytes: int = ISOLATED_OVER_BYTES  # a text kind's file up to this size is read in the cleaner's process

    @property
    def media_type(self) -> str:
        return self.media_types[0]

    def load(self) -> Reader:
        module, _, function = self.reader.partition(":")
        return getattr(importlib.import_module(module), function)


def legacy_refusal(modern: str, where: str = "") -> str:
    """Why a legacy binary Office file is refused: by its name (a .doc), or by its bytes under a modern name
    (``where``: :mod:`shared.formats.containers` says so)."""
    return f"a legacy binary Office file (OLE){where}, which ragbus does not read; save it as {modern} and ingest that"


KINDS: list[FileKind] = [
    FileKind("HTML", (".html", ".htm"), ("text/html", "application/xhtml+xml", "application/xml+html"),
             "shared.formats.text:read_html"),
    FileKind("Markdown", (".md", ".markdown"), ("text/markdown", "text/x-markdown", "text/md"),
             "shared.formats.text:read_markdown"),
    FileKind("plain text", (".txt",), ("text/plain",), "shared.formats.text:read_plain"),
    FileKind("GNU Info", (".info",), ("text/x-info", "application/x-info"), "shared.formats.text:read_info",
             numbered_parts=True),
    FileKind("reStructuredText", (".rst", ".rest"), ("text/x-rst", "text/prs.fallenstein.rst"),
             "shared.formats.text:read_rst", in_process_bytes=RST_ISOLATED_OVER_BYTES),
    FileKind("PDF", (".pdf",), ("application/pdf",), "shared.formats.pdf:read_pdf", binary=True),
    FileKind("Word", (".docx",), ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",),
             "shared.formats.office:read_docx", binary=True),
    FileKind("PowerPoint", (".pptx",),
             ("application/vnd.openxmlformats-officedocument.presentationml.presentation",),
             "shared.formats.office:read_pptx", binary=True),
    FileKind("Excel", (".xlsx",), ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",),
             "shared.formats.sheets:read_xlsx", binary=True),
    FileKind("CSV", (".csv",), ("text/csv",), "shared.formats.sheets:read_csv"),
    FileKind("TSV", (".tsv", ".tab"), ("text/tab-separated-values",), "shared.formats.sheets:read_tsv"),
    FileKind("EPUB", (".epub",), ("application/epub+zip",), "shared.formats.office:read_epub", binary=True),
    FileKind("OpenDocument text", (".odt",), ("application/vnd.oasis.opendocument.text",),
             "shared.formats.office:read_odt", binary=True),
    FileKind("legacy Word", (".doc",), ("application/msword",), "", refused=legacy_refusal(".docx")),
    FileKind("legacy PowerPoint", (".ppt",), ("application/vnd.ms-powerpoint",), "", refused=legacy_refusal(".pptx")),
    FileKind("legacy Excel", (".xls",), ("application/vnd.ms-excel",), "", refused=legacy_refusal(".xlsx")),
]


#: Readers a setting puts in place of a kind's own: (kind, the setting's choice) -> reader. The
#: service's reader runs where the kind's would (a bounded process of its own) and yields the same
#: passages and positions.
READER_CHOICES: dict[tuple[str, str], str] = {
    ("PDF", "documentai"): "shared.adapters.gcp.document_ai:read_pdf",
}


def chosen(kind: FileKind, limits: Limits) -> FileKind:
    """``kind`` with the reader the settings choose for it (``RAGBUS_PDF_READER``)."""
    reader = READER_CHOICES.get((kind.name, limits.pdf_reader)) if kind.name == "PDF" else None
    return replace(kind, reader=reader) if reader else kind


#: the suffix of a part of a file split in parts (find.info-2: a manual split in files beside find.info, their index)
_PART_SUFFIX = re.compile(r"(\.[a-z0-9]+)-[0-9]{1,3}")


def by_suffix(suffix: str) -> FileKind | None:
    """The kind of a file named with ``suffix`` (".PDF" too; ".info-2", a part of a kind split in parts), or None."""
    suffix = suffix.lower()
    part = _PART_SUFFIX.fullmatch(suffix)
    return next((k for k in KINDS if suffix in k.suffixes
                 or (part is not None and k.numbered_parts and part.group(1) in k.suffixes)), None)


def by_media_type(media_type: str) -> FileKind | None:
    """The kind of a response or object of ``media_type`` (parameters ignored), or None. Any other
    ``text/*`` reads as plain text, as a browser shows it."""
    media = media_type.partition(";")[0].strip().lower()
    kind = next((k for k in KINDS if media in k.media_types), None)
    if kind is None and media.startswith("text/"):
        return by_suffix(".txt")
    return kind


def readable() -> list[FileKind]:
    return [k for k in KINDS if not k.refused]


def suffix_list() -> str:
    """".html, .htm, .md, ..." : every suffix ragbus reads."""
    return ", ".join(s for k in readable() for s in k.suffixes)


def readable_media_types() -> tuple[str, ...]:
    """Every media type a reader takes (what a feed item's link may be fetched as)."""
    return tuple(m for k in readable() for m in k.media_types)


def kinds_table() -> str:
    """The Markdown table docs/formats.md and docs/architecture.md carry (``python -m shared.tools.docs``)."""
    lines = ["| kind | suffixes | media types | read by |", "|---|---|---|---|"]
    for k in KINDS:
        how = f"refused: {k.refused}" if k.refused else f"`{k.reader}`" + (" (separate process)" if k.binary else "")
        how += "".join(f"; with `RAGBUS_PDF_READER={choice}`, `{reader}`"
                       for (name, choice), reader in READER_CHOICES.items() if name == k.name)
        suffixes = " ".join(k.suffixes) + (f" (its parts {k.suffixes[0]}-1, -2 ...)" if k.numbered_parts else "")
        lines.append(f"| {k.name} | {suffixes} | {' '.join(f'`{m}`' for m in k.media_types)} | {how} |")
    return "\n".join(lines)
