"""How the documents of the format set (``shared/tools/eval/datasets/formats``, issue 31) were made.

Run once on a Debian 12 machine with the sources named in ``SOURCES`` below (Debian packages
installed or fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x``; test files of
PyPI packages and public-domain PDFs of pdfplumber's test suite, fetched beside it):

    python bench/formats_dataset.py --sources /tmp/fd --out shared/tools/eval/datasets/formats

The two decks with tables (``pyhowto-curses.pptx``, ``pywhatsnew-3.11-faster.pptx``) were added later
with ``--table-decks`` (no other file is rewritten; they need only python3.11-doc installed).
The PDFs' plain texts were first written as poppler wrote them; ``--clean-plain`` then cleaned them
once (:func:`clean_pdf_text`: running heads, feet and page numbers out, hyphenation joined, table
rows apart), as
``build`` now does when it writes them.

It writes ``documents/`` (each file as its source made it, or an excerpt of its pages, or the
text of a real document rendered to DOCX/PPTX/XLSX, or real pages rasterised to an image-only
PDF, each said in the manifest), ``plain/`` (an independent plain-text rendering of the same
content: ``pdftotext`` from poppler-utils for PDFs, one form feed between pages; for a scanned
PDF the text layer of the pages it was rasterised from; for a rendered file, the text it was
rendered from; for an EPUB, the text of its XHTML chapters by lxml; for a sheet, its rows as
``header: value`` lines) and ``manifest.json``'s document entries (``--manifest`` prints them).

The documents are committed; this script is the record of how, not a build step.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

PYDOC = Path("/usr/share/doc/python3.11/html")
PSF = "PSF-2.0 (Python documentation licence, /usr/share/doc/python3.11/copyright)"


@dataclass
class Made:
    file: str
    format: str
    layout: str  # one-column, two-column, three-column, table, scanned, slides, document, sheet, book
    package: str
    version: str
    source: str
    licence: str
    made: str  # how the file was made from its source


def dpkg_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def _raw(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def excerpt_pdf(source: Path, out: Path, pages: list[int] | None) -> int:
    """``pages`` (1-based) of ``source`` as a new PDF (None: the file as it is); its page count."""
    import pypdfium2 as pdfium

    raw = _raw(source)
    if pages is None:
        out.write_bytes(raw)
        return len(pdfium.PdfDocument(raw))
    src = pdfium.PdfDocument(raw)
    new = pdfium.PdfDocument.new()
    new.import_pages(src, [p - 1 for p in pages])
    with out.open("wb") as f:
        new.save(f)
    return len(new)


def image_only_pdf(source: Path, out: Path, pages: list[int], dpi: int = 150) -> None:
    """``pages`` of ``source`` rendered to greyscale images, saved as a PDF of images only (no text layer)."""
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(_raw(source))
    images = [src[p - 1].render(scale=dpi / 72, grayscale=True).to_pil().convert("L") for p in pages]
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:], quality=70)


def pdftotext(path: Path, pages: list[int] | None = None, raw: bytes | None = None, layout: bool = False) -> str:
    """poppler's text of a PDF, a form feed after each page; ``layout``: ``-layout`` (a table's row stays a
    line; for one-column pages only: it sets columns side by side)."""
    tmp = None
    if raw is not None:
        tmp = path.with_suffix(".tmp.pdf")
        tmp.write_bytes(raw)
        path = tmp
    try:
        mode = ["-layout"] if layout else []
        if pages is None:
            return subprocess.run(["pdftotext", *mode, "-enc", "UTF-8", str(path), "-"], capture_output=True,
                                  text=True, check=True).stdout
        return "".join(subprocess.run(["pdftotext", *mode, "-enc", "UTF-8", "-f", str(p), "-l", str(p), str(path), "-"],
                                      capture_output=True, text=True, check=True).stdout for p in pages)
    finally:
        if tmp:
            tmp.unlink()


# ------------------------------------------------------- the plain text of a PDF, cleaned (the ceiling)

#: a line that is only a page number: "12", "– 2", "—4", "9 / 233", "Page 3", "iv"
_PAGE_NUMBER = re.compile(r"(?i)^(?:page\s+)?[–—-]?\s*(?:\d{1,4}|(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3}))\s*[–—-]?"
                          r"(?:\s*(?:/|of)\s*\d{1,5})?$")
#: how many lines at the top and at the bottom of a page may be running heads, feet or page numbers
_EDGE = 3


def _edge_key(line: str) -> str:
    """What a running line has in common from page to page: its first stretch (a -layout line's parts
    are cut by runs of 3 or more spaces), whitespace collapsed, digits as #."""
    first = re.split(r"\s{3,}", line.strip())[0]
    return re.sub(r"\d+", "#", " ".join(first.split())).casefold()


