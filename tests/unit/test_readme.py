"""The README is the front door: short, its commands runnable, its links alive.

The README shows the two set-up commands first, then the everyday commands, and links the reference
pages in docs/. Every ``ragbus`` command it (or a docs/ page) shows must exist with every flag shown
beside it (``ragbus CMD --help`` exits 0 and names the flag), and every relative link in them must reach
a file, and a heading of that file when it names an ``#anchor``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shared.tools.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
SETUP = ("make demo    # creates .venv, installs ragbus, ingests the bundled corpus and answers three questions, offline",
         "make test    # creates .venv if needed and runs every test (unit, integration, e2e)")

_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMAND = re.compile(r"(?<![\w.-])ragbus((?: +[a-z][a-z-]*)+)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _prose_and_code(text: str) -> tuple[list[str], list[str]]:
    """(lines outside fenced blocks, lines inside them); a fence's info string is not a line of either."""
    prose, code, inside = [], [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        (code if inside else prose).append(line)
    return prose, code


def _spans(text: str, *, inline: bool) -> list[str]:
    """Where a command is shown to be run: each line of a fenced block and, with ``inline``, each
    `inline code` span of the prose that starts with ``ragbus`` (a docs/ page's prose also names
    commands a recipe would add, and quotes output that mentions ragbus)."""
    prose, code = _prose_and_code(text)
    spans = [span for line in prose for span in re.findall(r"`((?:\.venv/bin/)?ragbus [^`]*)`", line)]
    return code + (spans if inline else [])


def _shown_commands(text: str, *, inline: bool = True) -> list[tuple[tuple[str, ...], set[str], str]]:
    """(the words after ``ragbus``, the flags shown with them, the span) for every command shown."""
    shown = []
    for span in _spans(text, inline=inline):
        matches = list(_COMMAND.finditer(span))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(span)
            flags = set(_FLAG.findall(span[match.start():end]))
            shown.append((tuple(match.group(1).split()), flags, span))
    return shown


def _command_path(words: tuple[str, ...]) -> list[str]:
    """The longest run of ``words`` that names a command or sub-command of the CLI."""
    command = typer.main.get_command(app)
    path = []
    for word in words:
        commands = getattr(command, "commands", {})  # a group's sub-commands (typer ships its own click)
        if word not in commands:
            break
        path.append(word)
        command = commands[word]
    return path


def _anchors(text: str) -> set[str]:
    """The ids GitHub gives the headings of a Markdown file (lower case, punctuation dropped, spaces to -)."""
    prose, _ = _prose_and_code(text)
    seen: dict[str, int] = {}
    anchors = set()
    for line in prose:
        heading = re.match(r"#{1,6} +(.+?) *#*$", line)
        if not heading:
            continue
        words = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1)).strip().lower()
        slug = "".join(c for c in words if c in " -_" or unicodedata.category(c)[0] in "LN").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if not count else f"{slug}-{count}")
    return anchors


def _broken_links(page: Path) -> list[str]:
    prose, _ = _prose_and_code(page.read_text())
    text = re.sub(r"`[^`\n]*`", "", "\n".join(prose))  # joined: a link's words may wrap onto the next line
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z+.-]*:", target):  # http:, https:, mailto: — not ours to check offline
            continue
        name, _, anchor = target.partition("#")
        linked = (page.parent / name).resolve() if name else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {linked}")
    return broken


def test_the_readme_opens_with_the_two_setup_commands_and_stays_short():
    lines = README.read_text().splitlines()
    assert lines[0] == "# ragbus"
    assert lines[2:6] == ["```", *SETUP, "```"]
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference into a docs/ page"


def test_the_readme_links_every_docs_page():
    linked = {target.partition("#")[0] for target in _LINK.findall(README.read_text())}
    unlinked = [p.name for p in PAGES if f"docs/{p.name}" not in linked]
    assert not unlinked, f"docs/ pages the README does not link: {unlinked}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page):
    assert _broken_links(page) == []


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_ragbus_command_shown_exists_with_its_flags(page):
    runner = CliRunner()
    shown = _shown_commands(page.read_text(), inline=page == README)
    for words, flags, span in shown:
        path = _command_path(words)
        assert path, f"{page.name}: `ragbus {' '.join(words)}` is not a ragbus command ({span!r})"
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (span, result.output)
        missing = [flag for flag in flags if flag not in result.output]
        assert not missing, f"{page.name}: `ragbus {' '.join(path)}` has no {missing} ({span!r})"
    if page == README:
        assert len({tuple(_command_path(w)) for w, _, _ in shown}) >= 10


def test_the_checks_catch_a_dead_link_a_missing_heading_and_an_unknown_command(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## The `API` (v1)\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#the-api-v1) [b](other.md#not-a-heading) [c](gone.md) [d](https://x.test/)\n"
                    "`ragbus frobnicate now` and `ragbus ask --no-such-flag`\n")
    broken = _broken_links(page)
    assert len(broken) == 2 and "#not-a-heading" in broken[0] and "gone.md" in broken[1]
    shown = _shown_commands(page.read_text())
    assert _command_path(shown[0][0]) == [] and shown[1][1] == {"--no-such-flag"}


@pytest.mark.parametrize(("page", "part", "row"), [
    ("docs/http-api.md", "endpoints", "| POST | `/v1/queries/{query_id}/feedback` | Rate the query's answer |"),
    ("docs/formats.md", "file-kinds", "| CSV | .csv | `text/csv` | `shared.formats.sheets:read_csv` |"),
])
def test_a_generated_reference_page_left_stale_fails_the_check(tmp_path, capsys, page, part, row):
    from shared.tools import docs

    for generated in docs.PARTS:
        (tmp_path / generated.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / generated.path).write_text((ROOT / generated.path).read_text())
    text = (tmp_path / page).read_text()
    assert row in text
    (tmp_path / page).write_text(text.replace(row + "\n", ""))
    assert docs.main(["--check"], root=tmp_path) == 1
    assert f"stale: {page} ({part})" in capsys.readouterr().out
    assert docs.main([], root=tmp_path) == 0 and (tmp_path / page).read_text() == text
