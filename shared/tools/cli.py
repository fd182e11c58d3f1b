"""The ``ragbus`` command line.

Every command runs the embedded runtime in this process (``RAGBUS_RUNTIME=local``,
the default): it opens the durable bus and state under ``RAGBUS_HOME``, starts
the stages it needs, publishes the request and waits for the stages to finish.
Several ``ragbus`` processes may share one ``RAGBUS_HOME`` (a ``serve`` and a
``poll``, say): the bus leases each delivery to one worker.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from typer.core import TyperOption

from shared.contract import state_collections
from shared.contract.config import Settings, load_settings
from shared.contract.deps import Deps
from shared.contract.errors import RagbusError
from shared.contract.messages import FeedPollRequested
from shared.observability.logs import configure_logging, debugging
from shared.observability.terminal_text import dumps, markup, plain
from shared.query.record import QueryRecord
from shared.query.state import read_record
from shared.runtime.bootstrap import LocalSystem, build_deps, build_local
from shared.runtime.local import LocalRuntime
from shared.runtime.readiness import require_ready, unready_stages
from shared.runtime.stages import CONSUMERS, INGESTION_STAGES, Consumer
from shared.tools.console import (
    console,
    dead_since,
    err,
    print_answer,
    wait_until_stopped,
    wait_with_progress,
)


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
feeds_app = typer.Typer(help="Register, list and remove RSS/Atom feeds.", no_args_is_help=True)
app.add_typer(feeds_app, name="feeds")
sitemaps_app = typer.Typer(help="Register, list and remove sitemaps (sitemap.xml or a sitemap index).",
                          no_args_is_help=True)
app.add_typer(sitemaps_app, name="sitemaps")


AllowLoopback = Annotated[
    bool,
    typer.Option(
        "--allow-loopback",
        help="Allow feed and page URLs on 127.0.0.0/8 and ::1 (local use and tests). "
        "Same as RAGBUS_ALLOW_LOOPBACK=1.",
    ),
]


# --------------------------------------------------------------- plumbing


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
        consumers = _consumers(names)
        require_ready(self.settings, (c.stage for c in consumers))
        runtime = LocalRuntime(self.deps, self.local.bus, consumers).start()
        try:
            yield runtime
        finally:
            runtime.stop()


def _session(allow_loopback: bool = False, *, embedded_only: str | None = None, changes: bool = False) -> Session:
    """``changes``: the command writes to the data directory, so it says which one first
    (running from another folder would otherwise silently use another, empty, one)."""
    from shared.tools.topology import running_env, stopped_processes

    env = dict(os.environ)
    home = Path(env.get("RAGBUS_HOME", ".ragbus"))
    topology = running_env(home)
    if topology and "RAGBUS_RUNTIME" not in env:
        env.update(topology)  # `ragbus up --emulators` is running: talk to it
        os.environ.update(topology)  # the client libraries read the *_EMULATOR_HOST variables
    elif "RAGBUS_RUNTIME" not in env and (stopped := stopped_processes(home)):
        # the embedded runtime would quietly take the topology's place in the same home, and what
        # this command ingests or asks would land where the topology does not look
        raise _fail(f"the topology `ragbus up --emulators` started under {home.resolve()} is not running "
                    f"whole ({', '.join(stopped[:3])}{' and more' if len(stopped) > 3 else ''} stopped); "
                    "run `ragbus down` to stop the rest, then `ragbus up --emulators` to start it again "
                    "(after `ragbus down` alone, commands here use the embedded runtime)")
    settings = load_settings(env)
    if allow_loopback:
        settings = settings.with_(allow_loopback=True)
    if changes:
        announce_data(settings)
    if settings.runtime == "local":
        system = build_local(settings)
        return Session(settings, system.deps, system)
    if embedded_only:
        raise RagbusError(
            f"`ragbus {embedded_only}` runs the embedded runtime; unset RAGBUS_RUNTIME (it is {settings.runtime!r})"
        )
    from shared.tools.emulators import unreachable_emulators

    if unreachable := unreachable_emulators(os.environ):
        raise _fail("; ".join(unreachable) + "; start the emulators (`ragbus up --emulators` does), or unset "
                    "the variable to use Google Cloud itself")
    return Session(settings, build_deps(settings), None)


def _where(settings: Settings) -> str:
    if settings.runtime == "local":
        return f"data directory {settings.home.resolve()} (RAGBUS_HOME)"
    if os.environ.get("PUBSUB_EMULATOR_HOST") and os.environ.get("FIRESTORE_EMULATOR_HOST"):
        # the embedded runtime's data under RAGBUS_HOME is untouched and comes back at `ragbus down`
        return (f"the emulators of `ragbus up --emulators` (project {settings.gcp_project}, Firestore at "
                f"{os.environ['FIRESTORE_EMULATOR_HOST']}), not the data directory; `ragbus down` returns to it")
    return f"Google Cloud project {settings.gcp_project} (RAGBUS_RUNTIME={settings.runtime})"


def announce_data(settings: Settings) -> None:
    err.print(Text(f"using {_where(settings)}", style="dim"), soft_wrap=True)


def _consumers(stages: tuple[str, ...] | None) -> list[Consumer]:
    return [c for c in CONSUMERS if stages is None or c.stage in stages]


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {markup(message)}")
    return typer.Exit(code)


ADD_DOCUMENTS = ("add documents with `ragbus ingest PATH...` or `ragbus feeds add URL` then `ragbus poll`, "
                 "or try `ragbus demo`")


def _empty(message: str) -> None:
    """An empty listing says so, and what to do next (on stderr: stdout stays the data)."""
    err.print(Text(message, style="yellow"), soft_wrap=True)


def _print_json(value: Any) -> None:
    sys.stdout.write(dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _wait_for_documents(session: Session, ids_of: Callable[[], set[str] | None], timeout: float, label: str) -> int:
    """Wait, reading state only, until these documents are indexed or failed; return the failures.

    ``ids_of`` returns None while the request has not been handled yet (nothing to count)."""
    from shared.ingest.progress import status_of

    deadline = time.monotonic() + timeout
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as progress:
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
            progress.update(task, total=max(status.total, 1), completed=len(status.indexed) + len(status.failed),
                            description=f"{label:<12}{failed}")
            stable = stable + 1 if not status.pending else 0
            if stable >= 3:  # nothing pending three reads in a row
                return len(status.failed)
            time.sleep(0.5)
    err.print(f"[yellow]{label}: still working after {timeout:.0f} s; see `ragbus stats`[/]")
    return 0


# ------------------------------------------------------------------ feeds


@feeds_app.command("add")
def feeds_add(url: Annotated[str, typer.Argument(help="The feed's URL (http or https).")],
              allow_loopback: AllowLoopback = False) -> None:
    """Register a feed URL (RSS 2.0 or Atom)."""
    from shared.ingest.feeds import add_feed

    session = _session(allow_loopback, changes=True)
    try:
        feed = add_feed(session.deps.state, url, allow_loopback=session.settings.allow_loopback,
                        now=session.deps.clock.now())
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    console.print(f"added feed [bold]{markup(feed['url'])}[/]; run [bold]ragbus poll[/] to fetch it")


@feeds_app.command("list")
def feeds_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List registered feeds with their last poll and last error."""
    _list_listings("feed", as_json, "items")