def without_running_lines(text: str) -> str:
    """``text`` (pages cut by form feeds) without running heads, feet and page numbers: at each page's
    top and bottom, up to ``_EDGE`` lines, from the edge inward, that are a page number or whose
    :func:`_edge_key` begins an edge line on at least half the pages (and at least two). A rule of its
    own, with nothing of ragbus's PDF reader: a one-page file loses only its page numbers."""
    pages = [page.split("\n") for page in text.split("\f")]
    real = [i for i, lines in enumerate(pages) if any(line.strip() for line in lines)]
    seen: dict[str, set[int]] = {}
    for i in real:
        lines = [line for line in pages[i] if line.strip()]
        for line in lines[:_EDGE] + lines[-_EDGE:]:
            seen.setdefault(_edge_key(line), set()).add(i)
    running = {key for key, where in seen.items() if len(where) >= max(2, len(real) / 2)}

    def is_running(line: str) -> bool:
        return bool(_PAGE_NUMBER.match(line.strip())) or _edge_key(line) in running

    out = []
    for lines in pages:
        keep = [j for j, line in enumerate(lines) if line.strip()]
        dropped: set[int] = set()
        for order in (keep[:_EDGE], keep[::-1][:_EDGE]):
            for j in order:
                if not is_running(lines[j]):
                    break
                dropped.add(j)
        out.append("\n".join(line for j, line in enumerate(lines) if j not in dropped))
    return "\f".join(out)


def joined_hyphens(text: str) -> str:
    """A word hyphenated at a line's end joined again ("confed-" / "eracy" -> "confederacy"): a lower-case
    letter and a hyphen ending a line, a lower-case letter starting the next. Where the text writes the
    two parts with a hyphen elsewhere ("full-upgrade"), the hyphen is kept and only the line break goes."""
    hyphenated = set(re.findall(r"[A-Za-z]+-[a-z]+", re.sub(r"-[ \t]*\n", "\n", text)))

    def join(match: re.Match) -> str:
        first, second = match.group(1), match.group(2)
        return f"{first}-{second}" if f"{first}-{second}" in hyphenated else first + second

    return re.sub(r"([A-Za-z]+)-[ \t]*\n[ \t]*([a-z]+)", join, text)


def rows_apart(text: str) -> str:
    """Each line that reads as a table's row (``-layout`` keeps a row on one line, its cells apart by runs
    of 3 or more spaces) set apart by blank lines: plain text's reader joins lines of one width as a
    wrapped paragraph, and would run a table's rows together (as the sheets' rows are kept apart)."""
    out: list[str] = []
    for line in text.split("\n"):
        row = bool(re.search(r"\S\s{3,}\S", line.strip()))
        if row and out and out[-1].strip() and not out[-1].endswith("\f"):
            out.append("")
        out.append(line)
        if row:
            out.append("")
    return "\n".join(out)


def clean_pdf_text(text: str) -> str:
    """The ceiling's plain text of a PDF: poppler's text without running lines, hyphenation joined, a
    table's rows apart."""
    return rows_apart(joined_hyphens(without_running_lines(text)))


# ------------------------------------------------------------------ HTML -> blocks (for rendering)

