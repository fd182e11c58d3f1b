"""gzip-compressed documents: a document type followed by ``.gz`` (``README.md.gz``, ``policy.pdf.gz``, as Debian
ships /usr/share/doc) is that document, decompressed once, never past a cap.

One reading for every source that takes them: ``ragbus ingest`` (a file on disk) and the Cloud Storage trigger
(an object ``doc.md.gz``, decompressed by the cleaner when it reads the object).
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import BinaryIO

from shared.contract.errors import InvalidInput

COMPRESSED = ".gz"
#: the first two bytes of every gzip member (RFC 1952)
GZIP_SIGNATURE = b"\x1f\x8b"
#: the short reasons a refused gzip document is counted under (``ragbus ingest``'s "skipped" lines)
NOT_GZIP = "not valid gzip"
TWICE = "compressed twice"


def over_cap(max_bytes: int) -> str:
    return f"over the {max_bytes}-byte cap"


class GzipRefused(InvalidInput):
    """A gzip document that is not read: its message is what is wrong, said of the document ("is not valid gzip
    (...)"), ``short_reason`` the reason it is counted under."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.short_reason = reason


def compressed_name(name: str) -> tuple[str, bool]:
    """``name`` less its ``.gz`` (any case), and whether it had one: ``("doc.md", True)`` for ``doc.md.gz``."""
    if name.lower().endswith(COMPRESSED) and len(name) > len(COMPRESSED):
        return name[: -len(COMPRESSED)], True
    return name, False


def gunzip(source: BinaryIO | str | os.PathLike[str], max_bytes: int) -> tuple[bytes, bool]:
    """What the gzip ``source`` (a stream, or a file's path) holds, read no further than ``max_bytes`` (a small .gz
    can expand a thousandfold: a gzip bomb is refused once the cap is passed, not inflated whole), and whether bytes
    after its last member that start no other were ignored (a tape's or a download's padding: ``gzip -d`` keeps what
    the members hold and says "trailing garbage ignored").

    Raises :class:`GzipRefused`: not gzip, or damaged (:data:`NOT_GZIP`); expanding past ``max_bytes``
    (:func:`over_cap`); holding gzip again (:data:`TWICE`)."""
    data = bytearray()  # grown in place: bytes += piece copied all read so far each time (1.1 s for 20 MB)
    trailing = False
    try:
        with gzip.open(source, "rb") as stream:
            while len(data) <= max_bytes and (piece := stream.read1(min(1 << 20, max_bytes + 1 - len(data)))):
                data += piece
    except gzip.BadGzipFile as exc:
        if not data or "Not a gzipped file" not in str(exc):
            raise GzipRefused(f"is not valid gzip ({gzip_damage(exc)})", NOT_GZIP) from None
        trailing = True
    except (EOFError, zlib.error) as exc:
        raise GzipRefused(f"is not valid gzip ({gzip_damage(exc)})", NOT_GZIP) from None
    if len(data) > max_bytes:
        raise GzipRefused(f"expands to over the {max_bytes}-byte cap for one document", over_cap(max_bytes))
    if data[:2] == GZIP_SIGNATURE:
        # decompressed once, as its name says: what it holds is gzip again (`gzip -c notes.txt.gz > x.txt.gz`),
        # which the cleaner refused as "binary data (it contains NUL bytes)"
        raise GzipRefused("holds another gzip stream (it was compressed twice); ragbus decompresses once: gunzip "
                          "it once and ingest the result", TWICE)
    return bytes(data), trailing


def gzip_damage(exc: Exception) -> str:
    """What is wrong with a gzip file, in words a person acts on, from the error reading it raised: Python's
    "Compressed file ended before the end-of-stream marker was reached" says neither that the file is cut short nor
    what to do."""
    if isinstance(exc, EOFError):
        return ("it is cut short: its compressed data ends before gzip's end-of-stream marker, as a partial "
                "download or copy does; fetch or copy it again")
    if isinstance(exc, gzip.BadGzipFile) and "Not a gzipped file" in str(exc):
        return "it does not start with gzip's signature, so it is not gzip though named .gz"
    return f"its compressed data is damaged: {exc}"