@feeds_app.command("remove")
def feeds_remove(
    url: Annotated[str, typer.Argument(help="The feed's URL, as `ragbus feeds list` shows it.")],
    keep_documents: Annotated[bool, typer.Option(
        "--keep-documents", help="Keep the documents already indexed from this feed.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the documents' removal.")] = 300.0,
) -> None:
    """Unregister a feed and delete the documents indexed from it (--keep-documents keeps them)."""
    _remove_listing("feed", url, keep_documents, timeout)


def _list_listings(kind: str, as_json: bool, count_label: str) -> None:
    from shared.ingest.feeds import list_feeds

    listings = list_feeds(_session().deps.state, kind=kind)
    if as_json:
        _print_json(listings)
        return
    if not listings:
        _empty(f"no {kind}s registered; add one with `ragbus {kind}s add URL`")
        return
    table = Table("url", "last poll", count_label, "status", "last error")
    for listing in listings:
        table.add_row(*(Text(plain(cell)) for cell in (
            listing["url"], listing.get("last_poll") or "never", listing.get("items") or 0,
            listing.get("last_status") or "", listing.get("last_error") or "")))
    console.print(table)


def _remove_listing(kind: str, url: str, keep_documents: bool, timeout: float) -> None:
    from shared.ingest.feeds import remove_feed

    session = _session(changes=True)
    deps = session.deps
    since = time.time() - 0.001
    dead = 0
    with session.stages(("indexer",)) as runtime:
        try:
            deleted = remove_feed(deps.state, url, publisher=deps.publisher, clock=deps.clock,
                                  keep_documents=keep_documents, kind=kind)
        except RagbusError as exc:
            raise _fail(str(exc)) from None
        if deleted and runtime is not None:
            if not wait_with_progress(session.local, runtime, since, timeout, f"{kind}s remove"):
                raise typer.Exit(1)
            dead = dead_since(session.local, since)
        elif deleted:
            dead = _wait_for_documents(session, lambda: set(deleted), timeout, f"{kind}s remove")
    kept = "; its documents stay indexed" if keep_documents else f" and {len(deleted)} document(s) from it"
    console.print(Text(f"removed {kind} {plain(url)}{kept}"), soft_wrap=True)
    if dead:
        err.print(f"[red]{dead} document(s) could not be removed; see `ragbus dead-letters`[/]")
        raise typer.Exit(1)


# --------------------------------------------------------------- sitemaps


@sitemaps_app.command("add")
def sitemaps_add(url: Annotated[str, typer.Argument(help="The sitemap's URL (http or https).")],
                 allow_loopback: AllowLoopback = False) -> None:
    """Register a sitemap URL (sitemap.xml, or a sitemap index); `ragbus poll` fetches its pages."""
    from shared.ingest.feeds import add_feed

    session = _session(allow_loopback, changes=True)
    try:
        sitemap = add_feed(session.deps.state, url, allow_loopback=session.settings.allow_loopback,
                           now=session.deps.clock.now(), kind="sitemap")
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    console.print(f"added sitemap [bold]{markup(sitemap['url'])}[/]; run [bold]ragbus poll[/] to fetch its pages")


