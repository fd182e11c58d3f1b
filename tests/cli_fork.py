"""`ragbus` commands of the tests run in a process forked from one that has already imported the CLI.

`python -m shared.tools.cli` spends most of a short command importing the project (about 1.5 s at
no load, 4-5 s with the suite's two workers and the CLI's own processes on two cores). run_cli
(tests/support.py) is called about a thousand times a run; each call now forks a process from a
*zygote* (one per test process, started at the first call) that imported `shared.tools.cli` once,
and that process runs the command as `python -m` does: `runpy._run_module_as_main` in a new
`__main__`, argv, cwd and the whole environment of the call, stdin as the test's, stdout and stderr
into pipes the test reads to their end, the exit status (or the signal) waited for as a child's.
The interpreter ends it as it ends any program (atexit handlers, non-daemon threads joined, buffers
flushed).

What the fork cannot give a command is an import under its own environment. So:
- a call whose environment differs from the zygote's in a variable read while starting Python or
  importing the CLI (PYTHON*, LD_*, locale, TZ, terminal and colour variables: `_STARTUP`) is forked
  from another zygote, started with those variables (at most _MOST_ZYGOTES; past them, a plain
  subprocess, as before);
- the zygote is started without COLUMNS and LINES, which rich reads when the CLI's consoles are
  built at import: a console built without them reads them from the environment when it measures
  itself (a call's COLUMNS=200 gives 200 columns either way);
- a module-level value computed from the zygote's pid at import (the local bus's lease owner) is
  recomputed in the child (`_PER_PROCESS`), and the zygote refuses to start when another module
  global holds its pid (a new one would make every forked command share one identity).
TESTS_CLI_FORK=0 runs every command as a plain subprocess (`python -m shared.tools.cli`).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODULE = "shared.tools.cli"

# read while Python starts, or by the CLI's imports (rich's consoles are built at import)
_STARTUP_PREFIXES = ("PYTHON", "LD_", "LC_", "MALLOC_", "OPENBLAS_", "OMP_", "MKL_")
_STARTUP = {"LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
            "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "PATH", "HOME", "TMPDIR"}
_NOT_AT_START = ("COLUMNS", "LINES")


def _startup_view(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in _STARTUP or k.startswith(_STARTUP_PREFIXES)}


# ------------------------------------------------------------------ the zygote (its own process)


def _per_process() -> None:
    """Module globals a fresh `python -m shared.tools.cli` computes from its own pid."""
    bus = sys.modules.get("shared.adapters.local.bus")
    if bus is not None:
        bus._OWNER = f"{socket.gethostname()}:{os.getpid()}"


_PER_PROCESS = {("shared.adapters.local.bus", "_OWNER")}


def _unforkable() -> str:
    """Why a process forked from this one would not be the program a fresh start gives ('' if none)."""
    if threading.active_count() != 1:
        return f"the CLI's import started threads: {threading.enumerate()}"
    return _pid_globals()


def _pid_globals() -> str:
    """A project module's global holding this process's pid, not recomputed by _per_process ('' if none)."""
    import re

    pid = str(os.getpid())
    for name, module in list(sys.modules.items()):
        if not name.startswith(("shared", "services")):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, str | int) and not isinstance(value, bool) and not attr.startswith("__") \
                    and pid in re.findall(r"\d+", str(value)) and (name, attr) not in _PER_PROCESS \
                    and not _constant(module, attr, pid):
                return f"{name}.{attr} holds the importing process's pid ({value!r}): add it to _per_process"
    return ""


def _source(module: Any) -> str:
    try:
        return Path(module.__file__).read_text(encoding="utf-8")
    except (OSError, TypeError, AttributeError, UnicodeDecodeError):
        return ""


def _constant(module: Any, attr: str, number: str, depth: int = 0) -> bool:
    """Whether ``module``'s global ``attr`` is a constant that happens to equal the pid ``number`` (a budget of
    300 tokens where the pid is 300, as in a container), not a pid computed at import: the number is written
    in ``attr``'s own top-level assignment (``2_000`` writes 2000; a number elsewhere in the module, as the
    local bus's 2, 4 or 8, says nothing of ``attr``), or ``attr`` is assigned an expression of literals and
    such constants alone (``96 * 1024``, ``8 * _SEQUENCE * _SEQUENCE``), or imported from a module where it
    is one."""
    import re

    source = _source(module)
    if any(re.search(rf"(?<!\d){number}(?!\d)", re.sub(r"(?<=\d)_(?=\d)", "", value))
           or re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", value)  # another object's field: DEFAULTS.embed_concurrency
           for value in _assigned(source, attr)):
        return True
    literal, imported = _top_level(source, getattr(module, "__package__", None) or "")
    if attr in literal:
        return True
    origin = imported.get(attr)
    return origin is not None and origin[0] in sys.modules and depth < 5 \
        and _constant(sys.modules[origin[0]], origin[1], number, depth + 1)


def _assigned(source: str, attr: str) -> list[str]:
    """The source of each value the module's top level (an `if` or `try` there included, no function or
    class body) assigns to the name ``attr``."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    values, statements = [], list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None else []
        if any(isinstance(name, ast.Name) and name.id == attr for target in targets for name in ast.walk(target)):
            values.append(ast.get_source_segment(source, node.value) or "")
        statements.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return values


