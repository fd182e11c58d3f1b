"""Document AI's layout parser as the PDF reader: the setting, the splitting into pieces within the
online limit, the mapping of layout blocks to the local reader's passages and pages, and the REST
call's shape and failures (through httpx's mock transport; the stand-in server is in
tests/integration/test_documentai_layout.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from shared.adapters.gcp.document_ai import LayoutParser, layout_passages
from shared.contract.config import load_settings
from shared.contract.errors import ConfigError, InvalidInput, RetryableError
from shared.formats.passages import Passage, Reading, lay_out, position_label, positions_between
from shared.formats.pdf_pieces import PdfPiece, PdfPieces
from shared.formats.registry import Limits, by_suffix, chosen

pytestmark = pytest.mark.unit

FORMATS = Path(__file__).resolve().parents[1] / "data" / "formats"
PDF = FORMATS / "fontconfig-user.pdf"  # 15 pages
PROCESSOR = "projects/p1/locations/eu/processors/abc123"


def _text(text: str, kind: str, page: int | None, children: list | None = None) -> dict:
    block: dict = {"blockId": text[:8], "textBlock": {"text": text, "type": kind, "blocks": children or []}}
    if page is not None:
        block["pageSpan"] = {"pageStart": page, "pageEnd": page}
    return block


def _cell(text: str, page: int) -> dict:
    return {"blocks": [_text(text, "paragraph", page)], "rowSpan": 1, "colSpan": 1}


# ------------------------------------------------------------------ blocks -> passages


def test_blocks_become_the_local_readers_passages_at_the_files_pages():
    """A piece starting at page 16: its page 2 is the file's page 17. Headings (and their nested
    sections), paragraphs, list items and table rows are kept in order; running headers and
    footers are dropped, as the local reader drops them."""
    table = {"blockId": "t", "pageSpan": {"pageStart": 2, "pageEnd": 3}, "tableBlock": {
        "caption": "Table 3. Spacing values",
        "headerRows": [{"cells": [_cell("Name", 2), _cell("Value", 2)]}],
        "bodyRows": [{"cells": [_cell("mono", 2), _cell("100", 2)]},
                     {"cells": [_cell("charcell", 3), _cell("110", 3)]}],
    }}
    listing = {"blockId": "l", "pageSpan": {"pageStart": 1, "pageEnd": 1}, "listBlock": {"type": "unordered", "listEntries": [
        {"blocks": [_text("Patterns hold elements.", "paragraph", 1)]},
        {"blocks": [_text("Values are typed;", "paragraph", 1), _text("strings are quoted.", "paragraph", 1)]},
    ]}}
    blocks = [
        _text("fonts-conf", "header", 1),
        _text("Font Properties", "heading-1", 1, [
            _text("Patterns  hold\nproperty names.", "paragraph", None),  # no span: its heading's page
            listing,
        ]),
        _text("Spacing", "heading-2", 2, [table]),
        _text("17", "footer", 2),
        _text("Beyond the piece", "paragraph", 9),  # a span past the piece's pages stays on its last page
    ]
    piece = PdfPiece(first=16, pages=3, data=b"")

    assert layout_passages(blocks, piece) == [
        Passage("Font Properties", "heading", {"page": 16}),
        Passage("Patterns hold property names.", "paragraph", {"page": 16}),
        Passage("Patterns hold elements.", "item", {"page": 16}),
        Passage("Values are typed; strings are quoted.", "item", {"page": 16}),
        Passage("Spacing", "heading", {"page": 17}),
        Passage("Table 3. Spacing values", "paragraph", {"page": 17}),
        Passage("Name: mono; Value: 100", "row", {"page": 17}),
        Passage("Name: charcell; Value: 110", "row", {"page": 18}),
        Passage("Beyond the piece", "paragraph", {"page": 18}),
    ]


def test_a_table_without_header_rows_reads_its_first_row_as_the_header_and_rows_lay_out_line_by_line():
    table = {"blockId": "t", "pageSpan": {"pageStart": 1, "pageEnd": 1}, "tableBlock": {"bodyRows": [
        {"cells": [_cell("Variable", 1), _cell("Meaning", 1)]},
        {"cells": [_cell("FONTCONFIG_FILE", 1), _cell("the configuration file", 1)]},
        {"cells": [_cell("FONTCONFIG_PATH", 1), _cell("", 1)]},
    ]}}
    passages = layout_passages([table], PdfPiece(first=4, pages=1, data=b""))
    assert [p.text for p in passages] == ["Variable: FONTCONFIG_FILE; Meaning: the configuration file",
                                          "Variable: FONTCONFIG_PATH"]
    text, marks = lay_out(passages)
    assert text.count("\n") == 1 and position_label(positions_between(marks, 0, len(text))) == "p. 4"


def test_blocks_the_reader_does_not_know_or_broken_ones_are_passed_over():
    blocks = [{"blockId": "i", "imageBlock": {"mimeType": "image/png"}}, "not a block", {"textBlock": None},
              _text("  ", "paragraph", 1), _text("Kept", "subtitle", "one")]  # type: ignore[arg-type]
    assert layout_passages(blocks, PdfPiece(first=1, pages=2, data=b"")) == [Passage("Kept", "heading", {"page": 1})]


# ------------------------------------------------------------------ splitting


def _page_texts(data: bytes) -> list[str]:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        return [document[i].get_textpage().get_text_bounded() for i in range(len(document))]
    finally:
        document.close()


def test_a_pdf_is_split_into_pieces_within_the_page_limit_each_knowing_its_first_page():
    raw = PDF.read_bytes()
    whole = _page_texts(raw)
    reading = Reading()
    with PdfPieces(raw, pages=6, max_bytes=20 * 1024 * 1024, max_pages=1000, reading=reading) as pdf:
        pieces = list(pdf.pieces())
    assert [(p.first, p.pages, p.label) for p in pieces] == [(1, 6, "pages 1–6"), (7, 6, "pages 7–12"),
                                                            (13, 3, "pages 13–15")]
    for piece in pieces:  # each a PDF of its own holding exactly its pages
        assert _page_texts(piece.data) == whole[piece.first - 1:piece.last]
    assert reading.unread == 0


def test_pages_past_the_cap_are_cut_and_a_piece_over_the_byte_limit_is_halved():
    raw = PDF.read_bytes()
    reading = Reading()
    with PdfPieces(raw, pages=15, max_bytes=120_000, max_pages=10, reading=reading) as pdf:
        pieces = list(pdf.pieces())
    assert pieces[0].first == 1 and sum(p.pages for p in pieces) == 10 and len(pieces) > 1
    assert [(p.first, p.pages) for p in pieces] == [(1, 5), (6, 5)] and all(len(p.data) <= 120_000 for p in pieces)
    assert [p.first for p in pieces] == sorted(p.first for p in pieces)
    assert reading.unread == 5 and "RAGBUS_MAX_PAGES" in reading.unread_reason


def test_a_single_page_over_the_byte_limit_is_counted_as_not_read():
    reading = Reading()
    with PdfPieces(PDF.read_bytes(), pages=2, max_bytes=1000, max_pages=2, reading=reading) as pdf:
        assert list(pdf.pieces()) == []
    assert reading.unread == 15 and "1000 bytes one request may carry" in reading.unread_reason


def test_an_encrypted_pdf_is_refused_before_anything_is_sent():
    with pytest.raises(InvalidInput, match="encrypted"):
        PdfPieces((FORMATS / "password-protected.pdf").read_bytes(), pages=15, max_bytes=1 << 20, max_pages=10,
                  reading=Reading())


# ------------------------------------------------------------------ the setting


def test_the_layout_parser_is_chosen_for_pdfs_only():
    pdf, word = by_suffix(".pdf"), by_suffix(".docx")
    assert chosen(pdf, Limits()) is pdf
    assert chosen(pdf, Limits(pdf_reader="documentai")).reader == "shared.adapters.gcp.document_ai:read_pdf"
    assert chosen(pdf, Limits(pdf_reader="documentai")).binary  # still read in its own bounded process
    assert chosen(word, Limits(pdf_reader="documentai")) is word


@pytest.mark.parametrize(("env", "named"), [
    ({}, "RAGBUS_DOCUMENTAI_PROCESSOR"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": "abc123"}, "GOOGLE_CLOUD_PROJECT"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": "projects/p/processors/x"}, "neither a processor id"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": "projects/p/locations/asia1/processors/x"}, "'us' or 'eu'"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR, "RAGBUS_DOCUMENTAI_LOCATION": "us"}, "RAGBUS_DOCUMENTAI_LOCATION='us'"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR, "RAGBUS_DOCUMENTAI_ENDPOINT": "http://docai.example.com"},
     "plain http only to 127.0.0.1"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR, "RAGBUS_DOCUMENTAI_PAGES": "30"}, "must be <= 15"),
    ({"RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR, "RAGBUS_DOCUMENTAI_TIMEOUT_S": "120"}, "RAGBUS_PARSE_SECONDS=120"),
])
def test_a_misconfigured_layout_parser_is_refused_at_start_up_naming_what_is_wrong(env, named):
    with pytest.raises(ConfigError, match=named.replace("(", r"\(")):
        load_settings({"RAGBUS_PDF_READER": "documentai", **env})


def test_a_processor_id_is_named_in_its_project_and_location():
    settings = load_settings({"RAGBUS_PDF_READER": "DocumentAI", "RAGBUS_DOCUMENTAI_PROCESSOR": "abc123",
                              "GOOGLE_CLOUD_PROJECT": "p1", "RAGBUS_DOCUMENTAI_LOCATION": "eu"})
    assert settings.pdf_reader == "documentai" and settings.documentai_processor == PROCESSOR
    pinned = f"{PROCESSOR}/processorVersions/pretrained-layout-parser-v1.5-2025-08-25"  # a version, pinned
    assert load_settings({"RAGBUS_PDF_READER": "documentai", "RAGBUS_DOCUMENTAI_PROCESSOR": pinned}
                         ).documentai_processor == pinned
    assert LayoutParser(pinned, token=lambda: "t").base_url == "https://eu-documentai.googleapis.com"
    assert load_settings({}).pdf_reader == "local"
    with pytest.raises(ConfigError, match="'local' \\(default\\) or 'documentai'"):
        load_settings({"RAGBUS_PDF_READER": "tika"})


# ------------------------------------------------------------------ the REST call


def _piece() -> PdfPiece:
    return PdfPiece(first=7, pages=2, data=b"%PDF-1.7 two pages")


def _parser(handler, token=lambda: "ya29.token") -> LayoutParser:
    return LayoutParser(PROCESSOR, timeout_s=5, token=token, transport=httpx.MockTransport(handler))


def test_the_request_is_the_v1_process_shape_with_the_pdf_inline():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"document": {"documentLayout": {"blocks": [
            _text("Matching", "heading-1", 2)]}}})

    blocks = _parser(handler).process(_piece(), "file:///docs/fonts.pdf")
    request = seen[0]
    assert request.method == "POST"
    assert str(request.url) == f"https://eu-documentai.googleapis.com/v1/{PROCESSOR}:process"
    assert request.headers["authorization"] == "Bearer ya29.token"
    body = json.loads(request.content)
    assert base64.b64decode(body["rawDocument"]["content"]) == _piece().data
    assert body["rawDocument"]["mimeType"] == "application/pdf"
    assert body["processOptions"] == {"layoutConfig": {"returnImages": False, "returnBoundingBoxes": False}}
    assert body["fieldMask"] == "documentLayout"
    assert layout_passages(blocks, _piece()) == [Passage("Matching", "heading", {"page": 8})]


@pytest.mark.parametrize(("status", "message", "hint"), [
    (400, "Unable to process the document: the file is corrupted.", "the file was refused"),
    (403, "Permission 'documentai.processors.processOnline' denied", "roles/documentai.apiUser"),
    (404, "Processor not found.", "check RAGBUS_DOCUMENTAI_PROCESSOR"),
])
def test_a_refused_request_names_the_pages_the_services_words_and_what_to_check(status, message, hint):
    def handler(request):
        return httpx.Response(status, json={"error": {"code": status, "message": message, "status": "X"}})

    with pytest.raises(InvalidInput) as refused:
        _parser(handler).process(_piece(), "file:///docs/fonts.pdf")
    words = str(refused.value)
    assert "pages 7–8" in words and f"HTTP {status}" in words and message in words and hint in words


def test_429_is_retried_and_still_failing_is_retryable_not_a_refusal():
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(429, headers={"Retry-After": "0"},
                              json={"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}})

    with pytest.raises(RetryableError, match="HTTP 429 .*Quota exceeded.* after 3 attempts"):
        _parser(handler).process(_piece(), "file:///docs/fonts.pdf")
    assert len(calls) == 3


def test_an_answer_without_a_layout_is_retryable():
    with pytest.raises(RetryableError, match="no document layout"):
        _parser(lambda request: httpx.Response(200, text="<html>proxy</html>")).process(_piece(), "file:///x.pdf")


def test_a_document_the_service_could_not_process_is_refused_with_its_status():
    reply = {"document": {"error": {"code": 3, "message": "Document is password protected."}}}
    with pytest.raises(InvalidInput, match="could not process pages 7–8: Document is password protected"):
        _parser(lambda request: httpx.Response(200, json=reply)).process(_piece(), "file:///x.pdf")


def test_a_stand_in_on_loopback_is_sent_no_credentials():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json={"document": {}})

    parser = LayoutParser(PROCESSOR, endpoint="http://127.0.0.1:9", timeout_s=5, transport=httpx.MockTransport(handler))
    assert parser.process(_piece(), "file:///x.pdf") == []
    assert "authorization" not in seen[0].headers and str(seen[0].url).startswith("http://127.0.0.1:9/v1/")
