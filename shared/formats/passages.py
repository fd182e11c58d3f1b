"""What a reader yields: passages with their structure and position, and how they become the
clean text and its position map.

A :class:`Passage` is a heading, a paragraph, a list item, a table row (or, for the text kinds,
a whole body already laid out) with the place it stands: a PDF's page, a deck's slide, a
workbook's sheet and row. The cleaner lays passages out as the clean text (headings and
paragraphs apart, consecutive items and rows of one block line by line) and keeps where each
passage starts; the indexer gives every chunk the positions its characters cover
(:func:`position_label`: "p. 12", "pp. 12–13", "slide 3", "Sales, rows 4–9").
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

PassageKind = Literal["heading", "paragraph", "item", "row", "body"]

#: A place in a file: {"page": 12}, {"slide": 3}, {"sheet": "Sales", "row": 14}, {"chapter": 2}.
Position = dict[str, int | str]

#: Character offset of a passage in the clean text, and its position ({} where it has none).
Marks = list[tuple[int, Position]]

#: Kinds whose consecutive passages read line by line (a list's items, a table's rows).
_LINEWISE = frozenset({"item", "row"})


@dataclass(frozen=True)
class Passage:
    text: str
    kind: PassageKind = "paragraph"
    position: Position = field(default_factory=dict)


@dataclass
class Reading:
    """A file as its reader saw it: passages in reading order, the title and date it states, and
    the pages (or parts) it could not read, with why (a scanned page without an OCR engine)."""

    passages: list[Passage] = field(default_factory=list)
    title: str = ""
    published: str | None = None
    unread: int = 0
    unread_reason: str = ""

    def skip(self, count: int, reason: str) -> None:
        self.unread += count
        if reason and reason not in self.unread_reason:
            self.unread_reason = f"{self.unread_reason}; {reason}" if self.unread_reason else reason


def lay_out(passages: Iterable[Passage], start: int = 0) -> tuple[str, Marks]:
    """The passages as one text (blank lines between blocks, a line between consecutive items or
    rows of one position), and where each passage begins, offset by ``start``."""
    parts: list[str] = []
    marks: Marks = []
    length = start
    previous: Passage | None = None
    for passage in passages:
        text = passage.text.strip()
        if not text:
            continue
        if previous is not None:
            linewise = passage.kind in _LINEWISE and previous.kind == passage.kind and (
                previous.position.get("sheet") == passage.position.get("sheet"))
            gap = "\n" if linewise else "\n\n"
            parts.append(gap)
            length += len(gap)
        if not marks or marks[-1][1] != passage.position:
            marks.append((length, dict(passage.position)))
        parts.append(text)
        length += len(text)
        previous = passage
    return "".join(parts), marks


def positions_between(marks: Sequence[tuple[int, Position]], start: int, end: int) -> list[Position]:
    """The positions of the passages that characters ``[start, end)`` of the text touch."""
    if not marks:
        return []
    offsets = [offset for offset, _ in marks]
    first = max(0, bisect.bisect_right(offsets, start) - 1)
    last = max(first, bisect.bisect_left(offsets, end) - 1)
    return [position for _, position in marks[first:last + 1] if position]


def _span(values: list[int], one: str, many: str) -> str:
    values = sorted(set(values))
    if len(values) == 1:
        return f"{one} {values[0]}"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{many} {values[0]}–{values[-1]}"
    return f"{many} " + ", ".join(str(v) for v in values)


def position_label(positions: Iterable[Position]) -> str:
    """How a citation shows where its text stands: "p. 12", "pp. 12–13", "slide 3", "slides 2, 5",
    "Sales, row 4", "Sales, rows 4–9", "chapter 2"; "" without a position."""
    positions = list(positions)
    pages = [int(p["page"]) for p in positions if "page" in p]
    if pages:
        return _span(pages, "p.", "pp.")
    slides = [int(p["slide"]) for p in positions if "slide" in p]
    if slides:
        return _span(slides, "slide", "slides")
    sheets: dict[str, list[int]] = {}
    for p in positions:
        if "sheet" in p:
            sheets.setdefault(str(p["sheet"]), []).extend([int(p["row"])] if "row" in p else [])
    if sheets:
        return "; ".join(", ".join(part for part in (sheet, _span(rows, "row", "rows") if rows else "") if part)
                         for sheet, rows in sheets.items())
    chapters = [int(p["chapter"]) for p in positions if "chapter" in p]
    return _span(chapters, "chapter", "chapters") if chapters else ""


_FIRST_PAGE = re.compile(r"\App?\. (\d+)")


def first_page(label: str) -> int | None:
    """The first page a position label names ("pp. 12–13" -> 12), or None."""
    match = _FIRST_PAGE.match(label or "")
    return int(match.group(1)) if match else None


def page_link(url: str, label: str) -> str:
    """``url`` opening at the label's first page (``#page=12``, the PDF open parameter every
    browser's viewer honours) when it names one; ``url`` as it is otherwise."""
    page = first_page(label)
    if page is None or not url or "#" in url:
        return url
    return f"{url}#page={page}"


def join_blocks(blocks: list[tuple[str, int | None]]) -> str:
    """Items of one list read as consecutive lines; other blocks are paragraphs."""
    parts: list[str] = []
    for n, (block, in_list) in enumerate(blocks):
        if n:
            parts.append("\n" if in_list is not None and in_list == blocks[n - 1][1] else "\n\n")
        parts.append(block)
    return "".join(parts)


def labelled_row(header: Sequence[str], cells: Sequence[str]) -> str:
    """A table's row as "column: value; column: value" (a cell without a column name stands as it is,
    an empty cell is left out): how every reader writes a table's row (Office tables, sheets, Document AI)."""
    return "; ".join(f"{header[i]}: {value}" if i < len(header) and header[i] else value
                     for i, value in enumerate(cells) if value)
