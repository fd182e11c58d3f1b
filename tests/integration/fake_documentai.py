"""A local HTTP server speaking Document AI's ``process`` REST method (v1) as a layout parser does.

``POST /v1/projects/{p}/locations/{l}/processors/{id}:process`` is checked as the service checks
it, and refused with Google's error shape (``{"error": {"code", "message", "status"}}``) where the
service would refuse it:

- a path other than the processor's, or another method: 404 / 405;
- a body that is not JSON, an unknown field (proto3 JSON rejects one), not exactly one document
  source, a ``rawDocument`` without base64 ``content`` or with a ``mimeType`` the layout parser does
  not read, ``processOptions.layoutConfig`` that is not an object: 400 ``INVALID_ARGUMENT``;
- a PDF over the online limits (15 pages, 20 MB) or one PDFium cannot open: 400.

A valid request is answered with ``{"document": {"documentLayout": {"blocks": [...]}}}`` built from
the PDF's own text, page by page, in the shape the layout parser gives: the running header line
(the first line of a page that recurs on every page) as a ``header`` text block, a short line
opening a section as a ``heading-2`` text block whose section (its paragraphs, a numbered list as a
``listBlock``) is nested in its ``blocks``, every block with ``blockId`` and a ``pageSpan``
counted from the request's own first page. ``fieldMask`` is honoured (only ``documentLayout``
comes back when it names it).

Scripted failures are used first, in order: ``fail(429, retry_after="1")``; ``refuse_pages`` is
a page count the server refuses with 400 (as it refuses a damaged document).
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.formats.pdf import PDFIUM_LOCK
from tests.integration.fake_gemini import error_body
from tests.support import send_json

PROCESSOR = "projects/ragbus-test/locations/us/processors/4f2a9c0de1b35677"
MAX_PAGES = 15
MAX_BYTES = 20 * 1024 * 1024
#: What the layout parser reads (the layout-parse-chunk page's table of file types).
MIME_TYPES = {
    "application/pdf", "text/html",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
REQUEST_FIELDS = {"name", "skipHumanReview", "fieldMask", "processOptions", "labels", "imagelessMode",
                  "inlineDocument", "rawDocument", "gcsDocument"}
LAYOUT_CONFIG_FIELDS = {"chunkingConfig", "returnImages", "returnBoundingBoxes", "enableImageAnnotation",
                        "enableTableAnnotation", "enableImageExtraction", "enableLlmLayoutParsing"}
_NUMBERED = re.compile(r"^\d{1,3}\.\s")


@dataclass
class Failure:
    status: int
    retry_after: str | None = None


@dataclass
class Seen:
    """One request as it arrived: when, its pages, and the body."""

    at: float
    pages: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class FakeDocumentAI:
    def __init__(self, processor: str = PROCESSOR) -> None:
        self.processor = processor
        self.failures: list[Failure] = []
        self.refuse_pages: int | None = None
        self.requests: list[Seen] = []
        self.answered: list[int] = []  # the statuses answered, in order
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                status, payload, headers = fake._answer(self.path, self.rfile.read(length), dict(self.headers))
                with fake._lock:
                    fake.answered.append(status)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                data = json.dumps(payload).encode()
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                send_json(self, 405, error_body(405, "the process method is POST"))

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail(self, status: int, *, retry_after: str | None = None) -> None:
        self.failures.append(Failure(status, retry_after))

    def __enter__(self) -> FakeDocumentAI:  # noqa: PYI034 - a plain test helper, never subclassed
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------ one request

    def _answer(self, path: str, raw: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if path != f"/v1/{self.processor}:process":
            return 404, error_body(404, f"Processor {path.removeprefix('/v1/').split(':')[0]} not found."), {}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, error_body(400, "Invalid JSON payload received."), {}
        problem, pdf = _check(body)
        if problem:
            return 400, error_body(400, problem), {}
        with PDFIUM_LOCK:  # the client's thread reads PDFs with PDFium in this process too
            pages, texts = _pages(pdf)
        with self._lock:
            self.requests.append(Seen(time.monotonic(), pages if isinstance(pages, int) else 0, body, headers))
            failure = self.failures.pop(0) if self.failures else None
        if isinstance(pages, str):
            return 400, error_body(400, pages), {}
        if failure is not None:
            extra = {"Retry-After": failure.retry_after} if failure.retry_after is not None else {}
            return failure.status, error_body(failure.status, "Quota exceeded for online process requests per "
                                              "minute." if failure.status == 429 else "The service is unavailable."), extra
        if pages > MAX_PAGES:
            return 400, error_body(400, f"Document pages in non-imageless mode exceed the limit: {MAX_PAGES} got "
                                   f"{pages}. Try using imageless mode to increase the limit to 30."), {}
        if self.refuse_pages == pages:
            return 400, error_body(400, "Unable to process the document: the file is corrupted."), {}
        document: dict[str, Any] = {"documentLayout": {"blocks": _layout(texts)}}
        if body.get("fieldMask") != "documentLayout":
            document = {"mimeType": "application/pdf", **document, "pages": [{"pageNumber": n}
                                                                            for n in range(1, pages + 1)]}
        return 200, {"document": document}, {}


def pdf_of_pages(raw: bytes, pages: list[int]) -> bytes:
    """A PDF of its own holding ``raw``'s pages at these 0-based indexes, in this order (repeats
    allowed): real pages of a real file, for a piece the service refuses or a long document."""
    import pypdfium2 as pdfium

    with PDFIUM_LOCK:
        source, out = pdfium.PdfDocument(raw), pdfium.PdfDocument.new()
        try:
            out.import_pages(source, pages)
            buffer = io.BytesIO()
            out.save(buffer)
            return buffer.getvalue()
        finally:
            out.close()
            source.close()


def _check(body: Any) -> tuple[str, bytes]:
    """What the service would refuse in ``body`` ("" when nothing), and the PDF it carries."""
    if not isinstance(body, dict):
        return "Invalid JSON payload received. Expected an object.", b""
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown:
        return f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.', b""
    sources = [k for k in ("inlineDocument", "rawDocument", "gcsDocument") if k in body]
    if sources != ["rawDocument"]:
        return "Exactly one document source must be set; this stand-in reads rawDocument.", b""
    document = body["rawDocument"]
    if not isinstance(document, dict) or set(document) - {"content", "mimeType", "displayName"}:
        return "Invalid JSON payload received. rawDocument has unknown fields.", b""
    if document.get("mimeType") not in MIME_TYPES:
        return f"Unsupported input file format: {document.get('mimeType')!r}.", b""
    try:
        pdf = base64.b64decode(document.get("content") or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        return "Invalid value at 'raw_document.content' (TYPE_BYTES), Base64 decoding failed.", b""
    if not pdf:
        return "Document content is empty.", b""
    if len(pdf) > MAX_BYTES:
        return f"Document size exceeds the limit: {MAX_BYTES} bytes.", b""
    options = body.get("processOptions", {})
    if not isinstance(options, dict) or not isinstance(options.get("layoutConfig", {}), dict):
        return "Invalid JSON payload received. processOptions.layoutConfig must be an object.", b""
    layout_unknown = sorted(set(options.get("layoutConfig", {})) - LAYOUT_CONFIG_FIELDS)
    if layout_unknown:
        return f'Invalid JSON payload received. Unknown name "{layout_unknown[0]}" at ' \
               "'process_options.layout_config': Cannot find field.", b""
    if "fieldMask" in body and not isinstance(body["fieldMask"], str):
        return "Invalid value at 'field_mask' (type.googleapis.com/google.protobuf.FieldMask).", b""
    return "", pdf


def _pages(pdf: bytes) -> tuple[int | str, list[list[str]]]:
    """The PDF's page count and each page's lines, or why it cannot be read."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(pdf)
    except pdfium.PdfiumError:
        return "Unable to process the document: the file is corrupted or not a PDF.", []
    try:
        texts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            text = textpage.get_text_bounded().replace("\x02", "").replace("\r\n", "\n")
            textpage.close()
            page.close()
            texts.append([line.strip() for line in text.split("\n") if line.strip()])
        return len(document), texts
    finally:
        document.close()


