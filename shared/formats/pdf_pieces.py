"""A PDF cut into pieces a page-limited service takes: at most so many pages and bytes each.

Document AI's layout parser reads at most 15 pages and 20 MB in one online request
(:mod:`shared.adapters.gcp.document_ai`); a longer file is sent as pieces, each a PDF of its
own made by PDFium importing the pages into a new document (fonts and images come along). Every
piece knows the number its first page has in the whole file, so what the service says of
"page 2" of a piece lands on the file's own page. A piece over the byte limit is halved until
it fits; a single page still over it is counted as not read, with the reason. Pages past
``RAGBUS_MAX_PAGES`` are cut and counted as the local reader cuts them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

from shared.formats.passages import Reading
from shared.formats.pdf import PDFIUM_LOCK, metadata_title, open_pdf


@dataclass(frozen=True)
class PdfPiece:
    first: int  # the number of its first page in the whole file (1-based)
    pages: int
    data: bytes  # a PDF of its own

    @property
    def last(self) -> int:
        return self.first + self.pages - 1

    @property
    def label(self) -> str:
        return f"page {self.first}" if self.pages == 1 else f"pages {self.first}–{self.last}"


class PdfPieces:
    """The pieces of one PDF (:meth:`pieces`), its metadata title, and what was cut (``reading``).

    Opening refuses an encrypted or damaged file (:class:`~shared.contract.errors.InvalidInput`)
    as the local reader does. Use as a context manager: the document is closed on exit."""

    def __init__(self, raw: bytes, *, pages: int, max_bytes: int, max_pages: int, reading: Reading) -> None:
        if pages < 1:
            raise ValueError(f"pages per piece must be at least 1, not {pages}")
        self.per_piece = pages
        self.max_bytes = max_bytes
        self.reading = reading
        with PDFIUM_LOCK:
            self.document = open_pdf(raw)
            try:
                total = len(self.document)
                self.title = metadata_title(self.document)
            except BaseException:
                self.document.close()
                raise
        self.pages = min(total, max_pages)
        if total > self.pages:
            reading.skip(total - self.pages, f"pages past the first {max_pages} (RAGBUS_MAX_PAGES) were cut")

    def __enter__(self) -> PdfPieces:
        return self

    def __exit__(self, *exc: object) -> None:
        with PDFIUM_LOCK:
            self.document.close()

    def pieces(self) -> Iterator[PdfPiece]:
        """The pieces in page order, made one at a time (only the one being sent is in memory)."""
        for first in range(1, self.pages + 1, self.per_piece):
            yield from self._fitted(first, min(self.per_piece, self.pages - first + 1))

    def _fitted(self, first: int, pages: int) -> Iterator[PdfPiece]:
        data = self._extract(first, pages)
        if len(data) <= self.max_bytes:
            yield PdfPiece(first, pages, data)
        elif pages == 1:
            self.reading.skip(1, f"pages larger on their own than the {self.max_bytes} bytes one request "
                                 "may carry")
        else:
            half = pages // 2
            yield from self._fitted(first, half)
            yield from self._fitted(first + half, pages - half)

    def _extract(self, first: int, pages: int) -> bytes:
        import pypdfium2 as pdfium

        with PDFIUM_LOCK:
            piece = pdfium.PdfDocument.new()
            try:
                piece.import_pages(self.document, list(range(first - 1, first - 1 + pages)))
                out = io.BytesIO()
                piece.save(out)
                return out.getvalue()
            finally:
                piece.close()
