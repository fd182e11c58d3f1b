"""The text kinds: HTML (trafilatura), Markdown (markdown-it), reStructuredText (docutils) and
plain text, each decoded from bytes whose declared charset may be wrong; and the check that
refuses binary bytes posing as text. Moved here from the cleaner so the registry of formats
(:mod:`shared.formats.registry`) can name them; the cleaner reads every kind through it.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import re
import unicodedata
from dataclasses import dataclass

from shared.contract.errors import InvalidInput
from shared.contract.text import (
    line_breaks_as_newlines,
    normalize_text,
    opens_code_element,
    without_code_elements,
    without_terminal_formatting,
)
from shared.formats.passages import Passage, Reading, join_blocks, labelled_row
from shared.formats.registry import Limits

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/xml+html"})
MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/md"})
TEXT_TYPES = frozenset({"text/plain"})
RST_TYPES = frozenset({"text/x-rst", "text/prs.fallenstein.rst"})


@dataclass(frozen=True)
class CleanDocument:
    """The main text of a document and what its content says about itself."""

    body: str
    title: str = ""
    published: str | None = None


# ------------------------------------------------------------- decoding

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# WHATWG: these labels mean windows-1252 on the web.
_WEB_ALIASES = {"iso-8859-1": "cp1252", "latin-1": "cp1252", "latin1": "cp1252", "ascii": "cp1252",
                "us-ascii": "cp1252", "iso8859-1": "cp1252", "l1": "cp1252"}


def parse_content_type(value: str) -> tuple[str, str | None]:
    """``"text/html; charset=UTF-8"`` -> ``("text/html", "utf-8")``."""
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, val = param.partition("=")
        if name.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'").lower()
    return media.strip().lower(), charset


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = _WEB_ALIASES.get(label.lower(), label.lower())
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
_LETTER_BYTE = re.compile(rb"[\xc0-\xff]")


def _upper_half_is_punctuation(raw: bytes) -> bool:
    """Every byte over 0x7F is below 0xC0: windows-1252's punctuation and symbols, no code page's letters."""
    return _HIGH_BYTE.search(raw) is not None and _LETTER_BYTE.search(raw) is None


def _wide_without_bom(head: bytes) -> str | None:
    """"utf-16-le" or "utf-16-be" for UTF-16 text written without a byte-order mark (`iconv -t UTF-16LE`):
    a NUL as every other byte at least half the time (ASCII letters, spaces, digits) and almost never
    between them; a binary file's NULs fall on both sides. None otherwise."""
    pairs = len(head) // 2
    if pairs < 8 or b"\0" not in head:
        return None
    even, odd = head[0:2 * pairs:2].count(0), head[1:2 * pairs:2].count(0)
    if odd >= pairs / 2 and even <= pairs / 50:
        return "utf-16-le"
    if even >= pairs / 2 and odd <= pairs / 50:
        return "utf-16-be"
    return None


def _script(char: str) -> str:
    return unicodedata.name(char, "").split(" ")[0]


def _code_page_like(raw: bytes, utf8_text: str, declared: str | None, html: bool) -> str:
    """The code page of a mixed file's non-UTF-8 lines: the first of detection's choice and the usual
    Windows code pages that reads their upper-half bytes as letters or punctuation of the scripts the
    file's UTF-8 lines write (detection alone read a short German line as cp850's "f³r", or the file
    whole as gb18030's "f黵")."""
    scripts = {_script(c) for c in utf8_text if ord(c) > 127 and c.isalpha()}
    candidates = dict.fromkeys([_code_page(raw, declared, html)[0], "cp1252", "cp1250", "cp1251", "cp1253",
                                "cp1254", "cp1257"])
    for codec in candidates:
        try:
            text = raw.decode(codec)
        except (UnicodeDecodeError, LookupError):
            continue
        high = [c for c in text if ord(c) > 127]
        if all(c.isalpha() or unicodedata.category(c)[0] in "PSZ" for c in high) and (
                not scripts or {_script(c) for c in high if c.isalpha()} <= scripts):
            return codec
    return next(iter(candidates))


def _mixed_with_utf8(raw: bytes, declared: str | None, html: bool) -> str | None:
    """A file whose lines are part UTF-8, part a legacy code page (a changelog or notes file appended to
    by editors of both kinds): each line with non-ASCII bytes that is valid UTF-8 is read as UTF-8, and the
    others in the code page decode_bytes would read the whole file in. None unless both kinds of line are there.
    Read whole, such a file went to charset detection, which read its UTF-8 lines as a code page's letters
    ("Größe" as "GrĂ¶Ăźe")."""
    lines = raw.split(b"\n")
    legacy: list[int] = []
    utf8 = False
    for index, line in enumerate(lines):
        if _HIGH_BYTE.search(line) is None:
            continue
        try:
            line.decode("utf-8")
            utf8 = True
        except UnicodeDecodeError:
            legacy.append(index)
            utf8 = utf8 or _mostly_utf8(line)
    if not utf8 or not legacy:
        return None
    kept = set(legacy)
    utf8_text = "\n".join(line.decode("utf-8") for i, line in enumerate(lines) if i not in kept)
    codec = _code_page_like(b"\n".join(lines[i] for i in legacy), utf8_text, declared, html)
    read = b"\n".join(lines[i] for i in legacy).decode(codec, errors="replace").split("\n")
    if len(read) != len(legacy):
        return None
    by_index = {i: _utf8_with_strays(lines[i], codec) if _mostly_utf8(lines[i]) else text
                for i, text in zip(legacy, read, strict=True)}
    return "\n".join(by_index[i] if i in by_index else line.decode("utf-8") for i, line in enumerate(lines))


#: a UTF-8 character of two to four bytes: a line holding one and a stray byte is UTF-8 with that byte from elsewhere
_UTF8_CHARACTER = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")


def _mostly_utf8(line: bytes) -> bool:
    """Whether a line that is not valid UTF-8 holds more UTF-8 characters than stray bytes: UTF-8 with a byte
    from elsewhere. A code page's line may hold one by chance (windows-1251's "ОН»" is the bytes of UTF-8's "λ")
    among many letters that are none."""
    characters = _UTF8_CHARACTER.findall(line)
    strays = len(_HIGH_BYTE.findall(line)) - sum(map(len, characters))
    return len(characters) > strays


def _utf8_with_strays(line: bytes, codec: str) -> str:
    """A line read as UTF-8 but for the bytes that are none, read in ``codec``: "naïve ... Ren\\xe9" read whole in
    the code page was "naĂŻve ... René" (newcomer16: one Latin-1 byte in a UTF-8 line, as old changelogs have).
    One pass of the UTF-8 decoder, each run of bytes it cannot read handed to ``codec`` (decoding the rest of the
    line again after each stray took 81 s for a 1 MB line of them)."""
    return line.decode("utf-8", errors=_strays_in(codec))


@functools.cache
def _strays_in(codec: str) -> str:
    """The name of a codecs error handler that reads the bytes UTF-8 cannot in ``codec`` (registered once)."""
    name = f"ragbus-strays-in-{codec}"
    codecs.register_error(name, lambda error: (
        error.object[error.start:error.end].decode(codec, errors="replace"), error.end))
    return name