def html_blocks(path: Path, *, sections: int | None = None, stop_at: str | None = None) -> list[tuple[str, object]]:
    """A Sphinx page's main text as (kind, value) blocks: ("h1".."h4", text), ("p", text), ("li", text),
    ("pre", text), ("table", [[cell, ...], ...]); up to ``sections`` second-level sections, or up to the
    heading ``stop_at``."""
    from lxml import html

    root = html.parse(str(path)).xpath("//div[@role='main']")[0]
    for link in root.xpath(".//a[@class='headerlink']"):
        link.drop_tree()
    blocks: list[tuple[str, object]] = []
    seen_h2 = 0

    def text(el) -> str:
        return " ".join(el.text_content().split())

    def walk(el) -> bool:
        nonlocal seen_h2
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag in ("h1", "h2", "h3", "h4"):
                if tag == "h2":
                    seen_h2 += 1
                    if sections is not None and seen_h2 > sections:
                        return False
                if stop_at and text(child) == stop_at:
                    return False
                blocks.append((tag, text(child)))
            elif tag == "p":
                if text(child):
                    blocks.append(("p", text(child)))
            elif tag in ("ul", "ol"):
                for li in child.xpath("./li"):
                    blocks.append(("li", text(li)))
            elif tag == "pre":
                blocks.append(("pre", child.text_content().strip("\n")))
            elif tag == "table":
                rows = [[" ".join(c.text_content().split()) for c in tr.xpath("./th|./td")]
                        for tr in child.xpath(".//tr")]
                blocks.append(("table", [r for r in rows if any(r)]))
            elif tag in ("dl",):
                for dt, dd in zip(child.xpath("./dt"), child.xpath("./dd"), strict=False):
                    blocks.append(("p", f"{text(dt)}: {text(dd)}"))
            elif tag in ("section", "div", "blockquote"):
                if not walk(child):
                    return False
        return True

    walk(root)
    return blocks


def _rows_text(rows: list[list[str]]) -> list[str]:
    """A table's rows as plain text, "header: value; ..." each (its first row the header)."""
    header, *body = rows
    return ["; ".join(f"{h}: {v}" for h, v in zip(header, row, strict=False) if v) for row in body]


def blocks_text(blocks: list[tuple[str, object]]) -> str:
    """The blocks as plain text, a blank line after each paragraph and each table row (so a reader of
    plain text never takes rows of one width for a wrapped paragraph)."""
    out = []
    for kind, value in blocks:
        if kind == "table":
            out.extend(_rows_text(value))  # type: ignore[arg-type]
        elif kind == "li":
            out.append(f"- {value}")
        else:
            out.append(str(value))
    return "\n\n".join(out) + "\n"


def render_docx(blocks, out: Path, title: str) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    for kind, value in blocks:
        if kind in ("h1", "h2", "h3", "h4"):
            document.add_heading(str(value), level=int(kind[1]) - (0 if kind == "h1" else 0))
        elif kind == "li":
            document.add_paragraph(str(value), style="List Bullet")
        elif kind == "pre":
            document.add_paragraph(str(value), style="No Spacing")
        elif kind == "table":
            rows = value  # type: ignore[assignment]
            width = max(len(r) for r in rows)
            table = document.add_table(rows=len(rows), cols=width)
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        else:
            document.add_paragraph(str(value))
    document.save(out)


def _sentences(text: str, n: int) -> tuple[str, str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text)
    return " ".join(parts[:n]), " ".join(parts[n:])


def render_pptx(blocks, out: Path, title: str, max_slides: int = 12, split_at: tuple[str, ...] = ("h2", "h3"),
                subtitle: str = "Rendered from the Python 3.11 documentation (python3.11-doc)",
                notes_cap: int = 1500) -> list[str]:
    """A deck: a title slide, then one slide per section (a heading in ``split_at``; its text as the title,
    the first sentence of its paragraphs and its list items as bullets, the rest of its paragraphs as
    speaker notes, at most ``notes_cap`` characters). A section with a table is cut there: what comes
    before it is that slide; the table is a slide of its own (the heading as its title) whose speaker
    notes are the text after the table. Returns each slide's text (the plain rendering, slide by slide;
    a table's rows as "header: value" lines, a blank line between rows)."""
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = title
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = title
    first.placeholders[1].text = subtitle
    slides_text = [f"{title}\n{subtitle}"]
    for heading, content in _sections(blocks, split_at):
        at = next((i for i, (kind, _) in enumerate(content) if kind == "table"), len(content))
        bullets, notes = _slide_parts(content[:at])
        if bullets and len(slides_text) < max_slides:
            slides_text.append(_bullet_slide(deck, heading, bullets, notes, notes_cap))
        if at < len(content) and len(slides_text) < max_slides:
            after = " ".join(str(value) for kind, value in content[at + 1:] if kind in ("p", "li"))
            slides_text.append(_table_slide(deck, heading, content[at][1], after[:notes_cap]))
    deck.save(out)
    return slides_text


