"""Answers carry no markup when the markup comes from the newest document kinds (issue 35's own
campaign): a PDF, a DOCX, a PPTX and a CSV each hold an `<img>` loading a loopback address, an
`<iframe>` and a `javascript:` link beside the fact asked for; `ragbus ask --json`, answered by the
local reader quoting the document, keeps the fact and none of the markup."""

from __future__ import annotations

import csv
import html
import io
import json
import re

import pytest

from tests.hostile import bad_files
from tests.hostile.test_answer_markup import LEAK, assert_plain
from tests.support import run_cli

pytestmark = pytest.mark.hostile

def _lines(thing: str) -> list[str]:
    return [
        f'The {thing} buffer size is 512 KB <img src="http://{LEAK}/leak" width=1> on every {thing} node.',
        f'The {thing} buffer is described in <iframe src="http://{LEAK}/frame">the frame</iframe> the manual.',
        f"Read the [docs](javascript:alert(1)) about the {thing} buffer before tuning it on a {thing} node.",
        f"Operators of the {thing} fleet check the buffer weekly and record it in the {thing} maintenance log.",
    ]


def _pptx(lines: list[str]) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    frame = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(8), Inches(5)).text_frame
    frame.text = lines[0]
    for line in lines[1:]:
        frame.add_paragraph().text = line
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _csv(rows: list[str]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows([row] for row in rows)  # quoted as CSV quotes: "" inside a field
    return out.getvalue().encode()


KINDS = {
    "zeppelin.pdf": ("zeppelin", lambda lines: bad_files.pdf([bad_files.text_page(*lines)])),
    "dirigible.docx": ("dirigible", lambda lines: bad_files.docx([html.escape(line) for line in lines])),
    "aerostat.pptx": ("aerostat", _pptx),
    "airship.csv": ("airship", lambda lines: _csv(["note", *lines])),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("markup")
    docs = root / "docs"
    docs.mkdir()
    for name, (thing, make) in KINDS.items():
        (docs / name).write_bytes(make(_lines(thing)))
    run_cli(root / "home", "ingest", str(docs))
    return root / "home"


@pytest.mark.parametrize("name", sorted(KINDS))
def test_an_answer_quoting_a_document_with_markup_is_plain(home, name):
    thing = KINDS[name][0]
    shown = run_cli(home, "ask", f"What is the {thing} buffer size?", "--json", timeout=300)
    record = json.loads(shown.stdout)
    assert record["status"] == "answered" and "512 KB" in record["answer"], record
    assert any(name in json.dumps(c) for c in record["citations"]), record["citations"]
    assert_plain(record["answer"], f"ragbus ask over {name}")
    for sentence in record.get("answer_sentences") or []:
        assert_plain(sentence["text"], f"ragbus ask over {name}: a sentence")


def test_a_tag_broken_by_bad_csv_quoting_is_neutralised_so_no_client_loads_its_address(tmp_path):
    # backslash-escaped quotes (a JSON dump saved as .csv) leave an <img> with an unbalanced quote:
    # the answer may show its text, but never a tag start, an image, a link, or the address outside code
    docs = tmp_path / "docs"
    docs.mkdir()
    lines = _lines("gondola")
    (docs / "gondola.csv").write_text("note\n" + "".join(json.dumps(line) + "\n" for line in lines))
    run_cli(tmp_path / "home", "ingest", str(docs))
    record = json.loads(run_cli(tmp_path / "home", "ask", "What is the gondola buffer size?", "--json",
                                timeout=300).stdout)
    assert record["status"] == "answered" and "512 KB" in record["answer"], record
    for text in [record["answer"], *(s["text"] for s in record.get("answer_sentences") or [])]:
        assert not re.search(r"<[A-Za-z/!?]|!\[|\]\(", text) and "javascript:" not in text.lower(), text
        for address in re.findall(rf"\S*{re.escape(LEAK)}\S*", text):
            assert "`http://" in address and address.count("`") >= 2, text  # code, not a link
