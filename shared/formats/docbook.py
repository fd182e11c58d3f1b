"""The text of an HTML page that DocBook's stylesheets wrote (DocBook XSL, Publican), read from its markup.

trafilatura guesses a page's main content from how its blocks look, and on DocBook's output it guesses
wrong: it dropped whole sections of the Debian Administrator's Handbook (5.2 "Package Meta-Information":
168 of its 276 body sentences kept, 66 once the cleaner had unwrapped its headings), its sidebars
("BACK TO BASICS"), and every heading nested in DocBook's ``div.titlepage`` (the Debian FAQ's questions). DocBook's HTML says itself what is what, the same
way in every book: the content is the body less its navigation (``div.navheader``/``div.navfooter``,
Publican's ``ul.docnav``), its tables of contents (``div.toc``, ``dl.toc``, a qandaset's list of
questions) and Publican's banner. So such a page is read block by block, in the conventions of
:func:`shared.formats.text.extract_markdown`: each heading, paragraph, code block a paragraph of its own,
list items consecutive lines after a marker, a data table's rows ``| a | b |`` lines; a question and its
number (DocBook's qandaset lays them out in a table) one line.
"""

from __future__ import annotations

import re

# Phrasing content: read into the paragraph around it (HTML's list, as the cleaner's).
_INLINE = frozenset(
    "a abbr acronym b bdi bdo big cite code data del dfn em font i ins kbd mark q s samp small span strike "
    "strong sub sup time tt u var br wbr img".split())
_SKIPPED = frozenset(("script", "style", "noscript", "template", "head", "title", "img", "input", "select",
                      "button", "textarea", "object", "svg", "math", "iframe"))
# Navigation and tables of contents: DocBook XSL's, Publican's, and the qandaset's (a <tr class="toc">)
_NAVIGATION = re.compile(r"(?:^|\s)(?:navheader|navfooter|docnav|toc|list-of-[\w-]+)(?:\s|$)")
_NAVIGATION_IDS = frozenset(("banner",))  # Publican's "Download the ebook" strip
_NAVIGATION_TAGS = frozenset(("nav", "header", "footer"))
_NAVIGATION_SUMMARY = re.compile(r"\ANavigation (?:header|footer)\Z", re.IGNORECASE)  # DocBook XSL's, restyled
_GENERATOR = re.compile(r"docbook|publican", re.IGNORECASE)
_BREAK = "\x1e"  # a <br>: the line ends there (other line ends in the source are spaces)
XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*\?>")


def _classes(node) -> str:
    return node.get("class") or ""


def _has_class(node, name: str) -> bool:
    return name in _classes(node).split()


def _is_navigation(node) -> bool:
    if node.tag in _NAVIGATION_TAGS or node.get("id") in _NAVIGATION_IDS or _NAVIGATION.search(_classes(node)):
        return True
    if node.tag == "table" and _NAVIGATION_SUMMARY.match((node.get("summary") or "").strip()):
        return True
    # a qandaset's own table of contents: the lists of links to its questions before its entries
    parent = node.getparent()
    return node.tag == "dl" and parent is not None and _has_class(parent, "qandaset")


def is_docbook(tree) -> bool:
    """Whether DocBook's stylesheets wrote the page: their generator tag, or their section title pages."""
    for meta in tree.iter("meta"):
        if (meta.get("name") or "").lower() == "generator" and _GENERATOR.search(meta.get("content") or ""):
            return True
    return any(_has_class(div, "titlepage") for div in tree.iter("div"))


