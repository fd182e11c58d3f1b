"""Untrusted text through every CLI command: shown as text, never obeyed as markup or escapes.

Rich markup (``[/]`` crashes with MarkupError, ``[link=…]`` prints a hidden hyperlink) and
terminal escape sequences (ANSI CSI, OSC 8 hyperlinks, OSC 52 clipboard writes, the C1 CSI)
arrive in a file, a feed item, a page, a question and stored errors; each command must exit
as usual, show the text literally and emit none of the sequences. The terminal is forced on
(FORCE_COLOR) so rich would render links and styles as a real terminal gets them.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support import Site, article_html, run_cli, serve_site, topic_paragraphs

MARKUP = "[/] [link=http://evil.example/phish]phish here[/link] [bold red]loud"
ESCAPES = "\x1b[2J\x1b]8;;http://evil.example/osc\x07osc link\x1b]8;;\x07 \x1b]52;c;cHduZWQ=\x07 \x9b2J"
HOSTILE = f"{MARKUP} {ESCAPES}"
WORD = "zanzibarquux"
TERMINAL = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "400"}
_SGR = re.compile(r"\x1b\[(?:[0-9;]*[mAK]|\?25[lh])")  # rich's own colours and progress redraws


def _assert_inert(proc, *, literal: str | None = MARKUP) -> str:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "MarkupError" not in out, out
    assert "\x1b]" not in out, "an OSC sequence (hyperlink, clipboard) reached the terminal"
    assert "\x9b" not in out and "\x1b[2J" not in out, "a foreign CSI sequence reached the terminal"
    text = _SGR.sub("", out)
    assert "\x1b" not in text, f"an escape sequence other than rich's colours: {text!r}"
    if literal is not None:
        assert literal in text, f"the text was not shown literally: {text!r}"
    return text


def _assert_json_inert(proc) -> object:
    assert "\x1b" not in proc.stdout and "\x9b" not in proc.stdout
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile-cli")
    docs = tmp_path_factory.mktemp("docs")
    body = " ".join(topic_paragraphs(WORD, 3))
    (docs / "hostile.txt").write_text(f"{HOSTILE}\n\n{body} {HOSTILE} {WORD}\n")
    site = Site()
    with serve_site(site):
        site.put("/page.html", article_html(MARKUP, [f"{WORD} page {MARKUP}", *topic_paragraphs("page", 3)]))
        # a feed cannot carry ESC (not an XML character); C1 CSI and markup it can
        items = (
            f"<item><title>{MARKUP}</title><link>{site.base}/page.html</link><guid>g1</guid></item>"
            f"<item><title>no link</title><guid>{MARKUP} &#x9b;2J</guid></item>"
        )
        site.put("/feed.xml", "<?xml version='1.0'?><rss version='2.0'><channel><title>t</title>"
                 f"<link>{site.base}/</link><description>d</description>{items}</channel></rss>",
                 "application/rss+xml")
        run_cli(home, "ingest", str(docs))
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        polled = run_cli(home, "poll", "--timeout", "120", check=False, **TERMINAL)
    yield home, polled


#: The hostile guid as the stored error names it: feedparser made it a URL, which the poller
#: normalises (a page's identity is its normalised URL), so its markup arrives percent-encoded.
HOSTILE_URL_PART = "%5B/%5D%20%5Blink=http:/evil.example/phish%5D"


def test_poll_shows_a_hostile_item_error_as_text(hostile_home):
    _, polled = hostile_home
    assert polled.returncode == 1  # the item without a link failed: the run says so
    _assert_inert(polled, literal=HOSTILE_URL_PART)


@pytest.mark.parametrize("args", [("feeds", "list"), ("stats",)])
def test_feed_listings_show_a_stored_hostile_error_as_text(hostile_home, args):
    home, _ = hostile_home
    proc = run_cli(home, *args, **TERMINAL)
    _assert_inert(proc, literal=HOSTILE_URL_PART)
    data = _assert_json_inert(run_cli(home, *args, "--json", **TERMINAL))
    assert HOSTILE_URL_PART in json.dumps(data, ensure_ascii=False)


def test_a_document_containing_markup_is_searchable_with_exit_0(hostile_home):
    home, _ = hostile_home
    proc = run_cli(home, "search", WORD, **TERMINAL)
    assert proc.returncode == 0
    _assert_inert(proc)
    hits = _assert_json_inert(run_cli(home, "search", WORD, "--json", **TERMINAL))
    assert any("[/]" in hit["text"] for hit in hits)


def test_ask_shows_question_answer_and_citations_as_text(hostile_home):
    home, _ = hostile_home
    question = f"what about {WORD} {MARKUP}?"  # the query API refuses control characters itself
    proc = run_cli(home, "ask", question, **TERMINAL)
    _assert_inert(proc, literal=None)  # answer, rewrites and citations may quote the document
    record = _assert_json_inert(run_cli(home, "ask", question, "--json", **TERMINAL))
    assert question in json.dumps(record, ensure_ascii=False)  # JSON keeps the data

    traces = run_cli(home, "traces", **TERMINAL)
    _assert_inert(traces, literal=None)
    trace = run_cli(home, "trace", record["id"], **TERMINAL)
    _assert_inert(trace, literal=None)


def test_dead_letters_show_a_hostile_error_as_text(hostile_home):
    from shared.contract import state_collections
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local

    home, _ = hostile_home
    system = build_local(load_settings({"RAGBUS_HOME": str(home)}))
    system.deps.state.put(state_collections.DEAD_LETTERS, "hostile", {
        "subscription": "indexer.document-cleaned", "error": HOSTILE, "attempts": 5,
        "at": "2026-11-23T00:00:00+00:00", "type": "DocumentCleaned"})
    _assert_inert(run_cli(home, "dead-letters", **TERMINAL))
    _assert_inert(run_cli(home, "stats", **TERMINAL))
    _assert_json_inert(run_cli(home, "dead-letters", "--json", **TERMINAL))


@pytest.mark.parametrize("args", [
    ("feeds", "add", f"http://{MARKUP}\x1b]8;;x\x07.example/feed"),
    ("ingest", f"/nonexistent/{MARKUP}\x1b]52;c;eA==\x07"),
    ("trace", f"{MARKUP}\x1b[2J"),
])
def test_error_messages_quote_hostile_arguments_as_text(hostile_home, args):
    home, _ = hostile_home
    proc = run_cli(home, *args, check=False, **TERMINAL)
    assert proc.returncode != 0
    _assert_inert(proc, literal="[/]")


def test_a_path_ingest_refuses_is_named_with_its_control_characters_as_escapes(tmp_path):
    """`ragbus ingest` of a path it refuses printed the error through the terminal-safe text, which drops what a
    terminal obeys: 'bell<BEL>.png' was "bell.png has an unsupported suffix", a file that does not exist, where a
    folder's warnings and a failed file's line write it as escapes (cc0b8ac). Escaped, it is safe and findable."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bell\x07\x1b]0;title\x07.png").write_bytes(b"\x89PNG\r\n")
    proc = run_cli(tmp_path / "home", "ingest", str(docs / "bell\x07\x1b]0;title\x07.png"), check=False, **TERMINAL)
    assert proc.returncode == 2, proc.stderr
    text = _assert_inert(proc, literal="bell\\x07\\x1b]0;title\\x07.png has an unsupported suffix")
    assert "\x07" not in text, text
    # beside a path it ingests, the closing line names the one it skipped the same way
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "herons.md").write_text("# Herons\n\nHerons nest in colonies.\n")
    proc = run_cli(tmp_path / "home", "ingest", str(tmp_path / "notes"), str(docs / "bell\x07\x1b]0;title\x07.png"),
                   check=False, **TERMINAL)
    assert proc.returncode == 2, proc.stderr
    _assert_inert(proc, literal="1 path(s) skipped, the rest ingested: " + str(docs / "bell\\x07\\x1b]0;title\\x07.png"))
