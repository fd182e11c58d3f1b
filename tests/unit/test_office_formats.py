"""Office files and e-books through their readers: structure (headings, items, table rows as
"header: value") and position (slide, sheet and row, chapter), on real text: the Debian Policy
Manual's section 2.5 and the FHS's /etc section, written into each kind by the kind's own writer
(python-docx, python-pptx, openpyxl) or, for ODT and EPUB, as the zip of XML their standards define."""

from __future__ import annotations

import io
import zipfile

import pytest

from services.cleaner.handler import read_content
from shared.contract.errors import InvalidInput
from shared.formats.passages import lay_out, position_label
from shared.formats.registry import Limits

pytestmark = pytest.mark.unit

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

PRIORITY = ("Each package must have a priority value, which is set in the metadata for the Debian archive and "
            "is also included in the package's control files.")
PRIORITIES = [("required", "Packages which are necessary for the proper functioning of the system."),
              ("important", "Important programs, including those which one would expect to find on any "
                            "Unix-like system."),
              ("standard", "These packages provide a reasonably small but not too limited character-mode system.")]
ETC = "The /etc hierarchy contains configuration files. A configuration file is a local file used to control " \
      "the operation of a program; it must be static and cannot be an executable binary."


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = "Debian Policy: priorities"
    document.add_heading("2.5 Priorities", level=1)
    document.add_paragraph(PRIORITY)
    document.add_paragraph("required", style="List Bullet")
    document.add_paragraph("optional", style="List Bullet")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Priority", "Meaning"
    for name, meaning in PRIORITIES:
        cells = table.add_row().cells
        cells[0].text, cells[1].text = name, meaning
    buffer = io.BytesIO()
    document.save(buffer)
    # a footnote part, as Word writes one (python-docx writes none)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        target.writestr("word/footnotes.xml", (
            '<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
            '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:t>----</w:t></w:r></w:p></w:footnote>'
            '<w:footnote w:id="1"><w:p><w:r><w:t>The extra priority is deprecated; use optional instead.'
            "</w:t></w:r></w:p></w:footnote></w:footnotes>"))
    return out.getvalue()


def test_a_docx_keeps_its_headings_items_table_rows_and_footnotes():
    reading = read_content(_docx(), DOCX, "file:///policy.docx")
    kinds = [(p.kind, p.text) for p in reading.passages]
    assert reading.title == "Debian Policy: priorities"
    assert ("heading", "2.5 Priorities") in kinds and ("paragraph", PRIORITY) in kinds
    assert ("item", "- required") in kinds and ("item", "- optional") in kinds
    assert ("row", f"Priority: important; Meaning: {PRIORITIES[1][1]}") in kinds
    assert ("paragraph", "Footnote: The extra priority is deprecated; use optional instead.") in kinds
    assert "----" not in lay_out(reading.passages)[0]


