"""The ``ragbus`` command itself and what every command shares: its options, errors and empty results."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import click
import typer
from rich.text import Text
from typer.core import TyperOption

from shared.observability.terminal_text import dumps, markup
from shared.tools.console import err


def _flag_type(self: TyperOption, ctx: click.Context) -> str | None:
    """No type beside an on/off flag: typer writes ``<bool>`` there, which reads as a value to type."""
    return None if self.is_flag else _typer_option_type(self, ctx)


_typer_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    help="ragbus: event-driven RAG. Feeds and files in, answers with citations out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


AllowLoopback = Annotated[
    bool,
    typer.Option(
        "--allow-loopback",
        help="Allow feed and page URLs on 127.0.0.0/8 and ::1 (local use and tests). "
        "Same as RAGBUS_ALLOW_LOOPBACK=1.",
    ),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {markup(message)}")
    return typer.Exit(code)


ADD_DOCUMENTS = ("add documents with `ragbus ingest PATH...` or `ragbus feeds add URL` then `ragbus poll`, "
                 "or try `ragbus demo`")


def say_empty(message: str) -> None:
    """An empty listing says so, and what to do next (on stderr: stdout stays the data)."""
    err.print(Text(message, style="yellow"), soft_wrap=True)


def print_json(value: Any) -> None:
    sys.stdout.write(dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
