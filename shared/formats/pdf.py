"""PDF: text by PDFium (pypdfium2), page by page, in reading order; scanned pages by OCR.

Chosen by measurement against pypdf and pdfplumber on Debian's own PDFs (docs/formats.md, "PDF"): PDFium
was 5-10x faster than pypdf and 20-40x faster than pdfplumber, used the least memory, and its
text matched the plain-text edition Debian ships beside the same manual best.

From each page's text: running headers and footers (a top or bottom line that recurs, digits
aside, on many pages) and page numbers are dropped; a word hyphenated at a line end is joined;
wrapped lines of a paragraph are joined, while short lines (a list, a heading) stay lines of their
own; a table's rows, found by where their words stand (:mod:`shared.formats.pdf_tables`), are a
passage each ("column: value; ..."). A page without a text layer is read by Tesseract when it is
installed (Debian's ``tesseract-ocr``); otherwise it is skipped and counted. The title is the
document's metadata title, else its first page's first heading (or what its "Name" heading heads), else
the first page's first line when it reads as a title.
"""

from __future__ import annotations

import itertools
import logging
import re
import shutil
import subprocess
import threading
from collections import Counter
from statistics import median

from shared.contract.errors import InvalidInput
from shared.formats.containers import empty_file
from shared.formats.passages import Passage, Reading
from shared.formats.pdf_tables import Table, find_tables
from shared.formats.registry import Limits

log = logging.getLogger("ragbus.formats.pdf")

#: a page with fewer characters of text than this has no text layer worth the name (a scan)
SCANNED_BELOW_CHARS = 20
OCR_DPI = 300
OCR_SECONDS = 60  # one page; the whole file is bounded by RAGBUS_PARSE_SECONDS too