@sitemaps_app.command("list")
def sitemaps_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List registered sitemaps with their last poll and last error."""
    _list_listings("sitemap", as_json, "pages")


@sitemaps_app.command("remove")
def sitemaps_remove(
    url: Annotated[str, typer.Argument(help="The sitemap's URL, as `ragbus sitemaps list` shows it.")],
    keep_documents: Annotated[bool, typer.Option(
        "--keep-documents", help="Keep the documents already indexed from this sitemap.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the documents' removal.")] = 300.0,
) -> None:
    """Unregister a sitemap and delete the documents indexed from it (--keep-documents keeps them)."""
    _remove_listing("sitemap", url, keep_documents, timeout)


# ------------------------------------------------------------- ingestion


@app.command()
def poll(
    feed: Annotated[list[str] | None, typer.Option("--feed", help="Poll only this feed (repeatable; default: every registered feed and sitemap).")] = None,
    allow_loopback: AllowLoopback = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for indexing.")] = 900.0,
) -> None:
    """Poll feeds now and wait until everything new is indexed."""
    from shared.ingest.feeds import list_feeds
    from shared.ingest.progress import touched_since

    session = _session(allow_loopback, changes=True)
    deps = session.deps
    if not list_feeds(deps.state):
        left = session.local.bus.oldest_outstanding(
            [c.subscription for c in _consumers(INGESTION_STAGES)]) if session.local else None
        if left is None:
            # nothing to poll is not a failure: the command did all there was to do
            _empty("no feeds registered, nothing to poll; add one with `ragbus feeds add URL`")
            return
        # an earlier command ran out of time (a `feeds remove --timeout`): its work goes on here
        with session.stages(INGESTION_STAGES) as runtime:
            finished = wait_with_progress(session.local, runtime, left, timeout, "poll: work an earlier command left")
        if not finished:
            raise typer.Exit(1)
        console.print("no feeds registered; finished the work an earlier command left")
        return
    since, started = time.time() - 0.001, deps.clock.now()
    dead = 0
    earlier = _announce_earlier(session, _feed_items(deps, feed), "poll")
    with session.stages(INGESTION_STAGES) as runtime:
        deps.publisher.publish(FeedPollRequested(
            request_id=uuid.uuid4().hex, feed_urls=list(feed or []), requested_at=started))
        if runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "poll")
            dead = dead_since(session.local, since)
        else:
            wanted = list(feed or [f["url"] for f in list_feeds(deps.state)])

            def polled() -> set[str] | None:
                records = [f for f in list_feeds(deps.state) if f["url"] in wanted]
                if any(not f.get("last_poll") or f["last_poll"] < started.isoformat() for f in records):
                    return None  # keeps the wait going until the poller ran
                return touched_since(deps.state, started, wanted)

            dead = _wait_for_documents(session, polled, timeout, "poll")
    feeds = list_feeds(deps.state)
    failed = [f for f in feeds if f.get("last_error") and (not feed or f["url"] in feed)]
    for f in feeds:
        if not feed or f["url"] in feed:
            status = f"[red]{markup(f['last_error'])}[/]" if f.get("last_error") else markup(f.get("last_status") or "ok")
            console.print(f"{markup(f['url'])}: {status}")
    unfinished = _report_unfinished(session, earlier | touched_since(deps.state, started, _wanted_feeds(deps, feed)),
                                    "poll")
    if dead and not unfinished:
        err.print(f"[red]{dead} message(s) could not be processed; see `ragbus dead-letters`[/]")
    if failed or dead or unfinished:
        raise typer.Exit(1)


def _wanted_feeds(deps: Deps, feed: list[str] | None) -> list[str]:
    from shared.ingest.feeds import list_feeds
    from shared.ingest.url_guard import normalise_url

    if not feed:
        return [f["url"] for f in list_feeds(deps.state)]
    out = []
    for url in feed:
        try:
            out.append(normalise_url(url))
        except RagbusError:
            out.append(url)
    return out


def _feed_items(deps: Deps, feed: list[str] | None) -> set[str]:
    from shared.ingest.step import polled_items

    return {r["document_id"] for r in polled_items(deps.state, _wanted_feeds(deps, feed))}


def _announce_earlier(session: Session, candidates: set[str], command: str) -> set[str]:
    """Documents among ``candidates`` that an earlier run announced and that are not indexed
    yet (that run died, or gave up waiting): this run waits for them too."""
    from shared.ingest.progress import status_of

    pending = status_of(session.deps.state, candidates).pending
    if pending:
        err.print(f"{command}: {len(pending)} document(s) announced by an earlier run are not indexed yet; "
                  "waiting for them too")
    return pending


def _report_unfinished(session: Session, ids: set[str], command: str) -> int:
    """Say which of ``ids`` are still pending or failed after the wait; return how many."""
    from shared.ingest.progress import status_of

    status = status_of(session.deps.state, ids)
    if status.pending:
        err.print(f"[yellow]{command}: {len(status.pending)} document(s) still pending; they stay queued and "
                  f"continue on the next `ragbus {command}` (or under `ragbus serve`); see `ragbus stats`[/]")
    lettered = len(status.failed) - len(status.unfetched)
    if lettered:
        err.print(f"[red]{command}: {lettered} document(s) could not be processed; "
                  "see `ragbus dead-letters` for the reasons[/]")
    if status.unfetched:
        # a fetch that failed published nothing, so `ragbus dead-letters` has nothing to show
        err.print(f"[red]{command}: {len(status.unfetched)} item(s) could not be fetched; "
                  "`ragbus feeds list` (or `ragbus sitemaps list`) shows why[/]")
    return len(status.pending) + len(status.failed)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (.html, .htm, .md, .markdown, .txt, "
                                                 ".rst, .rest, and each of them gzip-compressed: .txt.gz ...).")],
    delete: Annotated[bool, typer.Option("--delete", help="Remove these documents' chunks instead.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="With --delete: delete even from / or a folder wider "
                                      "than any ingested path.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for indexing.")] = 900.0,
) -> None:
    """Ingest local files through the cleaner and indexer (the twin of a GCS upload)."""
    from shared.ingest.files import (
        IngestReport,
        delete_path,
        ingest_path,
        needs_confirmation,
        records_under,
    )

    session = _session(changes=True)
    report = IngestReport()
    deps = session.deps
    since = time.time() - 0.001
    ids: set[str] = set()
    if delete and not yes:
        for path in paths:
            why = needs_confirmation(path, deps.state)
            if why:
                raise _fail(f"{why}; nothing was deleted. Pass --yes to delete them, or name the ingested "
                            "folder or file itself")
    with session.stages(("cleaner", "indexer")) as runtime:
        for path in paths:
            try:
                if delete:
                    ids.update(delete_path(path, state=deps.state, publisher=deps.publisher, clock=deps.clock))
                else:
                    ids.update(m.document_id for m in ingest_path(
                        path, state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock,
                        report=report))
            except RagbusError as exc:
                raise _fail(str(exc)) from None
        submitted = len(ids)
        if not delete:
            # every file under these paths is this command's to finish, including files an
            # earlier run announced and did not see indexed (it was killed, or timed out)
            under = {r["document_id"] for path in paths for r in records_under(path, deps.state)}
            ids |= _announce_earlier(session, under - ids, "ingest")
        if ids and runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "ingest")
        elif ids:
            _wait_for_documents(session, lambda: ids, timeout, "ingest")
    verb = "deleted" if delete else "submitted"
    unchanged = f", {report.unchanged} unchanged" if report.unchanged else ""
    skipped = sum(report.skipped.values())
    skipped_text = f", {skipped} skipped" if skipped else ""
    # the index's total, from every source: "7 submitted; 15 indexed" read as if 15 of the 7 were
    console.print(f"{submitted} document(s) {verb}{unchanged}{skipped_text}; "
                  f"{deps.state.count(state_collections.DOCUMENTS)} document(s) in the index", soft_wrap=True)
    for (why, suffix), count in sorted(report.skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        console.print(Text(f"  skipped {count} {suffix} file(s): {why}"), soft_wrap=True)
    if delete:
        unfinished = _report_unfinished(session, ids, "ingest")
    else:
        # a file under these paths that failed earlier and is unchanged is still not indexed
        under = {r["document_id"] for path in paths for r in records_under(path, deps.state)}
        unfinished = _report_unfinished(session, ids | under, "ingest")
    if unfinished:
        raise typer.Exit(1)


# ------------------------------------------------------------------ reading


def collect_stats(deps: Deps) -> dict[str, Any]:
    from shared.ingest.feeds import list_feeds

    state = deps.state
    outcomes: dict[str, int] = {}
    for doc in state.list(state_collections.QUERIES):
        record = QueryRecord.from_doc(doc)
        key = record.outcome or record.status or "unknown"
        outcomes[key] = outcomes.get(key, 0) + 1
    from services.dead_letters.redrive import letters as dead_letters_of

    letters = dead_letters_of(state)  # each with its id: what `ragbus dead-letters retry ID` takes
    letters.sort(key=lambda d: d.get("at") or "", reverse=True)
    return {
        "documents": state.count(state_collections.DOCUMENTS),
        "chunks": deps.index.count_chunks(),
        "dead_letters": len(letters),
        "feeds": [
            {k: f.get(k) for k in ("url", "last_poll", "last_status", "last_error", "items")}
            for f in list_feeds(state)
        ],
        "queries": {"total": sum(outcomes.values()), "by_outcome": outcomes},
        "recent_dead_letters": [
            {k: d.get(k) for k in ("id", "message_id", "subscription", "type", "error", "attempts", "at")}
            for d in letters[:10]
        ],
    }


@app.command()
def stats(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Documents, chunks, dead letters, feeds and queries."""
    session = _session()
    result = collect_stats(session.deps)
    if as_json:
        _print_json(result)
        return
    announce_data(session.settings)  # 0 documents means something else in the topology's storage
    console.print(f"documents: {result['documents']}   chunks: {result['chunks']}   "
                  f"dead letters: {result['dead_letters']}   queries: {result['queries']['total']}")
    for feed in result["feeds"]:
        console.print(f"  feed {markup(feed['url'])}: last poll {markup(feed['last_poll'] or 'never')}"
                      + (f", [red]error: {markup(feed['last_error'])}[/]" if feed["last_error"] else ""))
    from services.dead_letters.redrive import short_id

    for letter in result["recent_dead_letters"]:
        # the id `ragbus dead-letters retry ID` / `purge ID` takes
        console.print(f"  [red]dead letter[/] {markup(short_id(letter))} {markup(letter['subscription'])}: "
                      f"{markup(letter['error'])}")


