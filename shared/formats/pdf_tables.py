"""Tables on a PDF page found by where their words stand, each row a passage of its own.

PDFium's text of a page reads a table row by row, but as plain lines: without positions, a row of
cells cannot be told from a line of prose, and rows run together into one paragraph. Here each
line's words get their boxes (two PDFium calls a word: its first and last character), a line's words
apart by more than an em make its cells, and a run of consecutive lines with two cells or more, close
under each other, is a table when the gaps between its cells line up down the run (columns with a
gutter no line crosses). Each row is then written as "column: value; ..." when the table's first
lines are a header (bold, or above a ruled line, or words over columns of figures), else its cells
joined with " | ". A line with nothing in the first column continues the row above (a cell wrapped
onto a second line); a line that does not fit the columns (prose beside or under the table) ends it.

Two- and three-column prose is untouched: its lines have one cell each, and a line that joins text
from two columns crosses no gutter that other lines leave open. Lists (a bullet or a number, then
text) and tables of contents (dot leaders) are not tables.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import median

from shared.formats.passages import labelled_row

#: words further apart than this many line heights are in different cells
CELL_GAP = 0.8
#: a line further below the one above it than this many line heights is not in the same table
ROW_GAP = 4.0
#: a gutter may be crossed by this share of a table's lines (a title or a wide cell)
CROSSING = 0.1
MIN_ROWS = 3  # lines with two cells or more

_DIGIT = re.compile(r"\d")
_SPACES = re.compile(r" +")
#: after a sentence's end, prose set by TeX leaves a wider space: twice the gap before a new cell
_STOP = re.compile(r"[.:;?!]$")
_STOPS = frozenset(".:;?!")
_RULE = re.compile(r"^[-=_─—–]{3,}$")
_LEADERS = re.compile(r"(?:\.\s?){4,}")
_MARKER = re.compile(r"^(?:[•▪◦‣∙·*–—-]|\(?\d{1,3}[.)]|\(?[a-z][.)])$")


@dataclass
class Word:
    text: str
    x0: float
    x1: float
    bottom: float
    height: float
    index: int  # of its first character on the text page

    @property
    def middle(self) -> float:
        return (self.x0 + self.x1) / 2


class Line:
    """One line as it stands on the page: its words, where it sits, its cells (words more than a
    cell's gap apart)."""

    def __init__(self, number: int, words: list[Word]) -> None:
        self.number = number  # the line of PDFium's text it is (or is part of)
        self.words = words
        self.bottom = median(w.bottom for w in words)
        self.height = max(w.height for w in words)
        self.text = " ".join(w.text for w in words)
        self.cells: list[list[Word]] = []
        gap = CELL_GAP * self.height
        for word in words:
            if not self.cells or word.x0 - self.cells[-1][-1].x1 > (
                    2 * gap if _STOP.search(self.cells[-1][-1].text) else gap):
                self.cells.append([])
            self.cells[-1].append(word)


@dataclass(frozen=True)
class Table:
    first: int  # PDFium's text lines it takes, first to last
    last: int
    cells: tuple[tuple[str, ...], ...]  # row by row
    header: tuple[str, ...] = ()
    starts: tuple[int, ...] = ()  # the line of PDFium's text each row begins on

    def without(self, lines: set[int]) -> Table:
        """The table less the rows that begin on ``lines`` (a running header or footer, a page number)."""
        keep = [n for n, start in enumerate(self.starts) if start not in lines]
        if len(keep) == len(self.cells):
            return self
        return replace(self, cells=tuple(self.cells[n] for n in keep), starts=tuple(self.starts[n] for n in keep))

    @property
    def rows(self) -> list[str]:
        """Each row as "column: value; ..." under a header, else its cells joined by " | "."""
        if self.header:
            return [labelled_row(self.header, cells) for cells in self.cells]
        return [" | ".join(cell for cell in cells if cell) for cells in self.cells]

    def runs_on(self, above: Table | None) -> Table:
        """This table under the header of ``above`` (the last table of the page before) when it
        opens its page without a header of its own and has as many columns: a table run on."""
        if self.header or above is None or not above.header or self.first > 3 or (
                len(above.header) != len(self.cells[0])):
            return self
        return replace(self, header=above.header)


class _Boxes:
    """Character boxes of one text page (PDFium's loose boxes: the font's height, the advance's width)."""

    def __init__(self, textpage, rotation: int = 0) -> None:
        import pypdfium2.raw as pdfium_c

        self._c = pdfium_c
        self._page = textpage.raw
        self._rect = pdfium_c.FS_RECTF()
        self._name = ctypes.create_string_buffer(128)
        self._flags = ctypes.c_int()
        self._x, self._y = ctypes.c_double(), ctypes.c_double()  # passed by reference
        # the page as it is shown: turned clockwise by its /Rotate (x, y) -> (y, -x), (-x, -y), (-y, x)
        self._turn = {90: (0, 1, -1, 0), 180: (-1, 0, 0, -1), 270: (0, -1, 1, 0)}.get(rotation % 360)

    def _shown(self, x: float, y: float) -> tuple[float, float]:
        if self._turn is None:
            return x, y
        a, b, c, d = self._turn
        return a * x + b * y, c * x + d * y

    def box(self, index: int) -> tuple[float, float, float, float]:
        """(left, right, bottom, height) of character ``index`` on the page as it is shown."""
        r = self._rect
        self._c.FPDFText_GetLooseCharBox(self._page, index, r)
        if self._turn is None:
            return r.left, r.right, r.bottom, r.top - r.bottom
        (x0, y0), (x1, y1) = self._shown(r.left, r.bottom), self._shown(r.right, r.top)
        return min(x0, x1), max(x0, x1), min(y0, y1), abs(y1 - y0)

    def gapped(self, text: str, start: int) -> bool:
        """Whether two words of this line of the page's text (its first character ``start``) stand
        a cell's gap apart, or one a line below the other. The characters' origins first (PDFium
        finds them 4x faster than boxes): the step from the origin of the character before a gap
        to the one after is the gap and that character's width (a fifth of a line height at
        least: a full stop), and most lines of a page have no step that wide."""
        # (the loop runs for every space of a page: PDFium's calls inline, the page turned only
        # for a step that is long enough)
        origin, page, x, y, turn = self._c.FPDFText_GetCharOrigin, self._page, self._x, self._y, self._turn
        height = 0.0
        for run in _SPACES.finditer(text, 1):
            after = run.end()
            if after >= len(text):
                break
            before = run.start() - 1
            if not height:
                height = self.box(start)[3]
                if height <= 0:
                    return False
            origin(page, start + before, x, y)
            x0, y0 = x.value, y.value
            origin(page, start + after, x, y)
            dx, dy = x.value - x0, y.value - y0
            if turn is not None:
                dx, dy = turn[0] * dx + turn[1] * dy, turn[2] * dx + turn[3] * dy
            gap = (2 if text[before] in _STOPS else 1) * CELL_GAP * height  # as Line.cells reads it
            if (dx > gap + 0.2 * height or abs(dy) > 0.5 * height) and self._apart(
                    start + before, start + after, gap, height):
                return True
        return False

    def _apart(self, before: int, after: int, gap: float, height: float) -> bool:
        _, right, bottom, _ = self.box(before)
        left, _, after_bottom, _ = self.box(after)
        return left - right > gap or abs(after_bottom - bottom) > 0.5 * height

    def bold(self, index: int) -> bool:
        weight = self._c.FPDFText_GetFontWeight(self._page, index)
        if weight >= 600:
            return True
        self._c.FPDFText_GetFontInfo(self._page, index, self._name, len(self._name), self._flags)
        return b"bold" in self._name.value.lower() or b"black" in self._name.value.lower()


def _words(boxes: _Boxes, text: str, start: int) -> list[Word]:
    """The words of one line of the page's text (``start``: the index of its first character)."""
    out: list[Word] = []
    for match in re.finditer(r"[^\s\x02]+", text):
        first, last = start + match.start(), start + match.end() - 1
        x0, _, bottom, height = boxes.box(first)
        _, x1, last_bottom, _ = boxes.box(last)
        if x1 < x0 or abs(last_bottom - bottom) > 0.5 * height or x1 - x0 > 1.2 * height * len(match.group()):
            out.extend(_split_word(boxes, match.group(), first))  # two cells PDFium ran together
        elif height > 0:
            out.append(Word(match.group(), x0, x1, bottom, height, first))
    return out


def _split_word(boxes: _Boxes, text: str, first: int) -> list[Word]:
    """A "word" whose letters jump (down a line, or across a gutter) as the words it is."""
    out: list[Word] = []
    for offset, char in enumerate(text):
        x0, x1, bottom, height = boxes.box(first + offset)
        if height <= 0:
            continue
        last = out[-1] if out else None
        if last and abs(bottom - last.bottom) <= 0.5 * height and -0.5 * height <= x0 - last.x1 <= CELL_GAP * height:
            last.text += char
            last.x1 = x1
        else:
            out.append(Word(char, x0, x1, bottom, height, first + offset))
    return out


def _wide_gaps(boxes: _Boxes, raws: Sequence[str], starts: Sequence[int]) -> list[int]:
    """The lines of PDFium's text with two words a cell apart (or one a line below the other): the
    only ones a table's row can be. Half the lines are looked at first, two in every four: any
    MIN_ROWS such lines at most three apart (a table) have one among them; the lines around each
    found are looked at next, outwards, until three in a row have no such gap."""
    seen: dict[int, bool] = {}

    def gapped(number: int) -> bool:
        if number not in seen:
            raw = raws[number]
            seen[number] = " " in raw and boxes.gapped(raw, starts[number])
        return seen[number]

    for number in range(len(raws)):
        if number % 4 < 2 and gapped(number):
            for step in (-1, 1):
                k, misses = number + step, 0
                while 0 <= k < len(raws) and misses < 3:
                    misses = 0 if gapped(k) else misses + 1
                    k += step
    return sorted(number for number, wide in seen.items() if wide)


def _groups(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of at least MIN_ROWS of ``numbers`` with at most two lines between one and the next."""
    groups: list[list[int]] = []
    for n in numbers:
        if groups and n - groups[-1][-1] <= 3:
            groups[-1].append(n)
        else:
            groups.append([n])
    return [(g[0], g[-1]) for g in groups if len(g) >= MIN_ROWS]


def page_lines(boxes: _Boxes, raws: Sequence[str], starts: Sequence[int], first: int, last: int) -> list[Line]:
    """Lines ``first`` to ``last`` of PDFium's text as they stand on the page, each cut where its
    words step down to another line (PDFium runs a table's stacked rows together at times)."""
    lines: list[Line] = []
    for number in range(first, last + 1):
        groups: list[list[Word]] = []
        for word in _words(boxes, raws[number], starts[number]):
            if not groups or abs(word.bottom - groups[-1][-1].bottom) > 0.6 * word.height:
                groups.append([])
            groups[-1].append(word)
        lines.extend(Line(number, words) for words in groups)
    return lines


def find_tables(textpage, text: str, rotation: int = 0) -> list[Table]:
    """The tables of a page whose text (``get_text_bounded``) is ``text`` and which is shown turned
    by ``rotation`` degrees; none where its characters cannot be placed (the text and the page's
    character count differ)."""
    if len(text) != textpage.count_chars() or "\r\n" not in text:
        return []
    boxes = _Boxes(textpage, rotation)
    raws = text.split("\r\n")
    starts = [0]
    for raw in raws[:-1]:
        starts.append(starts[-1] + len(raw) + 2)
    tables: list[Table] = []
    for first, last in _groups(_wide_gaps(boxes, raws, starts)):
        lines = page_lines(boxes, raws, starts, first, last)
        i = 0
        while i < len(lines):
            end = _run(lines, i)
            table = _table(lines[i:end], lines, boxes) if end - i >= MIN_ROWS else None
            if table is None:
                i += 1
                continue
            tables.append(table)
            i = next((k for k, line in enumerate(lines) if line.number > table.last), len(lines))
    return tables


def _run(lines: Sequence[Line], start: int) -> int:
    """The end of the run of lines from ``start`` that may be one table: lines of two cells or more,
    each close below the one before it (or a little above: a header's lines PDFium reads out of
    order), with single-cell lines (wrapped cells) among them."""
    if len(lines[start].cells) < 2:
        return start
    end = start + 1
    last_full = start
    while end < len(lines):
        line, above = lines[end], lines[end - 1]
        drop, height = above.bottom - line.bottom, max(line.height, above.height)
        if not -1.5 * height <= drop <= ROW_GAP * height:
            break
        if len(line.cells) >= 2:
            last_full = end
        elif end - last_full > 2:
            break
        end += 1
    return last_full + 1


def _gutters(rows: Sequence[Line]) -> list[tuple[float, float]]:
    """The x ranges between columns: left open by the cells of all but a few of ``rows`` (a sweep
    over where cells begin and end), each with a column on either side that more rows than that use."""
    spans = [(cell[0].x0, cell[-1].x1) for row in rows for cell in row.cells]
    allowed = max(1, int(CROSSING * len(rows)))
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    height = median(row.height for row in rows)
    gutters: list[tuple[float, float]] = []
    depth = 0
    for (x, step), (after, _) in zip(events, events[1:], strict=False):
        depth += step
        if depth > allowed or after <= x:
            continue
        if gutters and gutters[-1][1] == x:
            gutters[-1] = (gutters[-1][0], after)
        else:
            gutters.append((x, after))
    gutters = [g for g in gutters if g[1] - g[0] >= 0.5 * height]
    while gutters:
        bounds = [events[0][0], *(x for g in gutters for x in g), events[-1][0]]
        support = [sum(any(a <= w.middle <= b for w in row.words) for row in rows)
                   for a, b in zip(bounds[::2], bounds[1::2], strict=True)]
        weak = next((n for n, count in enumerate(support) if count <= max(allowed, 1)), None)
        if weak is None:
            break
        del gutters[max(0, weak - 1)]
    return gutters


def _column(word: Word, gutters: Sequence[tuple[float, float]]) -> int:
    return sum(word.middle > (a + b) / 2 for a, b in gutters)


def _fits(line: Line, middles: Sequence[float], most: int = 1) -> bool:
    """Whether none of the line's cells covers the middle of more than ``most`` columns (prose under
    a table does; a header's name, wider than its column, reaches over a gutter but not that far)."""
    return all(sum(cell[0].x0 <= m <= cell[-1].x1 for m in middles) <= most for cell in line.cells)


def _bold(line: Line, boxes: _Boxes) -> bool:
    return all(boxes.bold(w.index) for w in line.words)


def _page_numbers(rows: Sequence[Line]) -> bool:
    """Whether the rows end in numbers that never go down: a table of contents' pages."""
    last = [row.cells[-1][-1].text for row in rows]
    if not all(t.isdigit() and len(t) <= 4 for t in last):
        return False
    return all(int(a) <= int(b) for a, b in zip(last, last[1:], strict=False))


def _middles(rows: Sequence[Line], gutters: Sequence[tuple[float, float]]) -> list[float]:
    left = min(w.x0 for row in rows for w in row.words)
    right = max(w.x1 for row in rows for w in row.words)
    bounds = [left, *(x for g in gutters for x in g), right]
    return [(a + b) / 2 for a, b in zip(bounds[::2], bounds[1::2], strict=True)]


def _table(run: Sequence[Line], lines: Sequence[Line], boxes: _Boxes) -> Table | None:
    run = sorted(run, key=lambda line: -line.bottom)  # as the lines stand, top to bottom
    full = [line for line in run if len(line.cells) >= 2]
    if any(_LEADERS.search(line.text) for line in full) or _page_numbers(full):
        return None  # a table of contents
    # a header's names stand centred over their columns, wider than them: the body says where they are
    gutters = _gutters(full[2:] if len(full) > MIN_ROWS + 2 else full)
    if not gutters:
        return None
    # the table: from its first line to its last in the columns, past a row whose wide cell crosses
    # a gutter (the few the gutters allow) but not past a line of prose (one cell across them)
    middles = _middles(full, gutters)
    # (a bold header's name may span two columns: "OBLIGATION/SERVICE DATES" over START and END)
    fits = [_fits(line, middles) or _is_rule(line) or (
        len(line.cells) >= 2 and _fits(line, middles, 2) and _bold(line, boxes)) for line in run]
    if not fits[0]:
        return None  # prose above: the table is looked for from the next line on
    end = next((k for k in range(len(run)) if not fits[k] and len(run[k].cells) < 2), len(run))
    while end > 0 and not fits[end - 1]:
        end -= 1
    kept = list(run[:end])
    # a table takes whole lines of PDFium's text: a part line at either end stays text
    parts, kept_parts = Counter(x.number for x in lines), Counter(x.number for x in kept)
    whole = [line for line in kept if parts[line.number] == kept_parts[line.number]]
    if sum(len(line.cells) >= 2 for line in whole) < MIN_ROWS:
        return None
    columns = [[] for _ in range(len(gutters) + 1)]
    for line in whole:
        for word in line.words:
            columns[_column(word, gutters)].append(word)
    if sum(len({w.bottom for w in column}) >= 2 for column in columns) < 2:
        return None
    if columns[0] and all(_MARKER.match(w.text) for w in columns[0]):
        return None  # a list: bullets or numbers, then text
    header, body = _header(whole, gutters, boxes)
    rows, starts = _rows(body, gutters)
    if not rows:
        return None
    numbers = [line.number for line in whole]
    return Table(min(numbers), max(numbers), tuple(map(tuple, rows)), header, tuple(starts))


def _cells_of(line: Line, gutters: Sequence[tuple[float, float]]) -> list[str]:
    """The line's text by column: each cell in the column its first word stands in (a wrapped
    description that runs on into the gutter stays whole), a cell cut where a gap between two of
    its words holds a gutter's middle (cells PDFium set closer than a cell's gap)."""
    middles = [(a + b) / 2 for a, b in gutters]
    cells = [""] * (len(gutters) + 1)
    for cell in line.cells:
        n = _column(cell[0], gutters)
        for before, word in zip([None, *cell], cell, strict=False):
            if before is not None and any(before.x1 <= m <= word.x0 for m in middles):
                n = _column(word, gutters)
            cells[n] = f"{cells[n]} {word.text}".strip()
    return cells


def _is_rule(line: Line) -> bool:
    return bool(_RULE.match(line.text.replace(" ", "")))


def _header(lines: Sequence[Line], gutters: Sequence[tuple[float, float]],
            boxes: _Boxes) -> tuple[tuple[str, ...], list[Line]]:
    """The header's cell names and the lines under it: the first (up to three) lines when they
    stand above a ruled line, are bold over a body that is not, or are words over rows of figures."""
    rule = next((k for k, line in enumerate(lines[:4]) if k and _is_rule(line)), None)
    if rule is not None:
        top, skip = rule, rule + 1
    else:
        top = _bold_top(lines, boxes) or _words_over_figures(lines)
        skip = top
    if top == 0:
        return (), list(lines)
    names = [""] * (len(gutters) + 1)
    for line in lines[:top]:
        names = [f"{a} {b}".strip() for a, b in zip(names, _cells_of(line, gutters), strict=True)]
    return tuple(names), list(lines[skip:])


def _bold_top(lines: Sequence[Line], boxes: _Boxes) -> int:
    """How many of the first lines are bold (at most three), when the line under them is not."""
    bold = [_bold(line, boxes) for line in lines[:4]]
    top = 0
    while top < min(3, len(bold)) and bold[top]:
        top += 1
    return top if top < len(bold) and not bold[top] else 0


def _words_over_figures(lines: Sequence[Line]) -> int:
    """How many of the first lines (at most three) have no digit, when most lines under them have."""
    top = 0
    while top < min(3, len(lines) - 2) and not _DIGIT.search(lines[top].text):
        top += 1
    body = lines[top:]
    return top if sum(bool(_DIGIT.search(line.text)) for line in body) >= 0.6 * len(body) else 0


def _rows(lines: Sequence[Line], gutters: Sequence[tuple[float, float]]) -> tuple[list[list[str]], list[int]]:
    """Each row's cells. A line continues the row above (cells wrapped onto the next line) when it
    has nothing in the first column and one cell, or at most half as many as a row above that has
    its first; any other line starts a row. Ruled lines are dropped. Also the line each row begins on."""
    rows: list[list[str]] = []
    starts: list[int] = []
    for line in lines:
        if _is_rule(line):
            continue
        cells = _cells_of(line, gutters)
        filled = sum(bool(cell) for cell in cells)
        above = rows[-1] if rows else None
        if above is not None and not cells[0] and (
                filled == 1 or above[0] and 2 * filled <= sum(bool(cell) for cell in above)):
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(above, cells, strict=True)]
        else:
            rows.append(cells)
            starts.append(line.number)
    return rows, starts
