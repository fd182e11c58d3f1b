"""Deletes racing every kind of work (issue 35's campaign, beyond its three scenarios): work a
killed command left on the bus, a sitemap removed mid-poll, one file deleted during its folder's
ingest, two deletes at once, a listing removed and added again; and what a delete interrupted
between its tombstone and its message leaves is finished by the next delete."""

from __future__ import annotations

import json
import re
import subprocess

from tests.hostile.crash import NOTHING, census, kill9, start_captured, wait_for, write_corpus
from tests.support import (
    Site,
    article_html,
    put_article_feed,
    run_cli,
    serve_site,
    topic_paragraphs,
)


def _deleted_count(proc: subprocess.CompletedProcess) -> int:
    return int(re.search(r"(\d+) document\(s\) deleted", proc.stdout).group(1))


def test_work_a_killed_ingest_left_on_the_bus_does_not_bring_back_what_was_deleted_since(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 30)
    ingest = start_captured(home, "ingest", str(docs))
    wait_for(lambda: (home / "ragbus.db").exists() and census(home)["documents"] >= 1)
    kill9(ingest)  # its fetched and cleaned messages stay queued on the bus
    assert census(home)["documents"] < 30
    deleted = run_cli(home, "ingest", "--delete", str(docs))
    assert _deleted_count(deleted) == 30
    # the next command finishes the work the killed one left: none of it is indexed now
    left = run_cli(home, "poll", check=False)
    assert left.returncode == 0, left.stderr
    assert census(home) == NOTHING  # no record, and no chunk left in the index either
    assert json.loads(run_cli(home, "stats", "--json").stdout)["documents"] == 0


def test_a_sitemap_removed_during_its_poll_stays_removed_with_none_of_its_pages(tmp_path):
    site = Site()
    site.delay_s = 0.08
    pages = [f"/s{i}.html" for i in range(60)]
    with serve_site(site):
        for i, path in enumerate(pages):
            site.put(path, article_html(f"Page {i}", topic_paragraphs(f"dune{i}", 3, seed=i)))
        urls = "".join(f"<url><loc>{site.base}{path}</loc></url>" for path in pages)
        site.put("/sitemap.xml", f"<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                 f"{urls}</urlset>", "application/xml")
        home = tmp_path / "home"
        sitemap = f"{site.base}/sitemap.xml"
        run_cli(home, "sitemaps", "add", sitemap, "--allow-loopback")
        poll = start_captured(home, "poll")
        try:
            wait_for(lambda: sum(site.hits.get(path, 0) for path in pages) >= 10)
            removed = run_cli(home, "sitemaps", "remove", sitemap, check=False)
            poll.communicate(timeout=300)
        finally:
            kill9(poll)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(run_cli(home, "sitemaps", "list", "--json").stdout) == []
    assert census(home) == NOTHING  # no record, and no chunk left in the index either


def test_one_file_deleted_during_its_folders_ingest_stays_deleted_and_the_rest_are_indexed(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    files = write_corpus(docs, 30)
    doomed = files[-1]  # the last the ingest reaches
    ingest = start_captured(home, "ingest", str(docs))
    try:
        wait_for(lambda: (home / "ragbus.db").exists() and census(home)["documents"] >= 1)
        run_cli(home, "ingest", "--delete", str(doomed))
        out, errors = ingest.communicate(timeout=300)
    finally:
        kill9(ingest)
    assert ingest.returncode == 0, errors
    assert census(home)["documents"] == 29
    hits = json.loads(run_cli(home, "search", "subject29 report", "--k", "30", "--json").stdout)
    assert not any(hit["url"].endswith(doomed.name) for hit in hits)


def test_two_deletes_of_one_folder_at_once_count_each_document_once(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 12)
    run_cli(home, "ingest", str(docs))
    both = [start_captured(home, "ingest", "--delete", str(docs)) for _ in range(2)]
    results = [proc.communicate(timeout=300) for proc in both]
    assert all(proc.returncode == 0 for proc in both), [e for _, e in results]
    counts = [int(re.search(r"(\d+) document\(s\) deleted", out).group(1)) for out, _ in results]
    assert sum(counts) == 12, counts
    assert census(home) == NOTHING  # no record, and no chunk left in the index either


def test_a_feed_removed_then_added_again_is_indexed_again_by_its_next_poll(tmp_path):
    site = Site()
    with serve_site(site):
        put_article_feed(site, 4, "fjord")
        home = tmp_path / "home"
        feed = f"{site.base}/feed.xml"
        run_cli(home, "feeds", "add", feed, "--allow-loopback")
        run_cli(home, "poll")
        assert census(home)["documents"] == 4
        run_cli(home, "feeds", "remove", feed)
        assert census(home) == NOTHING  # no record, and no chunk left in the index either
        run_cli(home, "feeds", "add", feed, "--allow-loopback")
        again = run_cli(home, "poll")
        assert "still pending" not in again.stderr
    assert census(home)["documents"] == 4  # the next revision of each item: deletes win, re-adds work


def test_a_delete_interrupted_after_its_tombstones_is_finished_by_the_next_delete(tmp_path):
    from shared.contract.config import load_settings
    from shared.ingest.files import delete_path
    from shared.runtime.bootstrap import build_local

    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 3)
    run_cli(home, "ingest", str(docs))
    deps = build_local(load_settings({"RAGBUS_HOME": str(home)})).deps

    class LostPublisher:
        def publish(self, message, attributes=None):
            raise ConnectionError("the bus went away")

    try:
        delete_path(docs, state=deps.state, publisher=LostPublisher(), clock=deps.clock)
    except ConnectionError:
        pass  # killed here: one tombstone written, its message never sent
    assert census(home)["documents"] == 3
    finished = run_cli(home, "ingest", "--delete", str(docs))
    assert _deleted_count(finished) == 3
    assert census(home) == NOTHING  # no record, and no chunk left in the index either
