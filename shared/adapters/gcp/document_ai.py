"""PDFs read by Document AI's layout parser (``RAGBUS_PDF_READER=documentai``), over its REST API (v1).

One call, in the shape of the v1 reference (``projects.locations.processors.process``)::

    POST https://{location}-documentai.googleapis.com/v1/{processor}:process
    {"rawDocument": {"content": base64, "mimeType": "application/pdf"},
     "processOptions": {"layoutConfig": {...}}, "fieldMask": "documentLayout"}

answered by ``{"document": {"documentLayout": {"blocks": [DocumentLayoutBlock]}}}``, where a block
is one of ``textBlock {text, type, blocks}`` (type ``paragraph``, ``subtitle``, ``heading-1`` ..
``heading-5``, ``header``, ``footer``), ``tableBlock {headerRows, bodyRows, caption}`` (a row is
``{cells: [{blocks, rowSpan, colSpan}]}``) or ``listBlock {listEntries: [{blocks}], type}``, with
``blockId`` and ``pageSpan {pageStart, pageEnd}``. Blocks nest: a heading's section is its
``blocks``.

Online processing takes at most 15 pages and 20 MB per request (docs/google-cloud.md cites the
page), so the file is cut into pieces (:mod:`shared.formats.pdf_pieces`, ``RAGBUS_DOCUMENTAI_PAGES``)
sent a few at a time; a piece's ``pageSpan`` counts from its own first page, and is moved to the
file's page. The blocks become the passages the local reader yields (:mod:`shared.formats.pdf`):
headings, paragraphs, list items and table rows ("column: value; ..."), each at ``{"page": n}``;
running headers and footers are dropped as the local reader drops them.

Each request has one deadline (``RAGBUS_DOCUMENTAI_TIMEOUT_S``), a bounded reply and retries of
429/5xx with ``Retry-After`` (:class:`~shared.adapters.http_api.HttpAPI`); still failing, the file
is :class:`~shared.contract.errors.RetryableError` (redelivered, then dead-lettered with the
reason); a request the service refuses (400: a damaged piece; 403: the service account's role) is
:class:`~shared.contract.errors.InvalidInput` naming the file's pages and the service's words: that
file alone is dead-lettered. The whole file runs in the bounded reading process
(:mod:`shared.formats.sandbox`, ``RAGBUS_PARSE_SECONDS``). Credentials are Application Default
Credentials (the function's service account); an endpoint on 127.0.0.1 (a stand-in) gets none.
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx

from shared.adapters.deadline_http import one_deadline
from shared.adapters.http_api import HttpAPI, error_detail
from shared.contract.config import documentai_location_of
from shared.contract.errors import InvalidInput, RetryableError
from shared.formats.office import table_rows
from shared.formats.passages import Passage, PassageKind, Reading
from shared.formats.pdf_pieces import PdfPiece, PdfPieces
from shared.formats.registry import Limits

#: Online processing's limits for the layout parser (cloud.google.com/document-ai/docs/layout-parse-chunk,
#: "Limitations"): 15 pages of a PDF (RAGBUS_DOCUMENTAI_PAGES may ask for fewer) and 20 MB per file.
ONLINE_MAX_PAGES = 15
ONLINE_MAX_BYTES = 20 * 1024 * 1024
#: Requests in flight for one file: far below the default quota of 600 online process requests a
#: minute per project (cloud.google.com/document-ai/quotas) even with several cleaners at once.
IN_FLIGHT = 4
#: The layout of 15 dense pages is a few hundred KB of JSON; bounded far above that.
MAX_REPLY_BYTES = 16 * 1024 * 1024
_HEADINGS = ("title", "subtitle", "heading")
_FURNITURE = ("header", "footer")  # running headers and footers, as the local reader drops them


class LayoutParser(HttpAPI):
    """One layout parser processor, called over REST (see the module docstring)."""

    label = "Document AI layout parser"
    max_reply_bytes = MAX_REPLY_BYTES
    max_retry_after_s = 30.0  # nobody waits on an ingestion; the file's own bound is RAGBUS_PARSE_SECONDS
    reply_size = "the layout of 15 pages is a few hundred KB"

    def __init__(self, processor: str, *, endpoint: str = "", timeout_s: float = 60.0,
                 token: Callable[[], str] | None = None, transport: httpx.BaseTransport | None = None) -> None:
        self.processor = processor
        base = endpoint or f"https://{documentai_location_of(processor)}-documentai.googleapis.com"
        loopback = urlsplit(base).hostname in ("127.0.0.1", "localhost", "::1")
        # A stand-in on this machine is sent no credentials; Google's endpoint the function's own.
        self._token = token if token is not None or loopback else _default_token()
        self.open_client(base, timeout_s=timeout_s, transport=transport)

    @classmethod
    def from_limits(cls, limits: Limits) -> LayoutParser:
        if not limits.documentai_processor:
            raise InvalidInput("RAGBUS_PDF_READER=documentai needs RAGBUS_DOCUMENTAI_PROCESSOR (the layout parser "
                               "processor); the PDF was not read")
        return cls(limits.documentai_processor, endpoint=limits.documentai_endpoint,
                   timeout_s=limits.documentai_timeout_s)

    def too_slow(self, operation: str, exc: httpx.TimeoutException) -> RetryableError:
        return RetryableError(f"{self.label} {operation} did not answer within {self.timeout_s:g}s at "
                              f"{self.shown_url} ({type(exc).__name__}); raise RAGBUS_DOCUMENTAI_TIMEOUT_S "
                              "or lower RAGBUS_DOCUMENTAI_PAGES")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token()}"} if self._token else {}

    def process(self, piece: PdfPiece, url: str) -> list[dict[str, Any]]:
        """The layout blocks of one piece; errors name the file and the piece's pages."""
        body = {
            "rawDocument": {"content": base64.b64encode(piece.data).decode("ascii"), "mimeType": "application/pdf"},
            # the layout alone: no chunks (the indexer chunks), images or boxes
            "processOptions": {"layoutConfig": {"returnImages": False, "returnBoundingBoxes": False}},
            "fieldMask": "documentLayout",
        }
        what = f"of {piece.label} of {url}"
        with one_deadline(self.timeout_s):
            response = self.send(f"process {what}", "POST", f"/v1/{self.processor}:process", body,
                                 headers=self._headers)
        if response.status_code >= 400:
            raise InvalidInput(f"{self.label} refused {piece.label} (HTTP {response.status_code}: "
                               f"{error_detail(response)}); {_hint(response.status_code, self.processor)}")
        try:
            document = response.json()["document"]
            blocks = (document.get("documentLayout") or {}).get("blocks") or []
            if not isinstance(blocks, list):
                raise TypeError("documentLayout.blocks is not a list")
            failed = document.get("error") or {}  # Document.error: google.rpc.Status
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RetryableError(f"{self.label} answered {piece.label} of {url} with HTTP {response.status_code} "
                                 f"but no document layout ({type(exc).__name__}: {exc})") from exc
        if isinstance(failed, dict) and failed.get("code") and not blocks:
            raise InvalidInput(f"{self.label} could not process {piece.label}: {failed.get('message') or failed} "
                               f"(code {failed.get('code')}); {_hint(400, self.processor)}")
        return blocks


