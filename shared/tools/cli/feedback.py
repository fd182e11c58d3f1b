"""``ragbus feedback ID up|down``: rate an answer from the terminal (as ``/up`` and ``/down`` do in
``ragbus chat``, and the page's thumbs), kept in the query record (:mod:`shared.query.feedback`).

The client of a rating given here is ``cli:<login name>``: one rating per query and person at this
terminal, a second replacing the first.
"""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.text import Text

from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.observability.terminal_text import plain
from shared.query.feedback import (
    RATINGS,
    QueryNotEnded,
    feedback_counts,
    give_feedback,
    validate_feedback,
)
from shared.tools.cli.root import fail, print_json
from shared.tools.cli.session import open_session
from shared.tools.cli.traces import resolve_query_id
from shared.tools.console import console

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


def cli_client() -> str:
    """Who rates from this terminal: the login name (``cli:unknown`` where none can be read)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no such user in the password database (a container's bare uid)
        return "cli:unknown"


def rate(deps: Deps, query_id: str, rating: str, *, comment: str | None = None,
         wrong_citations: list[int] | None = None, expected: str | None = None) -> dict[str, object]:
    """Keep the rating; what to show (query id, rating, replaced, up and down counts). Raises
    :class:`~shared.contract.errors.RagbusError` subclasses saying what was wrong."""
    from shared.query.api import QueryNotFound

    body = {"rating": rating, "comment": comment, "wrong_citations": wrong_citations or None, "expected": expected}
    checked = validate_feedback({k: v for k, v in body.items() if v is not None})
    try:
        record, replaced = give_feedback(deps, query_id, checked, client=cli_client())
    except QueryNotFound:
        raise InvalidInput(f"no query {query_id!r}; `ragbus traces` lists the queries") from None
    return {"query_id": record.id, "rating": checked.rating, "replaced": replaced, **feedback_counts(record)}


def say_rated(result: dict[str, object]) -> None:
    word = "replaced your rating:" if result["replaced"] else "rated"
    console.print(Text(f"{word} {result['rating']} for query {str(result['query_id'])[:8]} "
                       f"(up {result['up']}, down {result['down']}); `ragbus trace {str(result['query_id'])[:8]}` "
                       "shows it", style="dim"))


@commands.command("feedback")
def feedback_cmd(
    query_id: Annotated[str, typer.Argument(help="A query id or a unique prefix of one (as `ragbus traces` shows it).")],
    rating: Annotated[str, typer.Argument(help="up (the answer was right) or down (it was not).",
                                          metavar="up|down")],
    comment: Annotated[str | None, typer.Option("--comment", help="Why, in plain text (at most 2,000 characters; default: none).")] = None,
    wrong_citation: Annotated[list[int] | None, typer.Option(
        "--wrong-citation", metavar="N", help="A citation \\[N] that was wrong; repeatable (default: none).")] = None,
    expected: Annotated[str | None, typer.Option(
        "--expected", help="The answer that was expected, kept for `ragbus eval --from-feedback` (default: none).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Rate an answer up or down, with an optional comment; a second rating replaces the first."""
    if rating not in RATINGS:
        raise fail(f"the rating is up or down, not {plain(rating)!r}")
    session = open_session(changes=True)
    resolved = resolve_query_id(session.deps, query_id)
    try:
        result = rate(session.deps, resolved, rating, comment=comment, wrong_citations=wrong_citation,
                      expected=expected)
    except (InvalidInput, QueryNotEnded) as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(result)
        return
    say_rated(result)


__all__ = ["cli_client", "feedback_cmd", "rate", "say_rated"]
