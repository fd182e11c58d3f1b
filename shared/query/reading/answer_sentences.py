"""Which sentences of a passage can be quoted as (part of) an answer, and which lean on the sentence before them.

An extractive answer copies sentences out of their passages, so each must read as a statement on its own, or come
right after the sentence it leans on: :func:`passage_pieces` reads a passage as documentation is written,
:func:`answer_sentence` cleans a piece for quoting or rejects it, :func:`opens_with_reference` tells whether a sentence
points back at what came before ("These ...", "At that scale ...": quoted alone it is a riddle), and
:func:`question_parts` splits a question that asks several things into its parts, so an answer can say which part its
sources leave out.
"""

from __future__ import annotations

import re

from shared.query.reading.translation import lexicon_table

#: lexicon/answer_words.tsv's word lists, by name (the file says why each): the reader's and answer_types'
ANSWER_WORDS = dict(lexicon_table("answer_words.tsv", ("list", "words")))


def word_list(name: str) -> frozenset[str]:
    """The words of :data:`ANSWER_WORDS`' list ``name``."""
    return frozenset(ANSWER_WORDS[name].split())


MIN_CHARS = 25
MIN_WORDS = 5
# What Sphinx ends a heading with, a link to it ("5.6.26. Version Control System (VCS) fields¶").
PERMALINK = "¶"

_WORD = re.compile(r"[^\W_][\w'’\-]*", re.UNICODE)
# A number standing on its own (a version, a date, a count), not digits inside a name such as BM25
_FIGURE = re.compile(r"(?<!\w)\d")
_BULLETS = "-*•·▪◦‣∙●○■\uf0b7–"  # a list item's marks, a PDF's too (formats/pdf_tables._MARKER)
_BULLET = re.compile(rf"^(?:[{_BULLETS}>]+|\(?\d{{1,2}}[.)]|\(?[a-z][)])\s+")
_REFERENCE_MARKER = re.compile(r"\s*\[\d+(?:\s*[,–-]\s*\d+)*\]")
# Ends as a statement: a full stop or an exclamation mark, maybe inside quotes or brackets.
STATEMENT_END = re.compile(r"[.!][\"'”’)\]]*$")
# A question mark that ends a word and a question ("Why?", "... in 3.2?"), not one inside a pattern or a
# path ("foo?bar", "/etc/rc?.d", "the wildcards * and ? apply").
_QUESTION = re.compile(r"[^\W_][\"'”’)\]]*\?(?![\w/.=&%-])|¿")
# A colon ends a sentence that says something ("the recommended idiom is ... call str.join() at the end:"), not one only
# pointing at what follows ("The following options are ...", too short, or a list's item: :func:`answer_sentence`).
_LEADS_INTO = re.compile(r"\b(?:following|as follows|these|below|examples?|e\.g)\b", re.IGNORECASE)
# "Atlas Corporation — Facilities Overview (Internal Documentation, 2024): The building ..."
_LABEL = re.compile(r"^(?P<label>[^:]{2,120}?):\s+(?=[\"'“‘(]?[A-Z0-9])")

# An item that is a value, not a heading: a field named by one word ("Release: 2.04"), a name and version ("Perl 5.28.1")
_VALUE_ITEM = re.compile(r"^[^\W\d_][\w-]*: \S|^[^\W\d_][\w+#-]*(?: [^\W\d_][\w+#-]*){0,3} v?\d+\.[\w.]*$")
_TITLE_SMALL = word_list("title_small")  # a line whose other words are all capitalised is a heading

_CONNECTIVES = word_list("connectives")  # "Additionally, ...": says all it means under a heading
_REFERRING_FIRST = _CONNECTIVES | word_list("referring_first")  # opening a sentence, it points back
# phrases opening a sentence that points back, and those among them that only link to what came before it
_REFERRING_PREFIXES, _CONNECTIVE_PREFIXES = (tuple(f"{p.replace('_', ' ')} " for p in ANSWER_WORDS[name].split())
                                             for name in ("referring_phrases", "connective_phrases"))
