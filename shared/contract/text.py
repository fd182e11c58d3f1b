"""Text conventions shared by ingestion and the query loop.

A clean document is its body with a small metadata header in front::

    Title: <title>
    Published: <ISO date or "unknown">
    Source: <url>

    <body>

The header travels with the text (into the first chunk, the grader's contexts,
the synthesizer's citations) so a passage always says where it came from;
:func:`strip_header` takes it off where only the body counts (the reference's
rule that drops header-only chunks).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from typing import Any

UNKNOWN_DATE = "unknown"

#: How much of a client's value an error message quotes back.
SHOWN_CHARS = 80

#: A command-line option as written ("-9", "-N", "--fast", "--no-name"), case kept: a term of its own for BM25 and
#: the reader, for "-9" holds no word of two characters and "-N" is not "-n" (gzip's --name and --no-name).
OPTION = re.compile(r"(?<![\w-])--?[^\W_][\w-]*")

_HEADER_RE = re.compile(
    r"\ATitle: (?P<title>[^\n]*)\nPublished: (?P<published>[^\n]*)\nSource: (?P<source>[^\n]*)(?:\n\n|\n?\Z)"
)


@dataclass(frozen=True)
class Header:
    title: str
    published: str | None  # None when the header says "unknown"
    source: str


def _one_line(value: str) -> str:
    return " ".join(value.split())


def build_header(title: str, published: str | None, source: str) -> str:
    """The metadata header, ending with the blank line that separates it from the body."""
    return (
        f"Title: {_one_line(title)}\n"
        f"Published: {_one_line(published or '') or UNKNOWN_DATE}\n"
        f"Source: {_one_line(source)}\n\n"
    )


def with_header(title: str, published: str | None, source: str, body: str) -> str:
    """``body`` with the metadata header in front."""
    return build_header(title, published, source) + body.strip() + "\n"


def split_header(text: str) -> tuple[Header | None, str]:
    """The header (None when ``text`` has none) and the body after it."""
    match = _HEADER_RE.match(text)
    if not match:
        return None, text
    published = match["published"].strip()
    header = Header(
        title=match["title"].strip(),
        published=None if published in ("", UNKNOWN_DATE) else published,
        source=match["source"].strip(),
    )
    return header, text[match.end():]


def strip_header(text: str) -> str:
    """``text`` without a leading metadata header (unchanged when it has none)."""
    return split_header(text)[1]


def header_length(text: str) -> int:
    """How many leading characters of ``text`` are its metadata header (0 when none)."""
    match = _HEADER_RE.match(text)
    return match.end() if match else 0


def snippet(text: str, limit: int = 240, *, title: str = "") -> str:
    """A one-line preview of a chunk: no metadata header (nor the title repeated at the
    start of the body, which the listing shows already), cut at a word boundary."""
    body = " ".join(strip_header(text).split())
    heading = " ".join(title.split())
    if heading and body.startswith(heading + " "):
        body = body[len(heading) + 1:]
    if len(body) <= limit:
        return body
    cut = body[: limit + 1].rsplit(" ", 1)[0] if " " in body[: limit + 1] else body[:limit]
    return cut.rstrip(" ,;:-–—") + "…"


def _comparable(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def meaningful_rewrite(original: str, rewritten: str) -> str | None:
    """What is worth showing of a rewrite of ``original``, or None when nothing is.

    A rewrite that only appends search terms after the question (pseudo-relevance
    feedback: "...? layers returns") says nothing to a reader; an expanded acronym or
    a reworded question does, and is shown without the terms (:func:`query_apart`).
    """
    question = query_apart(original, rewritten)[0]
    if not question or _comparable(question) == _comparable(original):
        return None
    return question


def query_apart(question: str, query: str) -> tuple[str, str]:
    """``query`` as the question it searches and the search terms a rewrite appended after it ("" when none):
    "How does BM25 saturate term frequency? speed less" is the question and "speed less". The question is
    the query's start when the query starts with it, else up to the query's last "?" when it ends with one; a
    rewording is all question. The record keeps the terms apart (an iteration's ``added_terms``)."""
    text, asked = " ".join(query.split()), " ".join(question.split())
    if asked and text.startswith(asked + " "):
        return asked, text[len(asked) + 1:]
    end = text.rfind("?")
    if asked.endswith("?") and 0 <= end < len(text) - 1:
        return text[:end + 1], text[end + 1:].strip()
    return text, ""


def searched_as(question: str, query: str) -> str:
    """A query as an event's detail shows it: quoted, with the search terms a rewrite appended after the
    question apart from it ("“How does BM25 saturate term frequency?” + search terms “speed less”"), as the
    page shows them; a rewording is shown whole."""
    asked, added = query_apart(question, query)
    return f"{in_quotes(asked)} + search terms {in_quotes(added)}" if added else in_quotes(asked)


# ------------------------------------------------------------ normalising

# Control characters other than tab and newline, the Unicode "format" characters that only confuse
# tokenizers (zero-width spaces, soft hyphens, BOMs), and the bidirectional embeddings, overrides and
# isolates that make a quoted sentence read as something it is not ("port \u202e0808" shows as "port 8080").
_BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069"
_CONTROL_RE = re.compile(rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200d\u2060\ufeff{_BIDI_CONTROLS}]")
_BIDI_RE = re.compile(f"[{_BIDI_CONTROLS}]")
# Characters that end a line though they are not "\n" (Python's str.splitlines takes them all): form feed and
# vertical tab, the file/group/record separators, NEL (EBCDIC's newline) and Unicode's line and paragraph
# separators. Dropped with the control characters, they glued the words on either side ("seconds.\fThe port").
# A run of form feeds and vertical tabs is one line break; beside a newline it is none of its own (pdftotext starts
# a page's first line with one, two after a blank page: "named in\n\f\fthe -c option" is one sentence, which
# join_wrapped joins): dropped with the control characters, as before.
_LINE_BREAKS_RE = re.compile("[\x1c-\x1e\x85\u2028]|(?<![\n\x0b\x0c])[\x0b\x0c]+(?![\n\x0b\x0c])")


def without_bidi_controls(text: str) -> str:
    """``text`` without bidirectional embeddings, overrides and isolates (right-to-left letters and the
    U+200E/U+200F marks stay): what a person typed, as every surface can show it without reordering it."""
    return _BIDI_RE.sub("", text)


_SPACES_RE = re.compile(r"[^\S\n]+")  # whitespace except newline
_BLANK_LINES_RE = re.compile(r"\n{3,}")


# Fullwidth digits and Latin letters (what CJK input methods type: "ｂｍ２５"); fullwidth punctuation
# ("？" in a Chinese question) is how that script writes, and stays.
_WIDTH = {code: code - 0xFEE0 for start, end in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
          for code in range(start, end + 1)}


def fold_width(text: str) -> str:
    """Fullwidth Latin letters and digits as their ASCII selves ("ｂｍ２５" -> "bm25"), as search engines
    fold them; nothing else changes (unlike NFKC, which would also make "a²" "a2")."""
    return text.translate(_WIDTH)


def line_breaks_as_newlines(text: str) -> str:
    """``text`` with every line break ``\\n``: CR LF, CR, NEL, U+2028, the file/group/record separators, a run of
    form feeds and vertical tabs between two characters of a line (one beside a newline is left, no break of its
    own, for :func:`normalize_text` to drop), and a paragraph separator, U+2029, as a blank line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2029", "\n\n")
    return _LINE_BREAKS_RE.sub("\n", text)


def normalize_text(text: str) -> str:
    """Unix newlines, no control characters, fullwidth ASCII folded, single spaces, at most one blank
    line in a row."""
    text = line_breaks_as_newlines(text)
    text = fold_width(unicodedata.normalize("NFC", text))
    text = _CONTROL_RE.sub("", text)
    text = _SPACES_RE.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES_RE.sub("\n\n", text).strip()


# ------------------------------------------------------------- sentences

# A sentence ends at ., ! or ? (optionally followed by closing quotes or brackets)
# and then whitespace; a blank line or a line break also ends one (headings, list items).
_SENTENCE_END_RE = re.compile(r"(?:[.!?…][\"'”’)\]]*\s+|\n\s*)")
_ABBREVIATIONS = frozenset(
    ["e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "co", "st", "no",
    "fig", "eq", "al", "approx", "dept", "est", "jr", "sr"]
)


def sentence_ends(text: str) -> list[int]:
    """Character offsets at which a new sentence starts (after the end and its whitespace).

    Deliberately simple: punctuation followed by whitespace, or a line break,
    except after common abbreviations ("e.g.", "Dr.") and single initials.
    """
    ends: list[int] = []
    for match in _SENTENCE_END_RE.finditer(text):
        if match.group(0)[0] == ".":
            before = text[max(0, match.start() - 24) : match.start()].split()
            bare = before[-1].lower().strip("(\"'") if before else ""
            if bare in _ABBREVIATIONS or (len(bare) == 1 and bare.isalpha()):
                continue
        if match.end() < len(text):
            ends.append(match.end())
    return ends


def split_sentences(text: str) -> list[str]:
    """``text`` cut at :func:`sentence_ends`, each piece stripped, empty pieces dropped."""
    pieces, start = [], 0
    for end in sentence_ends(text):
        pieces.append(text[start:end].strip())
        start = end
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


# ECMA-48 control sequences a terminal reads and does not show: CSI (ESC [ parameters, intermediates, a
# final byte: colours, bold, cursor moves), OSC (ESC ] ... ended by BEL or ESC \: a title, a hyperlink),
# and the other two-character escapes
_TERMINAL_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_NROFF_BULLET = re.compile("\\+\x08o")  # nroff's bullet: an o struck over a +
_OVERSTRUCK = re.compile("_\x08(.)|(.)\x08(?=(.))")  # underlined (_ then the letter) or bold (a letter twice)


def without_terminal_formatting(text: str) -> str:
    """``text`` as a terminal shows it: its escape sequences gone and each overstruck letter once.

    Text captured from a terminal, and nroff's or grotty's output as Debian ships manuals
    (man-db-manual.txt: ``\\x1b[1mbold\\x1b[22m``, ``N\\x08NA\\x08A`` for bold, ``+\\x08o`` for a bullet),
    otherwise kept the sequences' parameters once their control characters went ("[1mman-db[0m")."""
    if "\x1b" not in text and "\x08" not in text:
        return text
    text = _TERMINAL_ESCAPE.sub("", text)
    text = _NROFF_BULLET.sub("•", text)
    return _OVERSTRUCK.sub(lambda m: m.group(1) or "", text)


def clip_metadata(value: str | None, limit: int) -> str:
    """Untrusted metadata (a title, a date) as one line of at most ``limit`` characters
    (an ellipsis marks a cut), without control or bidirectional characters: it goes into the header and
    every chunk's record."""
    text = " ".join(_CONTROL_RE.sub("", without_terminal_formatting(value or "")).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def json_kind(value: Any) -> str:
    """What a client sent, as JSON names it ("a boolean", "null"), not Python ("bool", "NoneType")."""
    return "null" if value is None else {bool: "a boolean", int: "a number", float: "a number", str: "a string",
                                         list: "a list", dict: "an object"}.get(type(value), "a value")


def shown(value: Any) -> str:
    """A client's value quoted in an error, cut short: the message stays one readable line however
    much was sent (a 30 kB field name made a 30 kB error line). Text is quoted as Python quotes it;
    anything else as JSON writes it, as the client sent it (``true``, ``null``, not ``True``, ``None``)."""
    try:
        if isinstance(value, str | date):
            text = repr(str(value))
        else:
            try:
                text = json.dumps(value, ensure_ascii=False)
            except TypeError:  # not a JSON value (a set, an object): Python's spelling is all there is
                text = repr(value)
    except ValueError:  # an int past Python's 4300-digit str() limit
        text = f"a number of {value.bit_length()} bits"
    return cut(text)


def in_quotes(text: str) -> str:
    """``text`` quoted as a person reads it in an event's detail or a line of output: “When is exact search good
    enough?”, on one line; not Python's repr ('...' or "...", escapes), which the page and the event stream showed."""
    return f"“{' '.join(str(text).split())}”"


def cut(text: str) -> str:
    """Text from a client (a request path, say) cut to :data:`SHOWN_CHARS` for an error message."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


# ------------------------------------------------------------- markup

#: Elements whose content is code, styles or another document, never prose to read or quote.
CODE_ELEMENTS = ("script", "style", "iframe", "frame", "frameset", "object", "embed", "applet", "svg", "math",
                 "template", "noscript", "noembed", "xmp", "textarea", "title")
#: Every element name HTML parsers know (WHATWG's current and obsolete elements, and the two foreign roots): a
#: name outside this set, as in a document's ``<key>=<value>``, is text a browser would hide, not markup.
HTML_ELEMENTS = frozenset("""
a abbr acronym address applet area article aside audio b base basefont bdi bdo bgsound big blink blockquote body br
button canvas caption center cite code col colgroup data datalist dd del details dfn dialog dir div dl dt em embed
fieldset figcaption figure font footer form frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe image
img input ins isindex kbd keygen label legend li link listing main map mark marquee math menu menuitem meta meter
multicol nav nextid nobr noembed noframes noscript object ol optgroup option output p param picture plaintext pre
progress q rb rp rt rtc ruby s samp script search section select slot small source spacer span strike strong style sub
summary sup svg table tbody td template textarea tfoot th thead time title tr track tt u ul var video wbr xmp
""".split())
_CODE_ELEMENT = re.compile(rf"<({'|'.join(CODE_ELEMENTS)})\b[^>]*>.*?(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_CODE_ELEMENT_OPEN = re.compile(rf"<({'|'.join(CODE_ELEMENTS)})\b", re.IGNORECASE)


def without_code_elements(html: str) -> str:
    """``html`` with every ``<script>``, ``<style>``, ``<iframe>``… element removed with its content
    (an element left open runs to the end): the tag alone stripped, its code would read as text."""
    return _CODE_ELEMENT.sub(" ", html)


def opens_code_element(html: str) -> str | None:
    """The code element (lower case) that ``html`` leaves open at its end, else None: the text after
    it, up to its closing tag, is its content."""
    last = None
    for match in _CODE_ELEMENT_OPEN.finditer(html):
        last = match
    if last is None:
        return None
    name = last.group(1).lower()
    closed = re.search(rf"</{name}\s*>", html[last.end():], re.IGNORECASE)
    return None if closed else name
