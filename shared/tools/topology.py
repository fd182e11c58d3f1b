"""The production topology on one machine: `ragbus up --emulators` / `ragbus down`.

``up`` starts Google's Pub/Sub and Firestore emulators and fake-gcs-server,
lays out every topic with its dead-letter topic, the bucket, one
functions-framework server per stage (an OS process each, as Cloud Functions
runs them) and one push subscription per consumer (``<stage>.<topic>``) with
the dead-letter policy and retry backoff of ``infra/``. It records what it
started in ``$RAGBUS_HOME/topology.json``: every process by pid, and the
environment a client needs to talk to them. Other ``ragbus`` commands read it
with :func:`running_env`, so ``poll``, ``ingest``, ``ask`` and ``stats`` work
against the topology while it runs. ``down`` stops every recorded process.

What the emulators do differently from the cloud (measured, see the
integration tests): the Pub/Sub emulator honours dead-letter policies but not
the retry policy's backoff (it redelivers a nacked push about every 1-3 s), and
its push envelope carries no ``deliveryAttempt`` (functions-framework drops it
when it converts the raw envelope into a CloudEvent; the stages read it from the
raw body), so a stage always sees attempt 1 there and a failing message reaches
its dead-letter topic, whose push subscription (``dead_letters.<topic>-dead-letter``)
delivers it to the ``dead_letters`` server: as in the cloud, the dead letter is
recorded and its query ends ``failed``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.adapters.local.processes import process_alive
from shared.contract.errors import RagbusError
from shared.runtime.stages import DEAD_LETTER_RECORDER, SERVED_STAGES

log = logging.getLogger("ragbus.topology")

STATE_FILE = "topology.json"
REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

#: Every stage server ``up`` starts by default: the Pub/Sub consumers and the gateway.
ALL_STAGES: tuple[str, ...] = SERVED_STAGES
GATEWAY = "gateway"
#: The server recording dead letters (services/dead_letters), fed by every dead-letter topic.
DEAD_LETTERS = DEAD_LETTER_RECORDER

#: Subscription on each dead-letter topic, so dead letters are kept (a topic
#: without a subscription drops what is published to it).
DEAD_LETTER_SUBSCRIPTION_SUFFIX = "keep"


class TopologyError(RagbusError):
    """The emulator topology could not be started or is already running; the message says why."""


# ------------------------------------------------------------------ state


def data_home(home: Path) -> Path:
    """Where the topology started under ``home`` keeps its files (its span store): its state
    itself is in the emulators, in memory, and goes with them at ``ragbus down``."""
    return Path(home) / "topology"


def read_state(home: Path) -> dict[str, Any] | None:
    """The recorded topology under ``home``, or None when nothing was started there."""
    path = home / STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None


def stopped_processes(home: Path) -> list[str]:
    """The processes of the topology recorded under ``home`` that no longer run ("grader (pid 123)");
    empty when nothing is recorded there or all of it runs."""
    state = read_state(home)
    if not state:
        return []
    return [f"{p.get('name', '?')} (pid {p['pid']})" for p in state.get("processes", [])
            if not process_alive(int(p["pid"]))]


def running_env(home: Path) -> dict[str, str] | None:
    """The client environment of a topology that is up under ``home`` (all its processes alive)."""
    state = read_state(home)
    if not state:
        return None
    pids = [p["pid"] for p in state.get("processes", [])]
    if not pids or not all(process_alive(int(pid)) for pid in pids):
        return None
    return {str(k): str(v) for k, v in state.get("env", {}).items()}


# -------------------------------------------------------------- processes


@dataclass
class StageServer:
    """One functions-framework server (its own session: pid == process group id)."""

    name: str
    pid: int
    port: int
    log_path: Path
    popen: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def stage_command(stage: str, port: int, *, source: Path | None = None, python: str | None = None,
                  signature_type: str | None = "cloudevent") -> list[str]:
    """The functions-framework command line serving ``stage`` of ``source`` (the root main.py).

    The gateway is a ``functions_framework.aio.http`` function: functions-framework
    3.10 detects that decorator in ``create_app`` and serves it on uvicorn, so it
    takes no ``--signature-type`` and no ``--asgi``.
    """
    argv = [
        python or sys.executable, "-m", "functions_framework",
        f"--target={stage}", f"--source={source or REPO / 'main.py'}",
        f"--port={port}", f"--host={HOST}",
    ]
    if signature_type and stage != GATEWAY:
        argv.append(f"--signature-type={signature_type}")
    return argv


def start_server(name: str, argv: Sequence[str], port: int, env: dict[str, str], log_dir: Path,
                 *, cwd: Path = REPO) -> StageServer:
    """Launch one server process in its own session, its output in ``log_dir/<name>-<port>.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}-{port}.log"
    with open(log_path, "wb") as log_file:
        try:
            popen = subprocess.Popen(
                list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT,
                # Its own session: down() signals the whole group (gunicorn's master
                # and worker), and a Ctrl-C in the terminal of `ragbus up` leaves it alone.
                start_new_session=True,
            )
        except OSError as exc:
            raise TopologyError(f"could not run {argv[0]!r} for {name}: {exc}") from exc
    log.info("starting %s on port %d (pid %d, log %s)", name, port, popen.pid, log_path)
    return StageServer(name=name, pid=popen.pid, port=port, log_path=log_path, popen=popen)