_SOURCE_HELP = ("Only documents from this source: a feed or sitemap URL, gs://bucket/prefix or a folder "
                "(default: every source).")
_SINCE_HELP = ("Only documents published since: a date (2025-06-01), an ISO time or an age (12h, 7d, 2w, 3m, 1y) "
               "(default: no lower bound).")
_UNTIL_HELP = ("Only documents published before: a date (through that day), an ISO time or an age "
               "(7d: a week ago) (default: no upper bound).")
_WHERE_HELP = "Only documents whose metadata KEY equals VALUE; repeatable, all must hold (default: none)."
_KIND_HELP = "Only documents that came in as: feed, sitemap, file or gcs (default: any)."


def _filters(deps: Deps, source: str | None, since: str | None, until: str | None,
             where: list[str] | None, kind: str | None = None) -> Any:
    """The --source/--since/--until/--where/--kind flags as Filters (None when none is given)."""
    from shared.contract.filters import FilterError, Filters

    if source is None and since is None and until is None and not where and kind is None:
        return None
    try:
        filters = Filters.parse(now=deps.clock.now(), source=source, since=since, until=until,
                                kind=kind, where=where or None)
    except FilterError as exc:
        raise _fail(f"filter: {exc}") from None
    return None if filters.is_empty else filters


@app.command()
def search(
    text: Annotated[str, typer.Argument(help="The words to search for.")],
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="How many chunks.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    source: Annotated[str | None, typer.Option(help=_SOURCE_HELP)] = None,
    since: Annotated[str | None, typer.Option(help=_SINCE_HELP)] = None,
    until: Annotated[str | None, typer.Option(help=_UNTIL_HELP)] = None,
    where: Annotated[list[str] | None, typer.Option(metavar="KEY=VALUE", help=_WHERE_HELP)] = None,
    kind: Annotated[str | None, typer.Option(help=_KIND_HELP)] = None,
) -> None:
    """Retrieval only: the chunks that best match TEXT."""
    from shared.contract.text import snippet
    from shared.query.api import search_documents

    session = _session()
    filters = _filters(session.deps, source, since, until, where, kind)
    try:
        hits = search_documents(session.deps, text, k, field="text", filters=filters)
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        _print_json(hits)
        return
    if not hits:
        if session.deps.index.count_chunks() == 0:
            _empty(f"the index under {_where(session.settings)} is empty; {ADD_DOCUMENTS}")
        elif filters is not None:
            _empty(f"no chunk matches within the filters ({filters.describe()}); widen them or try other words")
        else:
            _empty("no chunk matches; try other words")
        return
    for n, hit in enumerate(hits, 1):
        console.print(Text.assemble((f"{n}. {plain(hit['title'])}", "bold"), f" ({hit['score']:.3f}) {plain(hit['url'])}"),
                      soft_wrap=True)
        console.print(Text("   " + plain(snippet(hit["text"], title=hit.get("title") or ""))))


