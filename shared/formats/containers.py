"""Zip containers (OOXML, EPUB, OpenDocument) opened within bounds, and their XML parsed safely.

A .docx is a zip of XML parts: a zip bomb (thousands of entries, an entry that expands a
thousandfold, gigabytes in all) is refused before any parser sees it, by the sizes the central
directory declares (Python's zipfile never reads an entry past its declared size, and the
reader's process is memory-capped besides). XML is parsed without entities, DTDs or network:
an external reference (an XXE, a linked template, a remote image) is never fetched, and macros
(``vbaProject.bin``) are bytes nobody reads.
"""

from __future__ import annotations

import io
import zipfile

from shared.contract.errors import InvalidInput
from shared.formats.registry import Limits

#: below this an entry's expansion ratio is not worth a refusal (a tiny, very repetitive XML part)
RATIO_FLOOR_BYTES = 1024 * 1024


def open_zip(raw: bytes, limits: Limits, what: str) -> zipfile.ZipFile:
    """``raw`` as a zip archive whose entries stay within ``limits``; :class:`InvalidInput` otherwise."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise InvalidInput(f"the {what} file is not a valid zip container ({exc}); it is damaged or "
                           "not what its name says") from None
    entries = archive.infolist()
    if len(entries) > limits.zip_max_entries:
        raise InvalidInput(f"the {what} file holds {len(entries)} zip entries, over the cap of "
                           f"{limits.zip_max_entries} (RAGBUS_ZIP_MAX_ENTRIES): refused as a zip bomb")
    total = sum(e.file_size for e in entries)
    if total > limits.zip_max_bytes:
        raise InvalidInput(f"the {what} file expands to {total} bytes, over the cap of {limits.zip_max_bytes} "
                           "(RAGBUS_ZIP_MAX_MB): refused as a zip bomb")
    for entry in entries:
        if entry.file_size > RATIO_FLOOR_BYTES and entry.file_size > limits.zip_max_ratio * max(entry.compress_size, 1):
            raise InvalidInput(
                f"the {what} file's entry {entry.filename[:80]!r} expands {entry.file_size // max(entry.compress_size, 1)}"
                f"-fold, over the cap of {limits.zip_max_ratio} (RAGBUS_ZIP_MAX_RATIO): refused as a zip bomb")
    return archive


def xml_parser():
    """An lxml parser that resolves no entity, loads no DTD and touches no network."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                           remove_comments=True)


def read_xml(archive: zipfile.ZipFile, name: str):
    from lxml import etree

    try:
        data = archive.read(name)
    except KeyError:
        return None
    try:
        return etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        raise InvalidInput(f"the part {name[:80]!r} is not well-formed XML ({exc})") from None
