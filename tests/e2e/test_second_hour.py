"""A newcomer's second hour (issue 25): their own documents, their own feeds and a clean slate,
each driven through the CLI in a subprocess on a fresh RAGBUS_HOME."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from tests.support import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
NEWCOMER = {"RAGBUS_ALLOW_LOOPBACK": "0", "COLUMNS": "200"}


def test_a_folder_ingest_says_what_it_took_skipped_and_found_unchanged(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    (docs / "cli").mkdir(parents=True)
    shutil.copy(DATA / "zlib_how.html", docs)
    shutil.copy(DATA / "xsltproc.html", docs)
    (docs / "installing.rst").write_text(
        "Installing\n==========\n\nUse :ref:`the resolver <resolver>` to install packages from an index; "
        "``pip install`` reads requirement files as well as single names, and it builds wheels first.\n")
    (docs / "cli" / "pip_download.rst.gz").write_bytes(gzip.compress(
        b"pip download\n============\n\nDownload packages into a directory without installing them, "
        b"so that a machine without network access can install them later from that directory.\n"))
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (docs / "conf.py.gz").write_bytes(gzip.compress(b"project = 'pip'"))

    first = run_cli(home, "ingest", str(docs), **NEWCOMER)
    assert "4 document(s) submitted, 2 skipped; 4 document(s) in the index" in first.stdout, first.stdout
    assert "skipped 1 .png file(s): not a document type ragbus reads" in first.stdout
    assert "skipped 1 .py.gz file(s): not a document type ragbus reads" in first.stdout

    again = run_cli(home, "ingest", str(docs), **NEWCOMER)
    assert "0 document(s) submitted, 4 unchanged, 2 skipped; 4 document(s) in the index" in again.stdout

    hits = json.loads(run_cli(home, "search", "buffer sizes 128K or 256K bytes", "--k", "1", "--json").stdout)
    assert hits[0]["title"] == "zlib Usage Example" and "128K or 256K" in hits[0]["text"]
    hits = json.loads(run_cli(home, "search", "xsltproc command line XSLT processor", "--k", "1",
                              "--json").stdout)
    assert hits[0]["title"] == "xsltproc"
    hits = json.loads(run_cli(home, "search", "download packages without network access", "--k", "1",
                              "--json").stdout)
    assert hits[0]["title"] == "pip download" and hits[0]["url"].endswith("pip_download.rst.gz")


def test_allow_loopback_sticks_to_the_listing_it_was_given_for(tmp_path):
    from tests.support import Site, article_html, rss, serve_site, topic_paragraphs

    home = tmp_path / "home"
    with serve_site(Site()) as site:
        site.put("/feed.xml", rss(site.base, [{"title": "Volcanoes", "path": "/a.html", "guid": "a"}]),
                 "application/rss+xml")
        site.put("/a.html", article_html("Volcanoes", topic_paragraphs("volcano")))
        refused = run_cli(home, "feeds", "add", f"{site.base}/feed.xml", check=False, **NEWCOMER)
        assert refused.returncode == 2 and "--allow-loopback" in refused.stderr
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml", "--allow-loopback", **NEWCOMER)
        poll = run_cli(home, "poll", **NEWCOMER)  # a plain poll, no flag, no RAGBUS_ALLOW_LOOPBACK
        assert "refusing" not in poll.stdout + poll.stderr
        assert json.loads(run_cli(home, "stats", "--json").stdout)["documents"] == 1
        assert site.hits.get("/a.html") == 1
