"""Deletes win, driven as a person would (issue 35, problem 1): a delete racing an ingest, a
delete followed by `dead-letters retry --all`, `feeds remove` during a poll. Each deleted document
stays deleted, each command reports only its own work, and a re-ingest afterwards works."""

from __future__ import annotations

import json

from tests.hostile.crash import NOTHING, census, start_captured, wait_for, write_corpus
from tests.support import (
    Site,
    put_article_feed,
    run_cli,
    serve_site,
)


def test_a_delete_during_an_ingest_of_the_folder_wins_and_each_command_reports_its_own_work(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 40)
    ingest = start_captured(home, "ingest", str(docs))
    try:
        wait_for(lambda: (home / "ragbus.db").exists() and census(home)["documents"] >= 2)
        delete = run_cli(home, "ingest", "--delete", str(docs), check=False)
        out, errors = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert delete.returncode == 0, delete.stderr
    assert "still pending" not in delete.stderr
    assert ingest.returncode == 0, errors
    assert "still pending" not in errors  # what the delete took is not this ingest's to wait for
    assert census(home) == NOTHING  # no record, and no chunk left in the index either
    assert "0 document(s) deleted" in run_cli(home, "ingest", "--delete", str(docs)).stdout
    # a re-ingest after the delete is the documents' next revision: all of them come back
    again = run_cli(home, "ingest", str(docs))
    assert "40 document(s) submitted" in again.stdout
    assert census(home)["documents"] == 40


def test_a_deleted_documents_dead_letter_retried_does_not_bring_it_back(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 3)
    # one chunk per document at most: each is refused by the indexer and dead-lettered
    first = run_cli(home, "ingest", str(docs), check=False, RAGBUS_MAX_CHUNKS_PER_DOCUMENT="1")
    assert first.returncode == 1 and "3 document(s) could not be processed" in first.stderr
    assert "3 document(s) deleted" in run_cli(home, "ingest", "--delete", str(docs)).stdout
    # the cause is fixed (the default cap), and every dead letter retried: the deletes still win
    retried = run_cli(home, "dead-letters", "retry", "--all")
    assert "retried 3 dead letter(s)" in retried.stdout and "failed again" not in retried.stdout
    assert census(home) == NOTHING  # no record, and no chunk left in the index either
    assert json.loads(run_cli(home, "search", "subject1 report", "--json").stdout) == []


def test_a_feed_removed_during_its_poll_stays_removed_with_none_of_its_documents(tmp_path):
    site = Site()
    site.delay_s = 0.08  # each page a little slow: the removal lands mid-poll
    with serve_site(site):
        items = put_article_feed(site, 80, "meadow")
        home = tmp_path / "home"
        feed = f"{site.base}/feed.xml"
        run_cli(home, "feeds", "add", feed, "--allow-loopback")
        poll = start_captured(home, "poll")
        try:
            wait_for(lambda: sum(site.hits.get(item["path"], 0) for item in items) >= 12)
            removed = run_cli(home, "feeds", "remove", feed, check=False)
            poll.communicate(timeout=300)
        finally:
            if poll.poll() is None:
                poll.kill()
    assert removed.returncode == 0, removed.stderr
    assert json.loads(run_cli(home, "feeds", "list", "--json").stdout) == []  # not registered again
    assert census(home) == NOTHING  # no record, and no chunk left in the index either