def _sections(blocks, split_at: tuple[str, ...]) -> list[tuple[str, list[tuple[str, object]]]]:
    sections: list[tuple[str, list[tuple[str, object]]]] = []
    for kind, value in blocks:
        if kind in split_at:
            sections.append((str(value), []))
        elif sections:
            sections[-1][1].append((kind, value))
    return sections


def _slide_parts(content) -> tuple[list[str], list[str]]:
    """A section's bullets (each paragraph's first sentence, each list item's) and notes (the rest of
    each paragraph)."""
    bullets, notes = [], []
    for kind, value in content:
        if kind == "p":
            head, rest = _sentences(str(value), 1)
            bullets.append(head)
            if rest:
                notes.append(rest)
        elif kind == "li":
            bullets.append(_sentences(str(value), 1)[0])
    return bullets, notes


def _bullet_slide(deck, heading: str, bullets: list[str], notes: list[str], notes_cap: int) -> str:
    from pptx.util import Pt

    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = heading
    frame = slide.placeholders[1].text_frame
    for i, bullet in enumerate(bullets[:6]):
        para = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        para.text = bullet
        para.font.size = Pt(14)
    text = [heading, *bullets[:6]]
    notes = bullets[6:] + notes
    if notes:
        note = " ".join(notes)[:notes_cap]
        slide.notes_slide.notes_text_frame.text = note
        text.append(note)
    return "\n".join(text)


def _table_slide(deck, heading: str, rows: list[list[str]], note: str) -> str:
    from pptx.util import Inches, Pt

    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = heading
    rows = rows[:12]
    width = max(len(r) for r in rows)
    shape = slide.shapes.add_table(len(rows), width, Inches(0.5), Inches(1.5), Inches(9), Inches(0.3 * len(rows)))
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            shape.table.cell(r, c).text = cell
            for para in shape.table.cell(r, c).text_frame.paragraphs:
                para.font.size = Pt(10)
    text = [heading, "\n\n".join(_rows_text(rows))]
    if note:
        slide.notes_slide.notes_text_frame.text = note
        text.append(note)
    return "\n\n".join(text)


def render_xlsx(sheets: dict[str, list[list[str]]], out: Path, title: str) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    book.properties.title = title
    for name, rows in sheets.items():
        sheet = book.create_sheet(name[:31])
        for row in rows:
            sheet.append(row)
    book.save(out)


def sheet_text(sheets: dict[str, list[list[str]]]) -> str:
    """Each sheet's name, then its rows as "header: value; ..." lines, a blank line between rows."""
    out = []
    for name, rows in sheets.items():
        out.append(name)
        out.extend(_rows_text(rows))
    return "\n\n".join(out) + "\n"


def epub_text(path: Path) -> str:
    """The text of an EPUB's spine documents in order (lxml), a form feed between chapters."""
    from lxml import etree, html

    with zipfile.ZipFile(path) as z:
        container = etree.fromstring(z.read("META-INF/container.xml"))
        opf_path = container.xpath("//*[local-name()='rootfile']/@full-path")[0]
        opf = etree.fromstring(z.read(opf_path))
        base = opf_path.rsplit("/", 1)[0] + "/" if "/" in opf_path else ""
        items = {i.get("id"): i.get("href") for i in opf.xpath("//*[local-name()='item']")}
        chapters = []
        for ref in opf.xpath("//*[local-name()='itemref']/@idref"):
            doc = html.fromstring(z.read(base + items[ref]))
            body = doc.xpath("//body")
            chapters.append("\n".join(" ".join(t.split()) for t in (body[0] if body else doc).itertext() if t.strip()))
    return "\f".join(chapters) + "\n"


