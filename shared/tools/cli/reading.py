"""``ragbus stats``, ``ragbus search`` and ``ragbus ask``: what the index holds and what it answers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import RagbusError
from shared.contract.redaction import redact
from shared.contract.sources import SOURCE_KINDS
from shared.observability.terminal_text import markup, plain
from shared.query.feedback import feedback_counts
from shared.query.record import QueryRecord
from shared.tools.cli.root import ADD_DOCUMENTS, fail, print_json, say_empty
from shared.tools.cli.session import Session, announce_data, open_session, where_data_is
from shared.tools.console import console, print_answer

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


def collect_stats(deps: Deps) -> dict[str, Any]:
    from shared.ingest.listings import kind_of, list_listings, shown_url

    state = deps.state
    outcomes: dict[str, int] = {}
    rated: dict[str, dict[str, int]] = {}  # outcome -> ratings up and down (every client's)
    for doc in state.list(state_collections.QUERIES):
        record = QueryRecord.from_doc(doc)
        key = record.outcome or record.status or "unknown"
        outcomes[key] = outcomes.get(key, 0) + 1
        if record.feedback:
            counts = rated.setdefault(key, {"up": 0, "down": 0})
            for rating, n in feedback_counts(record).items():
                counts[rating] += n
    from services.dead_letters.redrive import letters as dead_letters_of

    letters = dead_letters_of(state)  # each with its id: what `ragbus dead-letters retry ID` takes
    letters.sort(key=lambda d: d.get("at") or "", reverse=True)
    return {
        "documents": state.count(state_collections.DOCUMENTS),
        "chunks": deps.index.count_chunks(),
        "dead_letters": len(letters),
        "feeds": [  # every polled listing, whatever its kind (the key is older than sitemaps)
            {**{k: f.get(k) for k in ("url", "last_poll", "last_status", "last_error", "items")}, "kind": kind_of(f),
             "url": shown_url(f["url"]) if f.get("url") else f.get("url")}  # its ?token= [redacted], as listed
            for f in list_listings(state)
        ],
        "queries": {"total": sum(outcomes.values()), "by_outcome": outcomes},
        # ratings people gave answers (shared.query.feedback), by the answer's outcome
        "feedback": {"up": sum(c["up"] for c in rated.values()), "down": sum(c["down"] for c in rated.values()),
                     "by_outcome": rated},
        # what the retention settings keep in check (shared.runtime.retention)
        "data_dir": str(deps.settings.home), "data_dir_bytes": _tree_bytes(deps.settings.home),
        "recent_dead_letters": [
            {k: d.get(k) for k in ("id", "message_id", "subscription", "type", "error", "attempts", "at")}
            for d in letters[:10]
        ],
        # documents indexed with pages (slides, rows) left out: a scan without OCR, a cut at a bound
        "partly_read": [
            {"url": d.get("url"), "unread": d.get("unread"), "reason": d.get("unread_reason")}
            for d in state.list(state_collections.DOCUMENTS) if d.get("unread")
        ],
    }


def _tree_bytes(root: Path) -> int:
    """The bytes of the regular files under ``root`` (links not followed; a file deleted meanwhile skipped)."""
    total, folders = 0, [root]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


@commands.command()
def stats(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Documents, chunks, dead letters, feeds and queries."""
    session = open_session()
    result = collect_stats(session.deps)
    if as_json:
        print_json(result)
        return
    announce_data(session.settings)  # 0 documents means something else in the topology's storage
    console.print(f"documents: {result['documents']}   chunks: {result['chunks']}   "
                  f"dead letters: {result['dead_letters']}   queries: {result['queries']['total']}   "
                  f"rated up/down: {result['feedback']['up']}/{result['feedback']['down']}   "
                  f"data directory: {result['data_dir_bytes'] / 1e6:.1f} MB")
    for feed in result["feeds"]:
        console.print(f"  {feed['kind']} {markup(feed['url'])}: last poll {markup(feed['last_poll'] or 'never')}"
                      + (f", [red]error: {markup(feed['last_error'])}[/]" if feed["last_error"] else ""))
    from services.dead_letters.redrive import short_id

    for doc in result["partly_read"]:
        console.print(f"  [yellow]partly read[/] {markup(doc['url'])}: {doc['unread']} page(s) not read "
                      f"({markup(doc['reason'])})")
    for letter in result["recent_dead_letters"]:
        # the id `ragbus dead-letters retry ID` / `purge ID` takes
        console.print(f"  [red]dead letter[/] {markup(short_id(letter))} {markup(letter['subscription'])}: "
                      f"{markup(letter['error'])}")