def _top_level(source: str, package: str) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """The names a module's source assigns an expression of literals (and of such names) at its top level,
    and the names it imports from a module: {name: (module, name there)}."""
    import ast
    import importlib.util

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), {}
    imported: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            try:
                origin = importlib.util.resolve_name("." * node.level + node.module, package)
            except ImportError:
                continue
            imported.update({alias.asname or alias.name: (origin, alias.name) for alias in node.names})
    literal: set[str] = set()
    grown = True
    while grown:  # a constant may be written from constants assigned above it
        grown = False
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) and node.value is not None else []
            names = {target.id for target in targets if isinstance(target, ast.Name)} - literal
            if names and all(isinstance(part, ast.Constant | ast.BinOp | ast.UnaryOp | ast.operator | ast.unaryop
                                        | ast.expr_context) or isinstance(part, ast.Name) and part.id in literal
                             for part in ast.walk(node.value)):
                literal |= names
                grown = True
    return literal, imported


# what nearly every command imports after the CLI (its home's stores, the search path, ingest's files,
# formats and chunking, typer's and rich's lazy parts); none starts a thread or registers a message type
# (onnxruntime and tokenizers, which the embedder imports, are left out: onnxruntime starts a thread)
_PRELOADED = ("shared.tools.topology", "shared.adapters.local.index", "shared.query.api", "shared.ingest.files",
              "shared.ingest.progress", "shared.formats.text", "shared.formats.sandbox", "services.indexer.chunking",
              "typer._adapters", "rich._emoji_codes", "gzip")


