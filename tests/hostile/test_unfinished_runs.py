"""A run whose documents were dead-lettered or did not finish exits non-zero and says what is
left and where to look (`ragbus dead-letters`): ingest, poll and demo."""

from __future__ import annotations

from rich.console import Console

from shared.contract.errors import PermanentError, RagbusError
from tests.hostile.crash import census
from tests.support import Site, article_html, rss, run_cli, serve_site, topic_paragraphs


def test_ingest_of_a_file_that_is_dead_lettered_exits_1_and_points_at_dead_letters(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("\n\n".join(topic_paragraphs("harbor", 3)))
    (docs / "tiny.md").write_text("# Note\n\nShort note.\n")  # a tiny document is indexed, not a failure
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 this is no PDF")
    first = run_cli(home, "ingest", str(docs), check=False)
    assert first.returncode == 1  # this run's own work did not all finish
    assert "1 document(s) could not be processed" in first.stderr and "ragbus dead-letters" in first.stderr
    assert "broken.pdf" in first.stderr
    # unchanged, the file is still not indexed: a rerun says so, but it did all of its own work
    again = run_cli(home, "ingest", str(docs), check=False)
    assert again.returncode == 0, again.stderr
    assert "0 document(s) submitted, 3 unchanged" in again.stdout
    assert "2 document(s) in the index" in again.stdout  # the index's total, not this run's
    assert "failed earlier, unchanged," in again.stderr and "broken.pdf" in again.stderr
    assert "1 unchanged document(s) under these paths failed in an earlier run" in again.stderr
    assert "could not be processed" not in again.stderr
    assert census(home)["documents"] == 2


def _poll_a_good_item_beside(tmp_path, item: dict, pages: dict[str, str]):
    """``ragbus poll`` of a feed holding a good article and ``item`` (its page among ``pages``, if any)."""
    site = Site()
    with serve_site(site):
        site.put("/good.html", article_html("Good", topic_paragraphs("meadow", 3)))
        for path, body in pages.items():
            site.put(path, body)
        site.put("/feed.xml", rss(site.base, [{"title": "good", "path": "/good.html", "guid": "g"}, item]),
                 "application/rss+xml")
        home = tmp_path / "home"
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        return home, run_cli(home, "poll", check=False)


def test_poll_whose_page_is_dead_lettered_exits_1(tmp_path):
    home, proc = _poll_a_good_item_beside(tmp_path, {"title": "empty", "path": "/empty.html", "guid": "t"},
                                          {"/empty.html": "<html><body><nav>menu</nav></body></html>"})
    assert proc.returncode == 1
    assert "could not be processed" in proc.stderr and "ragbus dead-letters" in proc.stderr
    assert census(home)["documents"] == 1


def test_poll_whose_item_cannot_be_fetched_exits_1_and_points_at_feeds_list_not_dead_letters(tmp_path):
    # a fetch that fails publishes nothing, so no dead letter names the item: the pointer must
    # lead to where the reason is (it said "see `ragbus dead-letters`", which then said there were none)
    home, proc = _poll_a_good_item_beside(tmp_path, {"title": "gone", "path": "/gone.html", "guid": "x"}, {})
    assert proc.returncode == 1
    assert "1 item(s) could not be fetched" in proc.stderr and "ragbus feeds list" in proc.stderr
    assert "dead-letters" not in proc.stderr
    assert "no dead letters" in run_cli(home, "dead-letters").stderr
    assert "gone.html" in run_cli(home, "feeds", "list", "--json").stdout
    assert census(home)["documents"] == 1


def test_demo_whose_documents_are_dead_lettered_fails(tmp_path, monkeypatch):
    from shared.runtime.stages import CONSUMERS
    from shared.tools import demo

    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(demo, "QUESTIONS", [])
    cleaner = next(c for c in CONSUMERS if c.stage == "cleaner")
    real = cleaner.handler

    def cleaner_refusing_files(message, deps):
        if message.source == "file":
            raise PermanentError(f"refused {message.document_id} for the test")
        return real(message, deps)

    monkeypatch.setitem(cleaner.__dict__, "handler", cleaner_refusing_files)
    console = Console(record=True, width=200)
    try:
        demo.run_demo(console, port=0)
    except RagbusError as exc:
        assert "dead-lettered" in str(exc) and "ragbus dead-letters" in str(exc)
    else:
        raise AssertionError("the demo finished as if every document were indexed")
