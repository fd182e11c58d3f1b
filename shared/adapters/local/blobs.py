"""BlobStore on a local folder; writes are atomic (temp file + rename)."""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

from shared.contract.errors import DataFileError

_SAFE = re.compile(r"^[A-Za-z0-9._\-/]+$")


def _unwritable(path: Path, exc: OSError) -> OSError | DataFileError:
    """A full disk or a read-only folder as the error that names it (any other OSError as it is)."""
    if exc.errno == errno.ENOSPC:
        return DataFileError(f"{path}: the disk is full ({exc.strerror}); free space on the disk holding {path.parent} "
                             "and run the command again (what was stored is kept; unfinished work is redone)", "full")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return DataFileError(f"{path} cannot be written ({exc.strerror}); make {path.parent} writable or point "
                             "RAGBUS_HOME at a writable directory", "unwritable")
    return exc


class FolderBlobStore:
    """Blobs as files under ``root``; a reference is ``blob:`` plus the key."""

    PREFIX = "blob:"

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not _SAFE.match(key) or ".." in key.split("/") or key.startswith("/"):
            raise ValueError(f"blob key {key!r} must be a relative path of [A-Za-z0-9._-/]")
        return self.root / key

    def _key(self, ref: str) -> str:
        if not ref.startswith(self.PREFIX):
            raise KeyError(f"{ref!r} is not a local blob reference (expected 'blob:<key>')")
        return ref[len(self.PREFIX):]

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        except OSError as exc:
            raise _unwritable(path, exc) from exc
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise _unwritable(path, exc) from exc
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.PREFIX + key

    def get(self, ref: str) -> bytes:
        path = self._path(self._key(ref))
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise KeyError(f"no blob at {ref!r}") from None

    def delete(self, ref: str) -> None:
        self._path(self._key(ref)).unlink(missing_ok=True)