def wait_until_answering(servers: Sequence[StageServer], timeout_s: float, path: str = "/") -> None:
    """Wait (bounded) until every server answers HTTP at all; any status means it is up.

    A cloudevent function answers a bare GET with an error status, which is
    enough: the process imported its source and is accepting requests.
    """
    deadline = time.monotonic() + timeout_s
    waiting = list(servers)
    last: dict[str, str] = {}
    while waiting and time.monotonic() < deadline:
        for server in list(waiting):
            code = server.popen.poll()
            if code is not None:
                raise TopologyError(
                    f"{server.name} exited with code {code} before answering on port {server.port}; "
                    f"log {server.log_path}:\n{_tail(server.log_path)}"
                )
            try:
                with urllib.request.urlopen(server.url + path, timeout=5.0):
                    pass
            except urllib.error.HTTPError:
                pass  # answered, with an error status: up
            except (urllib.error.URLError, OSError) as exc:
                last[server.name] = str(exc)
                continue
            log.info("%s answers on %s", server.name, server.url)
            waiting.remove(server)
        if waiting:
            time.sleep(0.3)
    if waiting:
        names = ", ".join(f"{s.name} ({last.get(s.name, 'no answer')}; log {s.log_path})" for s in waiting)
        raise TopologyError(
            f"these servers did not answer within {timeout_s:.0f}s: {names}; "
            "the machine may be overloaded (raise the startup timeout) or a port taken"
        )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in os.environ for the admin clients (they read *_EMULATOR_HOST), then restore."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -------------------------------------------------------------------- up


