"""Hostile files of the newest kinds (PPTX, XLSX, EPUB, ODT, CSV/TSV, PDF trees), built byte by byte."""

from __future__ import annotations

import io
import struct
import zipfile

from tests.hostile import bad_files


def zipped(parts: dict[str, bytes], *, stored: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def lying_sizes(data: bytes, claimed: int) -> bytes:
    """``data`` (a zip) with every central-directory entry claiming ``claimed`` uncompressed bytes."""
    out = bytearray(data)
    pos = 0
    while (pos := out.find(b"PK\x01\x02", pos)) >= 0:
        struct.pack_into("<I", out, pos + 24, claimed)
        pos += 4
    pos = 0
    while (pos := out.find(b"PK\x03\x04", pos)) >= 0:
        struct.pack_into("<I", out, pos + 22, claimed)
        pos += 4
    return bytes(out)


_TYPES = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
          'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
          'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>{overrides}</Types>')
_REL = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
        '2006/relationships">{rels}</Relationships>')
_OD = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


_MAIN = "application/vnd.openxmlformats-officedocument."


def _package(main: str, overrides: dict[str, str], parts: dict[str, bytes]) -> bytes:
    """An OOXML package whose main part is ``main``; ``overrides``: part name -> content type (less
    its common prefix)."""
    types = "".join(f'<Override PartName="/{name}" ContentType="{_MAIN}{kind}"/>' for name, kind in overrides.items())
    return zipped({
        "[Content_Types].xml": _TYPES.format(overrides=types).encode(),
        "_rels/.rels": _REL.format(rels=f'<Relationship Id="rId1" Type="{_OD}officeDocument" Target="{main}"/>').encode(),
        **parts,
    })


def xlsx(shared_strings: bytes, sheet_rows: bytes) -> bytes:
    """A minimal .xlsx: one sheet of ``sheet_rows`` (``<row>`` elements) over ``shared_strings``."""
    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    return _package("xl/workbook.xml", {
        "xl/workbook.xml": "spreadsheetml.sheet.main+xml", "xl/worksheets/sheet1.xml": "spreadsheetml.worksheet+xml",
        "xl/sharedStrings.xml": "spreadsheetml.sharedStrings+xml"}, {
        "xl/workbook.xml": (f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{ns}" xmlns:r="{_OD[:-14]}'
                            'relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets>'
                            '</workbook>').encode(),
        "xl/_rels/workbook.xml.rels": _REL.format(rels=(
            f'<Relationship Id="rId1" Type="{_OD}worksheet" Target="worksheets/sheet1.xml"/>'
            f'<Relationship Id="rId2" Type="{_OD}sharedStrings" Target="sharedStrings.xml"/>')).encode(),
        "xl/sharedStrings.xml": (f'<?xml version="1.0" encoding="UTF-8"?><sst xmlns="{ns}">'.encode()
                                 + shared_strings + b"</sst>"),
        "xl/worksheets/sheet1.xml": (f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{ns}"><sheetData>'
                                     .encode() + sheet_rows + b"</sheetData></worksheet>"),
    })


def huge_shared_strings(count: int) -> bytes:
    strings = b"".join(b"<si><t>quarry ledger entry %d basalt</t></si>" % i for i in range(count))
    rows = b"".join(b'<row r="%d"><c r="A%d" t="s"><v>%d</v></c></row>' % (i + 1, i + 1, i) for i in range(20))
    return xlsx(strings, rows)


def pptx(slide_xml: bytes, *, slide_target: str = "slides/slide1.xml") -> bytes:
    p = "http://schemas.openxmlformats.org/presentationml/2006/main"
    return _package("ppt/presentation.xml", {
        "ppt/presentation.xml": "presentationml.presentation.main+xml",
        "ppt/slides/slide1.xml": "presentationml.slide+xml"}, {
        "ppt/presentation.xml": (f'<?xml version="1.0" encoding="UTF-8"?><p:presentation xmlns:p="{p}" '
                                 f'xmlns:r="{_OD[:-14]}relationships"><p:sldIdLst><p:sldId id="256" r:id="rId2"/>'
                                 '</p:sldIdLst></p:presentation>').encode(),
        "ppt/_rels/presentation.xml.rels": _REL.format(
            rels=f'<Relationship Id="rId2" Type="{_OD}slide" Target="{slide_target}"/>').encode(),
        "ppt/slides/slide1.xml": slide_xml,
    })


def nested_xml(root: bytes, tag: bytes, depth: int) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>' + root + b"<%s>" % tag * depth + b"</%s>" % tag * depth


def billion_laughs() -> bytes:
    ents = b'<!ENTITY l0 "lol">' + b"".join(b'<!ENTITY l%d "%s">' % (i, b"&l%d;" % (i - 1) * 10) for i in range(1, 10))
    return (b'<?xml version="1.0"?><!DOCTYPE w:document [' + ents + b']><w:document xmlns:w="http://schemas.'
            b'openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&l9;</w:t></w:r></w:p>'
            b"</w:body></w:document>")


def epub(spine_href: str, *, container: bool = True, chapter: bytes | None = None) -> bytes:
    parts = {"mimetype": b"application/epub+zip"}
    if container:
        parts["META-INF/container.xml"] = (
            b'<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            b'<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            b"</rootfiles></container>")
    parts["OEBPS/content.opf"] = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>'
        f'<dc:title>T</dc:title></metadata><manifest><item id="c1" href="{spine_href}" '
        'media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine></package>').encode()
    if chapter is not None:
        parts["OEBPS/ch1.xhtml"] = chapter
    return zipped(parts, stored=False)


def odt(content_xml: bytes | None) -> bytes:
    parts = {"mimetype": b"application/vnd.oasis.opendocument.text",
             "META-INF/manifest.xml": b'<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                                      b'opendocument:xmlns:manifest:1.0"/>'}
    if content_xml is not None:
        parts["content.xml"] = content_xml
    return zipped(parts)


ODT_ROOT = (b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            b'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>')


def pdf_page_tree_loop(lines: list[str]) -> bytes:
    """A page tree whose Kids name the Pages node itself beside its one page."""
    body = bad_files.pdf([bad_files.text_page(*lines)])
    return bad_files._reindexed(body.replace(b"/Kids [4 0 R]", b"/Kids [4 0 R 2 0 R]"))


def pdf_absurd_count(lines: list[str]) -> bytes:
    """One page in a tree that claims 2**31 - 1 of them."""
    body = bad_files.pdf([bad_files.text_page(*lines)])
    return bad_files._reindexed(body.replace(b"/Count 1 ", b"/Count 2147483647 "))


def ole_header() -> bytes:
    """The first bytes of a legacy Office (OLE compound) file, then filler."""
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + b"legacy" * 200


def stored(data: bytes) -> bytes:
    """The zip ``data`` rewritten with every entry stored uncompressed (ratio 1)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return zipped({i.filename: archive.read(i) for i in archive.infolist()}, stored=True)