# ------------------------------------------------------------------ the set

def build(src: Path, out: Path) -> list[Made]:
    docs, plain = out / "documents", out / "plain"
    docs.mkdir(parents=True, exist_ok=True)
    plain.mkdir(parents=True, exist_ok=True)
    made: list[Made] = []
    tex = src / "deb/x/usr/share/doc/texlive-doc/latex/base"
    plumber = src / "plumber"
    pypdf = src / "pypi/pypdf-7.1.1/resources"
    gov = "public domain (a work of the United States Government, 17 U.S.C. 105)"
    lppl = "LPPL-1.3c (LaTeX base distribution; texlive-latex-base-doc's copyright)"

    # (file, source, pages or None, layout, package, version, licence)
    pdfs = [
        ("ltnews11.pdf", tex / "ltnews11.pdf", None, "two-column", "texlive-latex-base-doc", "2022.20230122-3", lppl),
        ("ltnews28.pdf", tex / "ltnews28.pdf", [1, 2], "two-column", "texlive-latex-base-doc", "2022.20230122-3", lppl),
        ("ltnews33.pdf", tex / "ltnews33.pdf", [1, 2], "two-column", "texlive-latex-base-doc", "2022.20230122-3", lppl),
        ("federal-register-2020-17221.pdf", plumber / "federal-register-2020-17221.pdf", [1, 2, 3], "three-column",
         "pdfplumber (GitHub jsvine/pdfplumber tests/pdfs)", "git HEAD", gov),
        ("nics-background-checks-2015-11.pdf", plumber / "nics-background-checks-2015-11.pdf", None, "table",
         "pdfplumber (GitHub jsvine/pdfplumber tests/pdfs)", "git HEAD", gov),
        ("senate-expenditures.pdf", plumber / "senate-expenditures.pdf", None, "table",
         "pdfplumber (GitHub jsvine/pdfplumber tests/pdfs)", "git HEAD", gov),
        ("ltnews20.pdf", tex / "ltnews20.pdf", [1, 2], "two-column", "texlive-latex-base-doc", "2022.20230122-3", lppl),
        ("ltnews36.pdf", tex / "ltnews36.pdf", [1, 2], "two-column", "texlive-latex-base-doc", "2022.20230122-3", lppl),
        ("fntguide-encodings.pdf", tex / "fntguide.pdf", [4, 5], "table", "texlive-latex-base-doc", "2022.20230122-3",
         lppl),
        ("debian-faq-codenames.pdf", src / "src/debian-faq.pdf", [18, 19, 20], "one-column", "debian-faq",
         dpkg_version("debian-faq"), "permissive (SPI: verbatim and modified copies allowed with the notice; "
         "/usr/share/doc/debian-faq/copyright)"),
        ("fhs-root-filesystem.pdf", src / "src/fhs.pdf", [10, 11, 12, 13], "table", "debian-policy",
         dpkg_version("debian-policy"), "FHS licence (permissive: copies and modified versions with the notice; "
         "/usr/share/doc/debian-policy/copyright)"),
        ("bzip2-manual-memory.pdf", src / "src/bzip2.pdf", [8, 9], "table", "bzip2", dpkg_version("bzip2"),
         "BSD-variant (bzip2's licence, /usr/share/doc/bzip2/copyright)"),
        ("fontconfig-user.pdf", src / "src/fontconfig-user.pdf", [1, 2, 3], "one-column", "fontconfig",
         dpkg_version("fontconfig"), "MIT-style (Keith Packard, /usr/share/doc/fontconfig/copyright)"),
        ("nettle-hash-functions.pdf", src / "src/nettle.pdf", [13, 14, 15], "one-column", "nettle-dev",
         dpkg_version("nettle-dev"), "public domain (the manual says so on its second page)"),
        ("debian-reference-permissions.pdf", src / "src/debian-reference.en.pdf", [37, 38, 39, 40], "table",
         "debian-reference-en", dpkg_version("debian-reference-en"), "GPL-2+ (recorded as such; /usr/share/doc/"
         "debian-reference-en/copyright)"),
        ("maint-guide-build.pdf", Path("/usr/share/doc/maint-guide/maint-guide.en.pdf"), [15, 16], "one-column",
         "maint-guide", dpkg_version("maint-guide"), "GPL-2.0+ (recorded as such; /usr/share/doc/maint-guide/copyright)"),
    ]
    for file, source, pages, layout, package, version, licence in pdfs:
        count = excerpt_pdf(source, docs / file, pages)
        text = pdftotext(docs / file, layout=layout not in ("two-column", "three-column"))
        (plain / (file + ".txt")).write_text(clean_pdf_text(text))
        how = "copied as it is" if pages is None else f"pages {pages[0]}-{pages[-1]} of the source's {_count(source)}"
        made.append(Made(file, "pdf", layout, package, version, str(source).replace(str(src), "<sources>"), licence,
                         f"{how} ({count} pages)"))
    # scanned: pages rasterised to images, no text layer; plain = the text layer of the same pages
    scans = [
        ("vicksburg-scan.pdf", pypdf / "Seige_of_Vicksburg_Sample_OCR.pdf", [1, 2, 3], "pypdf (sdist 7.1.1, "
         "resources/)", "7.1.1", "public domain (a scan of a 19th-century book, The Siege of Vicksburg, pp. 49-51; pypdf's test resource, "
         "BSD-3-Clause project)", "a real scan: its page images re-rendered at 150 dpi greyscale into a PDF of "
         "images only (the source's OCR text layer dropped)"),
        ("debian-faq-scan.pdf", src / "src/debian-faq.pdf", [13, 14], "debian-faq", dpkg_version("debian-faq"),
         "permissive (SPI: verbatim and modified copies allowed with the notice)",
         "text pages rasterised at 150 dpi greyscale into a PDF of images only (no real scan with a clear licence "
         "was at hand)"),
        ("fhs-var-scan.pdf", src / "src/fhs.pdf", [37, 38], "debian-policy", dpkg_version("debian-policy"),
         "FHS licence (permissive)", "text pages (with tables) rasterised at 150 dpi greyscale into a PDF of "
         "images only (no real scan with a clear licence was at hand)"),
        ("ltnews22-scan.pdf", tex / "ltnews22.pdf", [1], "texlive-latex-base-doc", "2022.20230122-3", lppl,
         "a two-column text page rasterised at 150 dpi greyscale into a PDF of images only (no real scan with a "
         "clear licence was at hand)"),
    ]
    for file, source, pages, package, version, licence, how in scans:
        image_only_pdf(source, docs / file, pages)
        text = pdftotext(source, pages, raw=_raw(source), layout=file in ("fhs-var-scan.pdf", "debian-faq-scan.pdf"))
        (plain / (file + ".txt")).write_text(clean_pdf_text(text))
        made.append(Made(file, "pdf", "scanned", package, version, str(source).replace(str(src), "<sources>"),
                         licence, f"{how}; pages {', '.join(map(str, pages))} of the source's {_count(source)}"))
    made += build_office(src, docs, plain)
    made += build_table_decks(docs, plain)
    return made