# "At that scale", "In this case", "For these reasons", "Because of this", "All of them": a demonstrative or
# a pronoun after lead-in words
_LEAD_IN, _DEMONSTRATIVE = word_list("lead_in"), word_list("demonstratives")
# "When you do, ...", "If so, ...", "If not, ...": the clause stands for the previous one; so does one whose subject is
# "it" or "they" ("If it is set to 'raise', ..."), but for an "it" standing for nothing ("If it is possible to ...").
_ELLIPTIC_CLAUSE = re.compile(
    r"^(?:when|if|once|unless|until|as|where|while|whenever|since|because)\s+(?:(?:it|they)\s+(?!comes\b|(?:is|was)\s+"
    r"(?:not\s+)?\w+(?:ble|ary|ant|ful|ous|ive|afe|asy|ard|est|ter)\s+(?:to|that)\b)|(?:so|not|(?:you|we|they|it|one|i|"
    r"he|she)(?:\s+(?:do|does|did|don't|doesn't|can|cannot|can't|will|would|are|is|have|has|had|must|should))?)\s*[,.;])",
    re.IGNORECASE,
)
_CATAPHORIC = word_list("cataphoric")  # "those who ...", "those that ...": what it means follows
# "these" is read back to something already named ("BM25 addresses these with ..."); "this" too when it stands alone as
# the subject ("... because this is rare"). "them" among the first words ("Systems built on them ..."), and "this"
# standing for a thing named before ("Some brokers offer this within ...").
_BACK_POINTER = re.compile(
    r"^(?:\S+\s+){0,3}them\b|"
    r"\bthese\b|\bthis\s+(?:is|was|means|meant|makes|made|allows|lets|gives|has|had|can|could|will|would|"
    r"also|helps|happens|works|requires|ensures|explains|within|in|for|to|with|by|on|at|from|as|because|"
    r"when|only|too)\b|\bthis[.,;]|\bthose\s+(?!(?:" + "|".join(ANSWER_WORDS["cataphoric"].split()) + r")\b)",
    re.IGNORECASE,
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def heading_like(text: str) -> bool:
    """True for a Title Case line without a lower-case word of its own (a heading,
    a label, a byline), e.g. "Term Frequency Saturation and k1" or "Pros"."""
    # (stops at the first word of its own in lower case: every sentence of every passage is asked this)
    return not any(w[0].islower() and w.lower() not in _TITLE_SMALL
                   and not any(ch.isdigit() or ch.isupper() for ch in w[1:]) for w in _words(text))


# A piece opening with one in lower case is the tail of a sentence cut at an inner quotation or a chunk edge
TAIL_OPENERS = word_list("tail_openers")
_OPENS_A_VALUE = word_list("opens_a_value")  # a sentence goes on after one ("Defaults to" / "/bin/bash.")
# A line of prose opens with a word and a space ("out surrounded by parens.", "Full and direct access ..."), where a
# line of code opens with a name and a sign ("console.log(res);", "install: ...").
_PROSE = re.compile(r"[^\W\d_][^\W\d_'’-]*[’']?[^\W\d_]*\s")
# An item of a list, a definition or a table row may be short: "-p: show PIDs".
MIN_ITEM_CHARS = 12
MIN_ITEM_WORDS = 3


def too_short(statement: str, item: bool = False) -> bool:
    """Too short to stand alone as an answer ("Defaults to 0700.", "It had uid 37."; an item: "-p: show PIDs")."""
    return len(statement) < (MIN_ITEM_CHARS if item else MIN_CHARS) or len(_words(statement)) < (
        MIN_ITEM_WORDS if item else MIN_WORDS)


def answer_sentence(sentence: str, *, item: bool = False) -> str | None:
    """``sentence`` cleaned for quoting (bullets, ``[n]`` reference markers, heading labels such as "Facilities Overview
    (2024): " taken off), or None when it cannot be quoted: a fragment, one ending in a colon that only leads into what
    follows (:data:`_LEADS_INTO`), a question or one quoting one, a heading (Markdown ``#``, Sphinx ``¶``, Title Case
    with no lower-case word of its own), a piece starting mid-sentence with a small word ("into", "and"; not a lower-case
    identifier: "libffi is not ..."). ``item``: a list item, definition or table row (:func:`passage_pieces`)."""
    text = " ".join(sentence.split())
    if text.startswith("#") or text.endswith(PERMALINK):
        return None  # a Markdown or Sphinx heading
    text = _BULLET.sub("", text)
    text = _REFERENCE_MARKER.sub("", text).strip()
    label = _LABEL.match(text)
    # a short label with a number ("Q3 2024: Revenue rose") says when or which: it stays
    if not item and label and heading_like(label["label"]) and not (
            len(label["label"].split()) <= 3 and any(ch.isdigit() for ch in label["label"])):
        text = text[label.end():]
    ends = STATEMENT_END.search(text) or text.endswith(":") and len(_words(text)) >= 10 and not _LEADS_INTO.search(text)
    if too_short(text, item) or _QUESTION.search(text) or (text.endswith(":") if item else not ends) \
            or len(_CONTENTS_ENTRY.findall(text)) > 1:
        return None  # a fragment, cut at a colon or a chunk edge, a question (asked or quoted), a table of contents
    first = text.lstrip("\"'“‘(")
    if not item and first[:1].islower() and _words(first)[0].lower() in TAIL_OPENERS:
        return None  # the tail of a sentence split at an inner quotation or a chunk edge
    if heading_like(text) and not (item and _VALUE_ITEM.match(text)):
        return None
    return text


# A table of contents' entry: its title, dot leaders and page ("2.1. A program … 3", "Overview ..... 12"), the page
# ending the text or followed by the next entry's number or title; leaders never follow a digit. Ranges and counts
# ("ports 8000 ... 8080 and", "1 s … 2 s … 4 s") are no entries.
_CONTENTS_ENTRY = re.compile(r"(?<!\d)(?:…|\.\s?\.\s?\.)\s*\d+(?=\.?\s*$|\s+(?:\d+(?:\.\d+)*\.?\s|[A-Z]))")
# A Markdown or text table row ("| 304 | Not Modified |") and the rule under its header ("|---|:-:|").
_TABLE_ROW = re.compile(r"^\|(.+)\|$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
_ITEM = re.compile(rf"^(?:[{_BULLETS}]|\d{{1,2}}[.)])\s+")
_SENTENCE_CLOSE = re.compile(r"[.!?:;][\"'”’)\]]*$")
# A field of a text file's field list: "Filter ID: 0x21", "Size of Filter Properties: 1 byte" (a short
# name, a colon, a value that is no sentence).
_NAMED_CELL = re.compile(r"^[^:;|]{1,60}: \S")
_FIELD = re.compile(r"^[A-Za-z][\w .()/-]{0,40}:\s+[^:]{1,60}$")
# A wrapped line is long: text files wrap at 72-80 columns, and a heading or a label is short.
WRAPPED_LINE = 40


def _cells(line: str) -> list[str]:
    return [" ".join(c.replace("`", "").split()) for c in line.strip().strip("|").split("|")]


def _is_term(text: str) -> bool:
    """A definition list's term: short, no sentence of its own ("--max-age", "Accept-Encoding", "65534:")."""
    text = text.removesuffix(":")
    return len(text) <= 40 and len(text.split()) <= 4 and not _SENTENCE_CLOSE.search(text)


# An option as a manual's definition list names it: "--repeat", "-v or --verbose", "--path "PATH(S)"".
_OPTION_TERM = re.compile(r"^--?[A-Za-z][\w-]*(?:[ =][^.!?:;]{0,40})?$")


def _is_field(line: str) -> bool:
    return bool(_FIELD.match(line)) and not _SENTENCE_CLOSE.search(line) and not _OPTION_TERM.match(line)


def _is_table_row(line: str) -> bool:
    """A row as :func:`shared.formats.passages.labelled_row` writes it, two cells or more named ("Property: pixelsize;
    Type: Double; Description: Pixel size"), or three cells or more joined by " | " ("sx | Semi Expanded | 112.5%")."""
    named = sum(bool(_NAMED_CELL.match(cell)) for cell in line.split("; "))
    return named >= 2 or line.count(" | ") >= 2 and not line.startswith("|")


def _continues(line: str, following: str, closed: bool) -> bool:
    """``following`` carries on the sentence ``line`` breaks off: "... specified" / "by PATHS to load DTDs," /
    "entities or documents." (a line ending in a comma or a small word, whatever comes next: "Defaults to" /
    "/bin/bash."; or the next one opening in lower case, after a line as long as a wrapped one or before a small word:
    "are written" / "out surrounded by parens.", where lines end a sentence before a blank line, ``closed``)."""
    if _SENTENCE_CLOSE.search(line) or not following or not closed:
        return False
    last = line.rsplit(" ", 1)[-1].lower()
    if line.endswith(",") or last in _OPENS_A_VALUE:
        return True
    return bool(_PROSE.match(following)) and following[:1].islower() and line[-1:] not in "{([=\\|&" and (
        last in TAIL_OPENERS or len(line) >= WRAPPED_LINE or following.split(" ", 1)[0].lower() in TAIL_OPENERS)


def _opens_definition(lines: list[str], n: int) -> bool:
    """``lines[n]`` is a definition list's term as a text file writes it: a short line opening a paragraph
    ("dialout" / "Full and direct access to serial ports."), not its heading (one in Title Case is a term
    only where the definition goes on in lower case: "P < 0" / "prevents the version from being installed")."""
    return (n == 0 or not lines[n - 1]) and n + 1 < len(lines) and _is_term(lines[n]) and not _is_term(
        lines[n + 1]) and bool(_PROSE.match(lines[n + 1])) and (not heading_like(lines[n]) or lines[n + 1][:1].islower())


def passage_pieces(body: str) -> list[tuple[str, bool]]:
    """The pieces of a passage's body in order, each (text, is an item): paragraphs' lines joined where a text file
    wrapped them, list items, definitions as "term: definition", table rows with their header's names ("Code: 304;
    Meaning: Not Modified") and rows as the document readers write them ("Flag: -5; Compress usage: 4400k", "sx | Semi
    Expanded | 112.5%"). A paragraph's text is still one piece here; the caller cuts it into sentences."""
    lines = [" ".join(line.split()) for line in body.split("\n")]
    # A line wrapped by the text's author comes close to the width it was wrapped at (the longest
    # line); a shorter line ends its paragraph, or is an entry of a listing.
    wrapped = max(WRAPPED_LINE, int(0.75 * max((len(line) for line in lines), default=0)))
    closed = [False] * (len(lines) + 1)  # a line, or one after it before a blank line, ends a sentence
    for n in range(len(lines) - 1, -1, -1):
        closed[n] = bool(lines[n]) and (bool(_SENTENCE_CLOSE.search(lines[n])) or closed[n + 1])
    out: list[tuple[str, bool]] = []
    header: list[str] = []
    paragraph, n = "", 0
    alone: set[int] = set()  # pieces that are one line between blank lines

    def flush() -> None:
        nonlocal paragraph
        if paragraph:
            out.append((paragraph, False))
            paragraph = ""

    while n < len(lines):
        line = lines[n]
        following = lines[n + 1] if n + 1 < len(lines) else ""
        if not line:
            if n > 1 and paragraph and paragraph == lines[n - 1] and not lines[n - 2]:
                alone.add(len(out))
            flush()
            header = []
        elif _TABLE_ROW.match(line):
            flush()
            if _TABLE_RULE.match(following):
                header = _cells(line)  # the names of the columns, not a row of values
                n += 2
                continue
            if not _TABLE_RULE.match(line):
                out.append((_row(_cells(line), header), True))
        elif _is_term_line(lines, n, gap := 2 if not following and _OPTION_TERM.match(line) else 1):
            flush()  # (an option's term and what it means may stand a blank line apart: "--nonet" / "" / "Do not ...")
            out.append((f"{line}: {lines[n + gap]}", True))
            n += gap + 1
            continue
        elif _is_table_row(line):
            # a table's row as a reader writes it ("Flag: -5; Compress usage: 4400k; ...", or cells
            # joined by " | "): a piece of its own, never run on into the next row as a wrapped line
            flush()
            out.append((line, True))
        elif _is_field(line) and _is_field(following):
            # a field list: its fields read together ("Filter ID: 0x21; Size of Filter Properties: 1 byte")
            flush()
            fields = [line]
            while n + 1 < len(lines) and _is_field(lines[n + 1]):
                n += 1
                fields.append(lines[n])
            out.append(("; ".join(fields), True))
        elif _ITEM.match(line):
            flush()
            term = _ITEM.sub("", line)
            definition = _ITEM.sub("", following)
            # trafilatura writes <dt>/<dd> as two bullets: a short term, then a sentence; or a label, then its value ("-
            # Author:" / "- Raymond Hettinger"), not the first item of a list ("- Options:" / "- -v" / "- -q")
            after = lines[n + 2] if n + 2 < len(lines) else ""
            if _ITEM.match(following) and _is_term(term) and (not _is_term(definition) or term.endswith(":") and not (
                    definition.endswith(":") or _ITEM.match(after) and not after.endswith(":"))):
                out.append((f"{term.removesuffix(':')}: {definition}", True))
                n += 2
                continue
            out.append((term, True))
        elif paragraph and not heading_like(lines[n - 1]) and (
                (len(lines[n - 1]) >= wrapped and (not _SENTENCE_CLOSE.search(lines[n - 1]) or line[:1].islower()))
                or _continues(lines[n - 1], line, closed[n])):
            paragraph += " " + line  # the same paragraph, wrapped
        else:
            flush()
            paragraph = line
        n += 1
    flush()
    return _listing_lines_as_items(out, alone)


def _row(cells: list[str], header: list[str]) -> str:
    """A table's row as one piece: each cell with its column's name where the header names them all."""
    if header and len(header) == len(cells):
        return "; ".join(f"{h}: {c}" if h else c for h, c in zip(header, cells, strict=True) if c)
    return " | ".join(c for c in cells if c)


def _is_term_line(lines: list[str], n: int, gap: int) -> bool:
    """A definition list as text: a term on its line ("--repeat", "dialout", "P < 0"), what it means ``gap`` lines on."""
    following = lines[n + gap] if n + gap < len(lines) else ""
    return bool((_OPTION_TERM.match(lines[n]) or _opens_definition(lines, n)) and following
                and not _OPTION_TERM.match(following) and not _ITEM.match(following)
                and not _TABLE_ROW.match(following) and not heading_like(following))


def _listing_lines_as_items(out: list[tuple[str, bool]], alone: set[int]) -> list[tuple[str, bool]]:
    """Lines of a text file's listing ("pstree   shows processes as a tree"), two or more in a row, each without a full
    stop: items too; not a numbered section's heading ("4.13.17. December 2015: ...", a version is none: "1.1 Buzz"), nor
    a line between blank lines too short for a sentence that opens with a capital ("Fedora & RPM friends" / "yum ...")."""
    bare = [not item and "\n" not in text and not _SENTENCE_CLOSE.search(text) and len(_words(text)) >= MIN_ITEM_WORDS
            and not heading_like(text) and not re.match(r"\d+(?:\.\d+)+\.\s", text) for text, item in out]
    # one such line alone is an item too when it holds a figure: "Major changes in 1.20.1 (2022-11-15)";
    # a name with digits in it is no figure ("What BM25 cannot do" is a heading)
    return [(text, item or bare[i] and (((i > 0 and bare[i - 1]) or (i + 1 < len(bare) and bare[i + 1])) and not (
        i in alone and text[:1].isupper() and too_short(text)) or _FIGURE.search(text) is not None))
            for i, (text, item) in enumerate(out)]


def opens_with_reference(sentence: str) -> bool:
    """True when ``sentence`` starts by pointing back at what came before it."""
    text = sentence.lstrip("\"'“‘(").strip()
    words = [w.lower().replace("’", "'") for w in _words(text)]
    if not words:
        return False
    if words[0] in _REFERRING_FIRST and not (words[0] == "those" and words[1:2] and words[1] in _CATAPHORIC):
        return True
    if (" ".join(words[:6]) + " ").startswith(_REFERRING_PREFIXES):  # the phrase, then a word or the end
        return True
    lead = next((i for i, word in enumerate(words[:4]) if word not in _LEAD_IN), None)  # "that" of "At that scale"
    if lead and words[lead] in _DEMONSTRATIVE:
        return True
    if _ELLIPTIC_CLAUSE.match(text):
        return True
    # a back-pointing "these"/"this is" in the sentence's first clause (an item's first sentence's)
    first_clause = re.split(r"[,;:.!?]\s", text, maxsplit=1)[0]
    return bool(_BACK_POINTER.search(" ".join(first_clause.split()[:12])))


def opens_with_connective(sentence: str) -> bool:
    """True when ``sentence`` opens with a linking word or phrase ("Additionally, ...", "For example,
    ...") rather than a word standing for something named before ("It ...", "These ...")."""
    words = [w.lower() for w in _words(sentence.lstrip("\"'“‘(").strip())[:3]]
    return bool(words) and (words[0] in _CONNECTIVES or (" ".join(words) + " ").startswith(_CONNECTIVE_PREFIXES))


# "X AND Y" (written in capitals to stress it), or "..., and how/what/who ..." starting a new question.
_PART_BREAK = re.compile(
    r"\s+AND\s+|,?\s+(?i:and)\s+(?=(?i:(?:in|on|at|for|from|by|with|to|since)\s+)?(?i:how|why|what|when|where|which|who|"
    r"whom|whose|is|are|was|were|does|do|did|can|could|should|will|would|has|have)\b)"
)


def question_parts(question: str) -> list[str]:
    """The parts of an English question that asks several things, in order; empty for a question that asks one thing."""
    text = " ".join(question.split()).rstrip(" ?.!")
    parts = [p.strip(" ,;") for p in _PART_BREAK.split(text)]
    parts = [p for p in parts if _words(p)]
    return parts if len(parts) > 1 else []