def decode_bytes(raw: bytes, declared: str | None = None, *, html: bool = False) -> str:
    """Text from bytes whose declared charset may be wrong or missing.

    Order: a byte-order mark; UTF-16 without one (every other byte NUL, see _wide_without_bom); strict UTF-8 (valid UTF-8 with non-ASCII bytes is
    almost never anything else, so it beats a wrong label); the declared charset
    and a ``<meta charset>``, if they decode strictly; a file of both UTF-8 lines and lines in a code page
    line by line (_mixed_with_utf8); then windows-1252 when every
    non-ASCII byte is below 0xC0 (there windows-1252 holds curly quotes, dashes, the euro sign
    and symbols, and code pages keep their letters above: English text from Windows, which
    charset_normalizer read as cp437 or cp852 when it was short); then detection by
    charset_normalizer, preferring windows-1252 whenever it is among the
    plausible code pages (the usual truth behind a mislabelled Western page);
    last, windows-1252 with replacement characters.
    """
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return raw[len(bom):].decode(encoding, errors="replace")
    wide = _wide_without_bom(raw[:8192])
    if wide:
        return raw.decode(wide, errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    labelled = _labelled_codec(raw, declared, html)
    if labelled:
        return raw.decode(labelled)
    mixed = _mixed_with_utf8(raw, declared, html)
    if mixed is not None:
        return mixed
    codec, errors = _code_page(raw, declared, html)
    return raw.decode(codec, errors=errors)


def _labelled_codec(raw: bytes, declared: str | None, html: bool) -> str | None:
    """The declared charset, else the page's ``<meta charset>``, when it is not UTF-8 and reads ``raw`` strictly."""
    labels = [declared]
    if html:
        match = _META_CHARSET.search(raw[:4096])
        labels.append(match.group(1).decode("ascii", "ignore") if match else None)
    for label in labels:
        codec = _codec(label)
        if codec and codec != "utf-8":
            try:
                raw.decode(codec)
                return codec
            except UnicodeDecodeError:
                continue
    return None


def _code_page(raw: bytes, declared: str | None, html: bool) -> tuple[str, str]:
    """The codec (and its error handling) for text that is not UTF-8: see decode_bytes."""
    labelled = _labelled_codec(raw, declared, html)
    if labelled:
        return labelled, "strict"
    if _upper_half_is_punctuation(raw):
        try:
            raw.decode("cp1252")
            return "cp1252", "strict"
        except UnicodeDecodeError:
            pass
    from charset_normalizer import from_bytes

    matches = from_bytes(raw)
    encodings = [m.encoding for m in matches]
    if "cp1252" in encodings:
        return "cp1252", "replace"
    best = matches.best()
    if best is not None:
        return best.encoding, "replace"
    return "cp1252", "replace"


# ------------------------------------------------------------ extraction


# Below this many characters an extraction is checked again in precision mode:
# trafilatura's fallbacks return *some* text for any page (a lone "Home" link),
# and a short result is only main text if the precise extractor agrees.
_CONFIRM_BELOW_CHARS = 250


# Phrasing content (HTML's term): text and these elements between two blocks read as one paragraph.
_INLINE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd mark q s samp small span strike strong "
    "sub sup time tt u var br wbr img".split())
_CONTAINERS = ("body", "div", "td", "th", "li", "blockquote", "section", "article", "main", "aside", "dd",
               "center", "form")


def _is_inline(node) -> bool:
    return not isinstance(node.tag, str) or node.tag in _INLINE  # a comment's tail is prose too


def _append_text(paragraph, text: str | None) -> None:
    if not text:
        return
    if len(paragraph):
        paragraph[-1].tail = (paragraph[-1].tail or "") + text
    else:
        paragraph.text = (paragraph.text or "") + text


_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_NAVIGATION_TAGS = ("nav", "header", "footer", "aside")
# an XHTML document type with an internal subset ("<!DOCTYPE html [<!ENTITY ...>]>"): the HTML parser ends it at
# the first ">" and read the rest, "]>", as the page's first words (newcomer12, an EPUB chapter); its entities
# are never resolved either way
_INTERNAL_SUBSET = re.compile(r"\A(\s*(?:<\?xml[^>]*\?>\s*)?)<!DOCTYPE([^>\[]*)\[[^\]]*\]\s*>", re.IGNORECASE)


def _unwrap_headings(tree) -> bool:
    """Each section heading lifted out of the wrappers that hold nothing else and made a paragraph of its
    own, so it stays in the text as a line before its section (as a Markdown heading does).

    trafilatura 2.3 keeps a heading or drops it by where it stands: an <h2> in a bare div (DocBook's
    ``div.titlepage > div > div > h2``, which shared.formats.docbook now reads itself) or followed by a
    list (Policy's README) is dropped, one in a <section> before a paragraph kept; a <p> is kept
    wherever it stands. The links in a heading are unwrapped (their text stays): a paragraph that is
    mostly links trafilatura drops (Python's "lib2to3 — 2to3's library", a link to itself). Headings in
    navigation (<nav>, <aside>, role="navigation": Sphinx's "Previous topic") stay headings, which
    trafilatura leaves out. The page's <h1> stays a heading: trafilatura may take the title from it."""
    changed = False
    for heading in list(tree.iter(*_HEADINGS[1:])):
        if any(a.tag in _NAVIGATION_TAGS or a.get("role") == "navigation" for a in heading.iterancestors()):
            continue  # a sidebar's "Previous topic": as a paragraph it would be kept as prose
        parent = heading.getparent()
        while (parent is not None and parent.tag == "div" and len(parent) == 1
               and not (parent.text or "").strip() and not (heading.tail or "").strip()
               and parent.getparent() is not None):
            heading.tail, parent.tail = parent.tail, None
            parent.getparent().replace(parent, heading)
            parent = heading.getparent()
        for link in list(heading.iter("a")):
            link.drop_tag()  # its text stays: a paragraph that is mostly links trafilatura drops
        heading.tag, changed = "p", True
        heading.attrib.clear()
    return changed


#: HTML's link types for a link to a neighbouring page of a set (rel="next", HTML 4's "start", "contents"…)
_NAVIGATION_RELS = frozenset("next prev previous up start first last contents toc index".split())
_NAVIGATION_BLOCKS = ("p", "div", "nav", "header", "footer")  # not a menu's cell or item
_WORD = re.compile(r"\w+")


