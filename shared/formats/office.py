"""Word (.docx, python-docx), PowerPoint (.pptx, python-pptx), OpenDocument text (.odt) and EPUB.

Each container is checked against the zip bounds first (:mod:`shared.formats.containers`).
Structure is kept: a Word heading style or an ODT ``text:h`` is a heading, a numbered or bulleted
paragraph a list item, a table row one "header: value; ..." row; footnotes follow the body.
A slide is its title, its text, its tables and its speaker notes, all at position {"slide": n};
an EPUB's chapters come in spine order at {"chapter": n}.
"""

from __future__ import annotations

import io
import posixpath
from urllib.parse import unquote

from shared.contract.errors import InvalidInput
from shared.formats.containers import open_zip, read_ooxml, read_xml
from shared.formats.passages import Passage, Reading, labelled_row
from shared.formats.registry import Limits


def table_rows(rows: list[list[str]]) -> list[str]:
    """A table as text rows: the first row names the columns, each later row reads
    "column: value; column: value" (a cell without a column name stands as it is)."""
    rows = [[" ".join(cell.split()) for cell in row] for row in rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return []
    header, out = rows[0], []
    if len(rows) == 1:
        return [" | ".join(c for c in header if c)]
    for row in rows[1:]:
        text = labelled_row(header, row)
        if text:
            out.append(text)
    return out


# ------------------------------------------------------------------ Word


#: how an OOXML package's relationships (``_rels/.rels``) name its core properties, which hold its title
_CORE_PROPERTIES = "/metadata/core-properties"


def _stated_title(archive, document) -> str:
    """The title ``document``'s core properties state; "" for a package without that part, for which python-docx
    and python-pptx make up one ('Word Document', 'PowerPoint Presentation') that every such file was cited by."""
    relationships = read_xml(archive, "_rels/.rels")
    if relationships is None or not any((r.get("Type") or "").endswith(_CORE_PROPERTIES)
                                        for r in relationships.iter("{*}Relationship")):
        return ""
    return (document.core_properties.title or "").strip()


def read_docx(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return read_ooxml(raw, limits, "Word", lambda archive: _docx_reading(raw, archive))


def _docx_reading(raw: bytes, archive) -> Reading:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(raw))
    reading = Reading(title=_stated_title(archive, document))
    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(child, document)
            text = paragraph.text.strip()
            if not text:
                continue
            style = (paragraph.style.name if paragraph.style is not None else "") or ""
            if style == "Title" or style.startswith("Heading"):
                reading.passages.append(Passage(text, "heading"))
                reading.title = reading.title or text
            elif style.startswith("List") or child.find(".//{*}numPr") is not None:
                reading.passages.append(Passage(f"- {text}", "item"))
            else:
                reading.passages.append(Passage(text))
        elif tag == "tbl":
            table = Table(child, document)
            rows = [[cell.text for cell in row.cells] for row in table.rows]
            reading.passages.extend(Passage(row, "row") for row in table_rows(rows))
    reading.passages.extend(_footnotes(archive))
    return reading


def _footnotes(archive) -> list[Passage]:
    root = read_xml(archive, "word/footnotes.xml")
    if root is None:
        return []
    out = []
    for note in root.iter("{*}footnote"):
        if note.get("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}type") in ("separator",
                                                                                              "continuationSeparator"):
            continue
        text = " ".join("".join(t.text or "" for t in note.iter("{*}t")).split())
        if text:
            out.append(Passage(f"Footnote: {text}"))
    return out


# ------------------------------------------------------------ PowerPoint


def read_pptx(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    return read_ooxml(raw, limits, "PowerPoint", lambda archive: _pptx_reading(raw, archive, limits))


def _pptx_reading(raw: bytes, archive, limits: Limits) -> Reading:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(raw))
    reading = Reading(title=_stated_title(archive, deck))
    slides = list(deck.slides)
    if len(slides) > limits.max_pages:
        reading.skip(len(slides) - limits.max_pages, f"slides past the first {limits.max_pages} (RAGBUS_MAX_PAGES) were cut")
    for number, slide in enumerate(slides[:limits.max_pages], start=1):
        where = {"slide": number}
        title_shape = slide.shapes.title
        title = " ".join((title_shape.text_frame.text if title_shape is not None and title_shape.has_text_frame
                          else "").split())
        if title:
            reading.passages.append(Passage(title, "heading", where))
            reading.title = reading.title or title
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            reading.passages.extend(_shape_passages(shape, where))
        if slide.has_notes_slide:
            notes = " ".join(slide.notes_slide.notes_text_frame.text.split()) if \
                slide.notes_slide.notes_text_frame is not None else ""
            if notes:
                reading.passages.append(Passage(f"Speaker notes: {notes}", "paragraph", where))
    return reading


def _shape_passages(shape, where: dict) -> list[Passage]:
    out: list[Passage] = []
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        return [Passage(row, "row", where) for row in table_rows(rows)]
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):  # a group
        for inner in shape.shapes:
            out.extend(_shape_passages(inner, where))
        return out
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return out
    for paragraph in shape.text_frame.paragraphs:
        text = " ".join("".join(run.text for run in paragraph.runs).split())
        if text:
            out.append(Passage(f"- {text}" if paragraph.level > 0 else text,
                               "item" if paragraph.level > 0 else "paragraph", where))
    return out


