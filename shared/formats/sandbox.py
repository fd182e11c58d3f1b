"""A binary file is read in a separate process with bounded memory and time.

PDF and Office parsers are large C and Python code paths fed bytes from anyone: a decompression
bomb, an object-nesting loop or a 5,000-page file must cost one file, not the cleaner. Each such
file is read in a child forked from a small fork server (``multiprocessing``'s forkserver: the
child starts from a clean interpreter that has imported only this package, not from the
cleaner's threads) whose address space is capped (``RLIMIT_AS``) and which is killed at the time
bound. A child that dies, runs out of memory or out of time refuses that file alone, with the
reason.
"""

from __future__ import annotations

import multiprocessing
import resource
import threading
import time
import traceback
from dataclasses import dataclass

from shared.contract.errors import InvalidInput
from shared.formats.passages import Reading
from shared.formats.registry import FileKind, Limits


@dataclass(frozen=True)
class Bounds:
    seconds: float = 60.0  # RAGBUS_PARSE_SECONDS
    memory_bytes: int = 1024 * 1024 * 1024  # RAGBUS_PARSE_MEMORY_MB


_context = None
_context_lock = threading.Lock()


def _forkserver():
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["shared.formats.registry", "shared.formats.passages"])
            _context = context
        return _context


def _child(kind: FileKind, raw: bytes, content_type: str, url: str, limits: Limits, memory: int, conn) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        reading = kind.load()(raw, content_type, url, limits)
        conn.send(("ok", reading))
    except MemoryError:
        conn.send(("memory", ""))
    except InvalidInput as exc:
        conn.send(("refused", str(exc)))
    except BaseException as exc:  # a parser's own error on a malformed file: the file is refused
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        conn.send(("error", detail[:500]))
    finally:
        conn.close()


def read_isolated(kind: FileKind, raw: bytes, content_type: str, url: str, limits: Limits,
                  bounds: Bounds) -> Reading:
    """``kind``'s reading of ``raw``, done in a bounded child process.

    Raises :class:`InvalidInput` naming the bound when the child ran out of memory or time, and
    the parser's error when the file is malformed (both permanent: the file is refused)."""
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(kind, raw, content_type, url, limits, bounds.memory_bytes, sender),
                            daemon=True)
    started = time.monotonic()
    child.start()
    sender.close()
    try:
        if not receiver.poll(bounds.seconds):
            raise InvalidInput(f"reading this {kind.name} file took over {bounds.seconds:g} s "
                               "(RAGBUS_PARSE_SECONDS); it was stopped and refused")
        try:
            status, value = receiver.recv()
        except EOFError:
            child.join(5)
            raise InvalidInput(
                f"the {kind.name} reader stopped without an answer (exit code {child.exitcode}); over the "
                f"{bounds.memory_bytes // (1024 * 1024)} MB memory cap (RAGBUS_PARSE_MEMORY_MB) or a crash of "
                "the parser on this file") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join(5)
        receiver.close()
    if status == "ok":
        return value
    if status == "memory":
        raise InvalidInput(f"reading this {kind.name} file needed over {bounds.memory_bytes // (1024 * 1024)} MB "
                           f"(RAGBUS_PARSE_MEMORY_MB), after {time.monotonic() - started:.1f} s; it was refused")
    if status == "refused":
        raise InvalidInput(value)
    raise InvalidInput(f"the {kind.name} file cannot be read: {value}")
