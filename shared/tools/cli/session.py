"""What a command runs against: the embedded runtime in this process, the emulator topology
of ``ragbus up --emulators``, or Google Cloud; and waiting, state only, for documents to finish."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.text import Text

from shared.contract.config import Settings, is_set, load_settings
from shared.contract.deps import Deps
from shared.contract.errors import RagbusError
from shared.runtime.bootstrap import LocalSystem, build_runtime
from shared.runtime.local import LocalRuntime
from shared.runtime.readiness import require_ready
from shared.runtime.stages import CONSUMERS, Consumer
from shared.tools.cli.root import fail
from shared.tools.console import err, stage_progress


@dataclass
class Session:
    """What a command runs against: the embedded runtime in this process, or (gcp) the
    cloud or the emulator topology of ``ragbus up --emulators``, whose stages run elsewhere."""

    settings: Settings
    deps: Deps
    local: LocalSystem | None

    @contextmanager
    def stages(self, names: tuple[str, ...] | None = None) -> Iterator[LocalRuntime | None]:
        """Run these stages in this process (embedded runtime only), once each of them can do its
        work (:mod:`shared.runtime.readiness`: a ConfigError with the reason otherwise)."""
        if self.local is None:
            yield None
            return
        consumers = consumers_of(names)
        require_ready(self.settings, (c.stage for c in consumers))
        runtime = LocalRuntime(self.deps, self.local.bus, consumers).start()
        try:
            yield runtime
        finally:
            runtime.stop(waiting=say_stopping)  # Ctrl-C, Ctrl-D or the command's end alike


def say_stopping() -> None:
    """A stop that waits for a busy worker (a large file's indexing) says so: silent, it read as a hang."""
    err.print(Text("stopping: a stage is finishing its item (up to 10 s; Ctrl-C stops at once). Unfinished "
                   "work is kept: the next `ragbus ingest`, `ragbus poll` or `ragbus serve` in this data "
                   "directory does it.", style="yellow"), soft_wrap=True)


def open_session(allow_loopback: bool = False, *, embedded_only: str | None = None, changes: bool = False) -> Session:
    """``changes``: the command writes to the data directory, so it says which one first
    (running from another folder would otherwise silently use another, empty, one)."""
    from shared.tools.topology import running_env, stopped_processes

    env = dict(os.environ)
    home = load_settings(env).home
    runtime_chosen = is_set("runtime", env)  # a runtime named, even local, is not the topology's
    topology = running_env(home)
    if topology and not runtime_chosen:
        env.update(topology)  # `ragbus up --emulators` is running: talk to it
        os.environ.update(topology)  # the client libraries read the *_EMULATOR_HOST variables
    elif topology and topology_client(env, topology):
        # the gcp runtime named on the topology's own Firestore emulator (its variables exported, RAGBUS_HOME
        # left at this home): its queries' records go with that emulator at `ragbus down`, so their spans go
        # with the topology's (`$RAGBUS_HOME/topology/traces.db`), as `ragbus traces` reads them while it runs;
        # in the embedded runtime's traces.db they were rows whose record no store holds, `unknown` ever after
        env["RAGBUS_HOME"] = os.environ["RAGBUS_HOME"] = topology["RAGBUS_HOME"]
    elif not runtime_chosen and (stopped := stopped_processes(home)):
        # the embedded runtime would quietly take the topology's place in the same home, and what
        # this command ingests or asks would land where the topology does not look
        raise fail(f"the topology `ragbus up --emulators` started under {home.resolve()} is not running "
                    f"whole ({', '.join(stopped[:3])}{' and more' if len(stopped) > 3 else ''} stopped); "
                    "run `ragbus down` to stop the rest, then `ragbus up --emulators` to start it again "
                    "(after `ragbus down` alone, commands here use the embedded runtime)")
    settings = load_settings(env)
    if allow_loopback:
        settings = settings.with_(allow_loopback=True)
    if changes:
        announce_data(settings)
    if settings.runtime != "local":
        check_cloud_session(settings, embedded_only)
    runtime = build_runtime(settings)
    return Session(settings, runtime.deps, runtime.local)


def topology_client(env: dict[str, str], topology: dict[str, str]) -> bool:
    """Whether ``env`` runs the gcp runtime on the Firestore emulator of the running topology whose
    client environment is ``topology`` (its query records live there and go with it)."""
    firestore = topology.get("FIRESTORE_EMULATOR_HOST")
    return (bool(firestore) and env.get("FIRESTORE_EMULATOR_HOST") == firestore
            and load_settings(env).runtime == "gcp" and "RAGBUS_HOME" in topology)


def check_cloud_session(settings: Settings, embedded_only: str | None) -> None:
    """Refuse a command that runs only embedded, and emulators that do not answer."""
    if embedded_only:
        raise RagbusError(
            f"`ragbus {embedded_only}` runs the embedded runtime; unset RAGBUS_RUNTIME (it is {settings.runtime!r})"
        )
    from shared.tools.emulators import unreachable_emulators

    if unreachable := unreachable_emulators(os.environ):
        raise fail("; ".join(unreachable) + "; start the emulators (`ragbus up --emulators` does), or unset "
                    "the variable to use Google Cloud itself")


def where_data_is(settings: Settings) -> str:
    if settings.runtime == "local":
        return f"data directory {settings.home.resolve()} (RAGBUS_HOME)"
    if os.environ.get("PUBSUB_EMULATOR_HOST") and os.environ.get("FIRESTORE_EMULATOR_HOST"):
        # the embedded runtime's data under RAGBUS_HOME is untouched and comes back at `ragbus down`
        return (f"the emulators of `ragbus up --emulators` (project {settings.gcp_project}, Firestore at "
                f"{os.environ['FIRESTORE_EMULATOR_HOST']}), not the data directory; `ragbus down` returns to it")
    return f"Google Cloud project {settings.gcp_project} (RAGBUS_RUNTIME={settings.runtime})"


def announce_data(settings: Settings) -> None:
    err.print(Text(f"using {where_data_is(settings)}", style="dim"), soft_wrap=True)


def consumers_of(stages: tuple[str, ...] | None) -> list[Consumer]:
    return [c for c in CONSUMERS if stages is None or c.stage in stages]


def wait_for_documents(session: Session, ids_of: Callable[[], set[str] | None], timeout: float, label: str) -> int:
    """Wait, reading state only, until these documents are indexed or failed; return the failures.

    ``ids_of`` returns None while the request has not been handled yet (nothing to count)."""
    from shared.ingest.progress import status_of

    deadline = time.monotonic() + timeout
    with stage_progress() as progress:
        task = progress.add_task(f"{label:<12}", total=1)
        stable = 0
        while time.monotonic() < deadline:
            ids = ids_of()
            if ids is None:  # not picked up yet: an unknown id would read as done
                stable = 0
                time.sleep(0.5)
                continue
            status = status_of(session.deps.state, ids)
            failed = f" [red]{len(status.failed)} failed[/]" if status.failed else ""
            progress.update(task, total=max(status.total, 1), completed=len(status.indexed) + len(status.failed) + len(status.removed),
                            description=f"{label:<12}{failed}")
            stable = stable + 1 if not status.pending else 0
            if stable >= 3:  # nothing pending three reads in a row
                return len(status.failed)
            time.sleep(0.5)
    err.print(f"[yellow]{label}: still working after {timeout:.0f} s; see `ragbus stats`[/]")
    return 0


# ------------------------------------------------------------------ feeds
