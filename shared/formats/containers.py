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
import posixpath
import zipfile
from collections.abc import Callable
from urllib.parse import unquote

from shared.contract.errors import InvalidInput
from shared.formats.passages import Reading
from shared.formats.registry import KINDS, Limits, legacy_refusal

#: below this an entry's expansion ratio is not worth a refusal (a tiny, very repetitive XML part)
RATIO_FLOOR_BYTES = 1024 * 1024


#: an OLE compound file's signature: a legacy .doc/.xls/.ppt, or a password-protected .docx/.xlsx/.pptx
#: (Office encrypts the zip into an OLE file's "EncryptedPackage" stream)
OLE_SIGNATURE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: the name of an OLE directory entry (UTF-16, NUL-ended) that holds an encrypted Office package
_ENCRYPTED_PACKAGE = "EncryptedPackage\0".encode("utf-16-le")
#: Office's own zip kinds, each with its suffix (a legacy binary file under its name is told to be saved as one)
_OFFICE_KINDS = {kind.name: kind.suffixes[0] for kind in KINDS if kind.name in ("Word", "Excel", "PowerPoint")}


def _encrypted_package(raw: bytes) -> bool:
    """Whether an OLE file has a stream named EncryptedPackage: a directory entry (128 bytes, aligned to 128 from
    the file's start) opening with that name, its name-length field (at 64) the name's bytes and its type (at 66)
    a stream's. The name elsewhere (a .doc whose text mentions it) is no such entry."""
    at = raw.find(_ENCRYPTED_PACKAGE)
    while at >= 0:
        if at % 128 == 0 and raw[at + 64:at + 67] == len(_ENCRYPTED_PACKAGE).to_bytes(2, "little") + b"\x02":
            return True
        at = raw.find(_ENCRYPTED_PACKAGE, at + 1)
    return False


def _ole_refusal(raw: bytes, what: str) -> str:
    """Why an OLE compound file is refused as a ``what`` file: Office's own kinds are encrypted by Office or a
    legacy binary file saved under a modern name; an OpenDocument or EPUB file is never OLE."""
    if what not in _OFFICE_KINDS:
        return (f"the {what} file is a binary compound file (OLE: a legacy .doc, .xls or .ppt, or a password-"
                f"protected Office file), not a zip container as {what} files are; it is not what its name says")
    if _encrypted_package(raw):
        return (f"the {what} file is password-protected (encrypted by Office), which ragbus cannot read; save a "
                "copy without the password and ingest that")
    return f"the {what} file is " + legacy_refusal(_OFFICE_KINDS[what], " under a modern name")


def empty_file(what: str) -> str:
    """Why an empty file of a binary kind (``what``: "Word file", "PDF") is refused: it holds nothing, which is
    likelier a copy or a save cut short than damage."""
    return (f"the {what} is empty (0 bytes): there is nothing in it to read (a copy, download or save that "
            "stopped before writing it?); ingest it again once it holds the document")


def open_zip(raw: bytes, limits: Limits, what: str) -> zipfile.ZipFile:
    """``raw`` as a zip archive whose entries stay within ``limits``; :class:`InvalidInput` otherwise."""
    if raw.startswith(OLE_SIGNATURE):
        raise InvalidInput(_ole_refusal(raw, what))
    if not raw:
        # zipfile's "File is not a zip file" called an empty file damaged or misnamed
        raise InvalidInput(empty_file(f"{what} file"))
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
        if words := _past_limit(str(exc)):
            raise InvalidInput(f"the part {name[:80]!r} {words}{_PAST_PARSER}: refused") from None
        raise InvalidInput(f"the part {name[:80]!r} is not well-formed XML ({exc})") from None


# libxml2's limits: a part past one is not damaged (saving it again does not help) but built so, on purpose or by
# a faulty program; said as what it is ("Excessive depth in document: 256, use XML_PARSE_HUGE option" was
# reported as damage, "cut short or altered since it was saved", newcomer12)
_PARSER_LIMITS = (("Excessive depth", "nests its XML elements more than 256 levels deep"),
                  ("amplification factor", "defines XML entities that expand many times over (an entity bomb)"),
                  ("entity reference loop", "defines XML entities that refer to themselves (an entity bomb)"),
                  ("huge text node", "holds one XML text of more than 10 MB"))
_PAST_PARSER = ", past what the XML parser reads"


def _past_limit(problem: str) -> str | None:
    return next((words for key, words in _PARSER_LIMITS if key in problem), None)


# ------------------------------------------------------------- OOXML (OPC) packages

