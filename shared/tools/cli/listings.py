"""``ragbus sources`` and, per listing kind, ``ragbus feeds`` / ``ragbus sitemaps``: register, list
and remove polled listings.

Every command here is derived from :data:`shared.contract.sources.LISTING_KINDS`: a kind's group
(``ragbus <plural> add|list|remove``) and the ``ragbus sources`` group, which takes any kind.
"""

# No `from __future__ import annotations`: typer reads each parameter's annotation, and those of
# kind_group's commands name its argument, which a string annotation could not see.
import time
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from shared.contract.errors import RagbusError
from shared.contract.sources import DEFAULT_LISTING_KIND, LISTING_KINDS, ListingKind
from shared.observability.terminal_text import markup, plain
from shared.tools.cli.root import AllowLoopback, fail, print_json, say_empty
from shared.tools.cli.session import open_session, wait_for_documents
from shared.tools.console import console, dead_since, err, wait_with_progress

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]
RemovalTimeout = Annotated[float, typer.Option(help="Seconds to wait for the documents' removal.")]
_KINDS = ", ".join(LISTING_KINDS)


def kind_group(kind: ListingKind) -> typer.Typer:
    """``ragbus <plural> add|list|remove`` for listings of one kind."""
    group = typer.Typer(help=f"Register, list and remove {kind.described}.", no_args_is_help=True)

    @group.command("add", help=kind.add_help)
    def add(url: Annotated[str, typer.Argument(help=f"The {kind.name}'s URL (http or https).")],
            allow_loopback: AllowLoopback = False) -> None:
        _add_listing(kind, url, allow_loopback)

    @group.command("list", help=f"List registered {kind.plural} with their last poll and last error.")
    def list_(as_json: AsJson = False) -> None:
        _list_listings(kind, as_json)

    @group.command("remove", help=f"Unregister a {kind.name} and delete the documents indexed from it "
                   "(--keep-documents keeps them).")
    def remove(
        url: Annotated[str, typer.Argument(help=f"The {kind.name}'s URL, as `ragbus {kind.plural} list` shows it.")],
        keep_documents: Annotated[bool, typer.Option(
            "--keep-documents", help=f"Keep the documents already indexed from this {kind.name}.")] = False,
        timeout: RemovalTimeout = 300.0,
    ) -> None:
        _remove_listing(kind, url, keep_documents, timeout)

    return group


sources_app = typer.Typer(help=f"Register, list and remove polled listings of every kind ({_KINDS}).",
                          no_args_is_help=True)


@sources_app.command("add")
def sources_add(
    url: Annotated[str, typer.Argument(help="The listing's URL (http or https).")],
    kind: Annotated[str, typer.Option(help=f"What the URL is: {_KINDS}.")] = DEFAULT_LISTING_KIND,
    allow_loopback: AllowLoopback = False,
) -> None:
    """Register a listing URL of any kind; `ragbus poll` fetches what it lists."""
    _add_listing(_kind_named(kind), url, allow_loopback)


@sources_app.command("list")
def sources_list(
    kind: Annotated[str | None, typer.Option(help=f"Only listings of this kind: {_KINDS} (default: every kind).")]
    = None,
    as_json: AsJson = False,
) -> None:
    """List registered listings of every kind with their kind, last poll and last error."""
    _list_listings(_kind_named(kind) if kind is not None else None, as_json)


@sources_app.command("remove")
def sources_remove(
    url: Annotated[str, typer.Argument(help="The listing's URL, as `ragbus sources list` shows it.")],
    keep_documents: Annotated[bool, typer.Option(
        "--keep-documents", help="Keep the documents already indexed from this listing.")] = False,
    timeout: RemovalTimeout = 300.0,
) -> None:
    """Unregister a listing of any kind and delete the documents indexed from it (--keep-documents keeps them)."""
    _remove_listing(None, url, keep_documents, timeout)


def _kind_named(name: str) -> ListingKind:
    if name not in LISTING_KINDS:
        raise fail(f"--kind {name!r}: use one of {_KINDS}")
    return LISTING_KINDS[name]


def _add_listing(kind: ListingKind, url: str, allow_loopback: bool) -> None:
    from shared.ingest.listings import add_listing, shown_url

    session = open_session(allow_loopback, changes=True)
    try:
        listing = add_listing(session.deps.state, url, allow_loopback=session.settings.allow_loopback,
                           now=session.deps.clock.now(), kind=kind.name)
    except RagbusError as exc:
        raise fail(str(exc)) from None
    console.print(f"added {kind.name} [bold]{markup(shown_url(listing['url']))}[/]; run [bold]ragbus poll[/] to fetch "
                  f"{kind.fetched}")


def _list_listings(kind: ListingKind | None, as_json: bool) -> None:
    """One kind's listings as that kind's group shows them, or (None) every listing with its kind. A URL's query
    credential (``?token=``) is shown as ``[redacted]``, a form `remove` and `poll --feed` take too."""
    from shared.ingest.listings import kind_of, list_listings, shown_url

    listings = [{**listing, "url": shown_url(listing["url"]) if listing["url"] else listing["url"]}
                for listing in list_listings(open_session().deps.state, kind=kind.name if kind else None)]
    if kind is None:
        listings = [{**listing, "kind": kind_of(listing)} for listing in listings]
    if as_json:
        print_json(listings)
        return
    if not listings:
        noun, group = (kind.plural, kind.plural) if kind else ("listings", "sources")
        say_empty(f"no {noun} registered; add one with `ragbus {group} add URL`")
        return
    kind_column = () if kind else ("kind",)
    table = Table("url", *kind_column, "last poll", kind.items if kind else "entries", "status", "last error")
    for listing in listings:
        kind_cell = () if kind else (listing["kind"],)
        table.add_row(*(Text(plain(cell)) for cell in (
            listing["url"], *kind_cell, listing.get("last_poll") or "never", listing.get("items") or 0,
            listing.get("last_status") or "", listing.get("last_error") or "")))
    console.print(table)


def _remove_listing(kind: ListingKind | None, url: str, keep_documents: bool, timeout: float) -> None:
    """Remove ``url``, a listing of ``kind`` (of whatever kind it is when None)."""
    from shared.ingest.listings import (
        get_listing,
        kind_of,
        registered_url,
        remove_listing,
        shown_url,
    )

    session = open_session(changes=True)
    deps = session.deps
    since = time.time() - 0.001
    dead = 0
    label = f"{kind.plural if kind else 'sources'} remove"
    with session.stages(("indexer",)) as runtime:
        try:
            url = registered_url(deps.state, url, kind.name if kind else None)  # or as `list` shows it
            found = kind or LISTING_KINDS[kind_of(get_listing(deps.state, url) or {})]
            deleted = remove_listing(deps.state, url, publisher=deps.publisher, clock=deps.clock,
                                  keep_documents=keep_documents, kind=kind.name if kind else None)
        except RagbusError as exc:
            raise fail(str(exc)) from None
        if deleted and runtime is not None:
            if not wait_with_progress(session.local, runtime, since, timeout, label):
                raise typer.Exit(1)
            dead = dead_since(session.local, since, set(deleted))
        elif deleted:
            dead = wait_for_documents(session, lambda: set(deleted), timeout, label)
    kept = "; its documents stay indexed" if keep_documents else f" and {len(deleted)} document(s) from it"
    console.print(Text(f"removed {found.name} {plain(shown_url(url))}{kept}"), soft_wrap=True)
    if dead:
        err.print(f"[red]{dead} document(s) could not be removed; see `ragbus dead-letters`[/]")
        raise typer.Exit(1)
