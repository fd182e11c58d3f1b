"""PDFium is not thread-safe (pypdfium2's documentation): two of its calls at once in one process, even on
different documents, can end the process with a segmentation fault. The suite saw one, a worker reading a
PDF while a Document AI stand-in's thread read another. Every use of PDFium in ragbus holds one lock."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from shared.formats.passages import Reading
from shared.formats.pdf import PDFIUM_LOCK, read_pdf
from shared.formats.pdf_pieces import PdfPieces
from shared.formats.registry import Limits

pytestmark = pytest.mark.unit

PDF = Path(__file__).resolve().parents[1] / "data" / "formats" / "fontconfig-user.pdf"


def _blocked_while_held(work) -> tuple[bool, bool]:
    """Whether ``work`` waits while another thread holds the lock, and ends once it is let go."""
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    with PDFIUM_LOCK:
        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        waited = not done.wait(0.3)
    finished = done.wait(30)
    return waited, finished


@pytest.fixture(scope="module")
def raw() -> bytes:
    return PDF.read_bytes()


def test_reading_a_pdf_waits_for_another_threads_pdfium_call(raw):
    assert _blocked_while_held(lambda: read_pdf(raw, "application/pdf", "file:///x.pdf", Limits())) == (True, True)


def test_cutting_a_pdf_into_pieces_waits_for_another_threads_pdfium_call(raw):
    def cut() -> None:
        with PdfPieces(raw, pages=2, max_bytes=10_000_000, max_pages=4, reading=Reading()) as pdf:
            list(pdf.pieces())

    assert _blocked_while_held(cut) == (True, True)