def _drop_page_navigation(tree) -> bool:
    """Each block that is only links to the neighbouring pages of a manual left out: every link in it
    goes to a neighbour and its own words are no more than its links ("Next:", "Up:").

    A link goes to a neighbour when it says so (``rel="next"``, ``"prev"``, ``"up"``…) or when it goes
    where the page's own ``<link rel="next" href=...>`` elements say its neighbours are. GNU Texinfo
    heads each node page with "Next: X, Previous: Y, Up: Z [Index]" (``div.header`` in makeinfo 6,
    ``div.node`` in makeinfo 4; links with rel), and ends it with the same line (links without),
    which trafilatura keeps as lines of the page. A sentence of the content that links to the next
    chapter has more words of its own, or is one link ("See Memory Management."), and stays. Only the innermost block around such a link is
    judged (a page's few, not each of its blocks)."""
    def navigation_rel(element) -> bool:
        return bool(_NAVIGATION_RELS & set((element.get("rel") or "").lower().split()))

    neighbours = {link.get("href", "").split("#", 1)[0] for link in tree.iter("link") if navigation_rel(link)}
    neighbours.discard("")

    def to_neighbour(link) -> bool:
        return navigation_rel(link) or (link.get("href") or "").split("#", 1)[0] in neighbours

    blocks = {}
    for link in tree.iter("a"):
        if to_neighbour(link):
            block = next(link.iterancestors(*_NAVIGATION_BLOCKS), None)
            if block is not None and block.getparent() is not None:
                blocks[id(block)] = block
    changed = False
    for block in blocks.values():
        links = [a for a in block.iter("a") if a.get("href")]  # an anchor (<a name=...>) is no link
        if not all(to_neighbour(a) for a in links):
            continue
        own_words = sum(len(_WORD.findall(t)) for t in block.itertext()) - sum(
            len(_WORD.findall(a.text_content())) for a in links)
        if len(links) >= 2 and own_words <= len(links):  # one link with a word ("See X.") is a sentence
            block.drop_tree()  # its tail (text after it) stays
            changed = True
    return changed


#: elements whose text keeps its line breaks as a browser shows it (a code block), and code set inline,
#: whose own text is left as written
_PREFORMATTED = frozenset({"pre", "textarea", "listing", "xmp", "plaintext", "code", "samp", "kbd", "tt"})
#: a match starts only where a run of spaces and tabs starts (the look-behind): from each space inside a long run
#: without a line break the run was scanned again, quadratic (a 100 kB page, 100,000 spaces between two words of a
#: paragraph holding a <code>, took 91 s of the cleaner's own thread)
_SOURCE_LINE_BREAK = re.compile(r"(?<![ \t])[ \t]*[\r\n]\s*")


def _unwrap_source_lines(tree) -> bool:
    """The line breaks of the page's source in running text made spaces, as a browser shows them.

    trafilatura keeps them in a paragraph that holds a ``<code>`` (and only there), and a line break
    ends a sentence: libffi's "provides a portable, high level programming\\ninterface to ..." was
    quoted in two pieces. Text inside ``<pre>`` (and the other preformatted and code elements) stays
    as written. The walk is iterative: a page may nest deeper than Python's recursion allows."""
    changed = False
    stack = [(tree, False)]
    while stack:
        element, kept = stack.pop()
        if not isinstance(element.tag, str):
            continue  # a comment or a processing instruction: its tail is handled by its parent's walk
        inside = kept or element.tag in _PREFORMATTED
        if element.text and not inside and "\n" in element.text:
            element.text, changed = _SOURCE_LINE_BREAK.sub(" ", element.text), True
        for child in element:
            if child.tail and not inside and "\n" in child.tail:
                child.tail, changed = _SOURCE_LINE_BREAK.sub(" ", child.tail), True
            stack.append((child, inside))
    return changed


#: elements a page sets code inline in; inside these (a code block) text is left as written
_INLINE_CODE = ("code", "kbd", "samp", "tt")
_CODE_BLOCKS = frozenset({"pre", "textarea", "listing", "xmp", "plaintext"})


def _separate_alternative_terms(tree) -> bool:
    """A space after each <dt> another <dt> follows: texinfo writes an option's other spellings as terms of
    one entry ("-o file" then "--output=file"), which the extractor ran together ("-o file--output=file"). A
    space, as gzip(1) writes "-c --stdout": the reader reads "-a, --append" as no option term, and quoted the
    description below it without the option's name."""
    changed = False
    for term in tree.iter("dt"):
        following = term.getnext()
        text = term.text_content().strip()
        if following is None or following.tag != "dt" or not text or text.endswith("\u00b6"):
            continue  # a term ending in its permalink (Sphinx's "¶") is read as a line of its own
        if len(term):
            term[-1].tail = (term[-1].tail or "").rstrip() + " "
        else:
            term.text = (term.text or "").rstrip() + " "
        changed = True
    return changed


def _code_showing_tags(tree) -> bool:
    """Inline code that shows a tag ("use the <code>&lt;br&gt;</code> element") set in a Markdown code span.

    Its text reaches the chunk as a bare "<br>", which the answer's sanitiser removes as markup (the
    answer read "use the element"); in a code span it is kept as text (shared/query/plain_answer.py),
    as a Markdown page's inline code is (:func:`_inline_text`). Code inside a code block stays as written."""
    changed = False
    for element in list(tree.iter(*_INLINE_CODE)):
        if any(isinstance(a.tag, str) and (a.tag in _CODE_BLOCKS or a.tag in _INLINE_CODE)
               for a in element.iterancestors()):
            continue  # the outermost inline code only, and none inside a block of code
        text = element.text_content()
        if "\n" in text or not _SHOWN_TAG.search(text):
            continue
        for child in list(element):
            element.remove(child)  # its tail is part of text_content(), kept below
        element.text = _code_span(text)
        changed = True
    return changed


#: an inline style a browser renders nothing of (CSS's display: none; visibility: hidden or collapse)
_UNRENDERED_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse))\s*(?:!\s*important\s*)?(?:;|$)",
    re.IGNORECASE)


def _drop_unrendered(tree) -> bool:
    """Each element a browser does not render left out: the ``hidden`` attribute (not ``until-found``,
    which find-in-page opens), an inline ``display: none`` or ``visibility: hidden`` style, a ``<template>``, a
    ``<noscript>`` (a browser running scripts, as every reader's does, shows none of it).

    trafilatura drops some of these on some of its paths only, and hidden text is how a page says one
    thing to its readers and another to a machine (a hidden "the daemon listens on port 6666" was quoted
    over the visible 9922). <html> and <body> stay: pages hide them until a script has laid them out; so do a
    tab's panel (Docusaurus hides every one but the first) and what a button opens (``aria-controls``)."""
    # a tab's panel and what a button opens (aria-controls) are hidden until a click shows them: the page's text
    revealed = {name for element in tree.iter() if isinstance(element.tag, str)
                for name in (element.get("aria-controls") or "").split()}
    unrendered = [element for element in tree.iter() if isinstance(element.tag, str)
                  and element.tag not in ("html", "body") and element.get("role") != "tabpanel"
                  and element.get("id") not in revealed
                  and (element.tag in ("template", "noscript")
                       or (element.get("hidden") is not None and element.get("hidden").lower() != "until-found")
                       or _UNRENDERED_STYLE.search(element.get("style") or ""))]
    for element in unrendered:
        element.drop_tree()  # its tail (the text after it) stays
    return bool(unrendered)


# libxml2 (lxml's HTML parser) stops reading a page whose elements nest this deep: what lies below
# and after that point is dropped without an error (300 unclosed <font> tags lost the rest of a page)
_PARSER_MAX_DEPTH = 255


def _nests_past_parser(tree) -> bool:
    """Whether an element of ``tree`` stands at libxml2's depth limit (the page was cut there)."""
    depth = {tree: 0}
    for element in tree.iterdescendants():
        level = depth[element.getparent()] + 1
        if level >= _PARSER_MAX_DEPTH:
            return True
        depth[element] = level
    return False


