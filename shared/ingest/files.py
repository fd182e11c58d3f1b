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
import stat
from pathlib import Path

from shared.contract.errors import InvalidInput
from shared.contract.ids import content_hash, file_document_id
from shared.contract.messages import DocumentFetched
from shared.contract.ports import BlobStore, Clock, Publisher, StateStore
from shared.ingest import processed_items
from shared.ingest.step import Content, Item, announce, retract

log = logging.getLogger("ragbus.file_ingest")

MEDIA_TYPES = {
    ".html": "text/html",
    ".htm": "text/html",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
}
SUPPORTED = ", ".join(MEDIA_TYPES)
DEFAULT_MAX_BYTES = 20 * 1024 * 1024


def ingest_path(
    path: str | os.PathLike[str],
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    clock: Clock,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[DocumentFetched]:
    """Publish ``DocumentFetched`` for the file, or every supported file under the
    directory (recursive; hidden files and folders are skipped). Returns what was
    published: unchanged files are not sent again.

    Raises :class:`InvalidInput` for a missing path, an unsupported or oversized
    file, or a directory without a single supported file.
    """
    root = Path(path).expanduser()
    if not root.exists():
        if root.is_symlink():
            raise InvalidInput(f"{root} {broken_link(root)}; give a file ({SUPPORTED}) or a directory")
        raise InvalidInput(f"{root} does not exist; give a file ({SUPPORTED}) or a directory")
    if root.is_dir():
        files = _supported_files(root)
        if not files:
            raise InvalidInput(
                f"{root} contains no supported file; supported suffixes: {SUPPORTED}"
            )
    else:
        if root.suffix.lower() not in MEDIA_TYPES:
            raise InvalidInput(
                f"{root} has an unsupported suffix {root.suffix!r}; supported: {SUPPORTED}"
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
            )
        except InvalidInput as exc:
            if not root.is_dir():
                raise
            log.warning("skipping %s: %s", file, exc)
            continue
        if message is not None:
            published.append(message)
    log.info(
        "ingested %s: %d published, %d unchanged or skipped",
        root,
        len(published),
        len(files) - len(published),
    )
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


def _supported_files(directory: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(directory):
        # Hidden folders (.git, .venv...) are never documents.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            if name.startswith(".") or candidate.suffix.lower() not in MEDIA_TYPES:
                continue
            if candidate.is_file():
                out.append(candidate)
            elif candidate.is_symlink() and not candidate.exists():
                # named like a document, so meant as one: say why it is left out
                log.warning("skipping %s: it %s", candidate, broken_link(candidate))
    return out


def _ingest_file(
    file: Path,
    *,
    state: StateStore,
    blobs: BlobStore,
    publisher: Publisher,
    clock: Clock,
    max_bytes: int,
    root: Path | None = None,
) -> DocumentFetched | None:
    absolute = file.resolve()
    # A symlink's target is what is read: it must be a supported, readable file too.
    via = f" (the target of the symlink {file})" if absolute != file.absolute() and file.is_symlink() else ""
    content_type = MEDIA_TYPES.get(absolute.suffix.lower())
    if content_type is None:
        raise InvalidInput(f"{absolute}{via} has an unsupported suffix {absolute.suffix!r}; supported: {SUPPORTED}")
    try:
        status = absolute.stat()
        if not stat.S_ISREG(status.st_mode):
            # reading a named pipe waits for a writer forever, and a device can be endless
            raise InvalidInput(f"{absolute}{via} is not a regular file (a named pipe, device or socket); "
                               f"give a file ({SUPPORTED}) or a directory")
        if status.st_size > max_bytes:
            raise InvalidInput(
                f"{absolute}{via} is {status.st_size} bytes, over the {max_bytes}-byte cap for one document"
            )
        data = absolute.read_bytes()
    except OSError as exc:  # unreadable (permissions), gone meanwhile, a directory, a loop
        raise InvalidInput(f"{absolute}{via} cannot be read ({exc.strerror or exc}); skipped") from None
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
                        fallback_title=absolute.stem),
        state=state, publisher=publisher, clock=clock, blobs=blobs,
    )
    if done.claim == "unchanged":
        log.debug("%s unchanged; not sent again", absolute)
    return done.message


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
    folders = sorted({str(r) for r in roots})
    return (f"{target} is not inside any path given to `ragbus ingest`; it holds {len(doomed)} document(s) "
            f"ingested from {', '.join(folders[:3])}{' and more' if len(folders) > 3 else ''}")


def delete_path(
    path: str | os.PathLike[str], *, state: StateStore, publisher: Publisher, clock: Clock
) -> list[str]:
    """Publish ``DocumentDeleted(reason="file deleted")`` for the file, or for every
    previously ingested file under the directory, and forget their records.
    Works when the files are already gone from disk. Returns the document ids.

    Raises :class:`InvalidInput` when nothing was ingested at ``path`` and it does
    not exist either (most likely a typo).
    """
    target = Path(path).expanduser().resolve()
    doomed = records_under(target, state)
    if not doomed and not target.exists():
        raise InvalidInput(f"{target} was never ingested and does not exist; check the path")
    deleted = []
    for record in sorted(doomed, key=lambda r: r.get("path", "")):
        retract(record["document_id"], "file deleted", state=state, publisher=publisher, clock=clock)
        deleted.append(record["document_id"])
    log.info("deleted %d document(s) under %s", len(deleted), target)
    return deleted
