"""A text file under ISOLATED_OVER_BYTES is read in the cleaner's own thread, where nothing can stop it: each
pattern the text readers run over a document's own text takes time linear in it (the CPU-time ratio of 8x the
input stays near 8; a quadratic pattern makes it near 64)."""

from __future__ import annotations

import lxml.html

from shared.formats.text import (
    _front_matter,
    _tags_as_spaces,
    _unwrap_source_lines,
    _without_target,
)
from tests.support import cpu_ratio


def test_a_front_matter_value_followed_by_a_long_run_of_spaces_is_read_in_linear_time():
    # a lazy value before '\s*$' tried the run of spaces from each of its starts: 'title: x', 100,000 spaces,
    # 'y' (a 100 kB Markdown file) took 68 s of the cleaner's thread
    fronts = {n: "---\ntitle: Pump manual" + " " * n + "rev\n---\n\nBody text.\n" for n in (2000, 16000)}

    def check(n, result):
        assert result[0] == "Pump manual" + " " * n + "rev" and result[2] == "\nBody text.\n"

    assert cpu_ratio(lambda n: _front_matter(fronts[n]), 2000, 16000, check=check) < 24


def test_a_front_matter_field_reads_as_before():
    text = ("---\nTitle:   \"The pump manual\"  \r\nauthor: someone\ndate: 2024-05-01\t\npublished: 2023-01-01\n"
            "---\n\n# Heading\n")
    assert _front_matter(text) == ("The pump manual", "2024-05-01", "\n# Heading\n")


def test_a_long_run_of_spaces_in_a_paragraph_holding_a_line_break_is_unwrapped_in_linear_time():
    # the source line break pattern tried a run of spaces with no line break after it from each of its starts:
    # 100,000 spaces between two words of a paragraph holding a <code> (a 100 kB page) took 91 s
    def run(n):
        tree = lxml.html.fromstring(f"<div><p>The <code>pump</code> starts{' ' * n}slowly\n  and stops.</p></div>")
        _unwrap_source_lines(tree)
        return tree.text_content()

    def check(n, text):
        assert text == f"The pump starts{' ' * n}slowly and stops."

    assert cpu_ratio(run, 2000, 16000, check=check) < 24


def test_a_sphinx_roles_target_is_taken_off_in_linear_time():
    # the target pattern tried each space and each '<' of a role's text as a start and scanned the rest from each:
    # a role of 100,000 spaces (a 100 kB .rst file) took 23 s of the cleaner's thread, of 100,000 '<' 9 s
    spaced = {n: "pump" + " " * n + "curve" for n in (2000, 16000)}
    opened = {n: "<" * n + "curve" for n in (2000, 16000)}

    def unchanged(texts):
        def check(n, result):
            assert result == texts[n]  # no target to take off
        return check

    assert cpu_ratio(lambda n: _without_target(spaced[n]), 2000, 16000, check=unchanged(spaced)) < 24
    assert cpu_ratio(lambda n: _without_target(opened[n]), 2000, 16000, check=unchanged(opened)) < 24


def test_a_sphinx_roles_target_is_taken_off_as_before():
    assert _without_target("Pump curves <pump-curves>") == "Pump curves"
    assert _without_target("the <b> and <c>  \n") == "the <b> and"
    assert _without_target("a <b <c>") == "a"
    assert _without_target("plain text") == "plain text"
    assert _without_target("<only-target>") == ""


def test_the_tags_of_a_markdown_html_block_are_taken_off_in_linear_time():
    # '<[^>]+>' scanned the rest of the block from every '<' once no '>' was left: 130,000 '<' took 14 s
    blocks = {n: "<div>pump" + "<" * n for n in (4000, 32000)}

    def check(n, result):
        assert result == " pump" + "<" * n

    assert cpu_ratio(lambda n: _tags_as_spaces(blocks[n]), 4000, 32000, check=check) < 24


def test_the_tags_of_a_markdown_html_block_are_taken_off_as_before():
    assert _tags_as_spaces('<div class="x">The <b>pump</b> runs</div>') == " The  pump  runs "
    assert _tags_as_spaces("a <> b <c <d> e > f") == "a <> b   e > f"
    assert _tags_as_spaces("x < y") == "x < y"


def test_a_restructuredtext_file_over_4_kib_is_read_in_a_bounded_process_of_its_own(monkeypatch):
    # docutils' inline parser costs the square of a run without a space: 16 KiB of 'a-a-a-' took 14 s of the
    # cleaner's own thread (the bound was 16 KiB a while), 128 KiB (under the 128 KiB every text kind had) 13 minutes
    from services.cleaner import handler
    from shared.formats.passages import Passage, Reading

    isolated = []

    def bounded(kind, raw, content_type, url, limits, bounds):
        isolated.append((kind.name, len(raw)))
        return Reading(passages=[Passage("read in its own process")])

    monkeypatch.setattr(handler, "read_isolated", bounded)
    small = b"Pump\n====\n\nThe pump starts slowly.\n"
    assert "The pump starts slowly." in handler.read_content(small, "text/x-rst", "file:///pump.rst").passages[0].text
    assert isolated == []
    large = b"Pump\n====\n\n" + b"a-" * (2 * 1024 + 64)  # just over 4 KiB
    handler.read_content(large, "text/x-rst", "file:///pump.rst")
    assert isolated == [("reStructuredText", len(large))]
    handler.read_content(b"<p>" + b"x " * (2 * 1024 + 64) + b"</p>", "text/html", "file:///pump.html")
    assert len(isolated) == 1  # an HTML page of that size is still read in the cleaner's process
