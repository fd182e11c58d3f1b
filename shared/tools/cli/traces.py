"""``ragbus trace`` and ``ragbus traces``: the recorded spans of queries."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.observability.terminal_text import plain
from shared.query.feedback import feedback_counts
from shared.query.record import QueryRecord
from shared.query.state import read_record
from shared.tools.cli.root import fail, print_json, say_empty
from shared.tools.cli.session import open_session, where_data_is
from shared.tools.console import console, err

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


def _span_store(settings: Settings):
    from shared.adapters.local.spans import SqliteSpanStore

    if not settings.traces_path.exists():
        raise fail(f"no traces recorded yet under {settings.home} (RAGBUS_TRACING=0 turns them off)")
    return SqliteSpanStore(settings.traces_path)


FAILED_OUTCOMES = ("failed", "timed_out")


def resolve_query_id(deps: Deps, given: str) -> str:
    """The query id ``given`` names: the whole id or a unique prefix of one."""
    given = given.strip()
    if not given:  # the prefix of every id
        raise fail("give a query id or a unique prefix of one; `ragbus traces` lists them")
    if deps.state.get(state_collections.QUERIES, given) is not None:
        return given
    matches = sorted(r["id"] for r in deps.state.list(state_collections.QUERIES) if str(r.get("id", "")).startswith(given))
    if len(matches) > 1:
        shown = ", ".join(m[:12] for m in matches[:3]) + (", ..." if len(matches) > 3 else "")
        raise fail(f"{len(matches)} queries start with {given!r} ({shown}); give more characters")
    return matches[0] if matches else given


def short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """Each id's shortest prefix (at least ``minimum`` characters) that no other id shares."""
    out = {}
    for query_id in ids:
        n = minimum
        while n < len(query_id) and any(o != query_id and o.startswith(query_id[:n]) for o in ids):
            n += 1
        out[query_id] = query_id[:n]
    return out


@commands.command("trace")
def trace_cmd(
    query_id: Annotated[str, typer.Argument(help="A query id or a unique prefix of one (as `ragbus traces` "
                                            "shows it), or a trace id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the spans as JSON; the root span carries the "
                                          "answer's ratings under `feedback`, as the text form prints them.")] = False,
) -> None:
    """The waterfall of one query: every stage of every iteration, with durations and grades."""
    from shared.observability.waterfall import render

    session = open_session()
    store = _span_store(session.settings)
    query_id = resolve_query_id(session.deps, query_id)
    record = read_record(session.deps.state, query_id)
    trace_id = (record.trace_id if record else None) or store.trace_of_query(query_id) or query_id
    spans = store.spans_of_trace(trace_id)
    if not spans:
        raise fail(f"no spans for {query_id!r}; `ragbus traces` lists the traced queries")
    if as_json:
        ratings = list(record.feedback) if record is not None else []
        print_json([{**span, "feedback": ratings} if span.get("parent_id") is None else span for span in spans])
        return
    console.print(Text(f"trace {plain(trace_id)} — {len(spans)} spans", style="bold"))
    for line in render(spans):
        console.print(plain(line), markup=False, highlight=False, soft_wrap=True)
    if record is not None:
        print_feedback(record)


def print_feedback(record: QueryRecord) -> None:
    """The ratings people gave the answer, newest last, each with its comment (as text, never markup)."""
    for entry in record.feedback:
        line = Text(f"rated {plain(entry.get('rating'))}", style="green" if entry.get("rating") == "up" else "red")
        line.append(f" at {plain(entry.get('at'))}", style="dim")
        if entry.get("wrong_citations"):
            line.append(f"  wrong citations: {', '.join(f'[{n}]' for n in entry['wrong_citations'])}")
        if entry.get("comment"):
            line.append(f"  comment: {plain(entry['comment'])}")
        if entry.get("expected"):
            line.append(f"  expected: {plain(entry['expected'])}")
        console.print(line, soft_wrap=True)


def traced_queries(deps: Deps, settings: Settings, *, slow: bool, failed: bool, limit: int) -> list[dict[str, Any]]:
    """The traced queries with what a person looks for: when, how it ended, how long, the question."""
    from datetime import UTC, datetime

    store = _span_store(settings)
    rows = store.slowest_queries(1_000_000, order="duration" if slow else "recent")
    out = []
    for r in rows:
        record = deps.state.get(state_collections.QUERIES, str(r["query_id"])) or {}
        outcome = record.get("outcome") or record.get("status") or "unknown"
        ratings = feedback_counts(QueryRecord.from_doc(record)) if record else {"up": 0, "down": 0}
        if failed and outcome not in FAILED_OUTCOMES:
            continue
        question = "[redacted]" if settings.redact_query_text else record.get("original_query")
        out.append({
            "query_id": r["query_id"], "trace_id": r["trace_id"],
            "started_at": datetime.fromtimestamp(r["start_ns"] / 1e9, UTC).isoformat(),
            "outcome": outcome, "duration_ms": round(r["duration_ms"], 1),
            "iterations": len(record.get("iterations") or []), "spans": r["spans"], "question": question,
            "feedback": ratings,
        })
        if len(out) >= limit:
            break
    return out


@commands.command("traces")
def traces_cmd(
    slow: Annotated[bool, typer.Option("--slow", help="Slowest first (default: most recent first).")] = False,
    failed: Annotated[bool, typer.Option("--failed", help="Only queries that failed or timed out.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many queries.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List traced queries (time, outcome, duration, iterations, ratings, question): newest first, or slowest."""
    session = open_session()
    if not session.settings.traces_path.exists():
        if as_json:
            print_json([])
        say_empty(f"no queries traced yet under {where_data_is(session.settings)}; ask one with `ragbus ask QUESTION` "
               "(RAGBUS_TRACING=0 turns tracing off)")
        return
    rows = traced_queries(session.deps, session.settings, slow=slow, failed=failed, limit=limit)
    if as_json:
        print_json(rows)
        return
    if not rows:
        say_empty("no failed queries traced" if failed else "no queries traced yet; ask one with `ragbus ask QUESTION`")
        return
    every = [str(r["id"]) for r in session.deps.state.list(state_collections.QUERIES)]
    short = short_ids(sorted(set(every) | {str(r["query_id"]) for r in rows}))
    table = Table("id", "time", "outcome", "ms", "iter", "rated", "question")
    table.columns[0].no_wrap = True
    table.columns[1].no_wrap = True
    for r in rows:
        local_time = datetime_local(r["started_at"])
        table.add_row(Text(plain(short[str(r["query_id"])])), local_time, Text(plain(r["outcome"])),
                      f"{r['duration_ms']:.0f}", str(r["iterations"]), rated_cell(r["feedback"]),
                      Text(plain(r["question"] or "")))
    console.print(table)
    err.print(Text("`ragbus trace ID` shows one query's waterfall", style="dim"))


def rated_cell(counts: dict[str, int]) -> Text:
    """``up``, ``down``, ``2 up 1 down`` or nothing: how the answer was rated."""
    if not counts["up"] and not counts["down"]:
        return Text("")
    if counts["up"] + counts["down"] == 1:
        return Text("up" if counts["up"] else "down", style="green" if counts["up"] else "red")
    return Text(f"{counts['up']} up {counts['down']} down")


def datetime_local(iso: str) -> str:
    """The local time with its date and UTC offset: ``2026-11-26 05:55:38+01:00`` (a time without
    its zone or year cannot be compared with a log line or a colleague's)."""
    from datetime import datetime

    return datetime.fromisoformat(iso).astimezone().isoformat(sep=" ", timespec="seconds")


# ----------------------------------------------------------------- serving
