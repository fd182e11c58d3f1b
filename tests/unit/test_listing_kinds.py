"""Listing kinds are one registry (shared.contract.sources, with each kind's reader in
services.feed_poller.listings): poll, counting and the commands all follow it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from services.feed_poller.entries import Entry, Reading
from services.feed_poller.handler import handle
from services.feed_poller.listings import LISTINGS, Listing
from shared.contract.errors import InvalidInput
from shared.contract.messages import DocumentFetched
from shared.contract.sources import LISTING_KINDS, SOURCE_KINDS
from shared.ingest.listings import add_listing, kind_of, list_listings, remove_listing
from shared.ingest.step import Content, polled_items
from tests.unit.test_feed_poller import FakeFetcher, request, world  # noqa: F401 - the fixture


def _public(*_args, **_kwargs):
    return [(2, 1, 6, "", ("93.184.216.34", 443))]


def _inline_reader(kind: str, read_urls: dict[str, list[str]]) -> Listing:
    """A reader for ``kind`` that notes the URL it read and returns one entry with its text inline."""

    def read(url: str, result, fetcher) -> Reading:
        read_urls.setdefault(kind, []).append(url)
        return Reading([Entry(guid=f"{kind}-1", link=None, title=f"one {kind}", published=None,
                              item_hash=f"{kind}-hash")])

    def obtain(entry: Entry, fetcher) -> Content:
        return Content(url=f"https://{kind}.example/{entry.guid}", content_type="text/plain",
                       body=f"the text of {entry.guid}".encode(), title=entry.title)

    return Listing(("text/plain",), read, obtain)


def test_every_registered_kind_has_its_reader_and_is_a_document_source():
    assert set(LISTINGS) == set(LISTING_KINDS)
    assert set(LISTING_KINDS) <= set(SOURCE_KINDS)


def test_poll_reads_every_registered_kind_with_its_reader_and_counts_its_items(world, monkeypatch):  # noqa: F811
    # each registered kind read by a reader that notes what it read: a kind that poll or the
    # counting of polled items leaves out (POLLED_SOURCES did, silently) fails here
    read_urls: dict[str, list[str]] = {}
    urls = {}
    for kind in LISTING_KINDS:
        monkeypatch.setitem(LISTINGS, kind, _inline_reader(kind, read_urls))
        urls[kind] = f"https://{kind}.example/listing"
        world.fetcher.feed(urls[kind], b"listing", content_type="text/plain")
        add_listing(world.state, urls[kind], allow_loopback=False, now=world.clock.now(), kind=kind, resolver=_public)
    handle(request(), world.deps())
    assert read_urls == {kind: [url] for kind, url in urls.items()}
    assert sorted(m.source for m in world.publisher.of_type(DocumentFetched)) == sorted(LISTING_KINDS)
    assert sorted(r["source"] for r in polled_items(world.state)) == sorted(LISTING_KINDS)
    assert {kind_of(record) for record in list_listings(world.state)} == set(LISTING_KINDS)
    records = {r["url"]: r for r in list_listings(world.state)}
    assert all(records[url]["last_status"].startswith("ok: 1 new") for url in urls.values())


def test_a_listing_keeps_its_kind_and_is_removed_by_it(world):  # noqa: F811
    for kind in LISTING_KINDS:
        add_listing(world.state, f"https://{kind}.example/l", allow_loopback=False, now=world.clock.now(), kind=kind,
                 resolver=_public)
    with pytest.raises(InvalidInput, match="registered as a sitemap; remove it with `ragbus sitemaps remove"):
        add_listing(world.state, "https://sitemap.example/l", allow_loopback=False, now=world.clock.now(),
                 resolver=_public)
    with pytest.raises(InvalidInput, match=f"kind 'nope': use one of {', '.join(LISTING_KINDS)}"):
        add_listing(world.state, "https://x.example/l", allow_loopback=False, now=world.clock.now(), kind="nope",
                 resolver=_public)
    with pytest.raises(InvalidInput, match="no feed .* `ragbus feeds list`"):
        remove_listing(world.state, "https://sitemap.example/l", publisher=world.publisher, clock=world.clock)
    remove_listing(world.state, "https://sitemap.example/l", publisher=world.publisher, clock=world.clock, kind=None)
    assert [kind_of(r) for r in list_listings(world.state)] == [k for k in LISTING_KINDS if k != "sitemap"]


def test_every_kind_has_its_command_group_and_sources_takes_any(tmp_path, monkeypatch):
    from shared.tools.cli import app

    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGBUS_ALLOW_LOOPBACK", "1")
    runner = CliRunner()
    for kind in LISTING_KINDS.values():
        out = runner.invoke(app, [kind.plural, "--help"], env={"COLUMNS": "200"}).output
        assert f"Register, list and remove {kind.described}." in out
    added = runner.invoke(app, ["sources", "add", "http://127.0.0.1:9/map.xml", "--kind", "sitemap"])
    assert added.exit_code == 0 and "added sitemap" in added.output, added.output
    assert runner.invoke(app, ["feeds", "add", "http://127.0.0.1:9/feed.xml"]).exit_code == 0
    listed = json.loads(runner.invoke(app, ["sources", "list", "--json"]).stdout)
    assert [(r["url"], r["kind"]) for r in listed] == [("http://127.0.0.1:9/feed.xml", "feed"),
                                                       ("http://127.0.0.1:9/map.xml", "sitemap")]
    assert [r["url"] for r in json.loads(runner.invoke(app, ["sitemaps", "list", "--json"]).stdout)] == [
        "http://127.0.0.1:9/map.xml"]
    stats = json.loads(runner.invoke(app, ["stats", "--json"]).stdout)
    assert [(r["url"], r["kind"]) for r in stats["feeds"]] == [(r["url"], r["kind"]) for r in listed]
    assert "  sitemap http://127.0.0.1:9/map.xml: last poll never" in runner.invoke(app, ["stats"]).output
    table = runner.invoke(app, ["sources", "list", "--kind", "feed"], env={"COLUMNS": "200"}).output
    assert "feed.xml" in table and "map.xml" not in table
    bad = runner.invoke(app, ["sources", "add", "http://127.0.0.1:9/x", "--kind", "atom"])
    assert bad.exit_code == 2 and f"--kind 'atom': use one of {', '.join(LISTING_KINDS)}" in bad.output
    removed = runner.invoke(app, ["sources", "remove", "http://127.0.0.1:9/map.xml"])
    assert removed.exit_code == 0 and "removed sitemap http://127.0.0.1:9/map.xml" in removed.output
    assert [r["kind"] for r in json.loads(runner.invoke(app, ["sources", "list", "--json"]).stdout)] == ["feed"]


def test_a_listing_s_query_credential_is_shown_redacted_and_the_shown_url_names_it(tmp_path, monkeypatch):
    """`ragbus feeds list` (and `sources list`, `stats`, their --json, `feeds add`'s reply) printed a private feed's
    ?token= as registered: a terminal's scrollback, a shared screen or a cron mail held the credential. They show it
    [redacted] now; the record keeps it (polls fetch that URL), and the URL as shown names the listing for
    `feeds remove` and `poll --feed`. Two listings shown alike (the same address, different tokens) are refused by
    the shown form, which cannot tell them apart."""
    from shared.tools.cli import app

    secret = "s3cr3t-feed-token-4411"
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAGBUS_ALLOW_LOOPBACK", "1")
    runner = CliRunner()
    url = f"http://127.0.0.1:9/private.atom?feed_token={secret}&format=atom"
    shown = "http://127.0.0.1:9/private.atom?feed_token=[redacted]&format=atom"
    added = runner.invoke(app, ["feeds", "add", url])
    assert added.exit_code == 0 and secret not in added.output and "feed_token=[redacted]" in added.output, \
        added.output
    runner.invoke(app, ["sources", "add", f"http://127.0.0.1:9/map.xml?sig={secret}", "--kind", "sitemap"])
    outputs = {" ".join(args): runner.invoke(app, args, env={"COLUMNS": "250"}).output for args in (
        ["feeds", "list"], ["feeds", "list", "--json"], ["sources", "list"], ["sources", "list", "--json"],
        ["sitemaps", "list", "--json"], ["stats"], ["stats", "--json"])}
    for command, output in outputs.items():
        assert secret not in output and "=[redacted]" in output, (command, output)
    assert [r["url"] for r in json.loads(outputs["feeds list --json"])] == [shown]
    from shared.ingest.listings import registered_url
    from shared.tools.cli.session import open_session

    state = open_session().deps.state  # what polls fetch: the URL as registered
    assert sorted(f["url"] for f in list_listings(state)) == [f"http://127.0.0.1:9/map.xml?sig={secret}", url]
    assert registered_url(state, shown) == registered_url(state, url) == url  # `poll --feed` takes either
    removed = runner.invoke(app, ["feeds", "remove", shown, "--keep-documents"])
    assert removed.exit_code == 0 and f"removed feed {shown}" in removed.output, removed.output
    assert [r["kind"] for r in json.loads(runner.invoke(app, ["sources", "list", "--json"]).stdout)] == ["sitemap"]
    for token in ("one-token-123", "two-token-456"):
        runner.invoke(app, ["feeds", "add", f"http://127.0.0.1:9/twin.xml?token={token}"])
    twins = runner.invoke(app, ["feeds", "remove", "http://127.0.0.1:9/twin.xml?token=[redacted]"])
    assert twins.exit_code != 0 and "give the full URL" in twins.output, twins.output
    assert len(json.loads(runner.invoke(app, ["feeds", "list", "--json"]).stdout)) == 2