SOURCE_HELP = ("Only documents from this source: a feed or sitemap URL, gs://bucket/prefix or a folder "
                "(default: every source).")
SINCE_HELP = ("Only documents published since: a date (2025-06-01), an ISO time or an age (12h, 7d, 2w, 3m, 1y) "
               "(default: no lower bound).")
UNTIL_HELP = ("Only documents published before: a date (through that day), an ISO time or an age "
               "(7d: a week ago) (default: no upper bound).")
WHERE_HELP = "Only documents whose metadata KEY equals VALUE; repeatable, all must hold (default: none)."
KIND_HELP = f"Only documents that came in as: {', '.join(SOURCE_KINDS[:-1])} or {SOURCE_KINDS[-1]} (default: any)."


# The options search, ask and chat share, spelled once so their flags and help stay the same.
SourceOption = Annotated[str | None, typer.Option("--source", help=SOURCE_HELP)]
SinceOption = Annotated[str | None, typer.Option("--since", help=SINCE_HELP)]
UntilOption = Annotated[str | None, typer.Option("--until", help=UNTIL_HELP)]
WhereOption = Annotated[list[str] | None, typer.Option("--where", metavar="KEY=VALUE", help=WHERE_HELP)]
KindOption = Annotated[str | None, typer.Option("--kind", help=KIND_HELP)]
TopKOption = Annotated[int | None, typer.Option(
    "--top-k", min=1, max=50, help="How many chunks to retrieve and grade per iteration "
    "(default: RAGBUS_TOP_K, else 10).")]
MaxIterationsOption = Annotated[int | None, typer.Option(
    "--max-iterations", min=0, max=5, help="Refinements after the first retrieval when the grade is weak; 0: none "
    "(default: RAGBUS_MAX_ITERATIONS, else 2).")]


def say_if_nothing_can_answer(session: Session) -> None:
    """Say so before asking when the embedded index is empty (the topology's index is elsewhere)."""
    if session.local is not None and session.deps.index.count_chunks() == 0:
        say_empty(f"the index under {where_data_is(session.settings)} is empty, so nothing can answer; "
                  f"{what_fills_it(session)}")


def what_fills_it(session: Session) -> str:
    """What to do about an empty index: finish the indexing an earlier command left queued (an
    interrupted `ragbus ingest` of a large file: "add documents" read as if they were lost), or add some."""
    from shared.runtime.stages import INGESTION_STAGES
    from shared.tools.cli.session import consumers_of

    if session.local is not None and session.local.bus.outstanding(
            [c.subscription for c in consumers_of(INGESTION_STAGES)]):
        return ("documents an earlier command announced are still queued for indexing: the next `ragbus ingest`, "
                "`ragbus poll` or `ragbus serve` in this data directory indexes them")
    return ADD_DOCUMENTS


def filters_from_flags(deps: Deps, source: str | None, since: str | None, until: str | None,
             where: list[str] | None, kind: str | None = None) -> Any:
    """The --source/--since/--until/--where/--kind flags as Filters (None when none is given)."""
    from shared.contract.filters import FilterError, Filters

    if source is None and since is None and until is None and not where and kind is None:
        return None
    try:
        filters = Filters.parse(now=deps.clock.now(), source=source, since=since, until=until,
                                kind=kind, where=where or None)
    except FilterError as exc:
        raise fail(f"filter: {exc}") from None
    if filters.source is not None:
        _check_source_stored(deps, filters.source, source or "")
    return None if filters.is_empty else filters


