"""kill -9 of `ragbus ingest` at different moments; the rerun ends with every file indexed once."""

from __future__ import annotations

import pytest

from tests.hostile.crash import census, kill_when, start, write_corpus
from tests.support import run_cli

N = 24


@pytest.mark.parametrize("moment", [
    {"after_s": 0.0},  # before the runtime even started
    {"after_s": 1.2},  # while files are being announced or the models load
    {"documents": 4},  # mid-indexing: most of the work is still queued
])
def test_ingest_rerun_after_kill_9_indexes_every_file_exactly_once(tmp_path, moment):
    docs, home = tmp_path / "docs", tmp_path / "home"
    write_corpus(docs, N)
    kill_when(start(home, "ingest", str(docs)), home, **moment)
    rerun = run_cli(home, "ingest", str(docs), "--timeout", "120", check=False)
    assert rerun.returncode == 0, rerun.stderr
    counted = census(home)
    assert counted["documents"] == N and counted["index_documents"] == N
    assert counted["duplicates"] == 0
    again = run_cli(home, "ingest", str(docs))  # nothing left: a third run changes nothing
    assert "0 document(s) submitted" in again.stdout and census(home) == counted


def test_a_rerun_that_gives_up_waiting_says_what_is_pending_and_exits_non_zero(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    write_corpus(docs, N)
    kill_when(start(home, "ingest", str(docs)), home, documents=1)
    rerun = run_cli(home, "ingest", str(docs), "--timeout", "0", check=False)
    assert rerun.returncode == 1
    assert "announced by an earlier run are not indexed yet" in rerun.stderr
    assert "still pending" in rerun.stderr and "ragbus stats" in rerun.stderr
    assert run_cli(home, "ingest", str(docs), check=False).returncode == 0
    assert census(home)["documents"] == N


def test_poll_rerun_after_kill_9_indexes_every_item_exactly_once(tmp_path):
    from tests.support import Site, article_html, rss, serve_site, topic_paragraphs

    site, home, n = Site(), tmp_path / "home", 20
    with serve_site(site):
        items = []
        for i in range(n):
            site.put(f"/p{i}.html", article_html(f"Post {i}", topic_paragraphs(f"item{i}", 3, seed=i)))
            items.append({"title": f"Post {i}", "path": f"/p{i}.html", "guid": f"g{i}"})
        site.put("/feed.xml", rss(site.base, items), "application/rss+xml")
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        kill_when(start(home, "poll"), home, documents=3)
        rerun = run_cli(home, "poll", "--timeout", "120", check=False)
    assert rerun.returncode == 0, rerun.stderr
    counted = census(home)
    assert counted["documents"] == n and counted["duplicates"] == 0
