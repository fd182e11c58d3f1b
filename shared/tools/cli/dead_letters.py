"""``ragbus dead-letters``: messages that could not be handled; retry or purge them."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.text import Text

from shared.contract.errors import RagbusError
from shared.observability.terminal_text import plain
from shared.tools.cli.root import fail, print_json, say_empty
from shared.tools.cli.session import Session, open_session
from shared.tools.console import console, err, wait_with_progress

dead_letters_app = typer.Typer(
    help="Messages that could not be handled, with the reason; retry them once the cause is fixed, or purge them.",
    invoke_without_command=True)


@dead_letters_app.callback()
def dead_letters(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Messages that could not be handled, with the reason (`retry ID|--all`, `purge ID|--all`)."""
    from services.dead_letters.redrive import as_shown, letters, short_id

    if ctx.invoked_subcommand is not None:
        return
    kept = letters(open_session().deps.state)
    if as_json:
        print_json(as_shown(kept))
        return
    if not kept:
        say_empty("no dead letters: every message was handled")
        return
    for d in kept:
        console.print(Text.assemble((short_id(d), "bold"), " ", plain(d.get("at")), " ", plain(d.get("subscription")),
                                    f" x{plain(d.get('attempts'))}: ", (plain(d.get("error")), "red")),
                      soft_wrap=True)
    err.print(Text("`ragbus dead-letters retry ID` (or --all) once the cause is fixed; "
                   "`ragbus dead-letters purge ID` (or --all) drops it", style="dim"), soft_wrap=True)


LetterId = Annotated[str | None, typer.Argument(
    help="A dead letter's id as `ragbus dead-letters` shows it (a unique prefix is enough).", show_default=False)]
EveryLetter = Annotated[bool, typer.Option("--all", help="Every dead letter.")]


@dead_letters_app.command("retry")
def dead_letters_retry(
    letter_id: LetterId = None,
    every: EveryLetter = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the retried work.")] = 900.0,
) -> None:
    """Publish a dead letter's message again (the cause fixed), and wait until the stages handled it."""
    from services.dead_letters.redrive import retry, select, subject_of

    session = open_session(changes=True)
    since = time.time() - 0.001
    with session.stages() as runtime:
        try:
            done = retry(session.deps, select(session.deps.state, letter_id, every=every))
        except RagbusError as exc:
            raise fail(str(exc)) from None
        if done.done and runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "dead-letters retry", subjects=done.subjects)
    # only the letters of what this command retried: a retry running beside it fails its own
    again = len([d for d in letters_since(session, since) if subject_of(d) in done.subjects])
    console.print(f"retried {len(done.done)} dead letter(s)"
                  + (f"; {again} failed again (`ragbus dead-letters` shows why)" if again else ""))
    for key, why in done.refused.items():
        err.print(Text.assemble(("not retried: ", "bold red"), plain(key), ": ", plain(why)), soft_wrap=True)
    if again or done.refused:
        raise typer.Exit(1)


def letters_since(session: Session, since: float) -> list[dict[str, Any]]:
    from datetime import UTC, datetime

    from services.dead_letters.redrive import letters

    cutoff = datetime.fromtimestamp(since, UTC)
    out = []
    for d in letters(session.deps.state):
        try:
            if datetime.fromisoformat(str(d.get("at"))) >= cutoff:
                out.append(d)
        except ValueError:
            continue
    return out


@dead_letters_app.command("purge")
def dead_letters_purge(letter_id: LetterId = None, every: EveryLetter = False) -> None:
    """Drop a dead letter; the document it was about is left out until it changes."""
    from services.dead_letters.redrive import purge, select

    session = open_session(changes=True)
    try:
        done = purge(session.deps, select(session.deps.state, letter_id, every=every))
    except RagbusError as exc:
        raise fail(str(exc)) from None
    console.print(f"purged {len(done.done)} dead letter(s)")


# ------------------------------------------------------------------ traces