class _Reader:
    """Blocks of text, in order: ``(text, group)``; blocks of one group (a list, a table) are read as
    consecutive lines, others as paragraphs."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, int | None]] = []
        self.groups = 0
        self.markers: list[str] = []  # the pending marker of each list item we are in ("" once used)
        self.list_group: int | None = None

    def add(self, text: str, group: int | None = None) -> None:
        lines = [" ".join(line.split()) for line in text.split(_BREAK)]
        text = "\n".join(line for line in lines if line)
        if not text:
            return
        if self.markers:
            marker = self.markers[-1]
            if marker:
                text = "  " * (len(self.markers) - 1) + marker + text
                self.markers[-1] = ""
            group = self.list_group
        self.blocks.append((text, group))

    # ---------------------------------------------------------------- walking

    def inline(self, node) -> str:
        if node.tag == "br":
            return _BREAK
        if node.tag in _SKIPPED or _is_navigation(node):
            return ""
        parts = [node.text or ""]
        for child in node:
            if isinstance(child.tag, str):
                parts.append(self.inline(child) if child.tag in _INLINE else " " + child.text_content() + " ")
            parts.append(child.tail or "")
        return "".join(parts)

    def block(self, node) -> None:
        """``node``'s content: its runs of text and inline elements paragraphs, its blocks read in turn."""
        run = [node.text or ""]
        for child in node:
            if not isinstance(child.tag, str):  # a comment: its tail is text
                run.append(child.tail or "")
                continue
            if child.tag in _INLINE:
                run.append(self.inline(child))
            else:
                self.add("".join(run))
                run = []
                self.element(child)
            run.append(child.tail or "")
        self.add("".join(run))

    def element(self, node) -> None:
        tag = node.tag
        if tag in _SKIPPED or _is_navigation(node):
            return
        if tag == "pre":
            self.add_pre(node)
        elif tag in ("ul", "ol"):
            self.list(node)
        elif tag == "table":
            self.table(node)
        else:
            self.block(node)

    def add_pre(self, node) -> None:
        text = node.text_content().strip("\n").rstrip()
        if text.strip():
            group = self.list_group if self.markers else None
            if self.markers and self.markers[-1]:
                text = "  " * (len(self.markers) - 1) + self.markers[-1] + text
                self.markers[-1] = ""
            self.blocks.append((text, group))

    def list(self, node) -> None:
        outermost = not self.markers
        if outermost:
            self.groups += 1
            self.list_group = self.groups
        counter = int(node.get("start") or 1) if node.tag == "ol" and (node.get("start") or "1").isdigit() else 1
        for item in node:
            if not isinstance(item.tag, str) or item.tag in _SKIPPED or _is_navigation(item):
                continue
            self.markers.append(f"{counter}. " if node.tag == "ol" else "- ")
            counter += 1
            self.block(item)
            self.markers.pop()
        if outermost:
            self.list_group = None

    def table(self, node) -> None:
        rows = [row for row in node.iter("tr") if _owner_table(row) is node and not _is_navigation(row)]
        read = [[self.cell_blocks(cell) for cell in row if isinstance(cell.tag, str) and cell.tag in ("td", "th")]
                for row in rows]
        if not _is_data_table(node):
            # a qandaset, an admonition, a callout list laid out in a table: each row's text in turn; a
            # question and its number one line, a row of one-line cells one line
            for row, cells in zip(rows, read, strict=True):
                blocks = [block for cell in cells for block in cell]
                if _has_class(row, "question") and len(cells) > 1:
                    lead = len(cells[0]) + 1  # the number and the question
                elif all(len(cell) <= 1 for cell in cells):
                    lead = len(blocks)
                else:
                    lead = 0
                if blocks and lead:
                    self.add(" ".join(text for text, _ in blocks[:lead]))
                self.blocks.extend(blocks[lead:])
            return
        self.groups += 1
        group = self.list_group if self.markers else self.groups
        header = node.find("thead") is not None or bool(rows) and all(
            cell.tag == "th" for cell in rows[0] if isinstance(cell.tag, str))
        for n, cells in enumerate(read):
            texts = [" ".join(" ".join(text for text, _ in cell).split()) for cell in cells]
            if not any(texts):
                continue
            self.add("| " + " | ".join(texts) + " |", group)
            if n == 0 and header and len(read) > 1:
                self.blocks.append(("|" + "---|" * len(texts), group))

    def cell_blocks(self, cell) -> list[tuple[str, int | None]]:
        """What ``cell`` reads as, apart from the blocks around it."""
        outer, markers, group = self.blocks, self.markers, self.list_group
        self.blocks, self.markers, self.list_group = [], [], None
        try:
            self.block(cell)
            return self.blocks
        finally:
            self.blocks, self.markers, self.list_group = outer, markers, group


def _is_data_table(table) -> bool:
    """DocBook wraps a table of data in ``div.table`` (``div.table-contents``) or ``div.informaltable``;
    its other tables lay out a qandaset, an admonition, a callout list, a simple list."""
    parent = table.getparent()
    while parent is not None and parent.tag != "div":
        parent = parent.getparent()
    return parent is not None and any(
        _has_class(parent, name) for name in ("table", "table-contents", "informaltable"))


def _owner_table(row):
    for ancestor in row.iterancestors("table"):
        return ancestor
    return None


def docbook_text(html: str) -> str | None:
    """The text of a page DocBook's stylesheets wrote, its navigation and tables of contents left out;
    None when another tool wrote the page (or lxml cannot read it). XHTML is read by lxml's HTML parser
    (as the rest of the cleaner reads it): its element names carry no namespace."""
    import lxml.html
    from lxml import etree

    try:
        tree = lxml.html.document_fromstring(XML_DECLARATION.sub("", html, count=1))
    except (etree.ParserError, ValueError):
        return None
    if not is_docbook(tree):
        return None
    body = tree.find("body")
    reader = _Reader()
    reader.block(body if body is not None else tree)
    from shared.contract.text import normalize_text
    from shared.formats.passages import join_blocks

    return normalize_text(join_blocks(reader.blocks))