def _ask(deps: Deps, question: str, *, top_k: int | None, max_iterations: int | None,
         timeout: float | None, filters: Any = None) -> QueryRecord:
    """``timeout``: --timeout, or None for RAGBUS_QUERY_TIMEOUT_S (which, like the gateway's default,
    may exceed the range a caller may ask for)."""
    from shared.query.api import submit_query, wait_for_query

    record = submit_query(deps, question, top_k=top_k, max_iterations=max_iterations, timeout_s=timeout,
                          field="question", filters=filters)
    return wait_for_query(deps, record.id, (timeout or deps.settings.query_timeout_s) + 5)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in words (quote it in the shell).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full query record as JSON.")] = False,
    top_k: Annotated[int | None, typer.Option(
        min=1, max=50, help="How many chunks to retrieve and grade per iteration "
        "(default: RAGBUS_TOP_K, else 10).")] = None,
    max_iterations: Annotated[int | None, typer.Option(
        min=0, max=5, help="Refinements after the first retrieval when the grade is weak; 0: none "
        "(default: RAGBUS_MAX_ITERATIONS, else 2).")] = None,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds before the query times out (default: RAGBUS_QUERY_TIMEOUT_S, else 60).")] = None,
    source: Annotated[str | None, typer.Option(help=_SOURCE_HELP)] = None,
    since: Annotated[str | None, typer.Option(help=_SINCE_HELP)] = None,
    until: Annotated[str | None, typer.Option(help=_UNTIL_HELP)] = None,
    where: Annotated[list[str] | None, typer.Option(metavar="KEY=VALUE", help=_WHERE_HELP)] = None,
    kind: Annotated[str | None, typer.Option(help=_KIND_HELP)] = None,
) -> None:
    """Ask a question; answer with citations from the indexed corpus."""
    from shared.query.api import TIMEOUT_RANGE_S, validate_seconds

    if timeout is not None:
        try:  # named as the user typed it, not as the API's 'timeout_s'
            validate_seconds(timeout, "--timeout", TIMEOUT_RANGE_S)
        except RagbusError as exc:
            raise _fail(str(exc)) from None
    session = _session(changes=True)
    filters = _filters(session.deps, source, since, until, where, kind)
    if session.local is not None and session.deps.index.count_chunks() == 0:
        _empty(f"the index under {_where(session.settings)} is empty, so nothing can answer; {ADD_DOCUMENTS}")
    with session.stages():
        try:
            record = _ask(session.deps, question, top_k=top_k, max_iterations=max_iterations, timeout=timeout,
                          filters=filters)
        except RagbusError as exc:
            raise _fail(str(exc)) from None
    if as_json:
        _print_json(record.to_doc())
    else:
        print_answer(record)
    if record.status != "answered":
        raise typer.Exit(1)


dead_letters_app = typer.Typer(
    help="Messages that could not be handled, with the reason; retry them once the cause is fixed, or purge them.",
    invoke_without_command=True)
app.add_typer(dead_letters_app, name="dead-letters")