def up(
    home: Path,
    *,
    stages: Sequence[str] = ALL_STAGES,
    project: str = "ragbus-local",
    bucket: str | None = None,
    base_port: int | None = None,
    max_delivery_attempts: int = 5,
    min_backoff_s: float = 1.0,
    max_backoff_s: float = 60.0,
    ack_deadline_s: float = 60.0,
    allow_loopback: bool | None = None,
    stage_env: dict[str, str] | None = None,
    startup_timeout_s: float = 240.0,
    python: str | None = None,
    trace_retention_days: int | None = None,
) -> dict[str, Any]:
    """Start the emulators, the layout and one functions-framework server per stage.

    ``base_port``: the stage servers listen on ``base_port``, ``base_port + 1``, ...
    in the order of ``stages`` (free ports when None; the emulators always take
    free ports). ``stage_env`` is added to every stage server's environment.
    Returns the state written to ``$RAGBUS_HOME/topology.json``. Refuses when a
    topology is already running under ``home``; on any failure, stops what it
    started before raising. ``trace_retention_days`` (default RAGBUS_TRACE_RETENTION_DAYS)
    bounds the span stores earlier topologies left (:func:`expire_set_aside_spans`).
    """
    from shared.tools import emulators

    home = Path(home).resolve()
    _refuse_to_start(home, stages)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)  # its owner's alone, as the embedded runtime's
    set_aside_earlier_spans(home)
    if trace_retention_days is None:
        from shared.contract.config import load_settings

        trace_retention_days = load_settings().trace_retention_days
    expire_set_aside_spans(home, trace_retention_days, time.time())
    log_dir = home / "logs"
    bucket = bucket or f"{project}-blobs"
    started: list[Any] = []  # EmulatorProcess or StageServer, in start order
    try:
        for start in (emulators.start_pubsub_emulator, emulators.start_firestore_emulator,
                      emulators.start_gcs_emulator):
            started.append(start(log_dir))
        client_env = {
            "RAGBUS_RUNTIME": "gcp",
            # the topology's own files (its spans): the embedded runtime's traces.db under home
            # must not gain rows whose query records live in the Firestore emulator, which
            # forgets them at `ragbus down` ("unknown" rows with no question, ever after)
            "RAGBUS_HOME": str(data_home(home)),
            "GOOGLE_CLOUD_PROJECT": project,
            "RAGBUS_BUCKET": bucket,
            **{k: v for emulator in started for k, v in emulator.env.items()},
        }
        with _environment(client_env):
            dead_letter_subscriptions = _lay_out(project, bucket)
        env = _server_env(client_env, allow_loopback, stage_env)
        servers = _start_stages(stages, env, log_dir, started, base_port=base_port, python=python)
        wait_until_answering(list(servers.values()), startup_timeout_s)
        with _environment(client_env):
            subscriptions = _subscribe(project, servers, max_delivery_attempts=max_delivery_attempts,
                                       ack_deadline_s=ack_deadline_s, min_backoff_s=min_backoff_s,
                                       max_backoff_s=max_backoff_s)
        gateway = servers.get(GATEWAY)
        return _write_state(home, {
            "started_at": datetime.now(UTC).isoformat(),
            "project": project,
            "bucket": bucket,
            "gateway_url": gateway.url if gateway else None,
            "processes": _processes(started),
            "subscriptions": subscriptions,
            "dead_letter_subscriptions": dead_letter_subscriptions,
            "env": client_env,
        })
    except BaseException:
        _undo(started)
        raise


def set_aside_earlier_spans(home: Path) -> Path | None:
    """Move the span store of a topology started earlier under ``home`` aside, to
    ``topology/traces-until-<its last change, UTC>.db``; return its new path (None when there was none).

    The queries those spans describe went with that topology's Firestore emulator: left in place, the
    new topology's `ragbus traces` listed each of them, `unknown` with no question. Kept, not deleted:
    they are still read with `sqlite3`, for as long as RAGBUS_TRACE_RETENTION_DAYS keeps spans
    (:func:`expire_set_aside_spans`).
    """
    store = data_home(home) / "traces.db"
    if not store.exists():
        return None
    until = datetime.fromtimestamp(max(p.stat().st_mtime for p in _sqlite_files(store) if p.exists()), UTC)
    target = store.with_name(f"traces-until-{until:%Y%m%dT%H%M%S}Z.db")
    n = 1
    while any(p.exists() for p in _sqlite_files(target)):
        n += 1
        target = store.with_name(f"traces-until-{until:%Y%m%dT%H%M%S}Z-{n}.db")
    for source, moved in zip(_sqlite_files(store), _sqlite_files(target), strict=True):
        if source.exists():  # its write-ahead log with it: the spans not yet checkpointed are there
            source.replace(moved)
    log.info("the spans of the earlier topology under %s are kept in %s", home, target)
    return target


def expire_set_aside_spans(home: Path, retention_days: int, now_s: float) -> list[Path]:
    """Hold the span stores set aside under ``home`` to the span store's own retention: a store whose
    last change (the time in its name) is more than ``retention_days`` before ``now_s`` is deleted, its
    write-ahead log with it; from the others, the spans that ended before then. Return the deleted ones.

    Every ``up`` set one aside and none was ever deleted: they piled up, each as large as its topology's
    spans, outside RAGBUS_TRACE_RETENTION_DAYS."""
    from shared.adapters.local.spans import SqliteSpanStore

    cutoff_s = now_s - retention_days * 86400
    deleted: list[Path] = []
    for store in sorted(data_home(home).glob("traces-until-*.db")):
        until = _set_aside_until(store)
        if until < cutoff_s:
            for path in _sqlite_files(store):
                path.unlink(missing_ok=True)
            deleted.append(store)
            continue
        try:
            kept = SqliteSpanStore(store)
            try:
                kept.delete_older_than(retention_days, now_s)
            finally:
                kept.shutdown()
        except Exception as exc:  # noqa: BLE001 - a damaged old store must not stop `up`; it goes at its time
            log.warning("could not delete old spans from %s: %s", store, exc)
    if deleted:
        log.info("deleted %d span store(s) of earlier topologies older than %d day(s) under %s",
                 len(deleted), retention_days, home)
    return deleted


