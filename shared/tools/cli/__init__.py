"""The ``ragbus`` command line.

Every command runs the embedded runtime in this process (``RAGBUS_RUNTIME=local``,
the default): it opens the durable bus and state under ``RAGBUS_HOME``, starts
the stages it needs, publishes the request and waits for the stages to finish.
Several ``ragbus`` processes may share one ``RAGBUS_HOME`` (a ``serve`` and a
``poll``, say): the bus leases each delivery to one worker.

One module per command group; this module composes them into :data:`app` in the order
``ragbus --help`` lists them.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated

import typer
from rich.text import Text

from shared.contract.errors import RagbusError
from shared.contract.sources import LISTING_KINDS
from shared.observability.logs import configure_logging, debugging
from shared.observability.terminal_text import plain
from shared.tools.cli import (
    chat,
    dead_letters,
    evaluation,
    feedback,
    ingestion,
    listings,
    reading,
    serving,
    traces,
)
from shared.tools.cli.root import app, fail
from shared.tools.cli.session import Session
from shared.tools.cli.traces import datetime_local, resolve_query_id, short_ids
from shared.tools.console import console, err

__all__ = ["Session", "app", "datetime_local", "main", "resolve_query_id", "short_ids"]

# the order of `ragbus --help`: the commands, then the groups
for group in (ingestion, reading, chat, feedback, traces, serving, evaluation):
    app.registered_commands.extend(group.commands.registered_commands)
for kind in LISTING_KINDS.values():
    app.add_typer(listings.kind_group(kind), name=kind.plural)
app.add_typer(listings.sources_app, name="sources")
app.add_typer(dead_letters.dead_letters_app, name="dead-letters")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("ragbus")
        except PackageNotFoundError:  # run from a checkout that was never installed
            raise fail("ragbus is not installed (run `make demo` or pip install -e .), so it has no version") \
                from None
        console.print(f"ragbus {installed}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Log at debug level, with tracebacks "
                                        "(same as RAGBUS_LOG_LEVEL=debug).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print ragbus's version and exit.")] = False,
) -> None:
    if debug:
        os.environ["RAGBUS_LOG_LEVEL"] = "debug"  # stage threads and subprocesses inherit it
        configure_logging(tracebacks=None)


def main() -> None:
    configure_logging(tracebacks=None)
    try:
        app()
    except SystemExit as exc:
        _leave(exc.code)
        raise
    except Exception as exc:  # noqa: BLE001 - the last stop before a traceback reaches a newcomer
        if debugging():
            _leave(1, show_traceback=True)  # only returns when Python's own exit will print it
            raise
        reason = str(exc) if isinstance(exc, RagbusError) else f"{type(exc).__name__}: {exc}"
        err.print(Text.assemble(("error: ", "bold red"), plain(reason)), soft_wrap=True)
        err.print(Text("(ragbus --debug ... or RAGBUS_LOG_LEVEL=debug shows the traceback)", style="dim"))
        _leave(1)
        sys.exit(1)
    _leave(0)


def _leave(code: object, *, show_traceback: bool = False) -> None:
    """Exit past workers a stopped runtime left busy (:func:`shared.runtime.local.exit_past_busy_workers`),
    after the exception's traceback when asked; a command that never ran the runtime has none."""
    runtime = sys.modules.get("shared.runtime.local")
    if runtime is not None and runtime.workers_left_busy():
        if show_traceback:
            traceback.print_exc()
        runtime.exit_past_busy_workers(code)

