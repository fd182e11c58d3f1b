"""A damaged Office file is refused with its damage named: the part that is missing, cut short or
not XML, or the reference that points at nothing (not a parser's KeyError or AttributeError, and
not "no main text"). The readers are called directly: the damage is found inside them, and the
cleaner's sandbox passes a refusal's text on as it is (tests/hostile/test_bad_files.py)."""

from __future__ import annotations

import io
import zipfile

import pytest

from shared.contract.errors import InvalidInput
from shared.formats.registry import Limits, by_suffix

pytestmark = pytest.mark.unit

TEXT = "Each package must have a priority value, which is set in the metadata for the Debian archive."


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(TEXT)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _pptx() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Priorities"
    slide.placeholders[1].text_frame.text = TEXT
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active.append(["Priority", "Meaning"])
    workbook.active.append(["required", TEXT])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


MADE = {".docx": (_docx, "Word", "word/document.xml"), ".pptx": (_pptx, "PowerPoint", "ppt/slides/slide1.xml"),
        ".xlsx": (_xlsx, "Excel", "xl/worksheets/sheet1.xml")}


def _rewritten(raw: bytes, part: str, data: bytes | None) -> bytes:
    """``raw`` with ``part`` replaced by ``data`` (left out when None)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            if item.filename != part:
                target.writestr(item, source.read(item.filename))
            elif data is not None:
                target.writestr(item, data)
    return out.getvalue()


def _read(suffix: str, raw: bytes):
    return by_suffix(suffix).load()(raw, "", f"file:///damaged{suffix}", Limits())


@pytest.mark.parametrize("suffix", sorted(MADE))
def test_an_office_file_whose_main_part_is_cut_short_names_the_part(suffix):
    make, what, main = MADE[suffix]
    raw = make()
    assert _read(suffix, raw).passages  # whole, it reads
    cut = zipfile.ZipFile(io.BytesIO(raw)).read(main)
    with pytest.raises(InvalidInput) as refused:
        _read(suffix, _rewritten(raw, main, cut[: len(cut) // 2]))
    message = str(refused.value)
    assert message.startswith(f"the {what} file is damaged: its part '{main}' is not well-formed XML"), message


@pytest.mark.parametrize("suffix", sorted(MADE))
def test_an_office_file_missing_a_part_it_refers_to_names_the_part(suffix):
    make, what, main = MADE[suffix]
    with pytest.raises(InvalidInput) as refused:
        _read(suffix, _rewritten(make(), main, None))
    message = str(refused.value)
    assert message.startswith(f"the {what} file is damaged: "), message
    assert f"refers to '{main}', which the file does not hold" in message, message


@pytest.mark.parametrize("suffix", sorted(MADE))
def test_an_office_file_without_its_list_of_parts_says_so(suffix):
    make, what, _ = MADE[suffix]
    for damaged, says in ((None, "it has no [Content_Types].xml"),
                          (b"<Types/>", "its [Content_Types].xml is not an Office list of parts")):
        with pytest.raises(InvalidInput) as refused:
            _read(suffix, _rewritten(make(), "[Content_Types].xml", damaged))
        assert str(refused.value).startswith(f"the {what} file is damaged: {says}"), str(refused.value)


def _epub(chapters: dict[str, str | None]) -> bytes:
    """A book whose spine lists ``chapters`` in order; one whose text is None is listed but not held."""
    manifest = "".join(f'<item id="c{n}" href="{name}"/>' for n, name in enumerate(chapters))
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                      '<rootfiles><rootfile full-path="OEBPS/content.opf"/></rootfiles></container>')
        book.writestr("OEBPS/content.opf", '<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/'
                      f'dc/elements/1.1/"><metadata><dc:title>Policy</dc:title></metadata><manifest>{manifest}'
                      f"</manifest><spine>{spine}</spine></package>")
        for name, text in chapters.items():
            if text is not None:
                book.writestr(f"OEBPS/{name}", f"<html><body><h1>{name}</h1><p>{text}</p><p>{text}</p></body></html>")
    return out.getvalue()


def test_an_epub_missing_a_chapter_it_lists_says_so():
    """A chapter the spine lists but the file lacks was skipped without a word: the book was indexed as
    whole; a book lacking every chapter was refused as having "no main text"."""
    reading = _read(".epub", _epub({"one.xhtml": TEXT, "two.xhtml": None, "three.xhtml": TEXT}))
    assert [p.position for p in reading.passages] == [{"chapter": 1}, {"chapter": 3}]
    assert reading.unread == 1 and "'OEBPS/two.xhtml'" in reading.unread_reason, reading.unread_reason
    with pytest.raises(InvalidInput) as refused:
        _read(".epub", _epub({"one.xhtml": None, "two.xhtml": None}))
    assert str(refused.value) == ("the EPUB file has no chapter that reads: every chapter its spine lists is missing, "
                                  "so it is damaged ('OEBPS/one.xhtml', 'OEBPS/two.xhtml'): save it again from the "
                                  "program that made it"), str(refused.value)


def test_an_epub_chapter_nested_past_the_parser_is_named_and_the_rest_still_reads():
    """A chapter nested past libxml2's depth refused the whole book as "the HTML page nests ..." (newcomer16)."""
    deep = "<span>" * 400 + TEXT + "</span>" * 400
    reading = _read(".epub", _epub({"one.xhtml": TEXT, "deep.xhtml": deep}))
    assert [p.position for p in reading.passages] == [{"chapter": 1}]
    assert reading.unread == 1 and "chapter 2 ('OEBPS/deep.xhtml'): it nests its elements" in reading.unread_reason
    with pytest.raises(InvalidInput) as refused:
        _read(".epub", _epub({"deep.xhtml": deep}))
    assert str(refused.value).startswith("the EPUB file has no chapter that reads: chapter 1 ('OEBPS/deep.xhtml'): "
                                         "it nests its elements more than 255 levels deep"), str(refused.value)
    # one refusal for every book without a chapter that reads: the others that did not read are counted too
    with pytest.raises(InvalidInput) as refused:
        _read(".epub", _epub({"deep.xhtml": deep, "deeper.xhtml": deep}))
    assert str(refused.value).endswith("split the page; 1 more could not be read"), str(refused.value)


