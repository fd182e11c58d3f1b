"""Hostile files of the registered kinds, built byte by byte (no library would write them)."""

from __future__ import annotations

import io
import zipfile
import zlib


def pdf(page_streams: list[bytes], *, extra: list[bytes] | None = None, page_extra: bytes = b"") -> bytes:
    """A PDF of one page per content stream (Helvetica), plus ``extra`` objects after them."""
    count = len(page_streams)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>",
                            b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
                            + b"] /Count %d >>" % count,
                            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, stream in enumerate(page_streams):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 3 0 R >> >> %s >>" % (5 + 2 * i, page_extra))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.extend(extra or [])
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def text_page(*lines: str) -> bytes:
    out = [b"BT /F1 11 Tf 14 TL 50 780 Td"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1", "replace")
        out.append(b"(" + escaped + b") Tj T*")
    return b" ".join(out) + b" ET"


_WORDS = ("archive package priority maintainer upload source binary control field version epoch "
          "dependency conflict suite release mirror keyring changelog copyright policy").split()


def many_pages(count: int) -> bytes:
    """A ``count``-page PDF, a few lines of different words on each page."""
    pages = []
    for n in range(1, count + 1):
        lines = [" ".join(_WORDS[(n * 7 + i * 3 + k) % len(_WORDS)] for k in range(9)) for i in range(5)]
        pages.append(text_page(*lines))
    return pdf(pages)


def decompression_bomb(expanded_mb: int) -> bytes:
    """A one-page PDF whose Flate content stream expands to ``expanded_mb`` MB of spaces."""
    stream = zlib.compress(b" " * (expanded_mb * 1024 * 1024), 9)
    page = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"
    body = pdf([text_page("placeholder")])
    # swap the page's content stream (object 5) for the bomb
    start = body.index(b"5 0 obj\n")
    end = body.index(b"endobj\n", start)
    rebuilt = body[:start] + b"5 0 obj\n" + page + b"\n" + body[end:]
    return _reindexed(rebuilt)


def nesting_bomb(depth: int) -> bytes:
    """A PDF whose page carries an array nested ``depth`` levels deep."""
    return pdf([text_page("nested")], page_extra=b"/Nest " + b"[" * depth + b"]" * depth)


def _reindexed(body: bytes) -> bytes:
    """``body`` with its xref table rewritten for the objects' new offsets."""
    head = body[: body.index(b"xref\n")]
    offsets, pos = [], 0
    while True:
        found = head.find(b" 0 obj\n", pos)
        if found < 0:
            break
        line_start = head.rfind(b"\n", 0, found) + 1
        offsets.append(line_start)
        pos = found + 1
    out = bytearray(head)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(offsets) + 1, len(head))
    return bytes(out)


def docx(paragraphs: list[str], *, extra_parts: dict[str, bytes] | None = None, document_xml: bytes | None = None,
         relationships: bytes | None = None) -> bytes:
    """A minimal .docx (the parts Word needs) holding ``paragraphs``."""
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    document = document_xml or (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f"<w:body>{body}</w:body></w:document>").encode()
    parts = {
        "[Content_Types].xml": (
            b'<?xml version="1.0" encoding="UTF-8"?>'
            b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            b'<Default Extension="xml" ContentType="application/xml"/>'
            b'<Default Extension="bin" ContentType="application/vnd.ms-office.vbaProject"/>'
            b'<Override PartName="/word/document.xml" '
            b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            b"</Types>"),
        "_rels/.rels": (
            b'<?xml version="1.0" encoding="UTF-8"?>'
            b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            b'officeDocument" Target="word/document.xml"/></Relationships>'),
        "word/document.xml": document,
        "word/_rels/document.xml.rels": relationships or (
            b'<?xml version="1.0" encoding="UTF-8"?>'
            b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>'),
        **(extra_parts or {}),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return buffer.getvalue()
