"""Spreadsheets: .xlsx (openpyxl, read-only and values only: formulas are never evaluated, links
never followed), .csv and .tsv. Each row reads "header: value; header: value" under the sheet's
first row, at position {"sheet": name, "row": n} (n as the spreadsheet numbers it)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from shared.contract.errors import InvalidInput
from shared.formats.containers import read_ooxml
from shared.formats.passages import Passage, Reading, labelled_row
from shared.formats.registry import Limits


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())


def sheet_passages(sheet: str, rows: Iterable[tuple[int, list[str]]], reading: Reading, budget: int) -> int:
    """Append ``rows`` (numbered) of one sheet as passages; return how many of ``budget`` were used."""
    header: list[str] | None = None
    used = 0
    heading = len(reading.passages)
    for number, cells in rows:
        if not any(cells):
            continue
        if header is None:
            header = cells
            reading.passages.append(Passage(sheet or "Rows", "heading", {"sheet": sheet, "row": number}))
            continue
        if used >= budget:
            reading.skip(1, f"rows past the first {budget} (RAGBUS_MAX_ROWS) were cut")
            continue
        used += 1
        text = labelled_row(header, cells)
        reading.passages.append(Passage(text, "row", {"sheet": sheet, "row": number}))
    if header is not None and len(reading.passages) == heading + 1:
        del reading.passages[heading]  # a header row with no row under it holds nothing to read
    return used


def read_xlsx(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return read_ooxml(raw, limits, "Excel", lambda archive: _xlsx_reading(raw, limits))


def _xlsx_reading(raw: bytes, limits: Limits) -> Reading:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True, keep_links=False)
    reading = Reading(title=(workbook.properties.title or "").strip())
    budget = limits.max_rows
    try:
        for sheet in workbook.worksheets:
            # the size a sheet declares (<dimension ref="A1:XFD1048576"/>) or its farthest cell sets pads every row
            # to its width and every gap to its rows: a 6 kB book with a cell at XFD1048576 kept the reader
            # past RAGBUS_PARSE_SECONDS building a million rows of 16,384 cells; read the cells it holds
            sheet.reset_dimensions()
            rows = ((n, [_cell(v) for v in values])
                    for n, values in enumerate(sheet.iter_rows(values_only=True), start=1))
            budget -= sheet_passages(sheet.title, rows, reading, budget)
    finally:
        workbook.close()
    return reading


#: the most characters one cell of a CSV or TSV file may hold
FIELD_MAX_CHARS = 1024 * 1024


def _read_delimited(raw: bytes, content_type: str, url: str, limits: Limits, delimiter: str) -> Reading:
    from shared.formats.text import binary_reason, decode_bytes, parse_content_type

    why = binary_reason(raw)
    if why:
        raise InvalidInput(f"the file looks like binary data, not delimited text ({why})")
    text = decode_bytes(raw, parse_content_type(content_type)[1])
    name = PurePosixPath(unquote(urlsplit(url).path or "")).stem
    reading = Reading(title=name)
    csv.field_size_limit(FIELD_MAX_CHARS)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    ended = [0]  # the line the last whole record ended on: the next starts on the line after it
    try:
        sheet_passages("", _records(reader, ended), reading, limits.max_rows)
    except csv.Error as exc:
        # csv's own words name neither the line nor, for a field over the limit, what the limit is for; its
        # line_num is where it stopped reading, past the record's start when a quoted cell spans lines
        start, stop = ended[0] + 1, reader.line_num
        where = f"line {start}" if stop <= start else f"the record starting on line {start}, read to line {stop}"
        why = (f"; one cell holds more than {FIELD_MAX_CHARS:,} characters (a quote left open makes the rest of "
               "the file one cell)" if "field limit" in str(exc) else "")
        raise InvalidInput(f"the file is not valid delimited text ({where}: {exc}){why}") from None
    return reading


def _records(reader: Iterator[list[str]], ended: list[int]) -> Iterator[tuple[int, list[str]]]:
    """``reader``'s records, numbered, each cell's white space made single spaces; ``ended[0]`` is kept at the line
    the last record read ended on (``reader.line_num``), so a record csv fails on is named by its first line."""
    for number, cells in enumerate(reader, start=1):
        ended[0] = reader.line_num
        yield number, [" ".join(c.split()) for c in cells]


def read_csv(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _read_delimited(raw, content_type, url, limits, ",")


def read_tsv(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _read_delimited(raw, content_type, url, limits, "\t")