def prepare_html(html: str) -> tuple[str, str]:
    """The page with its headings out of empty wrappers and its loose prose in paragraphs, and the
    title the page states (<title>).

    Hand-written pages (zlib's zlib_how.html, many man-page exports) put prose as bare text
    between <pre> blocks; trafilatura keeps only text inside block elements and drops it, so
    each run of text and inline elements between two blocks becomes the <p> a browser renders
    it as (an anonymous block box)."""
    import lxml.html
    from lxml import etree

    try:
        tree = lxml.html.document_fromstring(html)  # its "<?xml ...?>" taken off by extract_html
    except (etree.ParserError, ValueError):
        return html, ""
    if _nests_past_parser(tree):
        raise InvalidInput(f"the HTML page nests its elements more than {_PARSER_MAX_DEPTH} levels deep (unclosed "
                           "tags?), where the HTML parser stops reading: the text below that depth and after it "
                           "would be lost; close the tags or split the page")
    title = " ".join((tree.findtext(".//title") or "").split())
    changed = _drop_unrendered(tree)
    changed = _drop_page_navigation(tree) or changed
    changed = _unwrap_headings(tree) or changed
    changed = _unwrap_source_lines(tree) or changed
    changed = _code_showing_tags(tree) or changed
    changed = _separate_alternative_terms(tree) or changed
    for container in list(tree.iter(*_CONTAINERS)):
        children = list(container)
        if all(_is_inline(c) for c in children):
            continue  # no block inside: extractors read it as one block already
        if not (container.text or "").strip() and not any(
                (c.tail or "").strip() or isinstance(c.tag, str) and c.tag in _INLINE for c in children):
            continue
        changed = True
        run = container.makeelement("p", {})
        run.text, container.text = container.text, None
        rebuilt, runs = [], {id(run)}
        for child in children:
            container.remove(child)  # its tail goes with it
            if not isinstance(child.tag, str):
                _append_text(run, child.tail)
            elif child.tag in _INLINE:
                run.append(child)
            else:
                tail, child.tail = child.tail, None
                rebuilt += [run, child]
                run = container.makeelement("p", {})
                run.text = tail
                runs.add(id(run))
        rebuilt.append(run)
        for node in rebuilt:
            if id(node) in runs and not node.text_content().strip() and node.find(".//img") is None:
                continue
            container.append(node)
    return (lxml.html.tostring(tree, encoding="unicode") if changed else html), title


def _stated_title(extracted: str, page_title: str) -> str:
    """trafilatura's title when the page's <title> contains it (a site name cut off), else <title>:
    it may pick a heading inside the page (an <h3> "Important" in xsltproc.html)."""
    if not page_title or extracted and extracted.casefold() in page_title.casefold():
        return extracted or page_title
    return page_title


def _definition_terms(html: str) -> list[str]:
    """The texts of a page's <dt> elements (a definition list's terms: a function's signature, a
    parameter's name), at least 3 of them, else none."""
    if "<dt" not in html:
        return []
    import lxml.html
    from lxml import etree

    try:
        tree = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return []
    terms = [" ".join(dt.text_content().split()).rstrip("¶ ") for dt in tree.iter("dt")]
    terms = [term for term in terms if term]
    return terms if len(terms) >= 3 else []


def _lost(terms: list[str], text: str) -> int:
    """How many of the terms begin no line of the text (a term named in the prose is still lost)."""
    starts = [" ".join(line.split()).lstrip("- ") for line in text.splitlines()]
    return sum(1 for term in terms if not any(start.startswith(term[:40]) for start in starts))


def extract_html(html: str, url: str) -> CleanDocument:
    """Main content and metadata of a web page, by trafilatura (no hand-written selectors)."""
    import trafilatura
    from trafilatura.settings import set_date_params

    from shared.formats.docbook import XML_DECLARATION, docbook_text

    html = _INTERNAL_SUBSET.sub(r"\1<!DOCTYPE\2>", html, count=1)
    # decoded already, so its "<?xml ... ?>" says nothing more, and lxml refuses a decoded text that has one;
    # trafilatura given a page that opens with one and has no <head> kept none of its text (newcomer16). Taken off
    # once here for every reader below.
    html = XML_DECLARATION.sub("", html, count=1)
    book = docbook_text(html)
    html, page_title = prepare_html(html)

    options = {
        "url": url or None,
        "with_metadata": True,
        # The date a page states (its meta tags, <time>, URL), never one guessed from a year its prose
        # mentions: htmldate's extensive mode, on by default, took "the 2024 test series" for a published
        # date of 2024-01-01, which a since/until filter then trusts (htmldate docs: "extensive mode
        # collects all potential dates [in bare content] and uses a disambiguation algorithm").
        "date_extraction_params": set_date_params(extensive=False),
        "include_comments": False,
        "include_tables": True,
        "include_images": False,
        "include_links": False,
        "deduplicate": False,
    }
    if book:
        # DocBook's pages say in their markup what is content (shared.formats.docbook): only their title
        # and date are trafilatura's. A short page too (trafilatura kept its Prev/Next lists); one with no
        # text of its own (a front page that is all table of contents) is read the general way
        from trafilatura.metadata import extract_metadata

        metadata = extract_metadata(html, url or None, options["date_extraction_params"], extensive=False)
        return CleanDocument(body=book, title=_stated_title((metadata.title or "").strip(), page_title),
                             published=metadata.date or None)
    document = trafilatura.bare_extraction(html, **options)
    text = normalize_text(getattr(document, "text", None) or "") if document is not None else ""
    terms = _definition_terms(html)
    if text and _lost(terms, text) > len(terms) / 2:
        # trafilatura's default extraction left out most of the page's <dt> terms, keeping their <dd>
        # descriptions without them: libffi's texinfo page lost every "Function: void ffi_closure_free (...)"
        # and parameter name, so "The executable address returned by ffi_closure_alloc." (codeloc's
        # description) answered what ffi_closure_alloc returns. Its recall mode keeps them as list items.
        recall = trafilatura.bare_extraction(html, favor_recall=True, **options)
        recall_text = normalize_text(getattr(recall, "text", None) or "") if recall is not None else ""
        if recall_text and _lost(terms, recall_text) < _lost(terms, text):
            document, text = recall, recall_text
    if len(text) < _CONFIRM_BELOW_CHARS:
        precise = trafilatura.bare_extraction(html, fast=True, favor_precision=True, **options)
        precise_text = normalize_text(getattr(precise, "text", None) or "") if precise is not None else ""
        text = text if precise_text else ""
    if document is None:
        return CleanDocument(body=text)
    title = _stated_title((getattr(document, "title", None) or "").strip(), page_title)
    date = getattr(document, "date", None) or None
    return CleanDocument(body=text, title=title, published=date)


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<yaml>.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
#: the value is the rest of the line, stripped where it is read: a lazy value before '\s*$' tried the trailing
#: spaces at each of their starts, quadratic ('title: x', 100,000 spaces, 'y': 68 s)
_FRONT_FIELD = re.compile(r"^(?P<key>title|date|published)\s*:\s*(?P<value>[^\n]+)$", re.MULTILINE | re.IGNORECASE)