@dead_letters_app.callback()
def dead_letters(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Messages that could not be handled, with the reason (`retry ID|--all`, `purge ID|--all`)."""
    from services.dead_letters.redrive import letters, short_id

    if ctx.invoked_subcommand is not None:
        return
    kept = letters(_session().deps.state)
    if as_json:
        _print_json(kept)
        return
    if not kept:
        _empty("no dead letters: every message was handled")
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
    from services.dead_letters.redrive import retry, select

    session = _session(changes=True)
    since = time.time() - 0.001
    with session.stages() as runtime:
        try:
            done = retry(session.deps, select(session.deps.state, letter_id, every=every))
        except RagbusError as exc:
            raise _fail(str(exc)) from None
        if done.done and runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "dead-letters retry")
    again = len(letters_since(session, since))
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

    session = _session(changes=True)
    try:
        done = purge(session.deps, select(session.deps.state, letter_id, every=every))
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    console.print(f"purged {len(done.done)} dead letter(s)")


# ------------------------------------------------------------------ traces


def _span_store(settings: Settings):
    from shared.adapters.local.spans import SqliteSpanStore

    if not settings.traces_path.exists():
        raise _fail(f"no traces recorded yet under {settings.home} (RAGBUS_TRACING=0 turns them off)")
    return SqliteSpanStore(settings.traces_path)


FAILED_OUTCOMES = ("failed", "timed_out")


def resolve_query_id(deps: Deps, given: str) -> str:
    """The query id ``given`` names: the whole id or a unique prefix of one."""
    given = given.strip()
    if not given:  # the prefix of every id
        raise _fail("give a query id or a unique prefix of one; `ragbus traces` lists them")
    if deps.state.get(state_collections.QUERIES, given) is not None:
        return given
    matches = sorted(r["id"] for r in deps.state.list(state_collections.QUERIES) if str(r.get("id", "")).startswith(given))
    if len(matches) > 1:
        shown = ", ".join(m[:12] for m in matches[:3]) + (", ..." if len(matches) > 3 else "")
        raise _fail(f"{len(matches)} queries start with {given!r} ({shown}); give more characters")
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


@app.command("trace")
def trace_cmd(
    query_id: Annotated[str, typer.Argument(help="A query id or a unique prefix of one (as `ragbus traces` "
                                            "shows it), or a trace id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the spans as JSON.")] = False,
) -> None:
    """The waterfall of one query: every stage of every iteration, with durations and grades."""
    from shared.observability.waterfall import render

    session = _session()
    store = _span_store(session.settings)
    query_id = resolve_query_id(session.deps, query_id)
    record = read_record(session.deps.state, query_id)
    trace_id = (record.trace_id if record else None) or store.trace_of_query(query_id) or query_id
    spans = store.spans_of_trace(trace_id)
    if not spans:
        raise _fail(f"no spans for {query_id!r}; `ragbus traces` lists the traced queries")
    if as_json:
        _print_json(spans)
        return
    console.print(Text(f"trace {plain(trace_id)} — {len(spans)} spans", style="bold"))
    for line in render(spans):
        console.print(plain(line), markup=False, highlight=False, soft_wrap=True)


def traced_queries(deps: Deps, settings: Settings, *, slow: bool, failed: bool, limit: int) -> list[dict[str, Any]]:
    """The traced queries with what a person looks for: when, how it ended, how long, the question."""
    from datetime import UTC, datetime

    store = _span_store(settings)
    rows = store.slowest_queries(1_000_000, order="duration" if slow else "recent")
    out = []
    for r in rows:
        record = deps.state.get(state_collections.QUERIES, str(r["query_id"])) or {}
        outcome = record.get("outcome") or record.get("status") or "unknown"
        if failed and outcome not in FAILED_OUTCOMES:
            continue
        question = "[redacted]" if settings.redact_query_text else record.get("original_query")
        out.append({
            "query_id": r["query_id"], "trace_id": r["trace_id"],
            "started_at": datetime.fromtimestamp(r["start_ns"] / 1e9, UTC).isoformat(),
            "outcome": outcome, "duration_ms": round(r["duration_ms"], 1),
            "iterations": len(record.get("iterations") or []), "spans": r["spans"], "question": question,
        })
        if len(out) >= limit:
            break
    return out


@app.command("traces")
def traces_cmd(
    slow: Annotated[bool, typer.Option("--slow", help="Slowest first (default: most recent first).")] = False,
    failed: Annotated[bool, typer.Option("--failed", help="Only queries that failed or timed out.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many queries.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List traced queries (time, outcome, duration, iterations, question): newest first, or slowest."""
    session = _session()
    if not session.settings.traces_path.exists():
        if as_json:
            _print_json([])
        _empty(f"no queries traced yet under {_where(session.settings)}; ask one with `ragbus ask QUESTION` "
               "(RAGBUS_TRACING=0 turns tracing off)")
        return
    rows = traced_queries(session.deps, session.settings, slow=slow, failed=failed, limit=limit)
    if as_json:
        _print_json(rows)
        return
    if not rows:
        _empty("no failed queries traced" if failed else "no queries traced yet; ask one with `ragbus ask QUESTION`")
        return
    every = [str(r["id"]) for r in session.deps.state.list(state_collections.QUERIES)]
    short = short_ids(sorted(set(every) | {str(r["query_id"]) for r in rows}))
    table = Table("id", "time", "outcome", "ms", "iter", "question")
    table.columns[0].no_wrap = True
    table.columns[1].no_wrap = True
    for r in rows:
        local_time = datetime_local(r["started_at"])
        table.add_row(Text(plain(short[str(r["query_id"])])), local_time, Text(plain(r["outcome"])),
                      f"{r['duration_ms']:.0f}", str(r["iterations"]), Text(plain(r["question"] or "")))
    console.print(table)
    err.print(Text("`ragbus trace ID` shows one query's waterfall", style="dim"))


def datetime_local(iso: str) -> str:
    """The local time with its date and UTC offset: ``2026-11-26 05:55:38+01:00`` (a time without
    its zone or year cannot be compared with a log line or a colleague's)."""
    from datetime import datetime

    return datetime.fromisoformat(iso).astimezone().isoformat(sep=" ", timespec="seconds")


# ----------------------------------------------------------------- serving


def _poll_periodically(system: LocalSystem, stop: threading.Event) -> None:
    from shared.ingest.feeds import list_feeds

    while not stop.wait(system.settings.poll_interval_s):
        if list_feeds(system.deps.state):
            system.bus.publish(FeedPollRequested(
                request_id=uuid.uuid4().hex, feed_urls=[], requested_at=system.deps.clock.now()))


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    allow_loopback: AllowLoopback = False,
) -> None:
    """Gateway, web page, MCP, every stage and scheduled polling in one process."""
    from services.gateway.app import serve as serve_gateway
    from services.gateway.guard import LOOPBACK_HOSTS
    from shared.contract.config import check_api_token

    token = load_settings().api_token
    if host not in LOOPBACK_HOSTS:
        if token is None:
            # anyone who can reach the address could read the index and spend the model budget
            raise _fail(f"warning: --host {host} is reachable from other machines and the gateway has no "
                        "authentication of its own; set RAGBUS_API_TOKEN (clients then send "
                        "Authorization: Bearer <token>) or serve on 127.0.0.1. Not starting.")
        try:
            check_api_token(token, host)
        except RagbusError as exc:
            raise _fail(f"{exc}. Not starting.") from None
        err.print(f"[yellow]warning:[/] serving on {markup(host)}: every API and MCP request needs "
                  "Authorization: Bearer $RAGBUS_API_TOKEN; use HTTPS in front of it beyond a trusted network")
    session = _session(allow_loopback, embedded_only="serve", changes=True)
    system = session.local
    stop = threading.Event()
    consumers = _consumers(None)
    stages = tuple(dict.fromkeys(c.stage for c in consumers))
    # Serving anyway, unlike `ask`: ingestion and search still work, and /readyz is what a
    # deployment watches; it answers 503 with the reason until the cause is fixed.
    for stage, reason in unready_stages(session.settings, stages).items():
        err.print(Text.assemble(("not ready: ", "bold red"), f"{stage}: ", plain(reason),
                                " (/readyz answers 503 until this is fixed; ingestion and search work)"),
                  soft_wrap=True)
    with LocalRuntime(system.deps, system.bus, consumers):
        poller = threading.Thread(target=_poll_periodically, args=(system, stop), daemon=True)
        poller.start()
        try:
            server = serve_gateway(system.deps, host, port, api_token=token, stages=stages)
        except RagbusError as exc:
            raise _fail(str(exc)) from None
        console.print(f"ragbus is serving on [bold]http://{markup(host)}:{port}/[/] (MCP at /mcp); Ctrl-C to stop")
        try:
            wait_until_stopped()
        finally:
            stop.set()
            server.stop()