CONTENT_TYPES = "[Content_Types].xml"
_CONTENT_TYPES_ROOT = "{http://schemas.openxmlformats.org/package/2006/content-types}Types"


def read_ooxml(raw: bytes, limits: Limits, what: str, read: Callable[[zipfile.ZipFile], Reading]) -> Reading:
    """``read(archive)`` of a Word, PowerPoint or Excel file within ``limits``; when its library fails
    on the file, or finds nothing in it, the refusal names the damage :func:`package_damage` finds.

    python-docx, python-pptx and openpyxl answer a damaged package with their own internals
    (``KeyError: "no relationship with key 'rId7'"``, ``AttributeError: ... 'overrides'``, an
    ``xml.etree`` ParseError while a sheet's rows are read, or, for a missing sheet, no rows at
    all); the package is examined only then, so a file they read is never refused by this check."""
    archive = open_zip(raw, limits, what)
    try:
        reading = read(archive)
    except (InvalidInput, MemoryError):
        raise
    except Exception as exc:  # each library raises several kinds on a damaged package
        damage = package_damage(archive)
        if damage:
            raise InvalidInput(_refusal(what, damage)) from None
        raise InvalidInput(f"the {what} file cannot be read ({type(exc).__name__}: {exc})") from None
    if not reading.passages and (damage := package_damage(archive)):
        raise InvalidInput(_refusal(what, damage))
    return reading


def _refusal(what: str, damage: str) -> str:
    if _PAST_PARSER in damage:
        return f"the {what} file is refused: {damage}"
    return f"the {what} file is damaged: {damage}; {_RESAVE}"


_RESAVE = "it was cut short or altered since it was saved: save it again from the program that made it"


def package_damage(archive: zipfile.ZipFile) -> str | None:
    """The first damage found in an Office Open XML package, in words; None when none is found.

    Checked in order: the list of parts (``[Content_Types].xml``) is there and is one; every XML
    part is well-formed (read as a stream, so a large sheet is never held whole); every
    relationship inside the package points at a part the package holds (OPC part names compare
    without regard to case; a ``TargetMode="External"`` link points outside and is not followed)."""
    names = {name.casefold() for name in archive.namelist()}
    if CONTENT_TYPES.casefold() not in names:
        return f"it has no {CONTENT_TYPES} (the list of its parts every Office file holds)"
    for name in archive.namelist():
        if name.endswith((".xml", ".rels")) and (problem := _xml_problem(archive, name)):
            if words := _past_limit(problem):
                return f"its part {name[:120]!r} {words}{_PAST_PARSER}"
            return f"its part {name[:120]!r} is not well-formed XML ({problem})"
    if read_xml(archive, _member(archive, CONTENT_TYPES)).tag != _CONTENT_TYPES_ROOT:
        return f"its {CONTENT_TYPES} is not an Office list of parts (its root is not <Types> in the OPC namespace)"
    for rels in (name for name in archive.namelist() if name.endswith(".rels")):
        for target in _internal_targets(archive, rels):
            if target.casefold() not in names:
                return f"its part {rels[:120]!r} refers to {target[:120]!r}, which the file does not hold"
    return None


def _member(archive: zipfile.ZipFile, name: str) -> str:
    return next(n for n in archive.namelist() if n.casefold() == name.casefold())


def _xml_problem(archive: zipfile.ZipFile, name: str) -> str | None:
    from lxml import etree

    try:
        with archive.open(name) as stream:
            for _, element in etree.iterparse(stream, events=("end",), resolve_entities=False, no_network=True,
                                              load_dtd=False, huge_tree=False):
                element.clear()
    except etree.XMLSyntaxError as exc:
        return str(exc)[:200]
    except (zipfile.BadZipFile, EOFError, OSError) as exc:  # the entry's compressed bytes are damaged
        return f"its compressed bytes cannot be read: {exc}"[:200]
    return None


def _internal_targets(archive: zipfile.ZipFile, rels: str) -> list[str]:
    """The part names ``rels`` points at inside the package: a target is relative to the folder of
    the part the relationships belong to (``word/_rels/document.xml.rels`` -> ``word/``), or
    absolute from the package's root when it starts with ``/``."""
    source_folder = posixpath.dirname(posixpath.dirname(rels))  # "word/_rels/x.rels" -> "word"
    out = []
    for relationship in read_xml(archive, rels).iter("{*}Relationship"):
        target = unquote(relationship.get("Target") or "")
        if relationship.get("TargetMode") == "External" or not target:
            continue
        path = target if target.startswith("/") else posixpath.join("/", source_folder, target)
        out.append(posixpath.normpath(path).lstrip("/"))
    return out
