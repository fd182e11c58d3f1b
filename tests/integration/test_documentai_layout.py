"""PDFs read by Document AI's layout parser (``RAGBUS_PDF_READER=documentai``) on the real embedded
runtime, against a stand-in on 127.0.0.1 that speaks the v1 ``process`` REST shape
(tests/integration/fake_documentai.py): fontconfig's 15-page manual (tests/data/formats) is split
into pieces of 6 pages, a 429 with ``Retry-After: 1`` is waited out and retried, the layout blocks
become chunks cited to the file's own pages, and a PDF the service refuses (400) is dead-lettered
alone, named with the service's words, while its neighbours are indexed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.formats.pdf import PDFIUM_LOCK
from tests.integration.fake_documentai import PROCESSOR, FakeDocumentAI, pdf_of_pages
from tests.unit.loop_fakes import HashingEmbedder

pytestmark = pytest.mark.integration

MANUAL = Path(__file__).resolve().parents[1] / "data" / "formats" / "fontconfig-user.pdf"
ON_PAGE_4 = "Which debug value monitors fontconfig memory usage?"  # "MEMORY 512 Monitor fontconfig memory usage"
ON_PAGE_12 = "What is the conventional location for per-user font configuration?"  # in the second piece


class WordHashingEmbedder(HashingEmbedder):
    """Words hashed into the local index's 384 dimensions: what is tested here is reading and
    citing, and loading the packaged model would take most of this test's time."""

    dimension = 384


def _page_words(raw: bytes) -> dict[int, set[str]]:
    import pypdfium2 as pdfium

    words: dict[int, set[str]] = {}
    with PDFIUM_LOCK:  # a PDFium object left to the garbage collector is closed in whichever thread runs it
        document = pdfium.PdfDocument(raw)
        try:
            for n in range(len(document)):
                page = document[n]
                textpage = page.get_textpage()
                words[n + 1] = set(textpage.get_text_bounded().replace("\x02", "").split())
                textpage.close()
                page.close()
        finally:
            document.close()
    return words


def _cited_pages(label: str) -> list[int]:
    """The pages a position label names: "p. 4" -> [4], "pp. 3–5" -> [3, 4, 5], "pp. 13, 15" -> [13, 15]."""
    pages: list[int] = []
    for part in label.split(maxsplit=1)[1].split(","):
        first, _, last = part.strip().partition("–")
        pages.extend(range(int(first), int(last or first) + 1))
    return pages


def test_pdfs_are_read_by_the_layout_parser_split_retried_and_cited_to_their_pages(tmp_path):
    from shared.contract.config import load_settings
    from shared.contract.state_collections import DEAD_LETTERS
    from shared.ingest.files import ingest_path
    from shared.query.api import search_documents
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    folder, home = tmp_path / "docs", tmp_path / "home"
    folder.mkdir()
    shutil.copy(MANUAL, folder / "fontconfig-user.pdf")
    (folder / "excerpt.pdf").write_bytes(pdf_of_pages(MANUAL.read_bytes(), [8, 9]))  # the one the service refuses
    (folder / "notes.md").write_text("# Notes on reading PDFs\n\nCalled online, the layout parser reads PDFs in "
                                     "pieces of at most fifteen pages and twenty megabytes; ragbus cuts a longer "
                                     "file into such pieces and sends a few of them at once.\n", encoding="utf-8")

    with FakeDocumentAI() as service:
        service.fail(429, retry_after="1")
        service.refuse_pages = 2
        settings = load_settings({
            "RAGBUS_HOME": str(home), "RAGBUS_PDF_READER": "documentai", "RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR,
            "RAGBUS_DOCUMENTAI_ENDPOINT": service.url, "RAGBUS_DOCUMENTAI_PAGES": "6",
            "RAGBUS_MAX_DELIVERY_ATTEMPTS": "2", "RAGBUS_RETRY_MIN_BACKOFF_S": "0.05",
            "RAGBUS_RETRY_MAX_BACKOFF_S": "0.2", "RAGBUS_TRACING": "0"})
        local = build_local(settings, embedder=WordHashingEmbedder())
        with LocalRuntime(local.deps, local.bus) as runtime:
            deps = local.deps
            sent = ingest_path(folder, state=deps.state, blobs=deps.blobs, publisher=deps.publisher,
                               clock=deps.clock)
            assert len(sent) == 3
            assert runtime.wait_idle(120)

    # the manual went as pieces of 6, 6 and 3 pages, the refused excerpt as one of 2, and the piece
    # answered 429 went again once its Retry-After had passed
    assert service.answered.count(429) == 1 and service.answered.count(400) == 1
    throttled = service.requests[service.answered.index(429)]
    again = [r for r in service.requests if r is not throttled and r.body == throttled.body]
    assert len(again) == 1 and again[0].at - throttled.at >= 1.0
    assert sorted(r.pages for r in service.requests if r is not throttled) == [2, 3, 6, 6]
    assert all("authorization" not in {k.lower() for k in r.headers} for r in service.requests)  # a stand-in

    # the refused file alone is dead-lettered, named, with the service's words
    (letter,) = deps.state.list(DEAD_LETTERS)
    reason = str(letter)
    assert "excerpt.pdf" in reason and "refused page" in reason and "the file is corrupted" in reason, letter

    # the manual's chunks are cited to its own pages: the page of each hit holds the hit's words
    words = _page_words(MANUAL.read_bytes())
    manual = []
    for question, page, words_there in ((ON_PAGE_4, 4, "MEMORY 512 Monitor fontconfig memory usage"),
                                        (ON_PAGE_12, 12, "is the conventional location for per-user font")):
        hits = [h for h in search_documents(deps, question, 5) if h["url"].endswith("fontconfig-user.pdf")]
        assert hits and all(h["position"].startswith(("p. ", "pp. ")) for h in hits), hits
        answers = [h for h in hits if words_there in h["text"]]
        assert answers and all(page in _cited_pages(h["position"]) for h in answers), [h["position"] for h in answers]
        manual += hits
    for hit in manual:
        cited = set().union(*(words[p] for p in _cited_pages(hit["position"])))
        chunk_words = [w for w in hit["text"].split() if w.isalpha() and len(w) > 3]
        on_page = sum(w in cited for w in chunk_words)
        assert on_page >= 0.9 * len(chunk_words), (hit["position"], hit["text"][:200])
    assert "pieces of at most fifteen" in search_documents(deps, "layout parser pieces", 3)[0]["text"]  # the neighbour


def test_a_service_still_failing_after_its_retries_leaves_the_file_to_be_redelivered_not_refused():
    """503s past the adapter's 3 attempts cross the reading process as RetryableError (the bus
    redelivers the message), never as the file refused."""
    from services.cleaner.handler import read_content
    from shared.contract.config import load_settings
    from shared.contract.errors import RetryableError

    with FakeDocumentAI() as service:
        for _ in range(3):
            service.fail(503, retry_after="0")
        settings = load_settings({"RAGBUS_PDF_READER": "documentai", "RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR,
                                  "RAGBUS_DOCUMENTAI_ENDPOINT": service.url})
        with pytest.raises(RetryableError, match="HTTP 503 .*after 3 attempts"):
            read_content(pdf_of_pages(MANUAL.read_bytes(), [0, 1]), "application/pdf", "file:///m.pdf", settings)
    assert service.answered == [503, 503, 503]
