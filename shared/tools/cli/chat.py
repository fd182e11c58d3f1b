"""``ragbus chat``: a conversation in the terminal.

Each line is a question; a follow-up ("and what is its maximum?") is sent with the
conversation's id, so the loop reads it with the earlier turns. ``/new`` starts a new
conversation, ``/up`` and ``/down`` (with an optional comment after them) rate the last answer as
``ragbus feedback`` does, Ctrl-D (or ``/quit``) leaves. One-shot questions stay ``ragbus ask``'s.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.text import Text

from shared.contract.deps import Deps
from shared.contract.errors import RagbusError
from shared.observability.terminal_text import plain
from shared.query.record import QueryRecord
from shared.tools.cli.reading import (
    KindOption,
    MaxIterationsOption,
    SinceOption,
    SourceOption,
    TopKOption,
    UntilOption,
    WhereOption,
    filters_from_flags,
    say_if_nothing_can_answer,
)
from shared.tools.cli.session import open_session
from shared.tools.console import cited_place, console, err

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)

PROMPT = "you> "
_HELP = ("Type a question. /up or /down [comment] rates the last answer; /new starts a new conversation; "
         "Ctrl-C stops waiting for an answer; Ctrl-D (or /quit) leaves.")
_COMMANDS = {"/new", "/quit", "/exit", "/help", "/up", "/down"}


@commands.command()
def chat(
    top_k: TopKOption = None,
    max_iterations: MaxIterationsOption = None,
    source: SourceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    where: WhereOption = None,
    kind: KindOption = None,
) -> None:
    r"""A conversation: ask, then follow up; each answer with its citations. /up or /down \[comment] rates the last
    answer, /new starts over, Ctrl-C stops waiting for an answer, Ctrl-D leaves."""
    session = open_session(changes=True)
    filters = filters_from_flags(session.deps, source, since, until, where, kind)
    say_if_nothing_can_answer(session)
    if sys.stdin.isatty():
        import readline  # noqa: F401 - line editing and history for input(), as a shell gives them
    with session.stages():
        console.print(Text(_HELP + (f"\nSearching only: {filters.describe()}." if filters is not None else ""),
                           style="dim"))
        try:
            unfinished, asked = _converse(session.deps, top_k=top_k, max_iterations=max_iterations, filters=filters)
        except KeyboardInterrupt:
            console.print()
            raise typer.Exit(130) from None
    if unfinished:  # as `ragbus ask` does for its one question: a script reading the exit status learns of it
        err.print(Text(f"{unfinished} of {asked} questions got no answer (failed, timed out, or not waited "
                       "for); each said why above", style="yellow"), soft_wrap=True)
        raise typer.Exit(1)


def _converse(deps: Deps, *, top_k: int | None, max_iterations: int | None, filters: Any) -> tuple[int, int]:
    """Read questions until Ctrl-D or /quit; return how many of the questions asked got no answer, and how many
    were asked."""
    conversation: str | None = None
    last: str | None = None  # the query id of the last answer, which /up and /down rate
    unfinished = asked = 0
    while True:
        try:
            line = input(PROMPT)
        except EOFError:  # Ctrl-D, or the end of piped questions
            console.print()
            return unfinished, asked
        if not sys.stdin.isatty():  # a terminal echoes what was typed; from a pipe the prompt stood alone
            console.print(plain(line), markup=False, highlight=False, soft_wrap=True)
        question = line.strip()
        if not question:
            continue
        command = question.lower()
        word, _, rest = question.partition(" ")
        if word.lower() in ("/up", "/down"):
            _rate_last(deps, last, word.lower()[1:], rest.strip() or None)
            continue
        if command in ("/quit", "/exit"):
            return unfinished, asked
        if command == "/new":
            conversation = None
            console.print(Text("New conversation: the next question stands on its own.", style="dim"))
            continue
        if command == "/help" or command.startswith("/") and " " not in command and command not in _COMMANDS:
            prefix = "" if command == "/help" else f"unknown command {plain(question)}; "
            console.print(Text(prefix + _HELP, style="dim"))
            continue
        record = _turn(deps, question, conversation, top_k=top_k, max_iterations=max_iterations, filters=filters)
        asked += 1
        unfinished += record is None or not record.ended or record.status != "answered"
        if record is not None:
            conversation, last = record.conversation_id, record.id
            if record.ended:
                print_turn(record)


def _rate_last(deps: Deps, query_id: str | None, rating: str, comment: str | None) -> None:
    """/up or /down: rate the last answer (said why when there is none, or the rating is refused)."""
    from shared.tools.cli.feedback import rate, say_rated

    if query_id is None:
        console.print(Text(f"no answer to rate yet; ask a question first, then /{rating}", style="dim"))
        return
    try:
        say_rated(rate(deps, query_id, rating, comment=comment))
    except RagbusError as exc:  # a comment too long, say: the conversation goes on
        err.print(Text.assemble(("error: ", "bold red"), plain(str(exc))), soft_wrap=True)


def _turn(deps: Deps, question: str, conversation: str | None, **options: Any) -> QueryRecord | None:
    """Ask ``question`` in ``conversation`` and wait for its end; None (said why) when it could not be asked.

    Ctrl-C stops this turn only, not the chat: while the answer is awaited, the record is returned as it
    is, not ended (the question goes on in this process's stages, and the conversation at the prompt);
    while the question is still being asked, it may or may not have been, and None is returned."""
    from shared.query.api import ConversationNotFound, submit_query, wait_for_query

    record: QueryRecord | None = None
    try:
        try:
            record = submit_query(deps, question, field="question", conversation_id=conversation, **options)
        except ConversationNotFound:
            err.print(Text("the conversation is no longer stored (it expired with its questions); "
                           "asking this as the start of a new one", style="yellow"))
            record = submit_query(deps, question, field="question", **options)
        with console.status("searching, grading, answering…"):
            return wait_for_query(deps, record.id, deps.settings.query_timeout_s + 5)
    except RagbusError as exc:  # a question too long, a bus that is down: say so, keep the conversation
        err.print(Text.assemble(("error: ", "bold red"), plain(str(exc))), soft_wrap=True)
        return None
    except KeyboardInterrupt:
        where = (f"the question goes on as query {record.id[:8]}: `ragbus trace {record.id[:8]}` shows it"
                 if record is not None else "`ragbus traces` shows whether the question was asked")
        console.print(Text(f"stopped waiting (Ctrl-C); {where}. Ask on, or Ctrl-D to leave.", style="dim"),
                      soft_wrap=True)
        return record


def print_turn(record: QueryRecord) -> None:
    """The answer as a chat shows it: what the question was read as, the answer, its sources."""
    if record.standalone_question and record.standalone_question != record.original_query:
        console.print(Text(f"(read as: {plain(record.standalone_question)})", style="dim"), soft_wrap=True)
    if record.status != "answered":
        console.print(Text(f"{plain(record.outcome or record.status)}: {plain(record.error or '')}", style="red"),
                      soft_wrap=True)
    if record.answer:
        console.print(Text(plain(record.answer)), soft_wrap=True)
    for c in record.citations:
        console.print(Text(f"  [{plain(c.get('id'))}] {cited_place(c)} — {plain(c.get('url'))}", style="cyan"),
                      soft_wrap=True)
    console.print(Text(f"({plain(record.outcome or record.status)}; query {record.id[:8]}: "
                       f"`ragbus trace {record.id[:8]}` shows its stages; /up or /down rates it)", style="dim"))
    console.print()


__all__ = ["chat", "print_turn"]