def _tags_as_spaces(html: str) -> str:
    """``html`` with each tag (a '<', at least one character, the first '>' after it) made one space, as
    re.sub(r"<[^>]+>", " ", html) made it, in linear time: that pattern scanned the rest of the text from every
    '<' once no '>' was left, so an HTML block of 130,000 '<' in a Markdown file took 15 s of the cleaner's thread."""
    out, at = [], 0
    while (start := html.find("<", at)) >= 0:
        if start + 1 < len(html) and html[start + 1] == ">":  # '<>' is no tag: look on after it
            out.append(html[at:start + 2])
            at = start + 2
            continue
        end = html.find(">", start + 1)
        if end < 0:
            break  # no '>' is left, so no tag either
        out.append(html[at:start] + " ")
        at = end + 1
    return "".join(out) + html[at:]


def extract_markdown(text: str, *, _depth: int = 0) -> CleanDocument:
    """Plain text of Markdown: headings, paragraphs, list items and code kept; markup dropped.

    A YAML front matter block gives the title and date when present; otherwise
    the first level-1 heading is the title.
    """
    from markdown_it import MarkdownIt

    title, published, text = _front_matter(text)
    parser = MarkdownIt("commonmark").enable("table")
    # markdown-it leaves a link to javascript:, vbscript:, file: or data: unparsed (a renderer's safety
    # rule), raw Markdown in the text; nothing here is rendered, and only a link's words are kept
    parser.validateLink = lambda url: True
    tokens = parser.parse(text)
    deep = _past_nesting_limit(tokens, parser.options["maxNesting"])
    if deep is not None:
        raise InvalidInput(f"the Markdown file nests its lists or quotes more than {parser.options['maxNesting']} "
                           f"levels deep (line {deep}), where the Markdown parser stops reading: the text below that "
                           "depth and after it would be lost; flatten the nesting or split the file")
    reader = _MarkdownBlocks(tokens, title, _depth)
    for i, token in enumerate(tokens):
        reader.read(i, token)
    return CleanDocument(body=normalize_text(join_blocks(reader.blocks)), title=reader.title, published=published)


def _past_nesting_limit(tokens: list, limit: int) -> int | None:
    """The line (1-based) of the quote or list item markdown-it opened at its block nesting limit, whose
    content it then skipped with the rest of the document (silently: a list nested ten deep lost the
    9 MB after its ninth level); None when nothing was cut."""
    for token in tokens:
        if token.type in ("blockquote_open", "list_item_open") and token.level >= limit - 1:
            return token.map[0] + 1 if token.map else 0
    return None


class _MarkdownBlocks:
    """The blocks of text (each with the list it belongs to) that a Markdown token stream holds,
    read one token at a time; the first level-1 heading becomes the title when none was given."""

    def __init__(self, tokens: list, title: str, depth: int) -> None:
        self.tokens = tokens
        self.title = title
        self.depth = depth
        self.blocks: list[tuple[str, int | None]] = []  # (text, the list it belongs to)
        self.prefix: list[str] = []  # list markers of the items we are inside
        self.ordered_counters: list[int | None] = []
        self.lists_seen = 0
        self.row: list[str] | None = None  # the cells of the table row being read
        self.tables_seen = 0
        self.code: str | None = None  # the <script> (or other code element) an HTML block left open

    def read(self, i: int, token) -> None:
        if self._inside_code(token) or self._table(token):
            return
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open", "bullet_list_close", "ordered_list_close",
                    "list_item_open", "list_item_close"):
            self._list(token)
        elif kind == "inline":
            self._inline(i, token)
        elif kind == "fence" and self.depth < _MYST_MAX_DEPTH and (directive := _MYST_DIRECTIVE.match(token.info)):
            self._directive(token, directive.end())
        elif kind in ("fence", "code_block"):
            self.blocks.append((token.content.rstrip("\n"), None))
        elif kind == "html_block":
            html, self.code = _outside_code(token.content, self.code)
            stripped = _tags_as_spaces(html).strip()
            if stripped:
                self.blocks.append((stripped, None))

    def _list_number(self) -> int | None:
        return self.lists_seen if self.prefix else None

    def _inside_code(self, token) -> bool:
        """Whether ``token`` is (part of) the content of a code element an HTML block left open: that
        content, up to its closing tag, is code, dropped and never read as prose. An HTML block that
        closes it is read on as any other."""
        kind = token.type
        if self.code is None or kind not in ("inline", "fence", "code_block", "html_block"):
            return False
        if kind not in ("inline", "html_block") or not _closes(self.code, token.content):
            return True
        if kind == "inline":
            line, self.code = _inline_text(token, self.code)
            if line.strip():
                self.blocks.append((line, self._list_number()))
            return True
        return False

    def _table(self, token) -> bool:
        """A table row is one line ("| 304 | Not Modified |") under its header and rule, as it was
        written: cell by cell, each a paragraph of its own, no row could be read back. True when
        ``token`` was a cell's text (read here, and nothing more to do with it)."""
        kind = token.type
        if kind == "table_open":
            self.tables_seen += 1
        elif kind == "tr_open":
            self.row = []
        elif kind == "inline" and self.row is not None:
            cell, self.code = _inline_text(token)
            self.row.append(" ".join(cell.split()))
            return True
        elif kind == "tr_close" and self.row is not None:
            self.blocks.append(("| " + " | ".join(self.row) + " |", -self.tables_seen))
            self.row = None
        elif kind == "thead_close" and self.blocks:
            self.blocks.append(("|" + "---|" * self.blocks[-1][0].count(" | ") + "---|", -self.tables_seen))
        return False

    def _list(self, token) -> None:
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            if not self.ordered_counters:
                self.lists_seen += 1
            start = token.attrs.get("start", 1) if kind == "ordered_list_open" else None
            self.ordered_counters.append(None if start is None else int(start or 1))
        elif kind in ("bullet_list_close", "ordered_list_close"):
            self.ordered_counters.pop()
        elif kind == "list_item_open":
            counter = self.ordered_counters[-1] if self.ordered_counters else None
            if counter is None:
                self.prefix.append("- ")
            else:
                self.prefix.append(f"{counter}. ")
                self.ordered_counters[-1] = counter + 1
        else:  # list_item_close
            self.prefix.pop()

    def _inline(self, i: int, token) -> None:
        line, self.code = _inline_text(token)
        if not line.strip() or _MYST_TARGET.match(line):
            return
        tokens = self.tokens
        if i and tokens[i - 1].type == "heading_open" and tokens[i - 1].tag == "h1" and not self.title:
            self.title = line.strip()
        if self.prefix and i >= 2 and tokens[i - 2].type == "list_item_open":
            line = "  " * (len(self.prefix) - 1) + self.prefix[-1] + line
        self.blocks.append((line, self._list_number()))

    def _directive(self, token, name_end: int) -> None:
        """A MyST directive (```{note}, ```{tab} Unix): its content is Markdown to read, not code;
        its argument ("Unix") says what the content is about."""
        inner = extract_markdown(_MYST_OPTION.sub("", token.content), _depth=self.depth + 1).body.strip()
        argument = token.info[name_end:].strip()
        if inner:
            self.blocks.append((f"{argument}\n\n{inner}" if argument else inner, None))


