"""Local files into the pipeline: the local twin of a GCS object-finalize/delete event.

:func:`ingest_path` announces every supported file under a path with
``DocumentFetched`` (raw bytes in the blob store), skipping files whose bytes
have not changed since they were last sent; :func:`delete_path` announces
``DocumentDeleted`` for files (or whole directories) that were ingested before,
whether or not they still exist on disk.

A file's identity is its absolute path: ``file_document_id(str(path.resolve()))``.
Both go through the ingestion step every source shares (:mod:`shared.ingest.step`),
whose claim -> publish -> mark ledger makes a re-run after a crash re-send what
was claimed but not yet marked.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shlex
import stat
import zlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from shared.contract import state_collections
from shared.contract.errors import InvalidInput
from shared.contract.ids import content_hash, file_document_id
from shared.contract.messages import DocumentFetched
from shared.contract.ports import BlobStore, Clock, Publisher, StateStore
from shared.formats.gzipped import COMPRESSED, NOT_GZIP, GzipRefused, gunzip
from shared.formats.registry import FileKind, by_suffix, readable, suffix_list
from shared.ingest import processed_items
from shared.ingest.step import Content, Item, announce, retract
from shared.observability.terminal_text import escaped

log = logging.getLogger("ragbus.file_ingest")

# Debian ships most of /usr/share/doc gzip-compressed (changelog.gz, README.md.gz, policy.pdf.gz): a
# document type followed by .gz is that document, read through the standard library's gzip (shared.formats.gzipped,
# which the Cloud Storage trigger's objects are read through too).
SUPPORTED = suffix_list()
#: suffix -> the media type announced for it, derived from the registry (which is what is read)
MEDIA_TYPES = {suffix: kind.media_type for kind in readable() for suffix in kind.suffixes}
FILE_TYPES = f"{SUPPORTED}, each also gzip-compressed ({COMPRESSED})"
DEFAULT_MAX_BYTES = 20 * 1024 * 1024

UNSUPPORTED = "not a document type ragbus reads"
DELETED_MEANWHILE = "deleted while this ingest ran"
NOT_UTF8 = "its name is not UTF-8"
NOT_REGULAR = "not a regular file"
#: a symlink under an ingested folder whose target is outside it: `ragbus ingest ./docs` reads what ./docs holds,
#: not `/etc/passwd` through `docs/passwd.txt -> /etc/passwd`; the target named by its own path is read
LEAVES_FOLDER = "a symlink to a file outside the folder"
#: a symlink to a folder under an ingested folder: never entered (it may lead anywhere, or loop)
FOLDER_LINK = "a symlink to a folder, which is not followed"
#: one whose target is a folder the same walk reads: its files are read there, once
FOLDER_LINK_INSIDE = "a symlink to a folder within the ingested one, whose files are read there, once"
#: a symlink to a file under an ingested folder whose target is hidden or in a hidden folder inside it, which the
#: walk leaves out (`docs/keys.txt -> docs/.private/keys.txt`): not read through the link either
HIDDEN_TARGET = "a symlink to a hidden file, or to a file in a hidden folder, which is not read"
#: what a skipped folder is counted under in :attr:`IngestReport.skipped`, where a file has its suffix
FOLDER = "(folder)"
#: a man page as /usr/share/man holds it (timeout.1.gz, printf.3, openssl.1ssl.gz) is roff source, not its text
MAN_PAGE = ("a man page's roff source, which ragbus does not read; ingest it as man renders it: "
            "MANWIDTH=80 man -l FILE | col -bx > FILE.txt")


@dataclass
class IngestReport:
    """What one ``ragbus ingest`` of a path did with each file it found."""

    published: list[DocumentFetched] = field(default_factory=list)
    unchanged: int = 0
    # (why, suffix) -> how many files: a folder's .png and its unreadable .md are different news
    skipped: Counter = field(default_factory=Counter)

    def skip(self, file: Path, why: str) -> None:
        self.skipped[(why, full_suffix(file))] += 1


#: what a file type's suffix looks like: ``.md``, ``.pdf``, ``.py`` (not ``.30-ReleaseNotes`` or ``.Debian``)
_TYPE_SUFFIX = re.compile(r"\.[a-z0-9]{1,5}")
#: a manual section's suffix: .1 to .9, with a subsection's letters (.3pm, .1ssl)
_MAN_SECTION = re.compile(r"\.[1-9][a-z]{0,6}")
#: a line of roff that opens a man page (``.TH``; ``.Dd`` in mdoc) or stands for one (``.so man1/other.1``)
_ROFF_PAGE = re.compile(rb"^\.(?:TH|Dd|so)[ \t]", re.MULTILINE)


def _type_suffix(name: str) -> str:
    """The suffix of ``name`` that names a file type, or "" ("v2.30-ReleaseNotes" has none)."""
    suffix = Path(name).suffix
    return suffix.lower() if _TYPE_SUFFIX.fullmatch(suffix) else ""


def full_suffix(file: Path) -> str:
    """``.md.gz`` for a compressed Markdown file, ``.png`` for an image, ``.gz`` for
    ``v2.30-ReleaseNotes.gz``, ``(none)`` without a suffix."""
    suffix = _type_suffix(file.name)
    if suffix == COMPRESSED:
        return (_type_suffix(file.stem) + COMPRESSED) if _type_suffix(file.stem) else COMPRESSED
    return suffix or "(none)"


def file_kind(file: Path, *, sniff: bool = True) -> tuple[FileKind, bool] | None:
    """The registered kind of ``file`` (:mod:`shared.formats.registry`), refused kinds included,
    and whether it is gzip-compressed; None when its suffix names no kind.

    A name without a type's suffix (``README``, ``NEWS.gz``, ``changelog.Debian.gz``,
    ``v2.30-ReleaseNotes.gz``: most of /usr/share/doc) is plain text when its first bytes are
    text (:data:`SNIFF_BYTES` of them, decompressed no further). Never through a symlink
    (``sniff=False`` for a link's target): ``notes -> /etc/shadow`` would be text too."""
    suffix = file.suffix.lower()
    compressed = suffix == COMPRESSED
    inner = Path(file.stem) if compressed else file
    kind = by_suffix(inner.suffix)
    if kind is None and sniff and not file.is_symlink() and not _type_suffix(inner.name) \
            and _starts_as_text(file, compressed):
        kind = by_suffix(".txt")
    return (kind, compressed) if kind is not None else None


#: how much of a file without a type's suffix is read to decide whether it is text
SNIFF_BYTES = 8192


def _starts_as_text(file: Path, compressed: bool) -> bool:
    from shared.formats.text import binary_reason

    try:
        head = _regular_head(file, compressed)
    except zlib.error:
        head = b""
    except OSError:
        return False
    if compressed and not head:
        # gzip's signature, then nothing that inflates (cut short in its first block, or damaged): meant as gzip, so
        # taken for text to be named for its damage when read, not skipped as "not a document type ragbus reads"
        return _gzip_signed(file)
    return bool(head and head.strip()) and binary_reason(head) is None


def _gzip_signed(file: Path) -> bool:
    try:
        stream = _open_regular(file)
    except OSError:
        return False
    if stream is None:
        return False
    with stream:
        return stream.read(2) == b"\x1f\x8b"


def _open_regular(file: Path) -> BinaryIO | None:
    """``file`` opened for reading when it is a regular file reached directly, else None (a named pipe, a device, a
    folder); raises OSError when it is a symlink or cannot be opened. What is opened is what is checked: a file
    swapped for a named pipe between a check and an open waited for a writer forever (O_NONBLOCK opens a pipe at
    once), and a symlink swapped in was read through (O_NOFOLLOW)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")  # O_NONBLOCK changes nothing for a regular file


def _regular_head(file: Path, compressed: bool) -> bytes | None:
    """The first :data:`SNIFF_BYTES` of ``file`` (of what it holds, when ``compressed``), or None when it is not a
    regular file (see _open_regular). Raises OSError, and ``zlib.error`` when ``compressed`` and it is not gzip."""
    stream = _open_regular(file)
    if stream is None:
        return None
    with stream:
        return _gzip_head(stream, SNIFF_BYTES) if compressed else stream.read(SNIFF_BYTES)


def _gzip_head(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes of what the gzip ``stream`` holds, as far as its stream goes: a file cut
    short still shows what it starts with (then it is refused as damaged gzip, by name, not taken for
    a kind ragbus does not read); no more than 64 times ``size`` of it is read. Raises ``zlib.error``
    when it is not gzip at all."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    head, read = b"", 0
    while len(head) < size and not inflate.eof and read < 64 * size:  # empty blocks inflate to nothing
        compressed = stream.read(16 * 1024)
        read += len(compressed)
        if not compressed:
            break
        head += inflate.decompress(compressed, size - len(head))
        while len(head) < size and inflate.unconsumed_tail:
            head += inflate.decompress(inflate.unconsumed_tail, size - len(head))
    return head[:size]


def unsupported_reason(file: Path) -> str:
    """Why ``file``, whose name names no kind ragbus reads, is left out: :data:`MAN_PAGE` for a man page's source
    (a manual section's suffix, compressed or not, and a roff page's opening line), :data:`NOT_REGULAR` for a
    named pipe, device or folder so named, else :data:`UNSUPPORTED`. Only a regular file reached directly is read
    (see _open_regular): a named pipe (``pipe.1``) would wait for a writer forever, and a symlink is never read
    through (``notes.1 -> /etc/shadow``)."""
    compressed = file.suffix.lower() == COMPRESSED
    if not _MAN_SECTION.fullmatch((Path(file.stem) if compressed else file).suffix.lower()):
        return UNSUPPORTED
    try:
        head = _regular_head(file, compressed)
    except (OSError, zlib.error):
        return UNSUPPORTED
    if head is None:
        return NOT_REGULAR
    return MAN_PAGE if _ROFF_PAGE.search(head) else UNSUPPORTED


def document_type(file: Path, *, sniff: bool = True) -> tuple[str, bool] | None:
    """The media type of the document ``file`` holds, and whether it is gzip-compressed; None
    when it is not a document ragbus reads."""
    found = file_kind(file, sniff=sniff)
    if found is None or found[0].refused:
        return None
    return found[0].media_type, found[1]


def ingest_path(
    path: str | os.PathLike[str],
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    clock: Clock,
    max_bytes: int = DEFAULT_MAX_BYTES,
    report: IngestReport | None = None,
) -> list[DocumentFetched]:
    """Publish ``DocumentFetched`` for the file, or every supported file under the
    directory (recursive; hidden files and folders are skipped). Returns what was
    published: unchanged files are not sent again. ``report``, when given, also
    counts the unchanged files and the skipped ones by reason and suffix.

    Raises :class:`InvalidInput` for a missing path, an unsupported or oversized
    file, or a directory without a single supported file.
    """
    report = report if report is not None else IngestReport()
    started = clock.now()  # a file deleted after this moment is not brought back by this run
    root = Path(path).expanduser()
    if not root.exists():
        if root.is_symlink():
            raise InvalidInput(f"{root} {broken_link(root)}; give a file ({FILE_TYPES}) or a directory")
        raise InvalidInput(f"{root} does not exist; give a file ({FILE_TYPES}) or a directory")
    if not utf8_name(root):
        raise InvalidInput(f"{shown_path(root)}: {NOT_UTF8}; rename it (its bytes are shown as \\x escapes)")
    if root.is_dir():
        files = _supported_files(root, report, state)
        if not files:
            raise InvalidInput(
                f"{root} contains no supported file; supported suffixes: {FILE_TYPES}"
            )
    else:
        found = file_kind(root)
        if found is not None and found[0].refused:
            raise InvalidInput(f"{root} is {found[0].refused}")
        if found is None:
            if unsupported_reason(root) == MAN_PAGE:
                raise InvalidInput(f"{root} is {MAN_PAGE}")
            raise InvalidInput(
                f"{root} has an unsupported suffix {root.suffix!r}; supported: {FILE_TYPES}"
            )
        files = [root]
    published: list[DocumentFetched] = []
    for file in files:
        try:
            message = _ingest_file(
                file,
                state=state,
                blobs=blobs,
                publisher=publisher,
                clock=clock,
                max_bytes=max_bytes,
                root=root.resolve(),
                started=started,
            )
        except InvalidInput as exc:
            if not root.is_dir():
                raise
            log.warning("skipping %s: %s", shown_path(file), escaped(exc))
            report.skip(file, getattr(exc, "short_reason", "refused"))
            continue
        if message is not None:
            published.append(message)
        else:
            report.unchanged += 1
    report.published.extend(published)
    log.info("ingested %s: %d published, %d unchanged, %d skipped", root, len(published),
             report.unchanged, sum(report.skipped.values()))
    return published


def broken_link(link: Path) -> str:
    """Why the symlink ``link`` leads to no file: its target is missing, or the links loop."""
    target = os.readlink(link)
    try:
        link.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop so; later versions raise OSError(ELOOP)
        return f"is a symlink to {target}, and the symlinks loop"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"is a symlink to {target}, and the symlinks loop"
    return f"is a symlink to {target}, which does not exist"


def _supported_files(directory: Path, report: IngestReport, state: StateStore | None = None) -> list[Path]:
    out = []
    inside = directory.resolve()
    for dirpath, dirnames, filenames in os.walk(directory):
        # Hidden folders (.git, .venv...) and files are never documents: not worth a report line.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for link in [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            # os.walk lists a link to a folder but does not enter it: say so rather than leave it out unsaid
            report.skipped[(_folder_link(Path(dirpath) / link, inside), FOLDER)] += 1
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            if name.startswith("."):
                continue
            found = file_kind(candidate)
            if found is not None and found[0].refused:
                report.skip(candidate, found[0].refused)
                continue
            if found is None:
                report.skip(candidate, unsupported_reason(candidate))
                continue
            if not utf8_name(candidate):
                # its path could be neither stored nor sent: it fails alone, named by its bytes
                log.warning("skipping %s: %s", shown_path(candidate), NOT_UTF8)
                report.skip(candidate, NOT_UTF8)
            elif candidate.is_file() and candidate.is_symlink() and not candidate.resolve().is_relative_to(inside):
                log.warning("skipping %s: it is a symlink to %s, outside %s; ingest that file by its own path to "
                            "read it%s", shown_path(candidate), shown_path(candidate.resolve()), shown_path(inside),
                            _read_earlier(candidate.resolve(), state))
                report.skip(candidate, LEAVES_FOLDER)
            elif candidate.is_file() and candidate.is_symlink() and not walk_reads(candidate.resolve(), inside):
                _hidden_target(candidate, inside, state)
                report.skip(candidate, HIDDEN_TARGET)
            elif candidate.is_file():
                out.append(candidate)
            elif candidate.is_symlink() and not candidate.exists():
                # named like a document, so meant as one: say why it is left out
                log.warning("skipping %s: it %s", shown_path(candidate), escaped(broken_link(candidate)))
                report.skip(candidate, "a broken symlink")
            else:
                # a named pipe, a socket, a device or a link to one (`zero.txt -> /dev/zero`): reading
                # it would wait forever or never end
                log.warning("skipping %s: it is not a regular file (a named pipe, device or socket)",
                            shown_path(candidate))
                report.skip(candidate, NOT_REGULAR)
    return out


def _folder_link(link: Path, inside: Path) -> str:
    """Say why the symlink to a folder ``link``, under the folder ``inside`` being ingested, is not followed; return
    the reason it is counted under. A target this walk reads anyway (a folder inside, not hidden) is not to be
    ingested again; any other is read when ``ragbus ingest`` names it (the link or its target), each document named
    by its path under the target."""
    target = link.resolve()
    if walk_reads(target, inside):
        log.warning("skipping %s: it is a symlink to the folder %s, which this ingest reads already (it is inside "
                    "%s); the link is not followed, so its files are read once", shown_path(link),
                    shown_path(target), shown_path(inside))
        return FOLDER_LINK_INSIDE
    log.warning("skipping %s: it is a symlink to the folder %s, which is not followed; `ragbus ingest %s` reads "
                "it, each document named by its path under %s", shown_path(link), shown_path(target),
                shell_word(link if utf8_name(link) else target), shown_path(target))  # ingest refuses a non-UTF-8 name
    return FOLDER_LINK


def walk_reads(target: Path, inside: Path) -> bool:
    """Whether the walk of the folder ``inside`` (resolved) reads ``target`` (resolved) where it lies: inside it, and
    neither hidden nor in a hidden folder (.git, .private), which the walk never enters."""
    return target.is_relative_to(inside) and not any(p.startswith(".") for p in target.relative_to(inside).parts)


def _hidden_target(link: Path, inside: Path, state: StateStore | None) -> None:
    """Say why the symlink to a file ``link``, whose target is hidden or in a hidden folder under the folder ``inside``
    being ingested, is not read: the walk leaves that file out, so the link does not bring it in (as a link to a
    hidden folder is not followed); named on the command line, the link (or its target) is read."""
    target = link.resolve()
    log.warning("skipping %s: it is a symlink to %s, a hidden file or one in a hidden folder, which this ingest of %s "
                "does not read; `ragbus ingest %s` reads it, the document named by its target's path%s",
                shown_path(link), shown_path(target), shown_path(inside),
                shell_word(link if utf8_name(link) else target), _read_earlier(target, state))


def _read_earlier(target: Path, state: StateStore | None) -> str:
    """What to add to the warning for a link leading out of a folder to ``target`` when an earlier ragbus read it
    through the link (until 6c35ea4 a folder's links were followed): its document is in the ledger under the
    target's own path, ingested from a folder that does not hold the target. Ingesting never removes a document,
    and ``--delete`` of the folder does not reach it (its path is not under the folder): say what does."""
    record = state.get(state_collections.PROCESSED_ITEMS, file_document_id(str(target))) if state else None
    root = (record or {}).get("root")
    if not root or processed_items.is_tombstone(record) or walk_reads(target, Path(root)):
        return ""
    return (f"; what an earlier ingest of {shown_path(Path(root))} read through it stays in the index (ingesting "
            f"does not remove it): `ragbus ingest --delete {shell_word(target)}` removes it")


def utf8_name(path: Path) -> bool:
    """Whether ``path`` is valid UTF-8 (a Latin-1 name read from disk holds surrogate escapes)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shell_word(path: Path) -> str:
    """``path`` as one word a shell reads back as that path, for a command a warning advises: quoted as shlex quotes it,
    or, when its name holds what :func:`shown_path` writes as an escape (a control character, a byte that is not
    UTF-8), in ``$'...'`` with those escapes, which bash and zsh read back as the characters; shlex's quotes kept the
    backslash, naming 'bell\\x07dir', a file that does not exist."""
    text = str(path)
    if shown_path(path) == text:
        return shlex.quote(text)

    def one(c: str) -> str:
        if "\udc80" <= c <= "\udcff":  # a byte that is not UTF-8, as os.fsdecode keeps it: $'\\xe9' is that byte
            return f"\\x{ord(c) - 0xDC00:02x}"
        if c in "\\'":
            return "\\" + c
        if "\x80" <= c <= "\x9f":  # a C1 control: $'\\x85' would be the byte 0x85, not the character's UTF-8
            return f"\\u{ord(c):04x}"
        return escaped(c)

    return "$'" + "".join(one(c) for c in text) + "'"


def shown_path(path: Path) -> str:
    """``path`` as text whatever its bytes, as a person can find it: what is not UTF-8 is shown as ``\\xe9`` escapes,
    and what a terminal would obey (``bell\\x07.md``) as escapes too, where the log's terminal-safe text dropped it
    and named a file that does not exist."""
    return escaped(os.fsencode(path).decode("utf-8", "backslashreplace"))


def _ingest_file(
    file: Path,
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    clock: Clock,
    max_bytes: int,
    root: Path | None = None,
    started: datetime | None = None,
) -> DocumentFetched | None:
    absolute = file.resolve()
    if root is not None and not absolute.is_relative_to(root):
        # the folder's walk found the link inside; one swapped in since leads out: checked on what is read
        raise Skipped(f"{file} is a symlink to {absolute}, outside {root}; ingest that file by its own path to "
                      "read it", LEAVES_FOLDER)
    if root is not None and not walk_reads(absolute, root):
        # inside, but hidden or in a hidden folder: the walk did not find it there, so neither is it read through a link
        raise Skipped(f"{file} is a symlink to {absolute}, a hidden file or one in a hidden folder under {root}; ingest "
                      "that file by its own path to read it", HIDDEN_TARGET)
    # A symlink's target is what is read: it must be a supported, readable file too.
    via = f" (the target of the symlink {file})" if absolute != file.absolute() and file.is_symlink() else ""
    kind = document_type(absolute, sniff=not via)
    if kind is None:
        # named like a document, a symlink may lead anywhere (`notes.md -> /etc/shadow`): say where
        raise Skipped(f"{absolute}{via} has an unsupported suffix {absolute.suffix!r}; supported: {FILE_TYPES}",
                      "a symlink to a file of a type ragbus does not read" if via else UNSUPPORTED)
    content_type, compressed = kind
    try:
        # what is checked is what is read: one open, then fstat (a file swapped for a named pipe between a stat and
        # an open waited for a writer forever; O_NONBLOCK opens a pipe at once)
        with os.fdopen(os.open(absolute, os.O_RDONLY | os.O_NONBLOCK), "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                # reading a named pipe waits for a writer forever, and a device can be endless
                raise Skipped(f"{absolute}{via} is not a regular file (a named pipe, device or socket); "
                              f"give a file ({FILE_TYPES}) or a directory", NOT_REGULAR)
            if status.st_size > max_bytes:
                raise Skipped(
                    f"{absolute}{via} is {status.st_size} bytes, over the {max_bytes}-byte cap for one document",
                    f"over the {max_bytes}-byte cap")
            data = _decompressed(absolute, max_bytes, via, stream) if compressed else stream.read(max_bytes + 1)
            if len(data) > max_bytes:  # grown since it was looked at
                raise Skipped(f"{absolute}{via} grew past the {max_bytes}-byte cap for one document while it was read",
                              f"over the {max_bytes}-byte cap")
    except OSError as exc:  # unreadable (permissions), gone meanwhile, a directory, a loop
        raise Skipped(f"{absolute}{via} cannot be read ({exc.strerror or exc}); skipped", "unreadable") from None
    # a file's date is when it was last changed (the cleaner prefers a date the document states)
    modified = datetime.fromtimestamp(status.st_mtime, UTC).isoformat(timespec="seconds")
    item = Item(
        document_id=file_document_id(str(absolute)),
        source="file",
        origin=str(absolute.parent),
        guid=str(absolute),
        item_hash=content_hash(data),
        # root: the path given to `ragbus ingest`, so `ingest --delete` knows what was ingested
        ledger={"path": str(absolute), "origin": str(absolute.parent),
                **({"root": str(root)} if root is not None else {})},
        trace={"path": str(absolute)},
    )
    done = announce(
        item,
        # the cleaner prefers the title the document states; the file's name is the fallback
        lambda: Content(url=absolute.as_uri(), content_type=content_type, body=data,
                        fallback_title=_name_as_title(absolute),
                        published=modified),
        state=state, publisher=publisher, clock=clock, blobs=blobs, started=started,
    )
    if done.claim == "unchanged":
        log.debug("%s unchanged; not sent again", absolute)
    if done.claim == "deleted":
        raise Skipped(f"{absolute}{via} was deleted (`ragbus ingest --delete`) while this ingest ran; "
                      "not ingested again (ingest it again to bring it back)", DELETED_MEANWHILE)
    return done.message


def _name_as_title(file: Path) -> str:
    """A file's name less its .gz and its kind's suffix: "policy" for policy.pdf.gz,
    "v2.30-ReleaseNotes" for v2.30-ReleaseNotes.gz, "README.Debian" for README.Debian."""
    name = file.name.removesuffix(COMPRESSED) if file.name.lower().endswith(COMPRESSED) else file.name
    suffix = Path(name).suffix
    return name[: -len(suffix)] if suffix and by_suffix(suffix) is not None else name


class Skipped(InvalidInput):
    """A file left out of an ingest, with the short ``reason`` its report line groups it by."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.short_reason = reason


def _decompressed(file: Path, max_bytes: int, via: str, opened: BinaryIO | None = None) -> bytes:
    """The document inside a gzip file (read from ``opened`` when given, ``file`` naming it), read no further than
    ``max_bytes`` (a small .gz can expand a thousandfold), as :func:`shared.formats.gzipped.gunzip` reads it."""
    try:
        data, trailing = gunzip(opened if opened is not None else file, max_bytes)
    except GzipRefused as exc:
        raise Skipped(f"{file}{via} {exc}{'; skipped' if exc.short_reason == NOT_GZIP else ''}",
                      exc.short_reason) from None
    if trailing:
        log.warning("%s%s: bytes after its gzip data are not gzip; ignored, as gzip -d ignores them", shown_path(file),
                    escaped(via))
    return data


def records_under(path: str | os.PathLike[str], state: StateStore) -> list[dict]:
    """Ledger records of the files ingested at ``path`` (the file, or anything under the folder)."""
    target = Path(path).expanduser().resolve()
    prefix = str(target).rstrip(os.sep) + os.sep
    return [
        record
        for record in processed_items.records(state, {"source": "file"})
        if record.get("path") == str(target) or str(record.get("path", "")).startswith(prefix)
    ]


def needs_confirmation(path: str | os.PathLike[str], state: StateStore) -> str | None:
    """Why deleting ``path`` should be confirmed (``--yes``), or None.

    Deleting ``/``, or a folder that is not inside any path given to ``ragbus ingest``
    (a parent of several ingested folders, say), sweeps wider than anything ingested."""
    target = Path(path).expanduser().resolve()
    doomed = records_under(target, state)
    if target == Path(target.anchor):
        return f"{target} is the root of the file system: this deletes all {len(doomed)} file document(s)"
    if not doomed or not target.is_dir() and any(r.get("path") == str(target) for r in doomed):
        return None
    roots = {Path(r.get("root") or r.get("origin") or "/") for r in doomed}
    if any(target == root or root in target.parents for root in roots):
        return None
    folders = sorted({shown_path(r) for r in roots})  # as a person can find them: the CLI's text drops a control
    return (f"{shown_path(target)} is not inside any path given to `ragbus ingest`; it holds {len(doomed)} document(s) "
            f"ingested from {', '.join(folders[:3])}{' and more' if len(folders) > 3 else ''}")


def delete_path(
    path: str | os.PathLike[str], *, state: StateStore, publisher: Publisher, clock: Clock
) -> list[str]:
    """Publish ``DocumentDeleted(reason="file deleted")`` for the file, or for every
    previously ingested file under the directory, and bury their records (tombstones:
    deletes win, see :mod:`shared.ingest.processed_items`). Works when the files are
    already gone from disk. Returns the document ids.

    Every document file still on disk under ``path`` gets a tombstone too, ingested or not
    yet: an ``ingest`` of the folder that started before this delete and has not reached a
    file cannot claim it afterwards. A delete interrupted before its message went out (the
    tombstone written, the document still indexed) is sent again.

    Raises :class:`InvalidInput` when nothing was ingested at ``path`` and it does
    not exist either (most likely a typo).
    """
    target = Path(path).expanduser().resolve()
    if not utf8_name(target):
        raise InvalidInput(f"{shown_path(target)}: {NOT_UTF8}, so nothing was ever ingested from it; check the path")
    doomed = records_under(target, state)
    unfinished = processed_items.unannounced(_tombstones_under(target, state))
    if not doomed and not unfinished and not target.exists():
        raise InvalidInput(f"{target} was never ingested and does not exist; check the path")
    deleted = []
    for record in sorted(doomed, key=lambda r: r.get("path", "")):
        # a delete of the same files running beside this one may have buried it first: its own
        if retract(record["document_id"], "file deleted", state=state, publisher=publisher, clock=clock,
                   if_live=True):
            deleted.append(record["document_id"])
    for document_id in unfinished:
        if document_id not in deleted:
            retract(document_id, "file deleted", state=state, publisher=publisher, clock=clock)
            deleted.append(document_id)
    known = [Path(r.get("root") or Path(r["path"]).parent)  # the paths given to `ragbus ingest`
             for r in (*doomed, *_tombstones_under(target, state)) if r.get("path")]
    for folder in _folders_to_bury(target, known):
        deleted += _bury_files_on_disk(folder, set(deleted), state=state, publisher=publisher, clock=clock)
    log.info("deleted %d document(s) under %s", len(deleted), target)
    return deleted


def _tombstones_under(target: Path, state: StateStore) -> list[dict]:
    prefix = str(target).rstrip(os.sep) + os.sep
    return [t for t in processed_items.tombstones(state, {"source": "file"})
            if t.get("path") == str(target) or str(t.get("path", "")).startswith(prefix)]


def _folders_to_bury(target: Path, known: list[Path]) -> list[Path]:
    """Where to look on disk for files an ingest running beside the delete may still claim: the target
    itself when it is a file, lies inside a path given to `ragbus ingest` (``known``), or nothing under
    it was ingested yet (the delete racing the first ingest of a folder); else only those ingested paths
    under it. Never the whole disk: ``ragbus ingest --delete / --yes`` walked every file of the file
    system before (it looks at the ingested folders under / instead)."""
    if not target.is_dir():
        return [target]
    inside = sorted({k for k in known if k != target and target in k.parents})
    if (not inside or any(k == target or k in target.parents for k in known)) and target.parent != target:
        return [target]
    # the outermost of them: a folder inside another is walked with it
    return [k for k in inside if not any(o in k.parents for o in inside)]


def _bury_files_on_disk(target: Path, done: set[str], *, state: StateStore, publisher: Publisher,
                        clock: Clock) -> list[str]:
    """Tombstones for the document files under ``target`` that no record named when the delete
    began; return those that turned out live meanwhile (an ingest claimed them): their delete
    is published too."""
    if target.is_dir():
        files = _supported_files(target, IngestReport())
    else:
        files = [target] if target.is_file() and document_type(target) is not None else []
    live = []
    for file in files:
        absolute = file.resolve()
        document_id = file_document_id(str(absolute))
        if document_id in done:
            continue
        # a live record (an ingest claimed the file since the delete began) owes its message: retract it
        if retract(document_id, "file deleted", state=state, publisher=publisher, clock=clock, if_live=True,
                   fields={"source": "file", "path": str(absolute), "origin": str(absolute.parent)}):
            live.append(document_id)
    return live
