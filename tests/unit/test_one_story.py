"""One story on every surface (issue 36 item 5): what the event stream and the page show of a query is
plain text a person reads, never a Python value (``True``, ``None``, a string's repr with its quotes and
escapes), and an answer that is not ``answered`` says so in its first paragraph."""

from __future__ import annotations

import re

import pytest

from shared.contract.messages import QuerySubmitted
from shared.contract.text import in_quotes, query_apart, searched_as
from shared.query.reading.language import is_note, phrase
from tests.unit.loop_fakes import CORPUS, make_loop

pytestmark = pytest.mark.unit

# a question holding both quote marks: Python's repr escapes one of them ('What\'s ...')
QUESTION = "What's the \"k1\" parameter's role when BM25 ranks documents by term frequency?"
PYTHON_VALUE = re.compile(r"\b(?:True|False|None)\b|\\'|\\\"|'[^']*'$")


def test_the_events_a_page_shows_quote_the_question_as_text_not_as_a_repr():
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit(QUESTION)
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    details = [e.get("detail") or "" for e in record["events"]]
    assert f"query: {in_quotes(QUESTION)}" in details[1], details
    assert not [d for d in details if PYTHON_VALUE.search(d)], details
    if record["outcome"] != "answered":  # the first paragraph says the answer is not sure, or refuses
        first = record["answer"].split("\n\n")[0]
        assert is_note(first) or first == phrase("abstain", "en"), first


def test_text_in_quotes_is_one_line_in_typographic_quotes():
    assert in_quotes("It's   the\n'k1' one") == "“It's the 'k1' one”"


@pytest.mark.parametrize("query, shown", [
    ("When is exact search good enough? retrieval model",
     "“When is exact search good enough?” + search terms “retrieval model”"),
    ("How does BM25 (Best Matching 25) saturate term frequency?",
     "“How does BM25 (Best Matching 25) saturate term frequency?”"),
])
def test_search_terms_a_rewrite_appends_are_shown_apart_from_the_question(query, shown):
    # issue 36 item 5: "How does BM25 saturate term frequency? speed less" read as the question asked
    assert searched_as("When is exact search good enough?", query) == shown


@pytest.mark.parametrize("question, query, apart", [
    ("When is exact search good enough?", "When is exact search good enough? retrieval model",
     ("When is exact search good enough?", "retrieval model")),
    ("news from last week", "news from last week articles announcements",  # no "?" to tell it by
     ("news from last week", "articles announcements")),
    ("How does BM25 saturate term frequency?", "How does BM25 (Best Matching 25) saturate term frequency?",
     ("How does BM25 (Best Matching 25) saturate term frequency?", "")),  # a rewording is all question
    ("blimp size", "blimp buffer size", ("blimp buffer size", "")),
])
def test_a_query_is_told_apart_into_the_question_and_the_terms_added(question, query, apart):
    assert query_apart(question, query) == apart


def test_the_record_keeps_the_search_terms_a_rewrite_added_apart_from_the_question():
    """The page, ``ragbus ask`` and MCP ``search_documents`` show the terms added to the question apart from it
    (issue 36 item 5), from the record's ``added_terms``, not by guessing where the question ends."""
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit("what is new")  # no content word of its own: the offline rewrite adds words to search with
    loop.pump(QuerySubmitted(query_id="q1"))
    (first, *_) = loop.record()["iterations"]
    assert first["added_terms"] and first["query"] == f"what is new {first['added_terms']}", first
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit("How does BM25 rank documents?")
    loop.pump(QuerySubmitted(query_id="q1"))
    (first, *_) = loop.record()["iterations"]
    assert first["added_terms"] == "" and first["query"] == "How does BM25 rank documents?", first