def _front_matter(text: str) -> tuple[str, str | None, str]:
    """The title and date a YAML front matter block gives ("" and None without one), and the text after it."""
    title, published = "", None
    front = _FRONT_MATTER.match(text)
    if front:
        for field in _FRONT_FIELD.finditer(front["yaml"]):
            value = field["value"].strip().strip("\"'")
            if field["key"].lower() == "title":
                title = value
            elif published is None:
                published = value
        text = text[front.end():]
    return title, published, text


# MyST, the Markdown of Sphinx projects (pip's docs as Debian ships them): a role is {name} right before
# an inline code span ({file}`/etc/pip.conf`), a directive a fence whose info is {name}; its options are
# ':key: value' lines at the start of its content. Read as their text, like the reStructuredText roles below.
_MYST_ROLE = re.compile(r"\{[A-Za-z][\w:+.-]*\}$")
_MYST_DIRECTIVE = re.compile(r"\{[A-Za-z][\w:+.-]*\}")
_MYST_OPTION = re.compile(r"\A(?::[\w-]+:[^\n]*\n)+")
#: directives nest (a note in a tab); deeper, each level re-reads its content and a hostile page could exhaust
#: the stack (3000 levels: no answer in 300 s), so deeper content is kept as written
_MYST_MAX_DEPTH = 2
_MYST_TARGET = re.compile(r"\A\([\w.:-]+\)=\Z")  # (config-file)= names the heading below it for links


def _closes(code: str, html: str) -> bool:
    return re.search(rf"</{code}\s*>", html, re.IGNORECASE) is not None


def _outside_code(html: str, code: str | None) -> tuple[str, str | None]:
    """``html`` without the code elements' content (a ``<script>``'s code is not prose), from the
    closing tag of ``code`` when an earlier token left that element open; and the element this one
    leaves open."""
    if code is not None:
        closing = re.search(rf"</{code}\s*>", html, re.IGNORECASE)
        if closing is None:
            return "", code
        html = html[closing.end():]
    return without_code_elements(html), opens_code_element(html)


_SHOWN_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9_.:-]*\s*/?>")


def _code_span(content: str) -> str:
    """``content`` as one Markdown code span: fenced by a backtick run longer than any it holds."""
    fence = "`" * (max(map(len, re.findall(r"`+", content)), default=0) + 1)
    pad = " " if content[:1] == "`" or content[-1:] == "`" else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def _inline_text(token, code: str | None = None) -> tuple[str, str | None]:
    """The text of an inline token, and the code element it leaves open (``code``: the one open
    before it): text inside a ``<script>``…``</script>`` is dropped with the tags."""
    parts: list[str] = []
    children = token.children or []
    for n, child in enumerate(children):
        if child.type == "html_inline":
            _, code = _outside_code(child.content, code)
            continue
        if code is not None:
            continue
        if child.type == "text" and n + 1 < len(children) and children[n + 1].type == "code_inline":
            parts.append(_MYST_ROLE.sub("", child.content))
        elif child.type == "code_inline" and _SHOWN_TAG.search(child.content):
            # code showing a tag ("the `<br>` element") keeps its span: an answer quoting it keeps the tag as
            # text in code (shared/query/plain_answer.py), where a bare tag would be removed as markup
            parts.append(_code_span(child.content))
        elif child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type == "image":
            parts.append(child.content)  # its alt text
        elif child.type in ("softbreak",):
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
    return "".join(parts), code


# Sphinx's roles and directives, which plain docutils does not know: read as their text (a role)
# or their content (a directive) rather than as an error message in the middle of the prose.
_SPHINX_ROLES = (
    "doc ref term class func meth mod attr exc data const obj envvar option program file command kbd samp "
    "guilabel menuselection abbr dfn mimetype makevar keyword token numref download any"
).split()
_SPHINX_DIRECTIVES = (
    "versionadded versionchanged deprecated seealso option envvar describe glossary hlist only tab tabs "
    "productionlist centered function class method attribute module data exception program"
).split()
_SPHINX_DROPPED = "toctree automodule autoclass autofunction automethod autodata autosummary literalinclude".split()
_rst_ready = False


def _without_target(text: str) -> str:
    """A Sphinx role's text without its closing "<target>" and the spaces before it ("Title <target>": "Title"),
    as the pattern '\\s*<[^>]*>\\s*$' took them off, in linear time: that pattern tried every space and every "<"
    as a start and scanned the rest of the text from each, so a role of 100,000 spaces (a 100 kB .rst file)
    took 23 s of the cleaner's own thread, and one of 100,000 "<" 9 s."""
    body = text.rstrip()
    if not body.endswith(">"):
        return text
    closing = len(body) - 1
    opening = body.find("<", body.rfind(">", 0, closing) + 1, closing)
    return text if opening < 0 else text[:opening].rstrip()


def _prepare_docutils() -> None:
    """Register the Sphinx vocabulary once per process (docutils keeps its registry globally)."""
    global _rst_ready
    if _rst_ready:
        return
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives, roles

    def as_text(name, rawtext, text, lineno, inliner, options=None, content=None):
        # "Title <target>" shows the title; "~pkg.mod.func" shows the last part, as Sphinx does
        shown = _without_target(text) or text
        if shown.startswith("~"):
            shown = shown[1:].rsplit(".", 1)[-1]
        return [nodes.literal(rawtext, shown.lstrip("!"))], []

    class AnyOption(dict):
        def __missing__(self, key):
            return directives.unchanged

    class Passthrough(Directive):
        has_content = True
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = AnyOption()

        def run(self):
            container = nodes.container()
            if self.arguments:
                container += nodes.paragraph(text=self.arguments[0])
            self.state.nested_parse(self.content, self.content_offset, container)
            return [container]

    class Dropped(Passthrough):
        def run(self):
            return []

    for name in _SPHINX_ROLES:
        for prefix in ("", "py:", "std:", "rst:"):
            roles.register_local_role(prefix + name, as_text)
    for name in _SPHINX_DIRECTIVES:
        directives.register_directive(name, Passthrough)
    for name in _SPHINX_DROPPED:
        directives.register_directive(name, Dropped)
    _rst_ready = True


def extract_rst(text: str) -> CleanDocument:
    """Plain text of reStructuredText, parsed by docutils: the document title is its title,
    a ``:date:`` field its date; markup, comments and what docutils could not parse dropped."""
    from docutils import nodes
    from docutils.core import publish_doctree

    _prepare_docutils()
    doctree = publish_doctree(text, settings_overrides={
        # a document that uses an unknown role still yields its text; never halt, never print
        "report_level": 5, "halt_level": 5, "warning_stream": False,
        # a document must not read files or pass raw HTML through (include::, raw::)
        "file_insertion_enabled": False, "raw_enabled": False,
        "doctitle_xform": True, "input_encoding": "unicode",
        # docutils drops a whole document with a line over 10,000 characters (its default); the file's size is
        # bounded where it is fetched and read, so a long line (a paragraph not wrapped) is read as any other
        "line_length_limit": max(10_000, len(text) + 1),
    })
    published = None
    for date in doctree.findall(nodes.date):
        published = date.astext().strip() or None
        break
    title_node = next(iter(doctree.findall(nodes.title)), None)
    title = title_node.astext().strip() if title_node is not None else ""
    dropped = (nodes.system_message, nodes.comment, nodes.substitution_definition, nodes.docinfo)
    for node in list(doctree.findall(lambda n: isinstance(n, dropped))):
        node.parent.remove(node)
    for node in list(doctree.findall(nodes.problematic)):
        node.parent.replace(node, nodes.Text(node.astext()))
    return CleanDocument(body=normalize_text(doctree.astext()), title=title, published=published)