def _set_aside_until(store: Path) -> float:
    """When the spans of a store set aside last changed: the time in its name
    (``traces-until-20261130T072000Z[-2].db``), else its file's (a name edited by hand)."""
    stamp = store.name.removeprefix("traces-until-")[:16]
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return max((p.stat().st_mtime for p in _sqlite_files(store) if p.exists()), default=0.0)


def _sqlite_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _processes(started: list[Any]) -> list[dict[str, Any]]:
    """What the state file says of each started process: the emulators, then the stage servers."""
    return [
        {"name": f"{e.name}-emulator", "kind": "emulator", "pid": e.pid, "address": e.host_port,
         "log": str(e.log_path)}
        for e in started if not isinstance(e, StageServer)
    ] + [
        {"name": s.name, "kind": "stage", "pid": s.pid, "port": s.port, "url": s.url, "log": str(s.log_path)}
        for s in started if isinstance(s, StageServer)
    ]


def _write_state(home: Path, state: dict[str, Any]) -> dict[str, Any]:
    path = home / STATE_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)  # readers never see half a file
    log.info("topology up under %s: %d processes", home, len(state["processes"]))
    return state


def _refuse_to_start(home: Path, stages: Sequence[str]) -> None:
    """Refuse unknown stages, a topology already running under ``home``, and missing emulators."""
    from shared.tools import emulators

    unknown = [s for s in stages if s not in ALL_STAGES]
    if unknown:
        raise TopologyError(f"unknown stage(s) {unknown}; choose from {list(ALL_STAGES)}")
    existing = read_state(home)
    if existing and any(process_alive(int(p["pid"])) for p in existing.get("processes", [])):
        raise TopologyError(
            f"a topology is already running under {home} (gateway {existing.get('gateway_url')}); "
            "run `ragbus down` first"
        )
    missing = {name: why for name, why in emulators.emulators_available().items() if why}
    if missing:
        raise TopologyError("cannot start the emulators: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))


def _server_env(client_env: dict[str, str], allow_loopback: bool | None,
                stage_env: dict[str, str] | None) -> dict[str, str]:
    """The stage servers' environment: this process's, pointed at the emulators."""
    env = dict(os.environ)
    env.pop("RAGBUS_RUNTIME", None)
    env.update(client_env)
    env.update({
        "RAGBUS_GATEWAY_HOST": HOST,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
    })
    if allow_loopback is not None:
        env["RAGBUS_ALLOW_LOOPBACK"] = "1" if allow_loopback else "0"
    env.update(stage_env or {})
    return env


def _start_stages(stages: Sequence[str], env: dict[str, str], log_dir: Path, started: list[Any], *,
                  base_port: int | None, python: str | None) -> dict[str, StageServer]:
    """One functions-framework server per stage (each added to ``started`` as it starts)."""
    from shared.tools import emulators

    servers: dict[str, StageServer] = {}
    for n, stage in enumerate(stages):
        port = base_port + n if base_port else emulators.free_port()
        # one service name per stage, so a trace shows which process ran each span
        stage_process_env = {**env, "OTEL_SERVICE_NAME": env.get("OTEL_SERVICE_NAME") or f"ragbus-{stage}"}
        server = start_server(stage, stage_command(stage, port, python=python), port, stage_process_env, log_dir)
        servers[stage] = server
        started.append(server)
    return servers


def _subscribe(project: str, servers: dict[str, StageServer], *, max_delivery_attempts: int,
               ack_deadline_s: float, min_backoff_s: float, max_backoff_s: float) -> list[str]:
    """A push subscription per consumer of a running stage (with its dead-letter topic), and the
    dead-letter recorder's on every dead-letter topic."""
    from shared.adapters.gcp.pubsub import ensure_push_subscription
    from shared.contract.topics import ALL_TOPICS, dead_letter_topic
    from shared.runtime.stages import CONSUMERS

    subscriptions = []
    for consumer in CONSUMERS:
        if consumer.stage not in servers:
            continue
        subscriptions.append(ensure_push_subscription(
            project, consumer.subscription, consumer.topic, servers[consumer.stage].url + "/",
            dead_letter_topic=dead_letter_topic(consumer.topic),
            max_delivery_attempts=max_delivery_attempts, ack_deadline_s=ack_deadline_s,
            min_backoff_s=min_backoff_s, max_backoff_s=max_backoff_s,
        ))
    recorder = servers.get(DEAD_LETTERS)
    if recorder is not None:
        for dead_topic in (dead_letter_topic(t) for t in ALL_TOPICS):
            subscriptions.append(ensure_push_subscription(
                project, f"{DEAD_LETTERS}.{dead_topic}", dead_topic,
                f"{recorder.url}/projects/{project}/topics/{dead_topic}",
                dead_letter_topic=None, ack_deadline_s=ack_deadline_s,
                min_backoff_s=min_backoff_s, max_backoff_s=max_backoff_s,
            ))
    return subscriptions


def _undo(started: list[Any]) -> None:
    """Stop what a failed start started, newest first."""
    from shared.tools import emulators

    for item in reversed(started):
        try:
            if isinstance(item, StageServer):
                emulators.stop_process_group(item.pid, timeout_s=5.0)
                item.popen.poll()
            else:
                item.stop(timeout_s=5.0)
        except Exception:  # keep stopping the rest
            log.exception("could not stop %s while undoing a failed start", item.name)


def _lay_out(project: str, bucket: str) -> list[str]:
    """Every topic and its dead-letter topic (+ a pull subscription keeping dead letters), the bucket."""
    from shared.adapters.gcp.gcs_blobs import GcsBlobStore
    from shared.adapters.gcp.pubsub import ensure_pull_subscription, ensure_topics
    from shared.contract.topics import ALL_TOPICS, dead_letter_topic

    dead_topics = [dead_letter_topic(t) for t in ALL_TOPICS]
    ensure_topics(project, [*ALL_TOPICS, *dead_topics])
    kept = [
        ensure_pull_subscription(project, f"{topic}.{DEAD_LETTER_SUBSCRIPTION_SUFFIX}", topic)
        for topic in dead_topics
    ]
    GcsBlobStore(bucket, project=project).ensure_bucket()
    return kept


# ------------------------------------------------------------------ down


def down(home: Path) -> list[str]:
    """Stop every process recorded under ``home`` (by process group), remove the state file.

    Returns the names of the processes that were still running and were
    stopped. Harmless when nothing runs (returns an empty list).
    """
    home = Path(home)
    state = read_state(home)
    stopped: list[str] = []
    if state:
        # Every process at once: one by one, each taking 2-4 s to exit (gunicorn's and uvicorn's
        # graceful shutdown, the emulators' JVMs), `down` took 28-33 s for 12 processes; together
        # they take as long as the slowest (4-6 s measured). A stage that sees its emulator go
        # mid-request only logs it: the emulators' state is in memory and goes with them anyway.
        stopped = stop_together(list(reversed(state.get("processes", []))))
    (home / STATE_FILE).unlink(missing_ok=True)
    return stopped


def stop_together(processes: list[dict[str, Any]], timeout_s: float = 10.0,
                  sig: signal.Signals = signal.SIGTERM) -> list[str]:
    """Signal (SIGTERM) each process group at once, wait for all of them together, SIGKILL what is left
    after ``timeout_s``; return the names of those that were running."""
    waiting: dict[int, str] = {}
    for process in processes:
        pid = int(process["pid"])
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            continue
        waiting[pid] = str(process["name"])
    stopped = list(waiting.values())
    deadline = time.monotonic() + timeout_s
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                os.waitpid(pid, os.WNOHANG)  # our child (the tests start it): collect it
            except ChildProcessError:
                pass  # started by another `ragbus up`: init collects it
            if not _group_alive(pid):
                log.info("stopped %s (pid %d)", waiting.pop(pid), pid)
        time.sleep(0.05)
    for pid, name in waiting.items():
        log.warning("%s (process group %d) ignored %s for %.0fs; sending SIGKILL", name, pid, sig.name, timeout_s)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return stopped


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a group we may not signal still exists
        return True
    return True