# ----------------------------------------------------------- OpenDocument

_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"


def _odf_text(node) -> str:
    return " ".join("".join(node.itertext()).split())


def read_odt(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    archive = open_zip(raw, limits, "OpenDocument")
    content = read_xml(archive, "content.xml")
    if content is None:
        raise InvalidInput("the OpenDocument file has no content.xml; it is damaged or not an .odt")
    reading = Reading()
    meta = read_xml(archive, "meta.xml")
    if meta is not None:
        reading.title = next((_odf_text(t) for t in meta.iter("{http://purl.org/dc/elements/1.1/}title")), "")
    body = content.find(".//{urn:oasis:names:tc:opendocument:xmlns:office:1.0}text")
    if body is None:
        return reading
    _odf_blocks(body, reading.passages, in_list=False)
    if not reading.title:
        reading.title = next((p.text for p in reading.passages if p.kind == "heading"), "")
    return reading


def _odf_blocks(node, out: list[Passage], in_list: bool) -> None:
    for child in node:
        if not isinstance(child.tag, str):
            continue
        tag = child.tag
        if tag == f"{{{_ODF_TEXT}}}h":
            text = _odf_text(child)
            if text:
                out.append(Passage(text, "heading"))
        elif tag == f"{{{_ODF_TEXT}}}p":
            text = _odf_text(child)
            if text:
                out.append(Passage(f"- {text}", "item") if in_list else Passage(text))
        elif tag == f"{{{_ODF_TEXT}}}list":
            _odf_blocks(child, out, in_list=True)
        elif tag == f"{{{_ODF_TABLE}}}table":
            rows = [[_odf_text(cell) for cell in row.iter(f"{{{_ODF_TABLE}}}table-cell")]
                    for row in child.iter(f"{{{_ODF_TABLE}}}table-row")]
            out.extend(Passage(row, "row") for row in table_rows(rows))
        else:
            _odf_blocks(child, out, in_list)


# ------------------------------------------------------------------- EPUB


def read_epub(raw: bytes, content_type: str, url: str, limits: Limits) -> Reading:
    from shared.formats.text import decode_bytes, extract_html

    archive = open_zip(raw, limits, "EPUB")
    container = read_xml(archive, "META-INF/container.xml")
    rootfile = next(iter(container.iter("{*}rootfile")), None) if container is not None else None
    if rootfile is None or not rootfile.get("full-path"):
        raise InvalidInput("the EPUB file has no META-INF/container.xml naming its package; it is damaged")
    opf_path = rootfile.get("full-path")
    package = read_xml(archive, opf_path)
    if package is None:
        raise InvalidInput(f"the EPUB file's package {opf_path[:80]!r} is missing")
    base = posixpath.dirname(opf_path)
    manifest = {item.get("id"): item.get("href") for item in package.iter("{*}item")}
    reading = Reading(title=next((" ".join((t.text or "").split()) for t in package.iter("{*}title")), ""))
    chapters = [manifest.get(ref.get("idref")) for ref in package.iter("{*}itemref")]
    chapters = [c for c in chapters if c]
    if len(chapters) > limits.max_pages:
        reading.skip(len(chapters) - limits.max_pages, f"chapters past the first {limits.max_pages} were cut")
    missing = []  # listed by the spine, not held by the file: named, not skipped without a word
    unreadable = []  # held but refused by the HTML reader (nested past the parser): the rest of the book still reads
    for number, href in enumerate(chapters[:limits.max_pages], start=1):
        name = posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))
        try:
            data = archive.read(name)
        except KeyError:
            missing.append(name)
            continue
        try:
            chapter = extract_html(decode_bytes(data, None, html=True), "")
        except InvalidInput as exc:  # one chapter refused the whole book as "the HTML page ..." (newcomer16)
            unreadable.append(f"chapter {number} ({name[:80]!r}): {str(exc).replace('the HTML page ', 'it ', 1)}")
            continue
        if chapter.body.strip():
            reading.passages.append(Passage(chapter.body, "body", {"chapter": number}))
    named = ", ".join(repr(name[:80]) for name in missing[:3]) + (f" and {len(missing) - 3} more"
                                                                  if len(missing) > 3 else "")
    refused = (unreadable[0] + (f"; {len(unreadable) - 1} more could not be read" if len(unreadable) > 1 else "")
               if unreadable else "")
    listed = len(chapters[:limits.max_pages])
    if not reading.passages and (missing or unreadable):  # each reason named, as a chapter skipped beside others is
        empty = listed - len(missing) - len(unreadable)
        lost = ("every chapter its spine lists is" if len(missing) == listed else
                f"{len(missing)} of the {listed} chapters its spine lists {'is' if len(missing) == 1 else 'are'}")
        raise InvalidInput("the EPUB file has no chapter that reads: " + "; ".join([
            *([f"{lost} missing, so it is damaged ({named}): save it again from the program that made it"]
              if missing else []),
            *([refused] if refused else []),
            *([f"{empty} {'holds' if empty == 1 else 'hold'} no text"] if empty else [])]))
    if missing:
        reading.skip(len(missing), f"chapters the book lists but does not hold, so it is damaged: {named}")
    if unreadable:
        reading.skip(len(unreadable), f"chapters that could not be read: {refused}")
    return reading
