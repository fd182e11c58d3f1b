"""A cache of the local embedder's optimised ONNX graph, so that a start does not optimise it again.

Building the embedder's ONNX Runtime session with every graph optimisation costs most of a CLI
start's model time: the shipped model keeps its weights as int8 with a scale, and optimising it
folds every weight back to float32 (ConstantFolding alone was 0.7 s of a 1.0 s session on two
cores; docs/benchmarks.md, "CLI cold start"). ONNX Runtime can save the graph it optimised
(``SessionOptions.optimized_model_filepath``, the weights in a file beside it); loading that with
optimisation off maps the weights from the file instead of computing them.

One *entry* is a folder holding what ONNX Runtime wrote (``model.onnx`` and its weights file)
and ``manifest.json``. Its name is a hash of what the optimised graph depends on: the model
file's path and size, ONNX Runtime's version, the optimisation level and this machine's CPU
features (the optimiser may choose kernels for them). The manifest also records the model file's
SHA-256 and every file's size and CRC-32, all checked at each load: a manifest that does not
match, a file that differs, a changed model, each makes the entry *stale or damaged*, and it is
rebuilt, never used. An entry is built in a temporary folder and renamed into place, so a start
never sees half an entry and concurrent starts do not race (the last rename wins; both built the
same thing). Files of an entry are never rewritten, only renamed away and deleted, so a process
that has one mapped keeps reading what it checked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("ragbus.embedder")

T = TypeVar("T")

FORMAT = 1  # of an entry's layout and manifest; a change makes every older entry stale
GRAPH = "model.onnx"
WEIGHTS = "model.data"  # ONNX Runtime writes the graph's initializers here, beside GRAPH
MANIFEST = "manifest.json"
KEEP = 3  # entries kept: one per model, ONNX Runtime version and CPU a data home is used with
_LEFTOVER_S = 3600  # a temporary folder this old is a crashed start's
# What the cache itself names (an entry: also holding a manifest), and so the only things pruning may delete: RAGBUS_MODEL_CACHE may name a
# folder that holds other things too (a home folder, by mistake), and none of them is the cache's.
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}")
_LEFTOVER_PREFIXES = (".building-", ".stale-")
# Free space a build leaves on the cache's disk: the runtime beside it (its bus, index, a serve's stages
# writing now) must never meet a disk the cache filled. An entry holds the weights in float32: four
# times the int8 model.
RESERVE_BYTES = 1 << 30
_READ_BLOCK = 1 << 22


def cpu_features() -> str:
    """What this machine's CPU can do, as the operating system lists it (Linux: the ``flags`` or
    ``Features`` line of /proc/cpuinfo); elsewhere the processor's architecture and name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() in {"flags", "Features"}:
                    return " ".join(sorted(value.split()))
    except OSError:
        pass
    import platform

    return f"{platform.machine()} {platform.processor()} {platform.platform()}"