def _pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Priorities"
    body = first.placeholders[1].text_frame
    body.text = PRIORITY
    point = body.add_paragraph()
    point.text, point.level = "optional is the default", 1
    first.notes_slide.notes_text_frame.text = "Mention that extra is deprecated."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "The priorities"
    table = second.shapes.add_table(len(PRIORITIES) + 1, 2, Inches(1), Inches(1.5), Inches(8), Inches(3)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Priority", "Meaning"
    for row, (name, meaning) in enumerate(PRIORITIES, start=1):
        table.cell(row, 0).text, table.cell(row, 1).text = name, meaning
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def test_a_pptx_reads_slide_by_slide_with_titles_tables_and_speaker_notes():
    reading = read_content(_pptx(), PPTX, "file:///deck.pptx")
    by_slide = {}
    for p in reading.passages:
        by_slide.setdefault(p.position["slide"], []).append((p.kind, p.text))
    assert by_slide[1][0] == ("heading", "Priorities") and ("paragraph", PRIORITY) in by_slide[1]
    assert ("item", "- optional is the default") in by_slide[1]
    assert ("paragraph", "Speaker notes: Mention that extra is deprecated.") in by_slide[1]
    assert ("row", f"Priority: standard; Meaning: {PRIORITIES[2][1]}") in by_slide[2]
    assert reading.title == "Priorities"


def test_a_spreadsheet_reads_row_by_row_as_header_value_at_its_sheet_and_row():
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Priorities"
    sheet.append(["Priority", "Meaning", "Order"])
    for n, (name, meaning) in enumerate(PRIORITIES, start=1):
        sheet.append([name, meaning, n])
    other = workbook.create_sheet("FHS")
    other.append(["Directory", "Holds"])
    other.append(["/etc", ETC])
    buffer = io.BytesIO()
    workbook.save(buffer)
    reading = read_content(buffer.getvalue(), XLSX, "file:///book.xlsx")
    rows = [(p.text, p.position) for p in reading.passages if p.kind == "row"]
    assert rows[0] == (f"Priority: required; Meaning: {PRIORITIES[0][1]}; Order: 1", {"sheet": "Priorities", "row": 2})
    assert rows[-1] == (f"Directory: /etc; Holds: {ETC}", {"sheet": "FHS", "row": 2})
    assert position_label([p for _, p in rows[:3]]) == "Priorities, rows 2–4"


@pytest.mark.parametrize(("media", "separator"), [("text/csv", ","), ("text/tab-separated-values", "\t")])
def test_csv_and_tsv_rows_read_as_header_value(media, separator):
    lines = [separator.join(["Priority", "Meaning"])] + [separator.join([n, f'"{m}"' if separator == "," else m])
                                                        for n, m in PRIORITIES]
    reading = read_content("\n".join(lines).encode(), media, "file:///priorities.csv")
    rows = [p for p in reading.passages if p.kind == "row"]
    assert rows[1].text == f"Priority: important; Meaning: {PRIORITIES[1][1]}" and rows[1].position["row"] == 3
    assert position_label([rows[1].position]) == "row 3"


def test_a_csv_cell_over_the_field_limit_is_refused_naming_its_line_and_the_limit():
    """It was refused as "not valid delimited text (field larger than field limit (1048576))": no line, nor what
    the number limits. A quote left open on line 3 makes the rest of the file one cell."""
    from shared.formats.sheets import read_csv

    raw = b"Priority,Meaning\nrequired,essential\nimportant,\"" + b"runs on " * 140_000 + b"\n"
    with pytest.raises(InvalidInput) as refused:
        read_csv(raw, "text/csv", "file:///priorities.csv", Limits())
    message = str(refused.value)
    assert message.startswith("the file is not valid delimited text (line 3: field larger than field limit"), message
    assert "one cell holds more than 1,048,576 characters (a quote left open" in message, message


@pytest.mark.parametrize("separator, reader", [(b",", "read_csv"), (b"\t", "read_tsv")])
def test_a_cell_over_the_field_limit_spanning_lines_is_named_by_the_line_its_record_starts_on(separator, reader):
    """A quoted cell opened on line 3 and running on over 150,000 lines was named by the line csv stopped on
    ("line 131075: field larger than field limit"), deep inside the cell, not where the record holding it starts:
    the quote to look for is on line 3."""
    from shared.formats import sheets

    raw = (b"Priority" + separator + b"Meaning\nrequired" + separator + b"essential\nimportant" + separator
           + b'"' + b"runs on\n" * 150_000)
    with pytest.raises(InvalidInput) as refused:
        getattr(sheets, reader)(raw, "text/csv", "file:///priorities.csv", Limits())
    message = str(refused.value)
    assert message.startswith("the file is not valid delimited text (the record starting on line 3, read to line "
                              "13107"), message
    assert "one cell holds more than 1,048,576 characters" in message, message


def test_a_sheet_of_a_header_row_alone_has_nothing_to_read():
    # its heading alone was a 4-character document ("Rows"), which a tiny document's one chunk would index
    assert read_content(b"Priority,Meaning\n", "text/csv", "file:///empty.csv").passages == []


def _zip(parts: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_an_epub_reads_its_chapters_in_spine_order():
    chapter = ('<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title></head><body><h1>{0}</h1>'
               "<p>{1}</p><p>{1}</p></body></html>")
    book = _zip({
        "mimetype": "application/epub+zip",
        "META-INF/container.xml": '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                                  '<rootfile full-path="OEBPS/content.opf"/></rootfiles></container>',
        "OEBPS/content.opf": '<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                             "<metadata><dc:title>Filesystem Hierarchy Standard</dc:title></metadata><manifest>"
                             '<item id="b" href="text/etc.xhtml"/><item id="a" href="text/priorities.xhtml"/>'
                             '</manifest><spine><itemref idref="a"/><itemref idref="b"/></spine></package>',
        "OEBPS/text/priorities.xhtml": chapter.format("Priorities", PRIORITY),
        "OEBPS/text/etc.xhtml": chapter.format("The /etc hierarchy", ETC),
    })
    reading = read_content(book, "application/epub+zip", "file:///fhs.epub")
    assert reading.title == "Filesystem Hierarchy Standard"
    assert [p.position for p in reading.passages] == [{"chapter": 1}, {"chapter": 2}]
    assert "Debian archive" in reading.passages[0].text and "/etc hierarchy" in reading.passages[1].text


def test_an_odt_keeps_headings_lists_and_tables():
    office = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
    text = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
    table = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
    rows = "".join(f"<table:table-row><table:table-cell><text:p>{n}</text:p></table:table-cell><table:table-cell>"
                   f"<text:p>{m}</text:p></table:table-cell></table:table-row>" for n, m in
                   [("Priority", "Meaning"), *PRIORITIES])
    content = (f'<office:document-content xmlns:office="{office}" xmlns:text="{text}" xmlns:table="{table}">'
               "<office:body><office:text><text:h>Priorities</text:h>"
               f"<text:p>{PRIORITY}</text:p><text:list><text:list-item><text:p>optional</text:p></text:list-item>"
               f"</text:list><table:table>{rows}</table:table></office:text></office:body></office:document-content>")
    document = _zip({"mimetype": "application/vnd.oasis.opendocument.text", "content.xml": content,
                     "meta.xml": f'<office:document-meta xmlns:office="{office}" '
                                 'xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta>'
                                 "<dc:title>Policy excerpt</dc:title></office:meta></office:document-meta>"})
    reading = read_content(document, "application/vnd.oasis.opendocument.text", "file:///p.odt")
    kinds = [(p.kind, p.text) for p in reading.passages]
    assert reading.title == "Policy excerpt"
    assert kinds[:3] == [("heading", "Priorities"), ("paragraph", PRIORITY), ("item", "- optional")]
    assert ("row", f"Priority: required; Meaning: {PRIORITIES[0][1]}") in kinds


@pytest.mark.parametrize(("media", "modern"), [("application/msword", ".docx"),
                                                ("application/vnd.ms-powerpoint", ".pptx"),
                                                ("application/vnd.ms-excel", ".xlsx")])
def test_legacy_office_files_are_refused_by_name_with_the_reason(media, modern):
    with pytest.raises(InvalidInput, match=f"legacy binary Office file.*save it as \\{modern}"):
        read_content(b"\xd0\xcf\x11\xe0", media, "file:///old")


def test_an_ole_file_under_a_modern_name_is_named_for_what_it_is():
    """A .doc saved as .docx, or a password-protected .docx (Office encrypts the zip into an OLE file), was
    refused as 'not a valid zip container (File is not a zip file); it is damaged or not what its name says'
    (newcomer15): neither is damaged, and the one thing to do differs."""
    from shared.formats.containers import open_zip
    from shared.formats.registry import Limits
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504
    with pytest.raises(InvalidInput, match="Word file is a legacy binary Office file \\(OLE\\) under a modern name, "
                       "which ragbus does not read; save it as \\.docx and ingest that"):  # as a .doc is told
        open_zip(ole, Limits(), "Word")
    encrypted = ole + b"".join(_ole_entry(name, kind) for name, kind in (
        ("Root Entry", 5), ("EncryptionInfo", 2), ("EncryptedPackage", 2), ("\x06DataSpaces", 1)))
    with pytest.raises(InvalidInput, match="Excel file is password-protected .*save a copy without the password"):
        open_zip(encrypted, Limits(), "Excel")
    with pytest.raises(InvalidInput, match="not a valid zip container"):  # anything else as before
        open_zip(b"PK\x03\x04 cut short", Limits(), "Word")


def _ole_entry(name: str, kind: int) -> bytes:
    """An OLE directory entry: its name (UTF-16, NUL-ended, in 64 bytes), the name's length, its type (2: stream)."""
    named = (name + "\0").encode("utf-16-le")
    return (named.ljust(64, b"\x00") + len(named).to_bytes(2, "little") + bytes([kind])).ljust(128, b"\x00")


def test_an_ole_file_is_password_protected_only_by_its_directory_entry_and_named_by_its_container_kind():
    """'EncryptedPackage' was looked for anywhere in the file: a legacy .doc whose text mentions it (UTF-16, as
    Word keeps text) was called password-protected; and an OLE file named .epub or .odt was told it was 'encrypted
    by Office' or to be saved 'in the modern format' (reviewer)."""
    from shared.formats.containers import open_zip
    from shared.formats.registry import Limits
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1".ljust(512, b"\x00")
    text = "Office keeps the encrypted zip in a stream named EncryptedPackage.".encode("utf-16-le")
    legacy = header + _ole_entry("Root Entry", 5) + _ole_entry("WordDocument", 2) + text.ljust(1024, b"\x00")
    assert legacy.find("EncryptedPackage".encode("utf-16-le")) >= 0
    with pytest.raises(InvalidInput, match="Word file is a legacy binary Office file"):
        open_zip(legacy, Limits(), "Word")
    encrypted = header + _ole_entry("Root Entry", 5) + _ole_entry("EncryptedPackage", 2)
    for what in ("EPUB", "OpenDocument"):
        with pytest.raises(InvalidInput, match=f"the {what} file is a binary compound file .OLE.*not a zip container "
                           f"as {what} files are") as refused:
            open_zip(encrypted, Limits(), what)
        assert "by Office" not in str(refused.value) and "modern format" not in str(refused.value)


def test_a_spreadsheet_with_a_cell_in_its_far_corner_reads_its_cells_at_once():
    """openpyxl pads a read-only sheet's rows to the size its farthest cell (or its <dimension>) sets, and
    fills each missing row between: a 6 kB workbook with one cell at XFD1048576 was refused after 120 s
    (RAGBUS_PARSE_SECONDS), a million rows of 16,384 empty cells built and thrown away."""
    import time

    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["Valve", "Torque"])
    sheet.append(["inlet valve", "12 newton metres"])
    sheet.cell(row=1048576, column=16384, value="far corner note")
    buffer = io.BytesIO()
    workbook.save(buffer)
    started = time.monotonic()
    reading = read_content(buffer.getvalue(), XLSX, "file:///valves.xlsx")
    assert time.monotonic() - started < 30
    assert "Valve: inlet valve; Torque: 12 newton metres" in [p.text for p in reading.passages if p.kind == "row"]
    assert any(p.text == "far corner note" and p.position["row"] == 1048576 for p in reading.passages)


def _without_core_properties(raw: bytes) -> bytes:
    """The package without docProps/core.xml and the relationship naming it, as some generators write one."""
    import re

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "docProps/core.xml":
                continue
            if item.filename == "_rels/.rels":
                data = re.sub(rb'<Relationship [^>]*core-properties"[^>]*/>', b"", data)
            target.writestr(item, data)
    return out.getvalue()


@pytest.mark.parametrize("make,media,heading", [(_docx, DOCX, "2.5 Priorities"), (_pptx, PPTX, "Priorities")])
def test_a_package_without_core_properties_is_titled_by_its_heading_not_its_library_s_placeholder(make, media, heading):
    # such a .docx was titled 'Word Document' and a .pptx 'PowerPoint Presentation' (newcomer17): python-docx and
    # python-pptx make up core properties for a package without them, and every such file was cited so
    reading = read_content(_without_core_properties(make()), media, "file:///notes.docx")
    assert reading.title == heading
    assert read_content(make(), media, "file:///notes.docx").title  # a title the file states is kept