@app.command()
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
        raise _fail("`ragbus up` runs the topology on emulators only: use `ragbus up --emulators`. "
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
        )
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    for process in state["processes"]:
        where = process.get("url") or process.get("address")
        console.print(f"  {process['name']:<20} pid {process['pid']:<8} {markup(where)}")
    # soft_wrap: URLs and paths stay whole for copying
    console.print(f"ragbus is up: gateway [bold]{markup(state['gateway_url'])}/[/] (MCP at /mcp)", soft_wrap=True)
    console.print(f"state and logs under {markup(settings.home)}; `ragbus feeds add`, `poll`, `ingest`, `ask` "
                  "and `stats` now use this topology; `ragbus down` stops it", soft_wrap=True)


@app.command()
def down() -> None:
    """Stop the topology that `ragbus up --emulators` started under RAGBUS_HOME."""
    from shared.tools import topology

    stopped = topology.down(load_settings().home)
    if stopped:
        console.print("stopped " + ", ".join(stopped))
    else:
        console.print("nothing was running")


@app.command()
def demo(
    serve_after: Annotated[bool, typer.Option("--serve", help="Keep serving the web page afterwards.")] = False,
    port: Annotated[int | None, typer.Option(
        help="Port of the demo's page and sample feed; the sample citations name it "
        "(default: RAGBUS_DEMO_PORT, else 8080, as `ragbus serve`).")] = None,
) -> None:
    """Ingest the bundled corpus and answer three questions that show the loop at work."""
    from shared.tools.demo import run_demo

    try:
        run_demo(console, serve_after=serve_after, port=port)
    except RagbusError as exc:
        raise _fail(str(exc)) from None