def _default_token() -> Callable[[], str]:
    from shared.adapters.gcp.access_token import default_token

    return default_token()[0]


def _hint(status: int, processor: str) -> str:
    if status in (401, 403):
        return ("check that the function's service account holds roles/documentai.apiUser and that the Document "
                "AI API is enabled")
    if status == 404:
        return f"check RAGBUS_DOCUMENTAI_PROCESSOR ({processor}) and its location"
    return "the file was refused; its other pages are not indexed either"


# ------------------------------------------------------------------ the reader


def read_pdf(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    """A PDF read by the layout parser (the registry's reader for ``RAGBUS_PDF_READER=documentai``)."""
    reading = Reading()
    parser = LayoutParser.from_limits(limits)
    pages = min(limits.documentai_pages, ONLINE_MAX_PAGES)
    try:
        with PdfPieces(raw, pages=pages, max_bytes=ONLINE_MAX_BYTES, max_pages=limits.max_pages,
                       reading=reading) as pdf:
            for piece, blocks in _processed(parser, pdf.pieces(), url):
                reading.passages.extend(layout_passages(blocks, piece))
            title = pdf.title
    finally:
        parser.close()
    reading.title = title or next((p.text for p in reading.passages[:5] if p.kind == "heading"), "")
    return reading


def _processed(parser: LayoutParser, pieces: Iterable[PdfPiece], url: str):
    """(piece, its blocks) in page order, with up to :data:`IN_FLIGHT` requests at once; the first
    failure ends the file (it is refused or retried whole) and cancels what has not started."""
    with ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="documentai") as pool:
        pending: deque[tuple[PdfPiece, Future]] = deque()
        try:
            for piece in pieces:
                pending.append((piece, pool.submit(parser.process, piece, url)))
                if len(pending) >= IN_FLIGHT:
                    first, future = pending.popleft()
                    yield first, future.result()
            while pending:
                first, future = pending.popleft()
                yield first, future.result()
        finally:
            for _, future in pending:
                future.cancel()


