"""A PDF table's rows are passages of their own (issue 31, item 2: "tables kept as rows"), found by
where their words stand on the page; prose beside and under a table, two- and three-column pages,
lists and tables of contents are left as they read."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from shared.formats.passages import Reading
from shared.formats.pdf import open_pdf, read_pdf
from shared.formats.pdf_tables import find_tables
from shared.formats.registry import Limits
from tests.hostile.bad_files import pdf

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "formats"
DOCUMENTS = Path(__file__).resolve().parents[2] / "shared" / "tools" / "eval" / "datasets" / "formats" / "documents"


@cache
def _read(path: Path) -> Reading:
    return read_pdf(path.read_bytes(), "application/pdf", "", Limits(ocr=False))


def _passages(path: Path, page: int) -> list[tuple[str, str]]:
    return [(p.kind, p.text) for p in _read(path).passages if p.position["page"] == page]


def _page(lines: list[tuple[float, float, str]]) -> bytes:
    """One page of Helvetica 10 pt text, each (x, y, text) placed where it says."""
    out = [b"BT /F1 10 Tf"]
    for x, y, text in lines:
        out.append(b"1 0 0 1 %.1f %.1f Tm (%s) Tj" % (x, y, text.encode("latin-1")))
    return b" ".join(out) + b" ET"


PROSE_ABOVE = "The sizes below were measured on the archive mirror during the last release of the suite"
PROSE_UNDER = "Each of these packages is rebuilt whenever its source changes and the mirror is updated again"
TABLE = [("Package", "Version", "Size"), ("zlib", "1.2.13", "160k"), ("bzip2", "1.0.8", "96k"),
         ("xz-utils", "5.4.1", "472k"), ("gzip", "1.12", "212k")]


def _table_pdf() -> bytes:
    lines = [(60, 760, PROSE_ABOVE)]
    for n, row in enumerate(TABLE):
        y = 730 - 16 * n
        lines += [(60, y, row[0]), (200, y, row[1]), (320, y, row[2])]
    lines.append((60, 730 - 16 * len(TABLE) - 4, PROSE_UNDER))
    return pdf([_page(lines)])


def test_each_row_of_a_table_is_a_passage_with_its_columns_named_and_the_prose_around_it_stays_prose():
    reading = read_pdf(_table_pdf(), "application/pdf", "", Limits(ocr=False))
    passages = [(p.kind, p.text) for p in reading.passages]
    assert ("row", "Package: bzip2; Version: 1.0.8; Size: 96k") in passages
    assert [text for kind, text in passages if kind == "row" and "Package:" in text] == [
        f"Package: {name}; Version: {version}; Size: {size}" for name, version, size in TABLE[1:]]
    texts = [text for _, text in passages]
    assert PROSE_ABOVE in texts and PROSE_UNDER in texts  # neither swallowed by a row
    assert all(p.position == {"page": 1} for p in reading.passages)


def test_a_running_footer_under_a_table_is_no_row_of_it():
    """A footer set in the table's columns just under its last row ("Mirror report ... Page 2" on
    every page) is dropped as page furniture, not read as a row."""
    names = ["zlib", "bzip2", "gzip", "lzip", "xz-utils", "zstd", "brotli", "lz4", "snappy", "pigz", "pbzip2", "lzop"]
    pages = []
    for number in range(3):
        lines = [(60, 760, ["Archive sizes", "Mirror sizes", "Release sizes"][number]),
                 (60, 730, "Package"), (200, 730, "Version"), (320, 730, "Size")]
        for n in range(4):
            y = 714 - 16 * n
            lines += [(60, y, names[4 * number + n]), (200, y, f"1.{n}"), (320, y, f"{n + 1}00k")]
        lines += [(60, 714 - 16 * 4, "Mirror report"), (320, 714 - 16 * 4, f"Page {number + 1}")]
        pages.append(_page(lines))
    reading = read_pdf(pdf(pages), "application/pdf", "", Limits(ocr=False))
    texts = [p.text for p in reading.passages]
    assert not [text for text in texts if "Mirror report" in text or "Page " in text], texts
    assert "Package: lzop; Version: 1.3; Size: 400k" in texts and "Package: zlib; Version: 1.0; Size: 100k" in texts


def test_a_table_run_on_from_the_page_before_takes_its_header():
    """fontconfig's property table (real, tests/data/formats) starts on page 1 under "Property Type
    Description" and a ruled line, and runs on over page 2 without them."""
    page_1 = _passages(DATA / "fontconfig-user.pdf", 1)
    assert ("row", "Property: family; Type: String; Description: Font family names") in page_1
    page_2 = _passages(DATA / "fontconfig-user.pdf", 2)
    assert ("row", "Property: pixelsize; Type: Double; Description: Pixel size") in page_2
    # a cell wrapped onto a second line is one cell
    assert ("row", "Property: rgba; Type: Int; Description: unknown, rgb, bgr, vrgb, vbgr, none - subpixel "
                   "geometry") in page_2
    # the section after the table reads as it did
    assert ("heading", "Font Matching") in page_2