def serve(fd: int) -> dict[str, Any]:
    """The zygote's loop on its control socket; returns (in a forked child only) the request that
    child is to run."""
    import importlib

    for name in (MODULE, *_PRELOADED):
        importlib.import_module(name)

    control = socket.socket(fileno=fd)
    why = _unforkable()
    if why:
        control.send(why.encode())
        os._exit(0)
    control.send(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        except InterruptedError:
            continue
        if not message:  # the test process ended
            os._exit(0)
        while True:  # reap supervisors that ended
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            control.close()
            return _supervise(json.loads(message), fds)
        for received in fds:
            os.close(received)


def _supervise(request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """Fork the command's process, tell the test its pid, wait for it, tell its exit status."""
    stdin, stdout, stderr, reply_fd = fds
    reply = socket.socket(fileno=reply_fd)
    pid = os.fork()
    if pid == 0:
        reply.close()
        for target, source in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(source, target)
        for source in {stdin, stdout, stderr}:
            if source > 2:
                os.close(source)
        return request
    for source in (stdin, stdout, stderr):
        os.close(source)
    try:
        reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    try:
        reply.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def run_request(request: dict[str, Any]) -> None:
    """In the command's process: become `python -m shared.tools.cli ARGS` in the call's cwd and
    environment; the interpreter then ends as that program ends."""
    import runpy
    import types

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _per_process()
    sys.path[0] = os.getcwd()  # what -m puts first
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = ["-m", *request["args"]]
    runpy._run_module_as_main(MODULE)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ the test process's side


class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = {k: v for k, v in env.items() if k not in _NOT_AT_START}
        self.startup = _startup_view(self.env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import tests.cli_fork as z; z.run_request(z.serve({theirs.fileno()}))"],
            cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),))
        theirs.close()
        ours.settimeout(300)
        self.refused = ours.recv(4096).decode() or f"it ended (exit {self.proc.wait()})"
        ours.settimeout(None)
        if self.refused == "ready":
            self.refused = ""
        else:
            sys.stderr.write(f"tests/cli_fork.py: ragbus commands run as plain subprocesses: {self.refused}\n")

    def stop(self) -> None:
        self.control.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", MODULE, *args]
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        mine, theirs = socket.socketpair()
        try:
            message = json.dumps({"args": list(args), "cwd": str(cwd), "env": env}).encode()
            with self.lock:
                socket.send_fds(self.control, [message], [_stdin(), out_w, err_w, theirs.fileno()])
        finally:
            os.close(out_w)
            os.close(err_w)
            theirs.close()
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: [], mine.fileno(): []}
        deadline = time.monotonic() + timeout
        pid = returncode = None
        with selectors.DefaultSelector() as selector:
            for fd in chunks:
                selector.register(fd, selectors.EVENT_READ)
            try:
                while selector.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise subprocess.TimeoutExpired(command, timeout, b"".join(chunks[out_r]),
                                                        b"".join(chunks[err_r]))
                    for key, _ in selector.select(left):
                        data = os.read(key.fd, 65536)
                        if not data:
                            selector.unregister(key.fd)
                            continue
                        chunks[key.fd].append(data)
                        if key.fd == mine.fileno():
                            lines = b"".join(chunks[key.fd]).split(b"\n")
                            for line in lines[:-1]:
                                said = json.loads(line)
                                pid = said.get("pid", pid)
                                returncode = said.get("returncode", returncode)
            except BaseException:  # the timeout, or the test interrupted: the command is killed, as run() kills it
                if pid is not None and returncode is None:
                    with _suppress_lookup():
                        os.kill(pid, signal.SIGKILL)
                raise
            finally:
                os.close(out_r)
                os.close(err_r)
                mine.close()
        if returncode is None:
            raise RuntimeError(f"the CLI's zygote gave no exit status for {args} (zygote exit {self.proc.poll()})")
        encoding = subprocess._text_encoding()  # type: ignore[attr-defined]  # what text=True decodes with

        def text(data: list[bytes]) -> str:
            return b"".join(data).decode(encoding).replace("\r\n", "\n").replace("\r", "\n")

        return subprocess.CompletedProcess(command, returncode, text(chunks[out_r]), text(chunks[err_r]))


def _stdin() -> int:
    """The test process's stdin, which a subprocess inherits (/dev/null when it has none)."""
    global _devnull
    try:
        os.fstat(0)
        return 0
    except OSError:
        if _devnull is None:
            _devnull = os.open(os.devnull, os.O_RDONLY)
        return _devnull


_devnull: int | None = None


class _suppress_lookup:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *_: Any) -> bool:
        return kind is not None and issubclass(kind, ProcessLookupError)


_zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}
_zygote_lock = threading.Lock()
# one zygote per startup environment seen (the test process's, FORCE_COLOR and TERM of a terminal's
# tests, ...), at most this many in a test process; a call past them runs as a plain subprocess
_MOST_ZYGOTES = 4


def _the_zygote(env: dict[str, str] | None = None) -> _Zygote | None:
    """The zygote that imported the CLI under ``env``'s startup variables (the test process's
    environment by default), started at the first call that needs it; None past _MOST_ZYGOTES."""
    env = dict(os.environ) if env is None else env
    key = tuple(sorted(_startup_view({k: v for k, v in env.items() if k not in _NOT_AT_START}).items()))
    with _zygote_lock:
        zygote = _zygotes.get(key)
        if zygote is None and len(_zygotes) >= _MOST_ZYGOTES:
            return None
        if zygote is None or zygote.proc.poll() is not None:
            import atexit

            zygote = _zygotes[key] = _Zygote(env)
            atexit.register(zygote.stop)
        return zygote


def run(args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -m shared.tools.cli ARGS` with ``env`` and ``cwd``, its output captured as text, as
    subprocess.run(..., capture_output=True, text=True, timeout=timeout) gives it."""
    how = "plain"
    try:
        if os.environ.get("TESTS_CLI_FORK", "1") != "0":
            zygote = _the_zygote(env)
            if zygote is not None and not zygote.refused:
                how = "fork"
                return zygote.run(list(args), cwd, env, timeout)
    finally:
        if os.environ.get("TESTS_CLI_FORK_LOG"):
            with open(os.environ["TESTS_CLI_FORK_LOG"], "a") as log:
                log.write(f"{how} {os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]} {args[:1]}\n")
    return subprocess.run([sys.executable, "-m", MODULE, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
