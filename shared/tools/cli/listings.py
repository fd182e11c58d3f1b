"""``ragbus feeds`` and ``ragbus sitemaps``: register, list and remove listings."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from shared.contract.errors import RagbusError
from shared.observability.terminal_text import markup, plain
from shared.tools.cli.root import AllowLoopback, fail, print_json, say_empty
from shared.tools.cli.session import open_session, wait_for_documents
from shared.tools.console import console, dead_since, err, wait_with_progress

feeds_app = typer.Typer(help="Register, list and remove RSS/Atom feeds.", no_args_is_help=True)
sitemaps_app = typer.Typer(help="Register, list and remove sitemaps (sitemap.xml or a sitemap index).",
                          no_args_is_help=True)


@feeds_app.command("add")
def feeds_add(url: Annotated[str, typer.Argument(help="The feed's URL (http or https).")],
              allow_loopback: AllowLoopback = False) -> None:
    """Register a feed URL (RSS 2.0 or Atom)."""
    from shared.ingest.feeds import add_feed

    session = open_session(allow_loopback, changes=True)
    try:
        feed = add_feed(session.deps.state, url, allow_loopback=session.settings.allow_loopback,
                        now=session.deps.clock.now())
    except RagbusError as exc:
        raise fail(str(exc)) from None
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

    listings = list_feeds(open_session().deps.state, kind=kind)
    if as_json:
        print_json(listings)
        return
    if not listings:
        say_empty(f"no {kind}s registered; add one with `ragbus {kind}s add URL`")
        return
    table = Table("url", "last poll", count_label, "status", "last error")
    for listing in listings:
        table.add_row(*(Text(plain(cell)) for cell in (
            listing["url"], listing.get("last_poll") or "never", listing.get("items") or 0,
            listing.get("last_status") or "", listing.get("last_error") or "")))
    console.print(table)


def _remove_listing(kind: str, url: str, keep_documents: bool, timeout: float) -> None:
    from shared.ingest.feeds import remove_feed

    session = open_session(changes=True)
    deps = session.deps
    since = time.time() - 0.001
    dead = 0
    with session.stages(("indexer",)) as runtime:
        try:
            deleted = remove_feed(deps.state, url, publisher=deps.publisher, clock=deps.clock,
                                  keep_documents=keep_documents, kind=kind)
        except RagbusError as exc:
            raise fail(str(exc)) from None
        if deleted and runtime is not None:
            if not wait_with_progress(session.local, runtime, since, timeout, f"{kind}s remove"):
                raise typer.Exit(1)
            dead = dead_since(session.local, since)
        elif deleted:
            dead = wait_for_documents(session, lambda: set(deleted), timeout, f"{kind}s remove")
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

    session = open_session(allow_loopback, changes=True)
    try:
        sitemap = add_feed(session.deps.state, url, allow_loopback=session.settings.allow_loopback,
                           now=session.deps.clock.now(), kind="sitemap")
    except RagbusError as exc:
        raise fail(str(exc)) from None
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
