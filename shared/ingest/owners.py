"""Which process holds a piece of ingestion work (a poll's lease, a delete not yet announced):
``host:pid``, so another process can tell a holder still at work from one that died."""

from __future__ import annotations

import os
import socket

_HOST = socket.gethostname()


def this_process() -> str:
    """``host:pid`` of this process."""
    return f"{_HOST}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether the process named ``host:pid`` may still run (another host's: assume so)."""
    host, _, pid = owner.rpartition(":")
    if host != _HOST or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