def _check_source_stored(deps: Deps, source: str, typed: str) -> None:
    """Refuse a --source no stored document comes from (a path that does not exist, a feed never polled):
    the filter would admit nothing, and the answer "nothing matches the filters" read as a finished command."""
    from shared.contract.filters import Filters

    only_source = Filters(source=source)
    # a source as it was stored (a feed, a folder, a bucket prefix: `ragbus sources`) or one document's URL or file:
    # one match asked for each, not every document read (in Firestore, one read per document, each command)
    named = [{"origin": source}, {"url": source}] + ([{"url": Path(source).as_uri()}] if os.path.isabs(source) else [])
    if any(deps.state.list(state_collections.DOCUMENTS, where=where, limit=1) for where in named):
        return
    origins: set[str] = set()
    for doc in deps.state.list(state_collections.DOCUMENTS):  # a prefix of what is stored, or nothing stored
        if only_source.matches(doc):
            return
        origins.add(str(doc.get("origin") or doc.get("url") or ""))
    if not origins:
        raise fail(f"--source {redact(typed)}: no document is indexed yet, so no stored source matches it; {ADD_DOCUMENTS}")
    missing = ("; no such file or folder exists either" if "://" not in source and not os.path.exists(source)
               else "")
    shown = sorted(redact(o) for o in origins if o)  # a feed's ?token= stays out of a terminal's scrollback
    listed = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    raise fail(f"--source {redact(typed)}: no indexed document comes from this source{missing}. --source filters the "
               "stored documents by where they came from (a feed or sitemap URL, gs://bucket/prefix or an "
               f"ingested folder or file); stored sources: {listed}")


@commands.command()
def search(
    text: Annotated[str, typer.Argument(help="The words to search for.")],
    k: Annotated[int | None, typer.Option("--k", min=1, max=50,  # TOP_K_RANGE, as --top-k
                                          help="How many chunks (default: RAGBUS_TOP_K, else 10).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    source: SourceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    where: WhereOption = None,
    kind: KindOption = None,
) -> None:
    """Retrieval only: the chunks that best match TEXT."""
    from shared.contract.text import snippet
    from shared.query.api import search_documents

    session = open_session()
    filters = filters_from_flags(session.deps, source, since, until, where, kind)
    try:
        hits = search_documents(session.deps, text, k, field="text", filters=filters)
    except RagbusError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(hits)
        return
    if not hits:
        if session.deps.index.count_chunks() == 0:
            say_empty(f"the index under {where_data_is(session.settings)} is empty; {what_fills_it(session)}")
        elif filters is not None:
            say_empty(f"no chunk matches within the filters ({filters.describe()}); widen them or try other words")
        else:
            say_empty("no chunk matches; try other words")
        return
    for n, hit in enumerate(hits, 1):
        place = f", {plain(hit['position'])}" if hit.get("position") else ""
        console.print(Text.assemble((f"{n}. {plain(hit['title'])}", "bold"),
                                    f" ({hit['score']:.3f}{place}) {plain(hit['url'])}"), soft_wrap=True)
        console.print(Text("   " + plain(snippet(hit["text"], title=hit.get("title") or ""))))


def _ask(deps: Deps, question: str, *, top_k: int | None, max_iterations: int | None,
         timeout: float | None, filters: Any = None) -> QueryRecord:
    """``timeout``: --timeout, or None for RAGBUS_QUERY_TIMEOUT_S (which, like the gateway's default,
    may exceed the range a caller may ask for)."""
    from shared.query.api import submit_query, wait_for_query

    record = submit_query(deps, question, top_k=top_k, max_iterations=max_iterations, timeout_s=timeout,
                          field="question", filters=filters)
    return wait_for_query(deps, record.id, (timeout or deps.settings.query_timeout_s) + 5)


@commands.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in words (quote it in the shell).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full query record as JSON.")] = False,
    top_k: TopKOption = None,
    max_iterations: MaxIterationsOption = None,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds before the query times out (default: RAGBUS_QUERY_TIMEOUT_S, else 60).")] = None,
    source: SourceOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    where: WhereOption = None,
    kind: KindOption = None,
) -> None:
    """Ask a question; answer with citations from the indexed corpus."""
    from shared.query.api import TIMEOUT_RANGE_S, validate_seconds

    if timeout is not None:
        try:  # named as the user typed it, not as the API's 'timeout_s'
            validate_seconds(timeout, "--timeout", TIMEOUT_RANGE_S)
        except RagbusError as exc:
            raise fail(str(exc)) from None
    session = open_session(changes=True)
    filters = filters_from_flags(session.deps, source, since, until, where, kind)
    say_if_nothing_can_answer(session)
    with session.stages():
        try:
            record = _ask(session.deps, question, top_k=top_k, max_iterations=max_iterations, timeout=timeout,
                          filters=filters)
        except RagbusError as exc:
            raise fail(str(exc)) from None
    if as_json:
        print_json(record.to_doc())
    else:
        print_answer(record)
    if record.status != "answered":
        raise typer.Exit(1)