_LIST_START = re.compile(r"^(?:[-*+•o]|\d{1,3}[.)]|[a-z][.)])\s")
_UNDERLINE = re.compile(r"^\s*([=\-~*#^])\1{2,}\s*$")
_HYPHEN_END = re.compile(r"[A-Za-zÀ-ÿ][-\u2010]$")  # U+2010: groff's hyphen where it breaks a word


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# A tag and its text on one line, set apart by two spaces or more, as mdoc hangs an option's text
# ("     -A      Generate host keys of all default key types (rsa, ecdsa, and"): its lines go on at the text's column.
_HUNG_TAG = re.compile(r"^\s*-\S{1,20}(?: \S{1,20})?( {2,})\S")


def join_wrapped(text: str) -> str:
    """Plain text with its hard-wrapped prose lines joined: a line reaching towards the wrap width
    (60% of the document's long lines) runs on into the next unless that one starts a list item, a
    deeper-indented block (the column a hung option's text starts at is no deeper: mdoc's "-A      Generate
    ...") or follows a colon; short lines (a heading, a table's or a list's) stay
    lines. A line's sentence is then whole, never cut at the wrap ("... not even [1]"). Its line breaks are
    ``\n`` (:func:`~shared.contract.text.line_breaks_as_newlines`, as :func:`extract_plain` reads it)."""
    lines = text.split("\n")
    lengths = sorted(len(line.rstrip()) for line in lines if line.strip())
    if not lengths:
        return text
    width = lengths[int(len(lengths) * 0.9)] if len(lengths) >= 10 else lengths[-1]
    if width < 40:
        return text  # short lines throughout: a list or a poem, not wrapped prose
    # The line being built is kept as its pieces, with what the rule reads of it (its indent, length and
    # end): joining each wrapped line onto the whole text so far copied and searched it again, quadratic in
    # a paragraph's length (Boost's 2 MB copyright files, whose license texts join into 136 kB lines:
    # 7-9 s each, most of a document's cleaning).
    out: list[str] = []
    pieces: list[str] = []  # the line being built
    indent = length = 0  # the first piece's indent; the line's length, rstripped as each piece is
    hang = -9  # the column a hung tag's text starts at on the first piece ("-A      Generate ..."), or none
    for line in lines:
        stripped = line.strip()
        last = pieces[-1] if pieces else ""
        runs_on = (length and stripped and length >= 0.6 * width
                   and not _LIST_START.match(stripped) and not _UNDERLINE.match(stripped)
                   and not last.endswith(":")
                   and not (hang >= 0 and _HUNG_TAG.match(line))  # in a list of hung tags, one starts an item
                   and (abs(_indent(line) - indent) <= 4 or abs(_indent(line) - hang) <= 1))
        if not runs_on:
            if pieces:
                out.append("".join(pieces))
            pieces, indent, length = [line.rstrip()], _indent(line), len(line.rstrip())
            tagged = _HUNG_TAG.match(line)
            hang = tagged.end(1) if tagged else -9
        elif _HYPHEN_END.search(last[-2:]) and stripped[:1].islower():
            pieces[-1] = last[:-1]
            pieces.append(stripped)
            length += len(stripped) - 1
        else:
            pieces.append(" " + stripped)
            length += 1 + len(stripped)
    if pieces:
        out.append("".join(pieces))
    return "\n".join(out)


def plain_title(text: str) -> str:
    """A plain-text document's heading: its first line when a blank line or an underline
    (=====, -----) follows it, it is short and does not end a sentence; "" otherwise (the file's
    name serves). A rendered man page's is the line its first section (NAME) states. Its line breaks are ``\n``."""
    lines = [line.strip() for line in text.split("\n")]
    first = next((i for i, line in enumerate(lines) if line and not _UNDERLINE.match(line)), None)
    if first is None:
        return ""
    heading = lines[first]
    if _MAN_HEADER.match(heading):
        return _man_page_name(lines[first + 1:])
    after = lines[first + 1] if first + 1 < len(lines) else ""
    if len(heading) > 80 or heading.endswith((".", ",", ";")) or not any(c.isalpha() for c in heading):
        return ""
    return heading if not after or _UNDERLINE.match(after) else ""


# A man page as `man -l FILE | col -bx` renders it opens with its running header, "GZIP(1)  General Commands
# Manual  GZIP(1)": furniture, the same on every page; what names the page is its first section's line.
_MAN_HEADER = re.compile(r"^(?P<page>[^\s()]+\([^\s()]+\))(?:\s.*)?\s(?P=page)$")


def _man_page_name(lines: list[str]) -> str:
    """The line of a rendered man page's first section (NAME, NOM, BEZEICHNUNG ...) after its header: "gzip,
    gunzip, zcat - compress or expand files" (its wrapped lines joined); "" when none follows."""
    start = next((i for i, line in enumerate(lines) if line), None)  # the section's heading
    if start is None:
        return ""
    named = itertools.takewhile(bool, lines[start + 1:])
    return " ".join(" ".join(named).split())


def extract_plain(text: str) -> CleanDocument:
    """Plain text with its wrapped lines joined and its box-drawn tables read as rows; its heading is its
    title (else none is stated)."""
    text = line_breaks_as_newlines(without_terminal_formatting(text))
    return CleanDocument(body=normalize_text(join_wrapped(box_tables(text))), title=plain_title(text))


_BOX_TOP = re.compile(r"^\s*┌[─┬]+┐\s*$")
_BOX_LINE = re.compile(r"^\s*(?:│.*│|[├└][─┼┴]+[┤┘])\s*$")


def box_tables(text: str) -> str:
    """Each table drawn with box characters (``┌─┬─┐`` / ``│a│b│`` / ``├─┼─┤``, as text browsers render a
    page's tables: X.Org's protocol specifications) as its rows, one list item each, "column: value; ...":
    a cell's value was read apart from its column's name ("│timeout │CARD32 │60 │" under "│Attribute │Type
    │Default │": newcomer12). A line continues the row above where its first cell is empty, or (within
    lines not parted by a separator) where its first cell is its only one filled: a renderer's wrapped
    cell; any other line is a row (an empty cell is a NULL), whether separators part every row (X.Org) or none
    (tabulate's simple_outline, rich's box.SQUARE, psql). A spacer line, every cell empty, is no row. A row
    whose cell count differs from the header's (a footer spanning the columns) stands unlabelled. A
    table not closed by ``└─┘``, or whose cell count changes between lines not parted by a separator,
    stays as it is."""
    if "┌" not in text:
        return text
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        if not _BOX_TOP.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        rows, end = _box_rows(lines, i + 1)
        if rows is None:
            out.extend(lines[i:end])
            i = end
            continue
        header, body = rows[0], rows[1:]
        if not body:
            out.append("- " + "; ".join(header))
        for row in body:
            out.append("- " + (labelled_row(header, row) if len(row) == len(header) else "; ".join(filter(None, row))))
        i = end
    return "\n".join(out)