def build_office(src: Path, docs: Path, plain: Path) -> list[Made]:
    made: list[Made] = []
    pyver = dpkg_version("python3.11-doc")
    # DOCX: Python HOWTOs rendered with python-docx (headings, paragraphs, bullets, code, tables)
    for file, page, sections, title in [
        ("pyhowto-logging.docx", "howto/logging.html", 3, "Logging HOWTO"),
        ("pyhowto-regex.docx", "howto/regex.html", 3, "Regular Expression HOWTO"),
        ("pyhowto-urllib2.docx", "howto/urllib2.html", 4, "HOWTO Fetch Internet Resources Using The urllib Package"),
        ("pyhowto-argparse.docx", "howto/argparse.html", 3, "Argparse Tutorial"),
        ("pyhowto-enum.docx", "howto/enum.html", 2, "Enum HOWTO"),
    ]:
        blocks = html_blocks(PYDOC / page, sections=sections)
        render_docx(blocks, docs / file, title)
        (plain / (file + ".txt")).write_text(blocks_text(blocks))
        made.append(Made(file, "docx", "document", "python3.11-doc", pyver, f"/usr/share/doc/python3.11/html/{page}",
                         PSF, f"the page's text rendered to DOCX with python-docx (headings, paragraphs, bullets, "
                         f"code, tables), up to its {sections + 1}th second-level section (the rest cut)"))
    # PPTX: "What's New" pages rendered with python-pptx, a slide per section
    for file, page, title in [
        ("pywhatsnew-3.4.pptx", "whatsnew/3.4.html", "What's New In Python 3.4"),
        ("pywhatsnew-3.5.pptx", "whatsnew/3.5.html", "What's New In Python 3.5"),
        ("pywhatsnew-3.6.pptx", "whatsnew/3.6.html", "What's New In Python 3.6"),
        ("pywhatsnew-3.7.pptx", "whatsnew/3.7.html", "What's New In Python 3.7"),
        ("pywhatsnew-3.10.pptx", "whatsnew/3.10.html", "What's New In Python 3.10"),
    ]:
        blocks = html_blocks(PYDOC / page, sections=3)
        slides = render_pptx(blocks, docs / file, title)
        (plain / (file + ".txt")).write_text("\f".join(slides) + "\n")
        made.append(Made(file, "pptx", "slides", "python3.11-doc", pyver, f"/usr/share/doc/python3.11/html/{page}",
                         PSF, "the page's first sections rendered to PPTX with python-pptx: a title slide, then a "
                         "slide per section (heading as title; each paragraph's first sentence and each list item "
                         "as bullets, at most 6; a table as a table; the rest as speaker notes), at most 12 slides"))
    # XLSX: tables of the Python library reference rendered with openpyxl
    codecs = [b[1] for b in html_blocks(PYDOC / "library/codecs.html") if b[0] == "table"]
    encodings = next(t for t in codecs if t[0] == ["Codec", "Aliases", "Languages"])
    transforms = next(t for t in codecs if t[0] == ["Codec", "Aliases", "Meaning", "Encoder / decoder"])
    logging_tables = [b[1] for b in html_blocks(PYDOC / "library/logging.html") if b[0] == "table"]
    for file, sheets, page, title in [
        ("pylib-codecs-encodings.xlsx", {"Standard Encodings": encodings, "Binary Transforms": transforms}, "library/codecs.html",
         "Standard Encodings"),
        ("pylib-logging-tables.xlsx", {"Levels": logging_tables[0], "LogRecord attributes": logging_tables[1]},
         "library/logging.html", "logging levels and LogRecord attributes"),
    ]:
        render_xlsx(sheets, docs / file, title)
        (plain / (file + ".txt")).write_text(sheet_text(sheets))
        made.append(Made(file, "xlsx", "sheet", "python3.11-doc", pyver, f"/usr/share/doc/python3.11/html/{page}",
                         PSF, "the page's HTML table(s) written to a workbook with openpyxl, a sheet per table, "
                         "the first row the header"))
    # CSV/TSV: real data files
    for file, source, package, licence, how in [
        ("debian.csv", Path("/usr/share/distro-info/debian.csv"), "distro-info-data", "ISC", "copied as it is"),
        ("ubuntu.csv", Path("/usr/share/distro-info/ubuntu.csv"), "distro-info-data", "ISC", "copied as it is"),
        ("zone1970.tsv", Path("/usr/share/zoneinfo/zone1970.tab"), "tzdata", "public domain (the file says so)",
         "comment lines dropped and a header row added from the comments' column descriptions; renamed .tsv"),
    ]:
        if file.endswith(".tsv"):
            rows = [line.split("\t") for line in source.read_text().splitlines() if not line.startswith("#")]
            rows.insert(0, ["countries", "coordinates", "TZ", "comments"])
            (docs / file).write_text("\n".join("\t".join(r) for r in rows) + "\n")
        else:
            shutil.copyfile(source, docs / file)
            rows = list(csv.reader(io.StringIO(source.read_text())))
        (plain / (file + ".txt")).write_text(sheet_text({file: rows}))
        made.append(Made(file, file.rsplit(".", 1)[1], "sheet", package, dpkg_version(package), str(source), licence,
                         how))
    # EPUB: Debian's own e-books
    for file, source, package in [
        ("project-history.en.epub", Path("/usr/share/doc/debian-history/docs/project-history.en.epub"),
         "debian-history"),
        ("developers-reference.epub", Path("/usr/share/developers-reference/developers-reference.epub"),
         "developers-reference"),
        ("policy.epub", Path("/usr/share/doc/debian-policy/policy.epub"), "debian-policy"),
    ]:
        shutil.copyfile(source, docs / file)
        (plain / (file + ".txt")).write_text(epub_text(source))
        licence = {"debian-history": "GPL-2+", "developers-reference": "GPL-2",
                   "debian-policy": "GPL-2+"}[package]
        made.append(Made(file, "epub", "book", package, dpkg_version(package), str(source),
                         f"{licence} (recorded as such; /usr/share/doc/{package}/copyright)", "copied as it is"))
    return made


