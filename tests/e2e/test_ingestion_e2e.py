"""Ingestion as a user drives it: `ragbus feeds add`, `poll`, `ingest`, `stats`, `search`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from tests.support import (
    REPO,
    Site,
    article_html,
    cli_json,
    documents_by_name,
    publish_feed,
    put_topic_articles,
    ragbus_env,
    run_cli,
    serve_site,
    topic_paragraphs,
)

TOPICS = ["volcano", "saxophone", "glacier", "satellite"]


def test_poll_twice_then_change_and_remove(tmp_path):
    home = tmp_path / "home"
    with serve_site(Site()) as site:
        items = put_topic_articles(site, TOPICS)
        publish_feed(site, items)
        feed = f"{site.base}/feed.xml"

        # loopback is refused unless allowed
        refused = run_cli(home, "feeds", "add", feed, check=False, RAGBUS_ALLOW_LOOPBACK="0")
        assert refused.returncode != 0 and "loopback" in (refused.stderr + refused.stdout).lower()
        run_cli(home, "feeds", "add", feed)

        run_cli(home, "poll")
        first = documents_by_name(home)
        assert set(first) == {f"{t}.html" for t in TOPICS}
        stats = cli_json(home, "stats")
        assert stats["documents"] == 4 and stats["chunks"] >= 4 and stats["dead_letters"] == 0
        (feed_stats,) = stats["feeds"]
        assert feed_stats["url"] == feed and feed_stats["last_poll"] and feed_stats["last_error"] is None

        hits = cli_json(home, "search", "saxophone report", "--k", "3")
        assert hits[0]["url"].endswith("/posts/saxophone.html")
        assert {"score", "text", "document_id", "title", "url"} <= set(hits[0])
        assert "cookies" not in " ".join(h["text"] for h in hits).lower()  # boilerplate cleaned away

        # the second poll indexes nothing and fetches no article again
        article_hits = site.hits["/posts/volcano.html"]
        run_cli(home, "poll")
        assert documents_by_name(home) == first
        assert site.hits["/posts/volcano.html"] == article_hits

        # change one item, remove another
        site.put("/posts/glacier.html", article_html("All about glaciers, revised", topic_paragraphs("iceberg", seed=9)))
        items[2] = {**items[2], "title": "All about glaciers, revised"}
        publish_feed(site, [i for i in items if i["guid"] != "guid-satellite"])
        run_cli(home, "poll")
        after = documents_by_name(home)
        assert set(after) == {"volcano.html", "saxophone.html", "glacier.html"}
        assert after["glacier.html"]["content_hash"] != first["glacier.html"]["content_hash"]
        assert after["volcano.html"] == first["volcano.html"]
        hits = cli_json(home, "search", "iceberg report", "--k", "10")
        glacier_chunks = [h for h in hits if h["url"].endswith("/posts/glacier.html")]
        assert glacier_chunks and all("iceberg" in h["text"] for h in glacier_chunks)
        assert not [h for h in cli_json(home, "search", "satellite", "--k", "10") if "satellite.html" in h["url"]]
        stats = cli_json(home, "stats")
        assert stats["documents"] == 3
        assert stats["chunks"] == sum(d["chunk_count"] for d in after.values())


def test_bad_feed_is_a_recorded_error_and_nothing_indexed_is_lost(tmp_path):
    home = tmp_path / "home"
    with serve_site(Site()) as site:
        publish_feed(site, put_topic_articles(site, TOPICS[:2]))
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        run_cli(home, "poll")
        before = documents_by_name(home)
        site.put("/feed.xml", "<?xml version='1.0'?><rss><channel><item><title>trunc", "application/rss+xml")
        result = run_cli(home, "poll", check=False)
        assert result.returncode == 1
        (feed,) = cli_json(home, "stats")["feeds"]
        assert feed["last_error"]
        assert documents_by_name(home) == before


def test_poison_message_lands_in_dead_letters_visible_in_stats(tmp_path):
    home = tmp_path / "home"
    empty = tmp_path / "empty.html"
    empty.write_text("<html><body><nav>menu</nav><script>x()</script></body></html>")
    result = run_cli(home, "ingest", str(empty), check=False)
    assert result.returncode == 1
    stats = cli_json(home, "stats")
    assert stats["dead_letters"] == 1 and stats["documents"] == 0
    (letter,) = stats["recent_dead_letters"]
    assert letter["subscription"] == "cleaner.document-fetched" and "no main text" in letter["error"]


def test_ingest_and_delete_files(tmp_path):
    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    (docs / "plain.txt").write_text("\n\n".join(topic_paragraphs("saxophone", seed=3)))
    (docs / "page.html").write_text(article_html("Glacier page", topic_paragraphs("glacier", seed=5)))
    run_cli(home, "ingest", str(docs))
    assert cli_json(home, "stats")["documents"] == 3
    run_cli(home, "ingest", "--delete", str(docs / "plain.txt"))
    stats = cli_json(home, "stats")
    assert stats["documents"] == 2
    assert not [h for h in cli_json(home, "search", "saxophone", "--k", "10") if h["url"].endswith("plain.txt")]
    bad = run_cli(home, "ingest", str(tmp_path / "missing.pdf"), check=False)
    assert bad.returncode == 2 and "missing.pdf" in bad.stderr


def test_a_folder_with_nothing_readable_is_skipped_and_the_other_paths_are_ingested(tmp_path):
    home = tmp_path / "home"
    first, empty, last = tmp_path / "apt", tmp_path / "bash", tmp_path / "relnotes"
    for folder in (first, empty, last):
        folder.mkdir()
    (first / "notes.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    (empty / "bash.png").write_bytes(b"\x89PNG\r\n")
    (last / "plain.txt").write_text("\n\n".join(topic_paragraphs("saxophone", seed=3)))
    result = run_cli(home, "ingest", str(first), str(empty), str(last), str(tmp_path / "missing"), check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    said = result.stderr.replace("\n", "")
    assert f"{empty} contains no supported file" in said and f"{tmp_path / 'missing'} does not exist" in said
    assert "2 path(s) skipped" in said and "2 document(s) submitted" in result.stdout
    assert cli_json(home, "stats")["documents"] == 2


def test_kill_mid_ingestion_then_restart_indexes_every_item_exactly_once(tmp_path):
    home = tmp_path / "home"
    topics = [f"topic{n:02d}" for n in range(24)]
    with serve_site(Site()) as site:
        publish_feed(site, put_topic_articles(site, topics))
        site.delay_s = 0.15  # slow article pages, so the kill lands mid-poll
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.tools.cli", "poll"], cwd=REPO, env=ragbus_env(home),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        store = SqliteStateStore(home / "ragbus.db")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and store.count(state_collections.DOCUMENTS) < 3:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        done_before = {d["document_id"]: d["indexed_at"] for d in store.list(state_collections.DOCUMENTS)}
        assert 3 <= len(done_before) < len(topics), "the kill should land mid-ingestion"

        site.delay_s = 0.0
        run_cli(home, "poll")
        docs = store.list(state_collections.DOCUMENTS)
        assert len(docs) == len(topics)
        # documents indexed before the kill were not indexed again
        for d in docs:
            if d["document_id"] in done_before:
                assert d["indexed_at"] == done_before[d["document_id"]]
        stats = cli_json(home, "stats")
        assert stats["chunks"] == sum(d["chunk_count"] for d in docs)
        hits = cli_json(home, "search", "report", "--k", "50")
        keys = [(h["document_id"], h["text"]) for h in hits]
        assert len(keys) == len(set(keys)), "a chunk is duplicated"
        assert stats["dead_letters"] == 0
