"""A query record stays under Firestore's 1 MiB document limit at the API's limits.

The retriever stores every iteration's contexts in the record; 6 iterations
(max_iterations 5) x 50 contexts (top_k 50) of long, multi-byte chunks must
still fit, as Firestore counts a document's size.
"""

from __future__ import annotations

import pytest

from services.retriever.handler import CONTEXT_TEXT_MAX_BYTES, clip_utf8
from shared.adapters.gcp.firestore_state import MAX_DOCUMENT_BYTES, document_size
from shared.query.api import MAX_ITERATIONS_RANGE, TOP_K_RANGE
from tests.unit.loop_fakes import chunk, make_loop

pytestmark = pytest.mark.unit


def _long_chunk(n: int):
    # A long chunk of a large embedding model, half of it 3-byte characters.
    body = f"BM25 ranking detail {n}. " + ("Ranking with BM25 weighs terms. 検索の順位付け。" * 160)
    c = chunk(n, f"A long title about BM25 ranking, part {n} " + "x" * 400, body)
    return c.__class__(**{**c.__dict__, "url": f"https://example.org/{'a' * 1800}/{n}"})


def test_six_iterations_of_fifty_contexts_fit_in_one_firestore_document():
    top_k, max_iterations = TOP_K_RANGE[1], MAX_ITERATIONS_RANGE[1]
    assert (top_k, max_iterations + 1) == (50, 6)
    loop = make_loop([_long_chunk(n) for n in range(120)])
    loop.submit("BM25 ranking", top_k=top_k, max_iterations=max_iterations)
    for iteration in range(max_iterations + 1):
        loop.deliver(loop.transformed(f"BM25 ranking {iteration}", iteration,
                                      [f"What is BM25 ranking detail {iteration}?"] * 3))
    record = loop.record()
    assert [len(e["contexts"]) for e in record["iterations"]] == [50] * 6
    size = document_size("queries", "q1", record)
    assert size < MAX_DOCUMENT_BYTES, f"{size} bytes"
    # what the grader and synthesizer read is still there
    context = record["iterations"][0]["contexts"][0]
    assert context["text"].startswith("Title: A long title") and "BM25" in context["text"]
    assert len(context["text"].encode("utf-8")) <= CONTEXT_TEXT_MAX_BYTES


def test_clipping_never_splits_a_character():
    assert clip_utf8("ab検索", 4) == "ab"
    assert clip_utf8("ab検索", 5) == "ab検"
    assert clip_utf8("short", 100) == "short"
    assert clip_utf8(None, 3) is None


def test_document_size_follows_firestores_rules():
    # the example of https://cloud.google.com/firestore/docs/storage-size: a task document
    doc = {"type": "Personal", "done": False, "priority": 1, "description": "Learn Cloud Firestore"}
    # name: "tasks" 6 + "id" 3 + 16; fields: 5+9, 5+1, 9+8, 12+22; + 32
    assert document_size("tasks", "id", doc) == 25 + 14 + 6 + 17 + 34 + 32


class _Ref:
    def __init__(self, written: list) -> None:
        self.written = written

    def document(self, _id: str) -> _Ref:
        return self

    def set(self, data: dict) -> None:
        self.written.append(data)


class _Client:
    def __init__(self) -> None:
        self.written: list = []

    def collection(self, _name: str) -> _Ref:
        return _Ref(self.written)


def test_the_firestore_store_refuses_a_document_over_the_limit_by_name():
    from shared.adapters.gcp.firestore_state import FirestoreStateStore
    from shared.contract.errors import PermanentError

    client = _Client()
    store = FirestoreStateStore(client=client)
    store.put("queries", "small", {"text": "x" * 1000})
    with pytest.raises(PermanentError, match=r"queries/big would be \d+ bytes"):
        store.put("queries", "big", {"text": "x" * MAX_DOCUMENT_BYTES})
    assert len(client.written) == 1


def test_the_largest_record_with_its_ratings_at_their_limits_still_fits():
    from shared.query.feedback import (
        MAX_COMMENT_CHARS,
        MAX_EXPECTED_CHARS,
        MAX_FEEDBACK_BYTES,
        MAX_RATINGS_PER_QUERY,
        Feedback,
        within_budget,
    )

    loop = make_loop([_long_chunk(n) for n in range(120)])
    loop.submit("BM25 ranking", top_k=TOP_K_RANGE[1], max_iterations=MAX_ITERATIONS_RANGE[1])
    for iteration in range(MAX_ITERATIONS_RANGE[1] + 1):
        loop.deliver(loop.transformed(f"BM25 ranking {iteration}", iteration,
                                      [f"What is BM25 ranking detail {iteration}?"] * 3))
    # every client at the limits, in 4-byte characters
    largest = Feedback("down", "😀" * MAX_COMMENT_CHARS, tuple(range(1, 51)), "😀" * MAX_EXPECTED_CHARS)
    ratings = within_budget([largest.to_doc(f"{n:016x}", "2026-11-28T20:00:00+00:00")
                             for n in range(MAX_RATINGS_PER_QUERY)])
    assert 6 <= len(ratings) < MAX_RATINGS_PER_QUERY and ratings[-1]["client"] == f"{MAX_RATINGS_PER_QUERY - 1:016x}"
    size = document_size("queries", "q1", {**loop.record(), "feedback": ratings})
    assert size < MAX_DOCUMENT_BYTES, f"{size} bytes"
    assert document_size("queries", "q1", {"feedback": ratings}) <= MAX_FEEDBACK_BYTES + 4096