def build_table_decks(docs: Path, plain: Path) -> list[Made]:
    """Two decks added later (the five above have speaker notes but no table): the Curses HOWTO (two
    tables) and the "Faster CPython" and bytecode sections of What's New In Python 3.11 (two tables),
    split at every heading down to h4 there (its table sits under an h4)."""
    made: list[Made] = []
    pyver = dpkg_version("python3.11-doc")
    whatsnew = html_blocks(PYDOC / "whatsnew/3.11.html")
    start = whatsnew.index(("h2", "Faster CPython"))
    for file, page, blocks, split_at, title, which in [
        ("pyhowto-curses.pptx", "howto/curses.html", html_blocks(PYDOC / "howto/curses.html"), ("h2", "h3"),
         "Curses Programming with Python", "the page's sections"),
        ("pywhatsnew-3.11-faster.pptx", "whatsnew/3.11.html", whatsnew[start:], ("h2", "h3", "h4"),
         "What's New In Python 3.11: Faster CPython", "the page's sections from \"Faster CPython\" on"),
    ]:
        slides = render_pptx(blocks, docs / file, title, split_at=split_at)
        (plain / (file + ".txt")).write_text("\f".join(slides) + "\n")
        made.append(Made(file, "pptx", "slides", "python3.11-doc", pyver, f"/usr/share/doc/python3.11/html/{page}",
                         PSF, f"{which} rendered to PPTX with python-pptx: a title slide, then a slide per section "
                         f"(heading, {'/'.join(split_at)}, as title; each paragraph's first sentence and each list "
                         "item as bullets, at most 6; the rest as speaker notes); a section's table as a slide of "
                         "its own after the text before it, the text after it as its speaker notes; at most 12 "
                         "slides"))
    return made


def _count(path: Path) -> int:
    import pypdfium2 as pdfium

    return len(pdfium.PdfDocument(_raw(path)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table-decks", action="store_true",
                        help="write only the two decks with tables (added later) under --out")
    parser.add_argument("--clean-plain", action="store_true",
                        help="clean the PDFs' plain texts under --out/plain once (running lines, hyphenation, "
                             "table rows apart; how the committed ones, first written raw, were cleaned)")
    args = parser.parse_args()
    if args.clean_plain:
        made = []
        for path in sorted((args.out / "plain").glob("*.pdf.txt")):
            path.write_text(clean_pdf_text(path.read_text()))
    elif args.table_decks:
        for folder in ("documents", "plain"):
            (args.out / folder).mkdir(parents=True, exist_ok=True)
        made = build_table_decks(args.out / "documents", args.out / "plain")
    elif args.sources is None:
        parser.error("--sources is required (but for --table-decks)")
    else:
        made = build(args.sources, args.out)
    print(json.dumps([m.__dict__ for m in made], indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
