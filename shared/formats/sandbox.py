"""A binary file is read in a separate process with bounded memory and time.

PDF and Office parsers are large C and Python code paths fed bytes from anyone: a decompression
bomb, an object-nesting loop or a 5,000-page file must cost one file, not the cleaner. Each such
file is read by a fresh interpreter (``python -m shared.formats.sandbox``: no threads, locks or
state inherited from the cleaner, unlike a fork) that caps its own address space
(``RLIMIT_AS``) before it reads a byte, and that is killed at the time bound. It answers in JSON,
never pickle: a parser subverted by a file cannot hand the cleaner code to run. A child that dies,
runs out of memory or out of time refuses that file alone, with the reason.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from shared.contract.errors import InvalidInput, RetryableError
from shared.formats.passages import Passage, Reading
from shared.formats.registry import FileKind, Limits


@dataclass(frozen=True)
class Bounds:
    seconds: float = 120.0  # RAGBUS_PARSE_SECONDS
    memory_bytes: int = 1024 * 1024 * 1024  # RAGBUS_PARSE_MEMORY_MB


def read_isolated(kind: FileKind, raw: bytes, content_type: str, url: str, limits: Limits,
                  bounds: Bounds) -> Reading:
    """``kind``'s reading of ``raw``, done in a bounded child process.

    Raises :class:`InvalidInput` naming the bound when the child ran out of memory or time, and
    the parser's error when the file is malformed (both permanent: the file is refused)."""
    payload = request_payload(kind, raw, content_type, url, limits, bounds)
    megabytes = bounds.memory_bytes // (1024 * 1024)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "shared.formats.sandbox"], input=payload, capture_output=True,
                              timeout=bounds.seconds, check=False, env=_child_environment())
    except subprocess.TimeoutExpired:
        raise InvalidInput(f"reading this {kind.name} file took over {bounds.seconds:g} s "
                           "(RAGBUS_PARSE_SECONDS); it was stopped and refused") from None
    try:
        status, value = json.loads(done.stdout.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        raise InvalidInput(
            f"the {kind.name} reader stopped without an answer (exit code {done.returncode}"
            f"{': ' + tail[0][:200] if tail[0] else ''}); over the {megabytes} MB memory cap "
            "(RAGBUS_PARSE_MEMORY_MB) or a crash of the parser on this file") from None
    if status == "ok":
        return Reading(passages=[Passage(text, kind_, position) for text, kind_, position in value["passages"]],
                       title=value["title"], published=value["published"], unread=value["unread"],
                       unread_reason=value["unread_reason"])
    if status == "memory":
        raise InvalidInput(f"reading this {kind.name} file needed over {megabytes} MB (RAGBUS_PARSE_MEMORY_MB), "
                           f"after {time.monotonic() - started:.1f} s; it was refused")
    if status == "refused":
        raise InvalidInput(value)
    if status == "retry":  # a service the reader called failed for now (Document AI's 429s, 5xx)
        raise RetryableError(value)
    raise InvalidInput(f"the {kind.name} file cannot be read: {value}")


def too_deep(kind_name: str) -> InvalidInput:
    """A file nested past its reader's recursion: refused by kind, not retried (reading it again nests as deep)."""
    return InvalidInput(f"the {kind_name} file nests deeper than its reader can follow (Python's recursion limit)")


def request_payload(kind: FileKind, raw: bytes, content_type: str, url: str, limits: Limits,
                    bounds: Bounds) -> bytes:
    """What the child reads on stdin: the request as one JSON line, then the file's bytes."""
    request = {"reader": kind.reader, "name": kind.name, "content_type": content_type, "url": url,
               "limits": asdict(limits), "memory": bounds.memory_bytes}
    return json.dumps(request).encode() + b"\n" + raw


def _child_environment() -> dict[str, str]:
    """This process's environment, with the folder this package was imported from first on the
    child's path (the cleaner may have found it through its working directory or a test's path)."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _answer(status: str, value: object) -> None:
    sys.stdout.write(json.dumps([status, value]))
    sys.stdout.flush()


def main() -> None:
    """The child: cap memory, read the request and the file from stdin, answer on stdout."""
    header = sys.stdin.buffer.readline()
    request = json.loads(header)
    memory = int(request["memory"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    raw = sys.stdin.buffer.read()
    kind = FileKind(request["name"], (), (request["content_type"],), request["reader"], binary=True)
    try:
        reading = kind.load()(raw, request["content_type"], request["url"], Limits(**request["limits"]))
    except MemoryError:
        _answer("memory", "")
        return
    except RecursionError:
        _answer("refused", str(too_deep(request["name"])))
        return
    except InvalidInput as exc:
        _answer("refused", str(exc))
        return
    except RetryableError as exc:
        _answer("retry", str(exc))
        return
    except Exception as exc:  # a parser's own error on a malformed file: the file is refused
        _answer("error", "".join(traceback.format_exception_only(type(exc), exc)).strip()[:500])
        return
    _answer("ok", {"passages": [[p.text, p.kind, p.position] for p in reading.passages], "title": reading.title,
                   "published": reading.published, "unread": reading.unread,
                   "unread_reason": reading.unread_reason})


if __name__ == "__main__":
    main()