@app.command("eval")
def eval_command(
    sample: Annotated[int, typer.Option(help="Answerable queries asked through the full pipeline (0: retrieval only).")] = 500,
    abstain_sample: Annotated[int, typer.Option(help="Abstain cases asked through the pipeline.")] = 200,
    ablations: Annotated[bool, typer.Option(help="Also run the A/B rows (each enhancement off in turn).")] = True,
    slice_queries: Annotated[int | None, typer.Option("--slice", help="Only the first N queries (smoke slice; default: all of them).")] = None,
    split: Annotated[str, typer.Option(
        help="Cases the pipeline samples come from: heldout (report), calibration (fit thresholds) or all; "
        "a case's split is decided by a hash of its id.")] = "heldout",
    providers: Annotated[str, typer.Option(
        help="Language-model providers whose full pipeline runs, comma-separated (local, openai, gemini); "
        "auto: local and every configured one. A named provider that cannot run is an error.")] = "auto",
    provider_sample: Annotated[list[str] | None, typer.Option(
        help="A smaller sample for a slow provider: PROVIDER=ANSWERABLE\\[/ABSTAIN], e.g. openai=40/20 "
        "(a subset of local's sample; repeatable; default: local's sample).")] = None,
    query_timeout: Annotated[float, typer.Option(
        help="Seconds one question may take (a small model on a slow CPU may need more; at most 600).")] = 120.0,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 1 when a provider that ran misses one of issue 11's targets (realdocs: issue 20's) "
        "(default: report only, exit 0).")] = False,
    out: Annotated[Path | None, typer.Option(
        help="Where the JSON results go (default: docs/eval_results.json for the full run with every option at "
        "its default, as `make eval` makes it; <cache>/eval_results.json for any other run, so a sample does not "
        "overwrite the committed figures; realdocs: docs/eval_realdocs.json and <cache>/eval_realdocs.json).")] = None,
    cache: Annotated[Path, typer.Option(help="Embedding and index cache.")] = Path(".ragbus-eval"),
    dataset: Annotated[str, typer.Option(
        help="fitz-gov (synthetic cases), realdocs (real package documentation in the repo, issue 20's targets; "
        "--sample N asks N of its questions) or conversations (follow-up dialogues, issue 24).")] = "fitz-gov",
    kind: Annotated[list[str] | None, typer.Option(
        help="realdocs: only questions of this kind (repeatable), e.g. table_row, near_miss (default: every kind).")] = None,
    show_failures: Annotated[bool, typer.Option(
        "--show-failures", help="realdocs and conversations: print every failed question with its answer and the expected keys.")] = False,
    reuse_ingest: Annotated[bool, typer.Option(
        "--reuse-ingest", help="realdocs and conversations: keep the ingested documents under <cache>/<dataset>-home "
        "and reuse them "
        "(fast runs while changing the query side; drop it after changing cleaning, chunking or indexing).")] = False,
) -> None:
    r"""Retrieval and answer quality on fitz-gov (synthetic cases; the dev extra installs it: pip install -e '.\[dev]'),
    or on the real-text development set (--dataset realdocs).

    Ends with issue 11's targets (fitz-gov, held-out split) or issue 20's (realdocs) and whether each is met.
    """
    if dataset == "realdocs":
        chosen = {"abstain_sample": abstain_sample, "ablations": ablations, "slice_queries": slice_queries,
                  "split": split, "provider_sample": provider_sample}
        _eval_realdocs(sample=None if sample == inspect.signature(eval_command).parameters["sample"].default
                       else sample, kinds=tuple(kind or ()), show_failures=show_failures, providers=providers,
                       reuse_ingest=reuse_ingest,
                       query_timeout=query_timeout, check=check, out=out, cache=cache, fitz_gov_only=chosen)
        return
    if dataset == "conversations":
        defaults = inspect.signature(eval_command).parameters
        chosen = {"sample": sample, "abstain_sample": abstain_sample, "ablations": ablations,
                  "slice_queries": slice_queries, "split": split, "kind": kind or None,
                  "provider_sample": provider_sample or None}
        changed = [f"--{name.replace('_queries', '').replace('_', '-')}" for name, value in chosen.items()
                   if value != defaults[name].default and value is not None]
        if changed:
            raise _fail(f"{', '.join(changed)} do not apply to --dataset conversations (it asks every dialogue)")
        _eval_conversations(show_failures=show_failures, reuse_ingest=reuse_ingest, query_timeout=query_timeout,
                            check=check, out=out, cache=cache, providers=providers)
        return
    if dataset != "fitz-gov":
        raise _fail(f"--dataset {dataset!r}: choose fitz-gov, realdocs or conversations")
    if kind or show_failures or reuse_ingest:
        raise _fail("--kind, --show-failures and --reuse-ingest apply to --dataset realdocs only (the last two also to "
                    "conversations)")
    from shared.tools.eval.report import eval_markdown
    from shared.tools.eval.runner import EvalOptions, run_eval, targets_missed
    from shared.tools.eval.targets import parse_provider_samples, parse_providers

    try:
        results = run_eval(
            EvalOptions(cache_dir=cache, sample=sample, abstain_sample=abstain_sample, ablations=ablations,
                        slice_queries=slice_queries, split=split, providers=parse_providers(providers),
                        provider_samples=parse_provider_samples(provider_sample or []),
                        query_timeout_s=query_timeout),
            progress=lambda msg: err.print(msg),
        )
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    chosen = {"sample": sample, "abstain_sample": abstain_sample, "ablations": ablations,
              "slice_queries": slice_queries, "split": split, "providers": providers,
              "provider_sample": provider_sample or None}
    defaults = inspect.signature(eval_command).parameters
    full_run = all(value == defaults[name].default for name, value in chosen.items())
    out = out or (Path("docs/eval_results.json") if full_run else cache / "eval_results.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    # soft_wrap: Markdown table rows stay one line each in a narrow terminal or a file
    console.print(eval_markdown(results), markup=False, highlight=False, soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = targets_missed(results)
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)


def _eval_realdocs(*, sample: int | None, kinds: tuple[str, ...], show_failures: bool, providers: str,
                   reuse_ingest: bool, query_timeout: float, check: bool, out: Path | None, cache: Path,
                   fitz_gov_only: dict[str, Any]) -> None:
    from shared.tools.eval import realdocs
    from shared.tools.eval.realdocs_run import RealDocsOptions, run_realdocs

    defaults = inspect.signature(eval_command).parameters
    changed = [f"--{name.replace('_queries', '').replace('_', '-')}" for name, value in fitz_gov_only.items()
               if value != defaults[name].default and not (name == "provider_sample" and not value)]
    if changed or providers.strip().lower() not in ("auto", "local"):
        raise _fail(f"{', '.join(changed) or '--providers ' + providers} apply to fitz-gov only; realdocs runs the "
                    "offline reader (RAGBUS_LLM=local)")
    try:
        results = run_realdocs(RealDocsOptions(cache_dir=cache, sample=sample, kinds=kinds, query_timeout_s=query_timeout,
                                               reuse_ingest=reuse_ingest), progress=lambda msg: err.print(msg))
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    full_run = sample is None and not kinds and not reuse_ingest  # the committed figures come from a fresh ingest
    out = out or (Path("docs/eval_realdocs.json") if full_run else cache / "eval_realdocs.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    console.print(realdocs.markdown(results, show_failures=show_failures), markup=False, highlight=False,
                  soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = realdocs.missed(results)
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)


def _eval_conversations(*, show_failures: bool, reuse_ingest: bool, query_timeout: float, check: bool,
                        out: Path | None, cache: Path, providers: str) -> None:
    from shared.tools.eval import conversations
    from shared.tools.eval.conversations_run import ConversationOptions, run_conversations

    if providers.strip().lower() not in ("auto", "local"):
        raise _fail(f"--providers {providers} applies to fitz-gov only; conversations runs the offline provider "
                    "(RAGBUS_LLM=local)")
    try:
        results = run_conversations(ConversationOptions(cache_dir=cache, query_timeout_s=query_timeout,
                                                        reuse_ingest=reuse_ingest), progress=lambda msg: err.print(msg))
    except RagbusError as exc:
        raise _fail(str(exc)) from None
    out = out or (cache / "eval_conversations.json" if reuse_ingest else Path("docs/eval_conversations.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    console.print(conversations.markdown(results, show_failures=show_failures), markup=False, highlight=False,
                  soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = [row["what"] for row in results["verdicts"] if row["met"] is not True]
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("ragbus")
        except PackageNotFoundError:  # run from a checkout that was never installed
            raise _fail("ragbus is not installed (run `make demo` or pip install -e .), so it has no version") \
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
    except Exception as exc:  # noqa: BLE001 - the last stop before a traceback reaches a newcomer
        if debugging():
            raise
        reason = str(exc) if isinstance(exc, RagbusError) else f"{type(exc).__name__}: {exc}"
        err.print(Text.assemble(("error: ", "bold red"), plain(reason)), soft_wrap=True)
        err.print(Text("(ragbus --debug ... or RAGBUS_LOG_LEVEL=debug shows the traceback)", style="dim"))
        sys.exit(1)


if __name__ == "__main__":
    main()
