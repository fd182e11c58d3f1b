"""``ragbus serve``, ``up``, ``down`` and ``demo``: run the system rather than one command."""

from __future__ import annotations

import threading
import uuid
from typing import Annotated

import typer
from rich.text import Text

from shared.contract.config import load_settings
from shared.contract.errors import RagbusError
from shared.contract.messages import FeedPollRequested
from shared.observability.terminal_text import markup, plain
from shared.runtime.bootstrap import LocalSystem
from shared.runtime.local import LocalRuntime
from shared.runtime.readiness import unready_stages
from shared.tools.cli.root import AllowLoopback, fail
from shared.tools.cli.session import announce_data, consumers_of, open_session, say_stopping
from shared.tools.console import (
    console,
    err,
    stop_signals,
    stop_signals_interrupt,
    wait_until_stopped,
)

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


def _poll_periodically(system: LocalSystem, stop: threading.Event) -> None:
    from shared.ingest.listings import list_listings

    while not stop.wait(system.settings.poll_interval_s):
        if list_listings(system.deps.state):
            system.bus.publish(FeedPollRequested(
                request_id=uuid.uuid4().hex, feed_urls=[], requested_at=system.deps.clock.now()))


@commands.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    allow_loopback: AllowLoopback = False,
) -> None:
    """Gateway, web page, MCP, every stage and scheduled polling in one process."""
    from services.gateway.guard import LOOPBACK_HOSTS
    from services.gateway.server import serve as serve_gateway
    from shared.contract.config import check_api_token

    token = load_settings().api_token
    if host not in LOOPBACK_HOSTS:
        if token is None:
            # anyone who can reach the address could read the index and spend the model budget
            raise fail(f"--host {host} is reachable from other machines and the gateway has no "
                        "authentication of its own; set RAGBUS_API_TOKEN (clients then send "
                        "Authorization: Bearer <token>) or serve on 127.0.0.1. Not starting.")
        try:
            check_api_token(token, host)
        except RagbusError as exc:
            raise fail(f"{exc}. Not starting.") from None
        err.print(f"[yellow]warning:[/] serving on {markup(host)}: every API and MCP request needs "
                  "Authorization: Bearer $RAGBUS_API_TOKEN; use HTTPS in front of it beyond a trusted network")
    session = open_session(allow_loopback, embedded_only="serve", changes=True)
    system = session.local
    stop = threading.Event()
    consumers = consumers_of(None)
    stages = tuple(dict.fromkeys(c.stage for c in consumers))
    # Serving anyway, unlike `ask`: ingestion and search still work, and /readyz is what a
    # deployment watches; it answers 503 with the reason until the cause is fixed.
    for stage, reason in unready_stages(session.settings, stages).items():
        err.print(Text.assemble(("not ready: ", "bold red"), f"{stage}: ", plain(reason),
                                " (/readyz answers 503 until this is fixed; ingestion and search work)"),
                  soft_wrap=True)
    runtime = LocalRuntime(system.deps, system.bus, consumers).start()
    try:
        poller = threading.Thread(target=_poll_periodically, args=(system, stop), daemon=True)
        poller.start()
        with stop_signals() as stopped:  # before the server answers: a SIGTERM once /healthz does stops it cleanly
            try:
                server = serve_gateway(system.deps, host, port, api_token=token, stages=stages)
            except RagbusError as exc:
                raise fail(str(exc)) from None
            console.print(f"ragbus is serving on [bold]http://{markup(host)}:{port}/[/] (MCP at /mcp); Ctrl-C to stop")
            try:
                wait_until_stopped(stopped)
            finally:
                stop.set()
                server.stop()
    finally:
        runtime.stop(waiting=say_stopping)  # Ctrl-C while a stage indexes a large file: up to 10 s, said


@commands.command()
def up(
    emulators: Annotated[bool, typer.Option(
        "--emulators", help="Run the production topology on this machine: Pub/Sub, Firestore and GCS "
        "emulators and one functions-framework server per stage.")] = False,
    port: Annotated[int | None, typer.Option(help="First port of the stage servers (default: free ports).")] = None,
    allow_loopback: AllowLoopback = False,
) -> None:
    """Start the production topology (Pub/Sub push, Firestore, GCS, one process per stage)."""
    from shared.tools import topology

    if not emulators:
        raise fail("`ragbus up` runs the topology on emulators only: use `ragbus up --emulators`. "
                    "Deploying to Google Cloud is `infra/` (terraform apply) and cloudbuild.yaml.")
    settings = load_settings()
    announce_data(settings)
    err.print("starting the emulators and one server per stage (this takes 20-60 s) ...")
    try:
        state = topology.up(
            settings.home, base_port=port, allow_loopback=allow_loopback or None,
            max_delivery_attempts=max(5, settings.max_delivery_attempts),
            min_backoff_s=settings.retry_min_backoff_s,
            max_backoff_s=max(settings.retry_min_backoff_s, min(settings.retry_max_backoff_s, 600.0)),
            ack_deadline_s=min(max(settings.ack_deadline_s, 10.0), 600.0),
            trace_retention_days=settings.trace_retention_days,
        )
    except RagbusError as exc:
        raise fail(str(exc)) from None
    for process in state["processes"]:
        where = process.get("url") or process.get("address")
        console.print(f"  {process['name']:<20} pid {process['pid']:<8} {markup(where)}")
    # soft_wrap: URLs and paths stay whole for copying
    console.print(f"ragbus is up: gateway [bold]{markup(state['gateway_url'])}/[/] (MCP at /mcp)", soft_wrap=True)
    console.print(f"state and logs under {markup(settings.home)}; `ragbus feeds add`, `poll`, `ingest`, `ask` "
                  "and `stats` now use this topology; `ragbus down` stops it", soft_wrap=True)


@commands.command()
def down() -> None:
    """Stop the topology that `ragbus up --emulators` started under RAGBUS_HOME."""
    from shared.tools import topology

    stopped = topology.down(load_settings().home)
    if stopped:
        console.print("stopped " + ", ".join(stopped))
    else:
        console.print("nothing was running")


@commands.command()
def demo(
    serve_after: Annotated[bool, typer.Option("--serve", help="Keep serving the web page afterwards.")] = False,
    port: Annotated[int | None, typer.Option(
        help="Port of the demo's page and sample feed; the sample citations name it "
        "(default: RAGBUS_DEMO_PORT, else 8080, as `ragbus serve`).")] = None,
) -> None:
    """Ingest the bundled corpus and answer three questions that show the loop at work."""
    from shared.tools.demo import run_demo

    try:
        # from before its server answers: a `kill` once /healthz does stops it as Ctrl-C does (its feed
        # unregistered, its stages stopped), and its wait for Ctrl-C with --serve takes over from it
        with stop_signals_interrupt():
            run_demo(console, serve_after=serve_after, port=port)
    except RagbusError as exc:
        raise fail(str(exc)) from None