# ------------------------------------------------------------------ blocks -> passages


def layout_passages(blocks: list[dict[str, Any]], piece: PdfPiece) -> list[Passage]:
    """The passages ``blocks`` (a piece's ``documentLayout.blocks``) say, in order, each at the
    file's page (a block's ``pageSpan.pageStart`` counts from the piece's first page)."""
    out: list[Passage] = []
    for block in blocks:
        _block(block, piece, piece.first, out)
    return out


def _page(block: dict[str, Any], piece: PdfPiece, inherited: int) -> int:
    span = block.get("pageSpan") or {}
    start = span.get("pageStart")
    if not isinstance(start, int) or isinstance(start, bool) or start < 1:
        return inherited
    return min(piece.first + start - 1, piece.last)


def _block(block: dict[str, Any], piece: PdfPiece, inherited: int, out: list[Passage]) -> None:
    if not isinstance(block, dict):
        return
    page = _page(block, piece, inherited)
    if "textBlock" in block:
        text = block["textBlock"] or {}
        kind = str(text.get("type") or "paragraph").lower()
        if kind in _FURNITURE:
            return
        _add(out, text.get("text"), "heading" if kind.startswith(_HEADINGS) else "paragraph", page)
        for child in text.get("blocks") or []:
            _block(child, piece, page, out)
    elif "listBlock" in block:
        for entry in (block["listBlock"] or {}).get("listEntries") or []:
            _list_entry(entry, piece, page, out)
    elif "tableBlock" in block:
        _table(block["tableBlock"] or {}, piece, page, out)


def _list_entry(entry: dict[str, Any], piece: PdfPiece, page: int, out: list[Passage]) -> None:
    """One item: the text of its text blocks; a list nested in it gives items of its own."""
    children = [b for b in (entry or {}).get("blocks") or [] if isinstance(b, dict)]
    texts = [b for b in children if "textBlock" in b]
    if texts:
        _add(out, " ".join(_text_of(b) for b in texts), "item", _page(texts[0], piece, page))
    for child in children:
        if "textBlock" not in child:
            _block(child, piece, page, out)


def _table(table: dict[str, Any], piece: PdfPiece, page: int, out: list[Passage]) -> None:
    """A table as rows "column: value; ..." (the header rows name the columns), its caption first."""
    _add(out, table.get("caption"), "paragraph", page)
    header = [_cells(row) for row in table.get("headerRows") or []]
    body = table.get("bodyRows") or []
    names = [" ".join(c for c in column if c) for column in zip(*header, strict=False)] if header else []
    rows = [names] if names else []
    pages = [page] if names else []
    for row in body:
        rows.append(_cells(row))
        cell_blocks = [b for cell in (row or {}).get("cells") or [] for b in (cell or {}).get("blocks") or []]
        pages.append(_page(cell_blocks[0], piece, page) if cell_blocks and isinstance(cell_blocks[0], dict) else page)
    kept = [(r, p) for r, p in zip(rows, pages, strict=True) if any(r)]
    if not kept:
        return
    texts = table_rows([r for r, _ in kept])
    # table_rows reads the first row as the header: the rest line up with the later rows' pages
    row_pages = [p for _, p in kept[1:]] if len(kept) > 1 else [kept[0][1]]
    for text, row_page in zip(texts, row_pages, strict=False):
        _add(out, text, "row", row_page)


def _cells(row: dict[str, Any]) -> list[str]:
    return [" ".join(_text_of(b) for b in (cell or {}).get("blocks") or [] if isinstance(b, dict))
            for cell in (row or {}).get("cells") or []]


def _text_of(block: dict[str, Any]) -> str:
    """All the text in ``block`` and its children (a table cell, a list entry)."""
    parts: list[str] = []
    text = block.get("textBlock")
    if isinstance(text, dict):
        parts.append(str(text.get("text") or ""))
        parts.extend(_text_of(b) for b in text.get("blocks") or [] if isinstance(b, dict))
    for entry in (block.get("listBlock") or {}).get("listEntries") or []:
        parts.extend(_text_of(b) for b in (entry or {}).get("blocks") or [] if isinstance(b, dict))
    return " ".join(" ".join(p.split()) for p in parts if p and p.strip())


def _add(out: list[Passage], text: Any, kind: PassageKind, page: int) -> None:
    words = " ".join(str(text or "").split())
    if words:
        out.append(Passage(words, kind, {"page": page}))