def test_a_header_of_two_lines_over_figures_names_each_column():
    """bzip2's manual (a dataset PDF): a memory table whose header takes two lines, after prose."""
    page = _passages(DOCUMENTS / "bzip2-manual-memory.pdf", 2)
    assert ("row", "Flag: -5; Compress usage: 4400k; Decompress usage: 2100k; Decompress -s usage: 1350k; "
                   "Corpus Size: 845160") in page
    prose = [text for kind, text in page if kind == "paragraph"]
    assert any(text.startswith("Here is a table which summarises") for text in prose)
    assert not any("1200k" in text for text in prose)


def test_a_wide_table_keeps_each_state_s_total_in_its_own_row():
    page = _passages(DOCUMENTS / "nics-background-checks-2015-11.pdf", 1)
    illinois = [text for kind, text in page if kind == "row" and text.startswith("State / Territory: Illinois;")]
    assert len(illinois) == 1 and illinois[0].endswith("Totals: 129,861")
    assert "Indiana" not in illinois[0]


@pytest.mark.parametrize("name", ["ltnews11.pdf", "ltnews28.pdf", "ltnews33.pdf", "federal-register-2020-17221.pdf"])
def test_two_and_three_column_prose_and_tables_of_contents_hold_no_table(name):
    document = open_pdf((DOCUMENTS / name).read_bytes())
    try:
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            try:
                tables = find_tables(textpage, textpage.get_text_bounded())
                assert tables == [], (name, index + 1, tables)
            finally:
                textpage.close()
                page.close()
    finally:
        document.close()


def test_a_turned_page_s_rows_keep_their_wrapped_description_and_amount_together():
    """The Senate's expenditure report (a dataset PDF) is a landscape page (/Rotate 90): each row's
    description wraps onto a second line, and the row is one passage with its amount."""
    page = _passages(DOCUMENTS / "senate-expenditures.pdf", 1)
    rows = [text for kind, text in page if kind == "row" and text.startswith("DOCUMENT NO.: DHAW20190031;")]
    assert len(rows) == 1, rows
    assert "; DESCRIPTION: SENATOR'S TRANSPORTATION TRAIN FARE FOR SEN HAWLEY WASHINGTON DC TO NEW YORK NY AND " \
           "RETURN; AMOUNT ($): 618.00" in rows[0]
    # a header of three lines, one name over two columns ("OBLIGATION/SERVICE DATES": START, END)
    assert "; DATE POSTED: 05/28/2019;" in rows[0] and "DATES START: 05/10/2019; END: 05/11/2019;" in rows[0]
    assert ("row", "PAYEE NAME: BAIN, J MATTHEW; DESCRIPTION: DISTRICT DIRECTOR; AMOUNT ($): 37,499.96") in page


def test_the_reader_quotes_each_row_alone_not_run_on_into_the_next():
    """The offline reader joined consecutive rows ("Property: ...; Type: ...", "sx | Semi Expanded |
    112.5%") as the wrapped lines of one paragraph, so an answer quoted a run of rows or none."""
    from shared.query.reading.extractive import quotable_sentences

    rows = [p.text for p in _read(DATA / "fontconfig-user.pdf").passages if p.kind == "row" and p.position["page"] == 2]
    rows = [row for row in rows if row.startswith("Property: ")][:6]
    assert len(rows) == 6
    quoted = [s.text for s in quotable_sentences("Title: fonts.conf\n\n" + "\n".join(rows))]
    assert quoted == rows
    cells = ["uc | Ultra Condensed | 50%", "ec | Extra Condensed | 62.5%", "sx | Semi Expanded | 112.5%"]
    assert [s.text for s in quotable_sentences("Title: fntguide\n\n" + "\n".join(cells))] == cells