def _box_rows(lines: list[str], start: int) -> tuple[list[list[str]] | None, int]:
    """The rows (cells) of the box-drawn table whose lines begin at ``start`` (below its ``┌─┐``), the
    header first, and the index of the line after the table (after its ``└─┘``, else its first line that
    is not the table's); rows None if it is not closed by ``└─┘`` or a group of lines between separators
    changes its cell count (a row would be lost or misread). Within a group, a line whose first cell is
    empty, or whose first cell is its only one filled under a line that filled others, continues the row
    above (a wrapped cell: X.Org's "│Keyboard │16 │" then "│Bell │ │"); across a separator, one whose first
    cell is empty continues a row of the body with as many cells; any other line starts a row, one with an
    empty cell too (a NULL: "│2 │bob │ │" under "│1 │ann │a@x │"). A line with every cell empty (a spacer) is
    no row."""
    rows: list[list[str]] = []
    width, before, broken = None, None, False  # the group's cell count, its last line's cells
    for end in range(start, len(lines)):
        if not _BOX_LINE.match(lines[end]):
            return None, end
        line = lines[end].strip()
        if line.startswith("└"):
            return (None if broken or not rows else rows), end + 1
        if not line.startswith("│"):
            width, before = None, None  # a separator: the next line starts a row
            continue
        cells = [cell.strip() for cell in line[1:-1].split("│")]
        if width is not None and width != len(cells):
            broken = True
        width = len(cells)
        if broken or not any(cells):
            continue
        if before is not None and (not cells[0] or not any(cells[1:]) and any(before[1:])) \
                or before is None and not cells[0] and len(rows) > 1 and len(rows[-1]) == len(cells):
            rows[-1] = [" ".join(filter(None, pair)) for pair in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
        before = cells
    return None, len(lines)


_WIDE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"
#: GNU Info's markup cookies (^@^H[index^@^H], ^@^H[image src="a.png" text="..."^@^H]): markup, neither the manual's
#: text nor binary data (an index part of a manual split in files, find.info-2.gz, opens with them and was refused as
#: binary data, newcomer16). One definition for bytes and text: a cookie runs to the next NUL however long it is (an
#: image's text= holds its whole picture in characters).
_INFO_COOKIE = re.compile("\x00\x08\\[[^\x00]*\x00\x08\\]")
_INFO_COOKIE_BYTES = re.compile(_INFO_COOKIE.pattern.encode())
_OVERSTRIKE_BYTES = re.compile(rb"(?<=[^\x00-\x1f\x7f])\x08(?=[^\x00-\x1f\x7f])")


def binary_reason(raw: bytes, text: str | None = None) -> str | None:
    """Why ``raw`` (or its decoded ``text``) is binary data rather than a document; None if it is text.

    Binary bytes with a text suffix or type (an image named .txt, a PDF served as
    text/html) would decode into hundreds of garbage chunks."""
    head = raw[:8192]
    if head.startswith(_WIDE_BOMS):
        return None  # UTF-16/32 text has NUL bytes of its own
    if _wide_without_bom(head):
        wide = head[:len(head) // 2 * 2].decode(_wide_without_bom(head), errors="replace")
        return binary_reason(wide.encode("utf-8"))  # the text's own control characters still count
    if b"\0" in _INFO_COOKIE_BYTES.sub(b"", head):
        return "it contains NUL bytes"
    # a backspace between two printed bytes is nroff's overstrike (bold "N\bN", underline "_\bn"), as
    # `man -Tutf8 | cat` and catman pages write every heading: text, read as a terminal shows it
    overstrikes = len(_OVERSTRIKE_BYTES.findall(head))
    if head and sum(head.count(bytes([b])) for b in _CONTROL_BYTES) - overstrikes > len(head) * 0.05:
        return "over 5% of its first bytes are control characters"
    if text:
        sample = text[:65536]
        if sample.count("\ufffd") > len(sample) * 0.05:
            return "over 5% of it is not valid in any text encoding"
    return None


# ------------------------------------------------------------ the readers the registry names


def _reading(document: CleanDocument) -> Reading:
    return Reading(passages=[Passage(document.body, "body")] if document.body.strip() else [],
                   title=document.title, published=document.published)


def _decoded(raw: bytes, content_type: str, *, html: bool = False) -> str:
    """``raw`` as text, read as a terminal shows it (an escape's parameters are no words of the document)."""
    return without_terminal_formatting(decode_bytes(raw, parse_content_type(content_type)[1], html=html))


def read_html(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _reading(extract_html(_decoded(raw, content_type, html=True), url))


def read_markdown(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _reading(extract_markdown(_decoded(raw, content_type)))


def read_rst(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _reading(extract_rst(_decoded(raw, content_type)))


def read_plain(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _reading(extract_plain(decode_bytes(raw, parse_content_type(content_type)[1])))


#: GNU Info's framing (/usr/share/info/sed.info.gz): ^_ opens each node, a "File: ..., Node: ..., Next: ..." line
#: names it, a "* Menu:" lists the nodes below, the file ends in a tag table ("Node: Top\x7f738") and Emacs's
#: "Local Variables" block; an index node is marked ^@^H[index^@^H] (_INFO_COOKIE). Navigation, not the manual's words.
_INFO_NODE_LINE = re.compile(r"\AFile: [^\n]*\bNode: [^\n]*\n")
_INFO_MENU = re.compile(r"^\* Menu:.*", re.S | re.M)
_INFO_TRAILERS = ("Tag Table:", "End Tag Table", "Indirect:", "Local Variables:")
#: a table's terms on lines of their own above one description (Texinfo's @item/@itemx: "‘-z’", "‘--null-data’",
#: "‘--zero-terminated’"): one line, so the description is read under all of them, not the last alone
_INFO_TERM_ABOVE_TERM = re.compile(r"^(‘[^’\n]+’)\n(?=‘[^’\n]+’\n)", re.M)


def extract_info(text: str) -> CleanDocument:
    """A GNU Info file as plain text: each node's own text (its underlined heading first), without the
    preamble, node lines, menus, index nodes and tag table (read as text they were thousands of "* -e, example:
    Overview. (line 6)" lines and raw DEL bytes; .info was skipped as no document type, newcomer16)."""
    nodes = [node.lstrip("\n") for node in text.split("\x1f")]
    parts = re.findall(r"^([^\s:]+\.info-[0-9]+): [0-9]+$", text, re.M)
    if parts and not any(_INFO_NODE_LINE.match(node) for node in nodes):
        raise InvalidInput(f"the GNU Info file only lists the parts its manual is split in ({', '.join(parts[:3])}"
                           f"{', ...' if len(parts) > 3 else ''}); its text is in those: ingest them (its folder)")
    kept = [_INFO_MENU.sub("", _INFO_NODE_LINE.sub("", node, count=1))
            for node in (nodes[1:] if len(nodes) > 1 else nodes)
            if not node.startswith(_INFO_TRAILERS) and "\x00\x08[index\x00\x08]" not in node]
    return extract_plain(_INFO_TERM_ABOVE_TERM.sub(r"\1, ", _INFO_COOKIE.sub("", "\n\n".join(kept))))


def read_info(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return _reading(extract_info(decode_bytes(raw, parse_content_type(content_type)[1])))
