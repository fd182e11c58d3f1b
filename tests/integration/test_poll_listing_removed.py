"""`ragbus poll` while another command removes the feed it polls, for real: a feed on a loopback HTTP server,
SQLite bus and state in a temporary home, the CLI in-process, and the removal made through a second runtime on
the same home (as `ragbus feeds remove` in another terminal) while the poll fetches the feed's pages.

A poll of every registered feed says which one was removed under it and exits 0 (the feed is no longer one of
them: a cron job's poll does not fail for a removal someone meant); a poll asked for that feed by name (--feed)
could not do what it was asked and exits 1, naming it. Before, both exited 0 and said nothing of it."""

from __future__ import annotations

import http.server
import threading
from typing import Any

import pytest
from typer.testing import CliRunner

from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.ingest.listings import get_listing, listing_key, new_listing_record, remove_listing
from shared.runtime.bootstrap import build_local
from shared.tools.cli import app

ITEMS = 4


def _feed(base: str) -> bytes:
    items = "".join(f"<item><title>Item {i}</title><link>{base}/item{i}.html</link><guid>item-{i}</guid></item>"
                    for i in range(ITEMS))
    return (f"<?xml version='1.0'?><rss version='2.0'><channel><title>t</title><link>{base}/</link>"
            f"<description>d</description>{items}</channel></rss>").encode()


def _page(i: int) -> bytes:
    return (f"<html><head><title>Item {i}</title></head><body><article><h1>Item {i}</h1><p>The item page number {i} "
            "says what the feed poller fetches for it, in sentences long enough to be kept as content.</p><p>Its "
            "second paragraph says nothing more, written for this test alone.</p></article></body></html>").encode()


@pytest.mark.integration
@pytest.mark.parametrize("named", [False, True], ids=["every feed", "--feed"])
def test_a_feed_removed_while_it_is_polled_is_named_and_fails_the_poll_that_asked_for_it(tmp_path, monkeypatch,
                                                                                           named):
    home = tmp_path / "home"
    for name, value in {"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0", "RAGBUS_ALLOW_LOOPBACK": "1"}.items():
        monkeypatch.setenv(name, value)
    other = build_local(load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"}))  # another terminal
    removed = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/feed.xml":
                body, kind = _feed(base), "application/rss+xml"
            else:
                if not removed.is_set():  # the first page fetched: the feed is removed meanwhile
                    removed.set()
                    remove_listing(other.deps.state, url, publisher=other.deps.publisher, clock=other.deps.clock)
                body, kind = _page(int(self.path.removeprefix("/item").removesuffix(".html"))), "text/html"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url = f"{base}/feed.xml"
    try:
        added = CliRunner().invoke(app, ["feeds", "add", url, "--allow-loopback"])
        assert added.exit_code == 0, added.output
        polled = CliRunner().invoke(app, ["poll", "--timeout", "120", *(["--feed", url] if named else [])])
    finally:
        server.shutdown()
        server.server_close()
    assert removed.is_set() and get_listing(other.deps.state, url) is None  # removed, and it stays removed
    said = " ".join(polled.output.split())
    assert f"poll: {url} was removed by another command while this poll ran" in said, polled.output
    assert polled.exit_code == (1 if named else 0), polled.output


@pytest.mark.integration
def test_poll_of_a_feed_that_is_not_registered_fails_naming_it(tmp_path, monkeypatch):
    # `ragbus poll --feed URL` with no listing registered said "no feeds registered, nothing to poll" and exited 0:
    # the URL asked for named nothing, and a script read the poll as done
    home = tmp_path / "home"
    for name, value in {"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"}.items():
        monkeypatch.setenv(name, value)
    other = build_local(load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"}))
    url = "https://feeds.example/never-added.xml"
    for registered in ([], ["https://feeds.example/added.xml"]):  # none registered, and another one registered
        for added in registered:
            other.deps.state.put(state_collections.FEEDS, listing_key(added),
                                 new_listing_record(added, other.deps.clock.now()))
        polled = CliRunner().invoke(app, ["poll", "--feed", url])
        said = " ".join(polled.output.split())
        assert polled.exit_code == 2, said
        assert f"poll --feed: no feed or sitemap {url} is registered" in said and "ragbus sources list" in said
    assert get_listing(other.deps.state, url) is None  # nor registered nor polled
