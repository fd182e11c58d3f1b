"""A full disk under RAGBUS_HOME, recognised however the writer says it.

SQLite says "database or disk is full" (or "disk I/O error" when it cannot grow its WAL), Python
``OSError`` carries ``ENOSPC``, and numpy's ``np.save`` says only "814080 requested and 337888
written": each is the same condition, to be named with the file and the way out.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from shared.contract.errors import DataFileError

#: Less room than this on the disk holding the data directory counts as full: SQLite needs a page or
#: more per write, a segment flush megabytes.
LOW_SPACE_BYTES = 4 << 20


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the disk holding ``path`` (None: unknown)."""
    for candidate in (path, *path.parents):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        return stat.f_bavail * stat.f_frsize
    return None


def is_full(exc: BaseException, path: Path | None = None) -> bool:
    """Whether ``exc``, met writing under ``path``, is a full disk: said so, or a short write (or an
    I/O error) on a disk with no room left."""
    text = str(exc).lower()
    if getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in text or "no space left" in text:
        return True
    short_write = "requested and" in text and "written" in text
    if path is not None and (short_write or "disk i/o error" in text):
        free = free_bytes(path)
        return free is not None and free < LOW_SPACE_BYTES
    return False


def full_error(path: Path, exc: BaseException, doing: str) -> DataFileError:
    """The :class:`DataFileError` (kind ``full``) for ``exc``, met while ``doing`` at ``path``."""
    return DataFileError(
        f"{path}: the disk is full while {doing} ({exc}); free space on the disk holding {path.parent} "
        "(what was stored is kept; unfinished work is redone)", "full")