def test_an_epub_with_chapters_both_missing_and_unreadable_names_both():
    """One chapter missing and the other nested past the parser was refused as "every chapter its spine lists is
    missing", which the deep one is not (review of 95ab2cc); one missing and one without text was too."""
    deep = "<span>" * 400 + TEXT + "</span>" * 400
    with pytest.raises(InvalidInput) as refused:
        _read(".epub", _epub({"one.xhtml": None, "deep.xhtml": deep}))
    assert str(refused.value).startswith(
        "the EPUB file has no chapter that reads: 1 of the 2 chapters its spine lists is missing, so it is damaged "
        "('OEBPS/one.xhtml'): save it again from the program that made it; chapter 2 ('OEBPS/deep.xhtml'): it nests "
        "its elements more than 255 levels deep"), \
        str(refused.value)
    with pytest.raises(InvalidInput) as refused:
        _read(".epub", _rewritten(_epub({"one.xhtml": None, "cover.xhtml": TEXT}), "OEBPS/cover.xhtml",
                                  b"<html><body><img src='cover.png'/></body></html>"))
    assert str(refused.value) == ("the EPUB file has no chapter that reads: 1 of the 2 chapters its spine lists is "
                                  "missing, so it is damaged ('OEBPS/one.xhtml'): save it again from the program "
                                  "that made it; 1 holds no text")


def test_a_whole_file_with_a_reference_outside_the_package_still_reads():
    """A link to a web address (TargetMode="External") is not a missing part: the file reads."""
    raw = _docx()
    rels = zipfile.ZipFile(io.BytesIO(raw)).read("word/_rels/document.xml.rels").decode()
    linked = rels.replace("</Relationships>", '<Relationship Id="rId99" Type="http://schemas.openxmlformats.org/'
                          'officeDocument/2006/relationships/hyperlink" Target="https://www.debian.org/doc/" '
                          'TargetMode="External"/></Relationships>')
    reading = _read(".docx", _rewritten(raw, "word/_rels/document.xml.rels", linked.encode()))
    assert [p.text for p in reading.passages] == [TEXT]


@pytest.mark.parametrize("suffix", sorted(MADE))
def test_an_office_part_past_the_xml_parser_s_limits_is_refused_as_such_not_as_damage(suffix):
    # a part nested 300 levels deep, or an entity bomb, is whole: it was reported as damage "cut short or
    # altered since it was saved: save it again", advice that cannot help (newcomer12)
    make, what, main = MADE[suffix]
    deep = b'<?xml version="1.0"?>' + b"<a>" * 300 + b"</a>" * 300
    laughs = (b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY l0 "lol">'
              + b"".join(b'<!ENTITY l%d "' % i + b"&l%d;" % (i - 1) * 10 + b'">' for i in range(1, 9)) + b"]><a>&l8;</a>")
    for part, says in ((deep, "nests its XML elements more than 256 levels deep"), (laughs, "an entity bomb")):
        with pytest.raises(InvalidInput) as refused:
            _read(suffix, _rewritten(make(), main, part))
        message = str(refused.value)
        assert message.startswith(f"the {what} file is refused: its part '{main}' "), message
        assert says in message and "save it again" not in message, message


@pytest.mark.parametrize("suffix, what", [(".docx", "Word file"), (".pptx", "PowerPoint file"),
                                          (".xlsx", "Excel file"), (".epub", "EPUB file"),
                                          (".odt", "OpenDocument file"), (".pdf", "PDF")])
def test_an_empty_file_of_a_binary_kind_is_named_as_empty_not_as_damaged(suffix, what):
    """A 0-byte report.docx (a copy stopped before it wrote anything) was refused as "not a valid zip container
    (File is not a zip file); it is damaged or not what its name says", a 0-byte PDF as "cannot be opened
    (PDFium: Data format error)": neither said the file is empty."""
    with pytest.raises(InvalidInput) as refused:
        _read(suffix, b"")
    assert str(refused.value).startswith(f"the {what} is empty (0 bytes): there is nothing in it to read"), refused
