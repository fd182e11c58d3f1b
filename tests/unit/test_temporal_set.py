"""bench/temporal.py's set (issue 27): at least 40 dated notes over two years and 30 questions with
relative or absolute time, each with its note; the dates in the feed and on the pages."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from email.utils import parsedate_to_datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import temporal  # noqa: E402

from shared.query.temporal import read_time  # noqa: E402


def test_the_set_is_large_enough_spans_two_years_and_every_question_names_a_time():
    corpus = temporal.notes()
    asked = temporal.questions(corpus)
    assert len(corpus) >= 40 and len(asked) >= 30
    assert {n.published.year for n in corpus} == {2025, 2026}
    assert len({n.doc for n in corpus}) == len(corpus)
    docs = {n.doc for n in corpus}
    assert all(gold in docs for _, gold in asked)
    assert all(read_time(q, temporal.NOW) is not None for q, _ in asked)
    other = temporal.questions_in_other_languages(corpus)
    assert len(other) == 9 and all(gold in docs for _, gold in other)
    for question, gold in other:
        reading = read_time(question, temporal.NOW)
        note = next(n for n in corpus if n.doc == gold)
        assert reading is not None, question
        # the note that answers it lies in the range read (before any widening), or the range is "latest"
        published = temporal.datetime(note.published.year, note.published.month, note.published.day,
                                      tzinfo=temporal.UTC)
        assert reading.newest or (reading.since <= published and (reading.until is None or published < reading.until)), question


def test_the_feed_and_the_pages_carry_each_note_s_date():
    corpus = temporal.notes()
    channel = ET.fromstring(temporal.feed_xml(corpus, "http://127.0.0.1:1"))
    dated = {item.findtext("link").rsplit("/", 1)[1]: parsedate_to_datetime(item.findtext("pubDate")).date()
             for item in channel.iter("item")}
    assert dated == {f"{n.doc}.html": n.published for n in corpus}
    note = corpus[5]
    page = temporal.page_html(note).decode()
    assert f'content="{note.published.isoformat()}T09:00:00Z"' in page
    assert f'<time datetime="{note.published.isoformat()}">' in page and note.feature in page


def test_a_version_is_stated_only_as_itself():
    assert temporal.states("NCCL 2.1 is now available.", "NCCL 2.1")
    assert not temporal.states("NCCL 2.11 is now available.", "NCCL 2.1")
    assert not temporal.states("NCCL 2.1.3 is out.", "NCCL 2.1")
    assert temporal.states("It adds User Buffer Registration.", "user buffer registration")