def file_digests(path: Path) -> dict[str, Any]:
    """Size and CRC-32 of a regular file, read in blocks (zlib releases the GIL over each); OSError for
    anything else (a device such as /dev/zero would be read forever)."""
    crc, size = 0, 0
    with path.open("rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        while block := stream.read(_READ_BLOCK):
            crc = zlib.crc32(block, crc)
            size += len(block)
    return {"bytes": size, "crc32": crc}


def sha256_of(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _plain_name(name: Any) -> bool:
    """A file name of the entry's own, not a path that leaves it."""
    return isinstance(name, str) and name not in {"", ".", ".."} and "/" not in name and "\\" not in name


def _not_ours(found: os.stat_result, what: str) -> str | None:
    """Why a file or folder of an entry may hold what another user put there: owned by another, or
    writable by others (RAGBUS_MODEL_CACHE in a shared folder such as /tmp, where anyone can write an
    entry whose manifest matches its own files, and so change every vector)."""
    uid = getattr(os, "geteuid", None)  # Windows: no owners to compare
    if uid is None:
        return None
    if found.st_uid != uid():
        return f"not trusted ({what} is owned by user {found.st_uid}, not this one)"
    if found.st_mode & 0o022:
        return f"not trusted ({what} is writable by other users)"
    return None


class GraphCache:
    """The cached optimised graph of one model, for one ONNX Runtime and CPU, under ``root``."""

    def __init__(self, root: Path, model: Path, key: Mapping[str, str], *,
                 reserve_bytes: int = RESERVE_BYTES) -> None:
        self.root = root
        self.reserve_bytes = reserve_bytes
        self.model = model
        self.key = {"format": str(FORMAT), "model": str(model.resolve()), "model_bytes": str(model.stat().st_size),
                    **key}
        name = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:32]
        self.entry = root / name

    def session(self, load: Callable[[Path], T], build: Callable[[Path | None], T]) -> T:
        """``load(graph)`` of a checked entry, else ``build(graph)``, which must make the session and
        have ONNX Runtime save its optimised graph to ``graph`` (``None``: the cache cannot be
        written; optimise in memory only)."""
        seen = self._manifest_text()
        manifest = self._manifest(seen)
        if manifest is not None:
            loaded = self._load_checked(manifest, load)
            if loaded is not None:
                return loaded
        return self._rebuild(build, seen)

    # ---------------------------------------------------------------- load

    def _manifest_text(self) -> str | None:
        try:
            return (self.entry / MANIFEST).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # no entry, or no cache folder (the build says why)
            return None
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8
            return f"unreadable: {exc}"

    def _manifest(self, text: str | None) -> dict[str, Any] | None:
        if text is None:
            return None
        try:
            manifest = json.loads(text)
        except ValueError:
            manifest = None
        if not isinstance(manifest, dict) or manifest.get("key") != self.key or not isinstance(
                manifest.get("files"), dict) or GRAPH not in manifest["files"] or not all(
                _plain_name(name) for name in manifest["files"]):
            log.warning("the embedder's graph cache %s has a manifest that is unreadable or made for "
                        "something else; rebuilding it", self.entry)
            return None
        return manifest

    def _load_checked(self, manifest: dict[str, Any], load: Callable[[Path], T]) -> T | None:
        """The loaded entry, once every file matches the manifest; None (and a warning) otherwise.

        The graph file is checked before ONNX Runtime reads it; the weights and the model (most of
        the bytes) are checked while it loads, and the session is dropped unused if they differ.
        """
        files = manifest["files"]
        problem = self._sizes_differ(files) or self._differs({GRAPH: files[GRAPH]})
        if problem is None:
            found: list[str | None] = []
            rest = {name: want for name, want in files.items() if name != GRAPH}

            def check() -> None:
                try:
                    found.append(self._differs(rest) or self._model_differs(manifest))
                except Exception as exc:  # noqa: BLE001 - any failure to check is a reason not to use it
                    found.append(f"not checkable ({exc})")

            checking = threading.Thread(target=check, daemon=True)
            checking.start()
            try:
                loaded: T | None = load(self.entry / GRAPH)
            except Exception as exc:  # noqa: BLE001 - whatever ONNX Runtime makes of a damaged entry
                loaded, problem = None, f"not loadable ({exc})"
            checking.join()
            problem = problem or found[0]
            if problem is None:
                return loaded
        log.warning("the embedder's graph cache %s is %s; rebuilding it", self.entry, problem)
        return None

    def _sizes_differ(self, files: Mapping[str, Any]) -> str | None:
        """Why the entry's files cannot be what the manifest lists, seen without opening any (a FIFO
        would block the open): one missing, not a regular file, not this user's alone, or another size."""
        try:
            problem = _not_ours(self.entry.stat(), "its folder")
        except OSError as exc:
            return f"unreadable ({exc})"
        if problem:
            return problem
        for name, want in files.items():
            try:
                found = (self.entry / name).stat()
            except OSError:
                return f"missing {name}"
            if not stat.S_ISREG(found.st_mode):
                return f"damaged ({name} is not a regular file)"
            if problem := _not_ours(found, name):
                return problem
            size = found.st_size
            if not isinstance(want, dict) or size != want.get("bytes"):
                return f"damaged ({name} has {size} bytes, not {want})"
        return None

    def _differs(self, files: Mapping[str, Any]) -> str | None:
        for name, want in files.items():
            try:
                got = file_digests(self.entry / name)
            except OSError as exc:
                return f"unreadable ({name}: {exc})"
            if got != want:
                return f"damaged ({name}: {got}, the manifest says {want})"
        return None

    def _model_differs(self, manifest: Mapping[str, Any]) -> str | None:
        try:
            digest = sha256_of(self.model)
        except OSError as exc:
            return f"stale (the model {self.model} is unreadable: {exc})"
        return None if digest == manifest.get("model_sha256") else f"stale (the model {self.model} changed)"

    # --------------------------------------------------------------- build

    def _rebuild(self, build: Callable[[Path | None], T], seen: str | None) -> T:
        try:
            if self.root.is_symlink() and not self.root.exists():
                raise OSError("a link to nothing")
            if self.root.exists() and not self.root.is_dir():
                raise OSError("a file, not a folder")
            self.root.mkdir(parents=True, exist_ok=True)
            free, need = shutil.disk_usage(self.root).free, 4 * self.model.stat().st_size + self.reserve_bytes
            if free < need:
                raise OSError(f"{free // 2**20} MB free, {need // 2**20} MB wanted")
            staging = Path(tempfile.mkdtemp(prefix=".building-", dir=self.root))
        except OSError as exc:
            log.warning("the embedder's graph cache cannot be written under %s (%s); optimising in memory",
                        self.root, exc)
            return build(None)
        try:
            try:
                built = build(staging / GRAPH)
            except Exception as exc:  # noqa: BLE001 - ONNX Runtime's own errors, a full disk among them
                log.warning("the embedder's optimised graph could not be saved under %s (%s); optimising "
                            "in memory", staging, exc)
                return build(None)  # a damaged model raises here again
            try:
                self._install(staging, seen)
                self._prune()
            except OSError as exc:
                log.warning("the embedder's optimised graph could not be cached under %s (%s); it is "
                            "optimised again at the next start", self.root, exc)
            return built
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _install(self, staging: Path, seen: str | None) -> None:
        """Write the manifest and rename ``staging`` to the entry. The entry found at the start
        (``seen``: its manifest), damaged or stale, is renamed away first; one another start
        installed meanwhile is kept."""
        for path in staging.iterdir():  # a umask of 002 leaves them group-writable, and so never trusted
            path.chmod(path.stat().st_mode & ~0o022)
        files = {p.name: file_digests(p) for p in sorted(staging.iterdir()) if p.is_file()}
        if GRAPH not in files:
            raise OSError(f"ONNX Runtime wrote no {GRAPH}")
        manifest = {"key": self.key, "model_sha256": sha256_of(self.model), "files": files,
                    "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        for _ in range(3):
            try:
                os.rename(staging, self.entry)
                return
            except OSError:
                if not self.entry.exists():
                    raise
            if self._manifest_text() not in {seen, None}:
                log.info("another start installed the embedder's graph cache %s first", self.entry)
                return
            aside = self.root / f".stale-{os.getpid()}-{time.monotonic_ns()}"
            try:
                os.rename(self.entry, aside)
            except FileNotFoundError:
                continue  # another start moved it first
            shutil.rmtree(aside, ignore_errors=True)
        raise OSError(f"other starts kept replacing {self.entry}")

    def _prune(self) -> None:
        """Delete crashed starts' leftovers and all but the ``KEEP`` newest entries; nothing else
        under ``root`` (see ``_ENTRY_NAME``)."""
        entries: list[tuple[float, Path]] = []
        now = time.time()
        for path in self.root.iterdir():
            try:
                changed = path.stat().st_mtime
            except OSError:
                continue
            if path.name.startswith(_LEFTOVER_PREFIXES):
                if now - changed > _LEFTOVER_S:
                    shutil.rmtree(path, ignore_errors=True)
            elif path != self.entry and _ENTRY_NAME.fullmatch(path.name) and (path / MANIFEST).is_file():
                entries.append((changed, path))
        for _, path in sorted(entries, reverse=True)[KEEP - 1:]:
            shutil.rmtree(path, ignore_errors=True)