def _layout(pages: list[list[str]]) -> list[dict[str, Any]]:
    """Blocks as the layout parser nests them, built from each page's lines."""
    firsts = Counter(lines[0] for lines in pages if lines)
    running = next((line for line, count in firsts.most_common(1) if len(pages) > 1 and 2 * count >= len(pages)), None)
    layout = _Layout()
    for page, lines in enumerate(pages, start=1):
        layout.page(page, lines, running)
    return layout.blocks


class _Layout:
    """The blocks of a document, page after page: a heading's section nests in its ``blocks``."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.blocks: list[dict[str, Any]] = []
        self.section: list[dict[str, Any]] | None = None
        self.paragraph: list[str] = []
        self.items: list[str] = []
        self.number = 0

    def block(self, content: dict[str, Any]) -> dict[str, Any]:
        return {"blockId": str(next(self.ids)), **content,
                "pageSpan": {"pageStart": self.number, "pageEnd": self.number}}

    def text(self, text: str, kind: str, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return self.block({"textBlock": {"text": text, "type": kind, "blocks": [] if children is None else children}})

    def add(self, block: dict[str, Any]) -> None:
        (self.section if self.section is not None else self.blocks).append(block)

    def close_paragraph(self) -> None:
        if self.paragraph:
            self.add(self.text(" ".join(self.paragraph), "paragraph"))
            self.paragraph = []

    def close_list(self) -> None:
        if self.items:
            entries = [{"blocks": [self.text(item, "paragraph")]} for item in self.items]
            self.add(self.block({"listBlock": {"listEntries": entries, "type": "ordered"}}))
            self.items = []

    def page(self, number: int, lines: list[str], running: str | None) -> None:
        self.number = number
        if running and lines and lines[0] == running:
            self.blocks.append(self.text(running, "header"))
            lines = lines[1:]
        footer = lines.pop() if lines and lines[-1].isdigit() else None  # a page number
        self.section = None  # a section does not run on past its page
        for line in lines:
            if _NUMBERED.match(line):
                self.close_paragraph()
                self.items.append(line)
                continue
            self.close_list()
            if len(line) < 40 and line[:1].isupper() and not line.endswith((".", ",", ":")) \
                    and len(line.split()) <= 5:
                self.close_paragraph()
                self.section = []
                self.blocks.append(self.text(line, "heading-2", self.section))
                continue
            self.paragraph.append(line)
            if line.endswith((".", ":")):
                self.close_paragraph()
        self.close_paragraph()
        self.close_list()
        if footer:
            self.blocks.append(self.text(footer, "footer"))
