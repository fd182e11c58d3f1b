"""``ragbus poll`` and ``ragbus ingest``: bring documents in and wait until they are indexed."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RagbusError
from shared.contract.messages import FeedPollRequested
from shared.contract.redaction import redact
from shared.formats.registry import suffix_list
from shared.observability.terminal_text import escaped, markup, plain
from shared.runtime.stages import INGESTION_STAGES
from shared.tools.cli.root import AllowLoopback, fail, say_empty
from shared.tools.cli.session import Session, consumers_of, open_session, wait_for_documents
from shared.tools.console import console, dead_since, err, wait_with_progress

if TYPE_CHECKING:
    from shared.ingest.files import IngestReport

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


@commands.command()
def poll(
    feed: Annotated[list[str] | None, typer.Option("--feed", help="Poll only this feed (repeatable; default: every registered feed and sitemap).")] = None,
    allow_loopback: AllowLoopback = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for indexing.")] = 900.0,
) -> None:
    """Poll feeds now and wait until everything new is indexed."""
    from shared.ingest.listings import list_listings, registered_url
    from shared.ingest.progress import touched_since

    session = open_session(allow_loopback, changes=True)
    deps = session.deps
    try:  # a URL as `feeds list` shows it (its ?token= [redacted]) names the listing
        feed = [registered_url(deps.state, url) for url in feed] if feed else feed
    except RagbusError as exc:
        raise fail(f"poll --feed: {exc}") from None
    listings = [f["url"] for f in list_listings(deps.state)]
    registered = set(listings)
    listed = _wanted_listings(deps, feed) if feed else listings  # --feed's URLs as stored, else every listing
    unknown = [url for url, normal in zip(feed, listed, strict=True) if normal not in registered] if feed else []
    if unknown:  # polling nothing for it and exiting 0 read as done
        raise fail(f"poll --feed: no feed or sitemap {', '.join(redact(url) for url in unknown)} is registered; "
                   "`ragbus sources list` shows the registered ones, `ragbus feeds add URL` registers one")
    if not registered:
        left = session.local.bus.oldest_outstanding(
            [c.subscription for c in consumers_of(INGESTION_STAGES)]) if session.local else None
        if left is None:
            # nothing to poll is not a failure: the command did all there was to do
            say_empty("no feeds registered, nothing to poll; add one with `ragbus feeds add URL`")
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
    asked = [url for url in listed if url in registered]  # what this poll is to fetch
    earlier = _announce_earlier(session, _listing_items(deps, feed), "poll")
    with session.stages(INGESTION_STAGES) as runtime:
        deps.publisher.publish(FeedPollRequested(
            request_id=uuid.uuid4().hex, feed_urls=list(feed or []), requested_at=started))
        if runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "poll")
            # this poll's own: what it announced or waited for (an ingest beside it fails its own)
            mine = earlier | touched_since(deps.state, started, _wanted_listings(deps, feed)) | {"poll"}
            dead = dead_since(session.local, since, mine)
        else:
            wanted = list(feed or [f["url"] for f in list_listings(deps.state)])

            def polled() -> set[str] | None:
                records = [f for f in list_listings(deps.state) if f["url"] in wanted]
                if any(not f.get("last_poll") or f["last_poll"] < started.isoformat() for f in records):
                    return None  # keeps the wait going until the poller ran
                return touched_since(deps.state, started, wanted)

            dead = wait_for_documents(session, polled, timeout, "poll")
    listed = list_listings(deps.state)
    failed = [f for f in listed if f.get("last_error") and (not feed or f["url"] in feed)]
    for f in listed:
        if not feed or f["url"] in feed:
            status = f"[red]{markup(f['last_error'])}[/]" if f.get("last_error") else markup(f.get("last_status") or "ok")
            console.print(f"{markup(redact(f['url']))}: {status}")  # a cron job's mail holds no ?token=
    unfinished = _report_unfinished(session, earlier | touched_since(deps.state, started, _wanted_listings(deps, feed)),
                                    "poll")
    if dead and not unfinished:
        err.print(f"[red]{dead} message(s) could not be processed; see `ragbus dead-letters`[/]")
    # a listing another command removed while this poll ran stays removed, with what it brought in: asked for by
    # name (--feed), its poll could not be done (exit 1); polled as one of every registered listing, it is no longer
    # one, a skip that is said (a cron job's poll does not fail for a removal someone meant)
    still = {f["url"] for f in listed}
    removed = [url for url in asked if url not in still]
    for url in removed:
        err.print(Text(f"poll: {redact(url)} was removed by another command while this poll ran; "
                       "it stays removed, and the documents it brought in are deleted", style="yellow"))
    if failed or dead or unfinished or (feed and removed):
        raise typer.Exit(1)


def _wanted_listings(deps: Deps, feed: list[str] | None) -> list[str]:
    from shared.ingest.listings import list_listings
    from shared.ingest.url_guard import normalise_url

    if not feed:
        return [f["url"] for f in list_listings(deps.state)]
    out = []
    for url in feed:
        try:
            out.append(normalise_url(url))
        except RagbusError:
            out.append(url)
    return out


def _listing_items(deps: Deps, feed: list[str] | None) -> set[str]:
    from shared.ingest.step import polled_items

    return {r["document_id"] for r in polled_items(deps.state, _wanted_listings(deps, feed))}


def _announce_earlier(session: Session, candidates: set[str], command: str) -> set[str]:
    """Documents among ``candidates`` that an earlier run announced and that are not indexed
    yet (that run died, or gave up waiting): this run waits for them too."""
    from shared.ingest.progress import status_of

    pending = status_of(session.deps.state, candidates).pending
    if pending:
        err.print(f"{command}: {len(pending)} document(s) announced by an earlier run are not indexed yet; "
                  "waiting for them too")
    return pending


def _counted_since(session: Session, since: float, earlier: set[str]) -> float:
    """When the progress display starts counting: ``since``, or, when this run waits for documents an
    earlier run announced, when the oldest message still outstanding for the ingestion stages was
    published (their messages are older than this run: counted from ``since`` the display showed no
    row at all while it waited minutes for a large file)."""
    if not earlier or session.local is None:
        return since
    oldest = session.local.bus.oldest_outstanding([c.subscription for c in consumers_of(INGESTION_STAGES)])
    return since if oldest is None else min(since, oldest)


def _report_unfinished(session: Session, ids: set[str], command: str, *, deleting: bool = False) -> int:
    """Say which of ``ids`` are still pending or failed after the wait; return how many."""
    from shared.ingest.progress import status_of

    status = status_of(session.deps.state, ids)
    if status.removed and not deleting:
        # another command's delete won (deletes do): not this command's failure, nor pending
        err.print(f"[yellow]{command}: {len(status.removed)} document(s) were deleted by another command "
                  "while this one ran; they stay deleted[/]")
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


@commands.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help=f"Files or folders ({suffix_list()}, and each of them "
                                                 "gzip-compressed: .txt.gz ...).")],
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

    session = open_session(changes=True)
    report = IngestReport()
    deps = session.deps
    since = time.time() - 0.001
    ids: set[str] = set()
    if delete and not yes:
        for path in paths:
            why = needs_confirmation(path, deps.state)
            if why:
                raise fail(f"{why}; nothing was deleted. Pass --yes to delete them, or name the ingested "
                            "folder or file itself")
    refused: list[Path] = []
    with session.stages(("cleaner", "indexer")) as runtime:
        for path in paths:
            try:
                if delete:
                    ids.update(delete_path(path, state=deps.state, publisher=deps.publisher, clock=deps.clock))
                else:
                    ids.update(m.document_id for m in ingest_path(
                        path, state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock,
                        report=report))
            except InvalidInput as exc:
                # one bad path (missing, or a folder with nothing readable) fails alone: the rest go on; named with
                # its control characters as escapes (plain dropped them: 'bell\x07.png' was shown as 'bell.png')
                err.print(Text.assemble(("error:", "bold red"), f" {escaped(exc)}"), soft_wrap=True)
                refused.append(path)
            except RagbusError as exc:
                raise fail(str(exc)) from None
        if len(refused) == len(paths):
            raise typer.Exit(2)  # each path's error is said above; there is nothing to wait for
        paths = [p for p in paths if p not in refused]
        submitted = len(ids)
        if not delete:
            # every file under these paths is this command's to finish, including files an
            # earlier run announced and did not see indexed (it was killed, or timed out)
            under = {r["document_id"] for path in paths for r in records_under(path, deps.state)}
            earlier = _announce_earlier(session, under - ids, "ingest")
            ids |= earlier
            since = _counted_since(session, since, earlier)
        if ids and runtime is not None:
            wait_with_progress(session.local, runtime, since, timeout, "ingest", subjects=ids)
        elif ids:
            wait_for_documents(session, lambda: ids, timeout, "ingest")
    _print_ingest_summary(deps, report, submitted, "deleted" if delete else "submitted")
    if delete:
        unfinished = _report_unfinished(session, ids, "ingest", deleting=True)
    else:
        # a file under these paths that failed earlier and is unchanged is still not indexed: it is
        # named, but it was not this run's work, so it does not fail this run (issue 31)
        earlier = {r["document_id"] for path in paths for r in records_under(path, deps.state)} - ids
        _name_outcomes(deps, ids, earlier)
        unfinished = _report_unfinished(session, ids, "ingest")
        _report_earlier_failures(session, earlier)
    if refused:
        err.print(Text(f"ingest: {len(refused)} path(s) skipped, the rest {'deleted' if delete else 'ingested'}: "
                       + ", ".join(escaped(p) for p in refused), style="red"), soft_wrap=True)
        raise typer.Exit(2)  # as a lone bad path does: the command line named something it could not take
    if unfinished:
        raise typer.Exit(1)


def _print_ingest_summary(deps: Deps, report: IngestReport, submitted: int, verb: str) -> None:
    """One line of counts, then each kind of file skipped with its reason."""
    from shared.ingest.files import FOLDER

    unchanged = f", {report.unchanged} unchanged" if report.unchanged else ""
    skipped = sum(report.skipped.values())
    skipped_text = f", {skipped} skipped" if skipped else ""
    # the index's total, from every source: "7 submitted; 15 indexed" read as if 15 of the 7 were
    console.print(f"{submitted} document(s) {verb}{unchanged}{skipped_text}; "
                  f"{deps.state.count(state_collections.DOCUMENTS)} document(s) in the index", soft_wrap=True)
    for (why, suffix), count in sorted(report.skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        what = "folder(s)" if suffix == FOLDER else f"{suffix} file(s)"
        console.print(Text(f"  skipped {count} {what}: {why}"), soft_wrap=True)


_ERROR_CLASS = re.compile(r"\A[A-Z]\w*(?:Error|Input|Exception): ")
#: files named one by one in the ingest summary; past it, a count (the dead letters hold them all)
NAMED_FILES = 20


def _name_outcomes(deps: Deps, ids: set[str], earlier: set[str] = frozenset()) -> None:
    """Name each file that failed, with its reason, and each indexed with pages left unread;
    those of ``earlier`` (unchanged since an earlier run failed them) as failed earlier."""
    from shared.ingest.progress import failures

    failed = failures(deps.state, ids | earlier)
    partly = [d for d in deps.state.get_many(state_collections.DOCUMENTS, sorted(ids)).values() if d.get("unread")]
    ledger = deps.state.get_many(state_collections.PROCESSED_ITEMS, sorted(failed))
    lines = [Text(f"  {'failed earlier, unchanged,' if i in earlier else 'failed'} "
                  f"{escaped(ledger.get(i, {}).get('path') or i)}: {plain(_reason(error))}",
                  style="yellow" if i in earlier else "red")
             for i, error in sorted(failed.items(), key=lambda kv: (kv[0] in earlier, kv[0]))]
    lines += [Text(f"  partly read {plain(d.get('url'))}: {d['unread']} page(s) not read "
                   f"({plain(d.get('unread_reason'))})", style="yellow") for d in partly]
    for line in lines[:NAMED_FILES]:
        err.print(line, soft_wrap=True)
    if len(lines) > NAMED_FILES:
        err.print(f"  ... and {len(lines) - NAMED_FILES} more (`ragbus dead-letters`, `ragbus stats`)")


def _report_earlier_failures(session: Session, earlier: set[str]) -> None:
    """Say how many of ``earlier`` (not this run's work) are still failed; the exit code does not count them."""
    from shared.ingest.progress import status_of

    status = status_of(session.deps.state, earlier)
    lettered = len(status.failed - status.unfetched)
    if lettered:
        err.print(f"[yellow]ingest: {lettered} unchanged document(s) under these paths failed in an earlier run "
                  "and are still not indexed; see `ragbus dead-letters` (`ragbus dead-letters retry --all` "
                  "once the cause is fixed)[/]")


def _reason(error: str) -> str:
    """A dead letter's error without the delivery preamble and the document's own id and URL."""
    reason = error.split(": ", 1)[1] if error.startswith("Pub/Sub dead-lettered") and ": " in error else error
    reason = _ERROR_CLASS.sub("", reason)
    return reason.split("): ", 1)[1] if reason.startswith("document ") and "): " in reason else reason


# ------------------------------------------------------------------ reading