_PAGE_NUMBER = re.compile(r"^\s*(?:page\s+)?(?:\d{1,5}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d{1,5})?\s*$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_SOFT_HYPHEN = re.compile(r"\x02(?:\r?\n)?")
_LEADING_NUMBER = re.compile(r"^(\d{1,5})\s")
_TRAILING_NUMBER = re.compile(r"\s(\d{1,5})$")
_DOT_LEADERS = re.compile(r"(?:\s?\.){4,}\s?")  # a table of contents' ". . . . ." between a title and its page
_HYPHENATED = re.compile(r"([a-zà-ÿ])[-\u2010]\n([a-zà-ÿ])")  # U+2010: the hyphen groff breaks a word with
_SENTENCE_END = re.compile(r"[.!?:;)\]\"”]$")
# a letter after the dash, or one digit ending the term or before its comma ("-0, --null", "-1, --fast", "-9"):
# "-40" wrapped alone is a number
_OPTION = r"(?:--?[A-Za-z][\w-]*|-\d(?=,|$))(?:\[?=[^\s,]*)?"
# a man page's term: "-a, --all", "--block-size=SIZE" (not a sentence's end, "... use --dump-every-bb=count.")
_OPTIONS_ONLY = re.compile(rf"{_OPTION}(?:,\s*{_OPTION})*(?<![.;:])$")
# a term short enough to share its description's line ("-k like --block-size=1K", "--help display this help"):
# one option, no value (a wrapped sentence's "--max-depth=0 is the same as ..." is none)
_TERM_ON_ITS_LINE = re.compile(r"--?[A-Za-z][\w-]* [a-z]")
# a line that runs on into the next, which is then no term: a comma, a command's backslash, a word that needs more
_RUNS_ON = re.compile(r"(?:[,\\]|\b(?:and|or|with|the|a|an|as|of|to|than|by|for|in|from|via))$")
# a line that opens a sentence with a capitalised word ("Display values are ..."; not "NUL" or "DU_BLOCK_SIZE")
_OPENS_A_SENTENCE = re.compile(r"[A-Z][a-z]+\b")
#: lines kept at the top and bottom of a page as candidates for running headers and footers
_EDGE_LINES = 2
#: PDFium is not thread-safe: no two of its calls may run at once in one process, not even on different
#: documents (pypdfium2's documentation), and a worker's call beside another's can end the process with a
#: segmentation fault. Every use of PDFium in ragbus holds this lock.
PDFIUM_LOCK = threading.RLock()


def read_pdf(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    with PDFIUM_LOCK:
        document = open_pdf(raw)
        try:
            return _read(document, limits)
        finally:
            document.close()


def open_pdf(raw: bytes):
    """``raw`` opened by PDFium; :class:`InvalidInput` naming why it cannot be (encrypted, damaged)."""
    import pypdfium2 as pdfium

    if not raw:  # PDFium's "Data format error" called an empty file damaged
        raise InvalidInput(empty_file("PDF"))
    try:
        return pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise InvalidInput("the PDF is encrypted (password-protected); ragbus cannot read it without the "
                               "password: remove the protection and ingest it again") from None
        raise InvalidInput(f"the PDF cannot be opened ({exc}); it is damaged or not a PDF") from None


def _read(document, limits: Limits) -> Reading:
    reading = Reading()
    total = len(document)
    pages = min(total, limits.max_pages)
    if total > pages:
        reading.skip(total - pages, f"pages past the first {limits.max_pages} (RAGBUS_MAX_PAGES) were cut")
    texts: list[list[str]] = []
    # each page's lines' first line of PDFium's text, and its tables by the lines they take
    tables: list[tuple[list[int], dict[int, Table]]] = []
    above: Table | None = None  # the last table of the page before, whose header a table run on takes
    ocr_left = limits.ocr_max_pages if limits.ocr else 0
    engine = shutil.which("tesseract") if limits.ocr else None
    for number in range(pages):
        page = document[number]
        try:
            text, found = _page_text(page)
            if len(text.strip()) < SCANNED_BELOW_CHARS and _has_image(page):
                text, found = _scanned(page, number + 1, engine, ocr_left, limits, reading), []
                ocr_left -= 1 if engine else 0
        finally:
            page.close()
        if found:
            found[0] = found[0].runs_on(above)
        above = found[-1] if found else None
        lines, origin = _lines(text)
        texts.append(lines)
        taken = {n: table for table in found for n in range(table.first, table.last + 1)}
        tables.append((origin, {i: taken[n] for i, n in enumerate(origin) if n in taken}))
    running = _running_lines(texts)
    offset = _printed_offset(texts)
    for number, (lines, (origin, in_table)) in enumerate(zip(texts, tables, strict=True), start=1):
        kept = _without_edges(lines, running, None if offset is None else number + offset)
        full = _usual_width([lines[i] for i in kept])
        reading.passages.extend(Passage(text, kind, {"page": number}) for text, kind in _paragraphs(
            _with_tables(lines, origin, kept, in_table), full))
    reading.title = _title(document, reading, texts[0] if texts else [])
    return reading


def _page_text(page) -> tuple[str, list[Table]]:
    """The page's text as PDFium reads it (lines apart by CR LF) and the tables on it."""
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_bounded()
        rotation = page.get_rotation()
        if rotation and len(text) != textpage.count_chars():
            # on a turned page PDFium's bounded text runs some lines together; its text by index
            # has the same characters with every line apart
            lines = textpage.get_text_range().replace("\ufffe", "\x02")
            if lines.replace("\r\n", "") == text.replace("\r\n", ""):
                text = lines
        return text, find_tables(textpage, text, rotation)
    finally:
        textpage.close()


def _lines(text: str) -> tuple[list[str], list[int]]:
    """The text's lines, stripped, and the line of PDFium's text each begins on: a word hyphenated
    at a line's end (PDFium marks the hyphen U+0002) is made whole, its two lines one."""
    lines: list[str] = []
    origin: list[int] = []
    carry, start = "", 0
    for number, raw in enumerate(text.split("\r\n")):
        if not carry:
            start = number
        if raw.endswith("\x02"):
            carry += raw[:-1]
            continue
        joined, carry = _SOFT_HYPHEN.sub("", carry + raw), ""
        for piece in joined.replace("\r", "\n").split("\n"):
            lines.append(piece.strip())
            origin.append(start)
    if carry:
        lines.append(_SOFT_HYPHEN.sub("", carry).strip())
        origin.append(start)
    return lines, origin


def _with_tables(lines: list[str], origin: list[int], kept: list[int],
                 in_table: dict[int, Table]) -> list[str | Table]:
    """The kept lines, each table's in one piece where its first kept line stood, less any row that
    begins on a line dropped as a running header, footer or page number."""
    dropped = {origin[i] for i in set(range(len(lines))) - set(kept)}
    out: list[str | Table] = []
    placed: set[int] = set()
    for i in kept:
        table = in_table.get(i)
        if table is None:
            out.append(lines[i])
        elif id(table) not in placed:
            placed.add(id(table))
            out.append(table.without(dropped))
    return out


def _has_image(page) -> bool:
    """Whether the page shows an image (a scan); a page left blank on purpose has none to read."""
    import pypdfium2.raw as pdfium_c

    return any(obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects(max_depth=2))


def _scanned(page, number: int, engine: str | None, ocr_left: int, limits: Limits, reading: Reading) -> str:
    """The text OCR reads on a page without a text layer, or "" (the page counted as unread)."""
    if not limits.ocr:
        reading.skip(1, "pages without a text layer (OCR is off: RAGBUS_OCR)")
        return ""
    if engine is None:
        reading.skip(1, "pages without a text layer (no OCR engine installed: apt-get install tesseract-ocr)")
        return ""
    if ocr_left <= 0:
        reading.skip(1, f"pages without a text layer past the first {limits.ocr_max_pages} read by OCR "
                        "(RAGBUS_OCR_MAX_PAGES)")
        return ""
    bitmap = page.render(scale=OCR_DPI / 72, grayscale=True)
    try:
        pixels = bitmap.to_numpy()
    finally:
        bitmap.close()
    if pixels.ndim == 3:
        pixels = pixels[:, :, 0]
    height, width = pixels.shape[:2]
    portable_graymap = b"P5\n%d %d\n255\n" % (width, height) + pixels.astype("uint8").tobytes()
    try:
        done = subprocess.run([engine, "stdin", "stdout", "-l", "eng", "--dpi", str(OCR_DPI)],
                              input=portable_graymap, capture_output=True, timeout=OCR_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        reading.skip(1, f"pages whose OCR failed ({type(exc).__name__})")
        return ""
    if done.returncode != 0:
        reading.skip(1, f"pages whose OCR failed (tesseract exit {done.returncode})")
        return ""
    text = done.stdout.decode("utf-8", "replace")
    log.info("page %d read by OCR: %d characters", number, len(text))
    return text


def _edge_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).lower()


def _running_lines(pages: list[list[str]]) -> set[str]:
    """Lines (digits aside) among the first or last few of at least half the pages, and of 3 at
    least, or of both of two: a running header or footer ("Debian Policy Manual, Release 4.6" /
    "Chapter 3. Binary packages"; a two-page man page's "DU(1) User Commands DU(1)" and "GNU coreutils
    9.1 September 2022 1", which stood as a passage and ran on from the page's last line)."""
    if len(pages) < 2:
        return set()
    counts: Counter[str] = Counter()
    for lines in pages:
        content = [line for line in lines if line]
        if len(content) < 2:
            # a page's only line is its text, not a header or footer over text: counted, a document of one
            # such line a page ("Step 3: ...", a slide or label each page) lost every line and was refused
            continue
        edges = set(content[:_EDGE_LINES] + content[-_EDGE_LINES:])
        counts.update({_edge_key(line) for line in edges})
    floor = max(3, len(pages) // 2) if len(pages) > 2 else 2
    return {key for key, count in counts.items() if count >= floor and key.strip("# ")}


def _edge_numbers(lines: list[str]) -> set[int]:
    """The numbers a page's top and bottom lines begin or end with (a printed page number)."""
    content = [line for line in lines if line]
    out = set()
    for line in content[:_EDGE_LINES] + content[-_EDGE_LINES:]:
        for match in (_LEADING_NUMBER.match(line), _TRAILING_NUMBER.search(line)):
            if match:
                out.add(int(match.group(1)))
    return out


def _printed_offset(pages: list[list[str]]) -> int | None:
    """How the printed page numbers run against the page index (printed = index + offset), when
    a third of the pages agree on it: then "12 Chapter 2. The Debian Archive" on page 12 is a
    running header, however its chapter title changes."""
    offsets: Counter[int] = Counter()
    for index, lines in enumerate(pages, start=1):
        offsets.update({number - index for number in _edge_numbers(lines)})
    if not offsets or len(pages) < 3:
        return None
    offset, count = offsets.most_common(1)[0]
    return offset if count >= max(3, len(pages) // 3) else None


def _without_edges(lines: list[str], running: set[str], printed: int | None) -> list[int]:
    """The indexes of the lines that are not a running header, footer or page number."""
    content = [i for i, line in enumerate(lines) if line]
    edges = set(content[:_EDGE_LINES] + content[-_EDGE_LINES:])

    def is_edge_furniture(line: str) -> bool:
        if _PAGE_NUMBER.match(line) or _edge_key(line) in running:
            return True
        if printed is None or len(line) > 100:
            return False
        return any(m and int(m.group(1)) == printed
                   for m in (_LEADING_NUMBER.match(line), _TRAILING_NUMBER.search(line)))

    return [i for i, line in enumerate(lines) if not (i in edges and is_edge_furniture(line))]


def _usual_width(lines: list[str]) -> float:
    """The page's usual width of a line, in characters (the median of those over 20)."""
    widths = [len(line) for line in lines if len(line) > 20]
    return median(widths) if widths else 60


def _paragraphs(lines: list[str | Table], full: float) -> list[tuple[str, str]]:
    """A page's lines as (text, kind) blocks: wrapped lines of a paragraph joined (a hyphenated
    word made whole), short lines (``full``: the usual width) kept apart as rows of their own (a
    list's); a table's rows each a row."""
    blocks: list[tuple[str, str]] = []
    current: list[str] = []

    def close() -> None:
        if current:
            text = _HYPHENATED.sub(r"\1\2", "\n".join(current)).replace("\n", " ")
            text = _DOT_LEADERS.sub(" … ", text)
            blocks.append((" ".join(text.split()), "paragraph" if len(current) > 1 else _line_kind(current[0])))
            current.clear()

    for line in lines:
        if isinstance(line, Table):
            close()
            blocks.extend((row, "row") for row in line.rows)
            continue
        if not line:
            close()
            continue
        if _section_heading(line):  # a man page's NAME, SYNOPSIS: no blank line need set them apart
            close()
            current.append(line)
            close()
            continue
        runs_on = bool(current and _RUNS_ON.search(current[-1]))
        if _OPTIONS_ONLY.match(line) and not runs_on:  # (not a command's or a sentence's rest)
            # a term of options starts a block (the description above ended short)
            close()  # and its description, below it, joins it: "-a, --all count every widget ..."
            current.append(line)
            continue
        if current and not runs_on and _is_term(current) and (
                _TERM_ON_ITS_LINE.match(line) or _OPENS_A_SENTENCE.match(line) and _described_in_lower_case(current)
                and not _SENTENCE_END.search(current[-1])):
            # in a list of terms, the next term on its description's line, or the paragraph after the list (the
            # description above ended near the width: '--version output version information and exit' / 'Display
            # values are ...'): a description begun in lower case and not ended by a stop goes on in lower case
            close()
        current.append(line)
        # a line well short of the page's usual width ends its paragraph (or is a row on its own)
        if len(line) < 0.7 * full or _SENTENCE_END.search(line) and len(line) < 0.9 * full:
            close()
    close()
    return blocks


def _is_term(block: list[str]) -> bool:
    """Whether ``block`` opens with a man page's term: a line of options, or one option and its description."""
    return bool(_OPTIONS_ONLY.match(block[0]) or _TERM_ON_ITS_LINE.match(block[0]))


def _described_in_lower_case(block: list[str]) -> bool:
    """Whether the description of the term ``block`` opens with begins in lower case ("-k like ...", "-a, --all" /
    "write counts ..."), as GNU's man pages write them."""
    on_its_line = _TERM_ON_ITS_LINE.match(block[0])
    words = block[0].split()[1:2] if on_its_line else block[1].split()[:1] if len(block) > 1 else []
    return bool(words) and words[0][:1].islower()


def _section_heading(line: str) -> bool:
    """A line of one to three capitalised words, four letters or more ("SYNOPSIS", "SEE ALSO", "ÜBERSICHT"):
    a reference page's section heading, which PDFium gives with no blank line around it (a wrapped line
    that is one acronym, "USA", is too short to be one)."""
    words = line.split()
    return 0 < len(words) <= 3 and line.isupper() and all(word.isalpha() for word in words) and len(
        "".join(words)) >= 4


def _line_kind(line: str) -> str:
    if re.match(r"^(?:[•▪◦‣∙·*-]|\d{1,3}[.)])\s", line):
        return "item"
    if len(line) < 80 and not _SENTENCE_END.search(line) and line[:1].isupper() and len(line.split()) <= 12:
        return "heading"
    return "row"


def _title(document, reading: Reading, first_lines: list[str] | None = None) -> str:
    title = metadata_title(document)
    if title:
        return title
    # the first heading of the first page that says something ("CHAPTER" does not), with the lines it wraps onto
    # ("... but afraid to" / "forget"), or what a reference page's "Name" heading heads ("fonts.conf — Font
    # configuration files", as a man page's NAME): without one the file's name serves (the cleaner's fallback)
    opening = [p for p in reading.passages if p.position.get("page") == 1][:5]
    for n, passage in enumerate(opening):
        if passage.kind == "heading" and passage.text.casefold() == "name" and n + 1 < len(opening):
            return opening[n + 1].text
        if passage.kind == "heading" and len(passage.text.split()) >= 3:
            wrapped = itertools.takewhile(lambda p: p.kind != "heading" and p.text[:1].islower(), opening[n + 1:])
            return " ".join([passage.text, *(p.text for p in wrapped)])
    # else the first page's first line, though it recurs as a running header ("Shared MIME-info Database" heads
    # every page of shared-mime-info's spec, which was titled "mime-spec" by its file's name): short, with words,
    # no page number ("Page 1 of 9"), no sentence's or a number's end ("Chapter 1", "... at users.sf.net)")
    first = " ".join(next((line for line in first_lines or [] if line.strip()), "").split())
    if len(first) <= 80 and re.search(r"[^\W\d_]{2}", first) and not _PAGE_NUMBER.match(first) and not (
            _SENTENCE_END.search(first) or _TRAILING_NUMBER.search(first) or _LEADING_NUMBER.match(first)):
        return first
    return ""


def metadata_title(document) -> str:
    """The title the PDF's information dictionary states, or "" (none, or a placeholder)."""
    try:
        title = (document.get_metadata_value("Title") or "").strip()
    except Exception:  # a malformed info dictionary: the first heading serves
        return ""
    if title and not title.lower().startswith(("untitled", "microsoft word")):
        return " ".join(title.split())
    return ""
