"""The shared query operations: validation, record creation, reading, waiting, searching."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from shared.adapters.local.clock import SystemClock
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.contract.messages import QuerySubmitted
from shared.contract.ports import Chunk, Grade, ScoredChunk
from shared.query.api import (
    QueryNotFound,
    answer_summary,
    contexts_summary,
    get_query,
    search_documents,
    submit_query,
    validate_query_text,
    wait_for_query,
)
from shared.query.record import QueryRecord, grade_to_doc
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher
from tests.scripted_loop import ANSWER, ScriptedLoop


@pytest.fixture
def state() -> InMemoryStateStore:
    return InMemoryStateStore()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def deps(state, clock, publisher) -> Deps:
    return Deps(Settings(), publisher=publisher, state=state, clock=clock)


# ----------------------------------------------------------------- submit


def test_submit_creates_the_record_and_starts_the_loop(deps, state, publisher, clock):
    record = submit_query(deps, "  What is BM25?  ", top_k=7, max_iterations=1, timeout_s=30)

    stored = state.get(state_collections.QUERIES, record.id)
    assert stored == record.to_doc()
    assert QueryRecord.from_doc(stored) == record
    assert record.status == "pending"
    assert record.original_query == "What is BM25?"
    assert (record.top_k, record.max_iterations) == (7, 1)
    assert record.deadline == (clock.now() + timedelta(seconds=30)).isoformat()
    assert record.events[0]["type"] == "submitted"
    assert publisher.messages == [QuerySubmitted(query_id=record.id)]


def test_submit_uses_the_settings_defaults(state, clock, publisher):
    settings = Settings(top_k=4, max_iterations=3, query_timeout_s=12)
    deps = Deps(settings, publisher=publisher, state=state, clock=clock)
    record = submit_query(deps, "q")
    assert (record.top_k, record.max_iterations) == (4, 3)
    assert record.deadline == (clock.now() + timedelta(seconds=12)).isoformat()
    assert record.max_model_calls == settings.max_model_calls


def test_every_submission_gets_its_own_id(deps):
    ids = {submit_query(deps, "same question").id for _ in range(5)}
    assert len(ids) == 5


def test_windows_line_endings_and_tabs_are_kept_as_text(deps):
    record = submit_query(deps, "line one\r\nline\ttwo")
    assert record.original_query == "line one\nline\ttwo"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"query": ""}, "'query' is empty"),
        ({"query": " \n\t "}, "'query' is empty"),
        ({"query": "x" * 10_000}, "10000 characters, more than the limit of 2000"),
        ({"query": "bad \x00 byte"}, "control character U+0000 at position 4"),
        ({"query": "escape \x1b[31m"}, "control character U+001B"),
        ({"query": "lone \r return"}, "control character U+000D"),
        ({"query": "del \x7f"}, "control character U+007F"),
        ({"query": "c1 \x85 next line"}, "control character U+0085"),
        ({"query": "half \ud800 pair"}, "unpaired surrogate U+D800"),
        ({"query": None}, "'query' must be a string, got null"),
        ({"query": ["a"]}, "'query' must be a string, got a list"),
        ({"query": 42}, "'query' must be a string, got a number"),
        ({"query": "q", "top_k": 0}, "'top_k' is 0; send a whole number from 1 to 50"),
        ({"query": "q", "top_k": 51}, "'top_k' is 51"),
        ({"query": "q", "top_k": "5"}, "'top_k' must be a whole number from 1 to 50, got a string"),
        ({"query": "q", "top_k": True}, "got a boolean"),
        ({"query": "q", "top_k": 2.5}, "'top_k' must be a whole number"),
        ({"query": "q", "max_iterations": -1}, "'max_iterations' is -1; send a whole number from 0 to 5"),
        ({"query": "q", "max_iterations": 6}, "'max_iterations' is 6"),
        ({"query": "q", "timeout_s": 0}, "'timeout_s' is 0"),
        ({"query": "q", "timeout_s": float("nan")}, "'timeout_s' must be a number of seconds"),
    ],
)
def test_bad_input_is_refused_with_what_to_send(deps, state, publisher, kwargs, expected):
    query = kwargs.pop("query")
    with pytest.raises(InvalidInput) as caught:
        submit_query(deps, query, **kwargs)
    assert expected in str(caught.value)
    assert state.count(state_collections.QUERIES) == 0
    assert publisher.messages == []


@pytest.mark.parametrize(("field", "value", "named"), [
    ("top_k", True, "got a boolean true"), ("max_iterations", False, "got a boolean false"),
    ("timeout_s", True, "got a boolean true"), ("timeout_s", [None], "got a list [null]"),
    ("max_iterations", 1e308, "'max_iterations' is 1e+308;"),
])
def test_an_error_names_the_value_as_the_client_wrote_it_in_json(deps, field, value, named):
    """A client sends JSON: `"top_k": true` was refused as "got a boolean True", Python's spelling, and
    `"max_iterations": 1e308` as a 309-digit integer the client never sent."""
    with pytest.raises(InvalidInput) as caught:
        submit_query(deps, "q", **{field: value})
    assert named in str(caught.value) and "True" not in str(caught.value) and "None" not in str(caught.value)


def test_wait_s_names_the_value_as_the_client_wrote_it_in_json():
    from services.gateway.queries import _wait_seconds

    for value, named in ((True, "got true"), ("5", "got '5'"), ([1], "got [1]")):
        with pytest.raises(InvalidInput) as caught:
            _wait_seconds(value)
        assert str(caught.value).endswith(named), caught.value


def test_limits_at_the_edges_are_accepted(deps):
    record = submit_query(deps, "x" * 2000, top_k=50, max_iterations=0)
    assert (len(record.original_query), record.top_k, record.max_iterations) == (2000, 50, 0)
    assert submit_query(deps, "q", top_k=1, max_iterations=5).top_k == 1
    assert submit_query(deps, "q", top_k=3.0).top_k == 3


def test_a_bus_failure_ends_the_query_instead_of_leaving_it_pending(state, clock):
    class DownBus:
        def publish(self, message, attributes=None):
            raise ConnectionError("bus.db is locked")

    deps = Deps(Settings(), publisher=DownBus(), state=state, clock=clock)
    with pytest.raises(RetryableError, match="try again"):
        submit_query(deps, "what now?")
    [record] = state.list(state_collections.QUERIES)
    assert record["status"] == "failed"
    assert "could not start the query loop" in record["error"]
    assert "bus.db is locked" in record["error"]


# ------------------------------------------------------------ get / wait


def test_get_query_unknown_is_none(deps):
    assert get_query(deps, "missing") is None


def test_get_query_times_out_a_query_past_its_deadline(deps, clock):
    record = submit_query(deps, "slow", timeout_s=5)
    clock.advance(4)
    assert get_query(deps, record.id).status == "pending"
    clock.advance(2)
    expired = get_query(deps, record.id)
    assert (expired.status, expired.outcome) == ("timed_out", "timed_out")
    assert expired.events[-1]["type"] == "timed_out"
    # a later read changes nothing more
    assert get_query(deps, record.id) == expired


def test_wait_returns_the_record_as_it_stands_when_the_wait_elapses(deps, clock):
    record = submit_query(deps, "pending forever", timeout_s=60)
    start = clock.monotonic()
    waited = wait_for_query(deps, record.id, 3)
    assert waited.status == "pending"
    assert 3 <= clock.monotonic() - start < 3.5


def test_wait_never_outlasts_the_query_deadline(deps, clock):
    record = submit_query(deps, "nobody answers", timeout_s=2)
    waited = wait_for_query(deps, record.id, 30)
    assert waited.status == "timed_out"
    assert clock.monotonic() < 3


def test_wait_for_unknown_query_raises(deps):
    with pytest.raises(QueryNotFound, match="no query with id 'nope'"):
        wait_for_query(deps, "nope", 1)


def test_wait_returns_once_stages_answer(state):
    clock = SystemClock()
    loop = ScriptedLoop(state, clock, step_s=0.01)
    deps = Deps(Settings(), publisher=loop, state=state, clock=clock)
    record = submit_query(deps, "what is bm25")
    done = wait_for_query(deps, record.id, 10)
    assert done.status == "answered"
    assert done.answer == ANSWER
    assert [e["stage"] for e in done.events] == [
        "gateway",
        *["transformer", "retriever", "grader"] * 2,
        "synthesizer",
    ]


# ------------------------------------------------------------- summaries


def test_summaries_take_the_kept_iteration():
    first_grade, second_grade = grade_to_doc(Grade(0.7, 0.7, 0.7, True, True)), grade_to_doc(Grade(0.5, 0.5, 0.5, True, True))
    doc = {
        "id": "q1",
        "status": "answered",
        "outcome": "answered_with_caveat",
        "best_iteration": 0,
        "iterations": [
            {"iteration": 0, "query": "first", "contexts": [{"chunk_id": "a"}], "grade": first_grade},
            {"iteration": 1, "query": "second", "contexts": [{"chunk_id": "b"}], "grade": second_grade},
        ],
        "answer": "A [1].",
        "citations": [{"id": 1, "url": "https://x"}],
        "error": None,
    }
    record = QueryRecord.from_doc(doc)
    ctx = contexts_summary(record)
    assert (ctx["best_iteration"], ctx["query"], ctx["iterations"]) == (0, "first", 2)
    assert ctx["contexts"] == [{"chunk_id": "a"}]
    assert ctx["grade"] == first_grade
    ans = answer_summary(record)
    assert (ans["answer"], ans["outcome"], ans["iterations"]) == ("A [1].", "answered_with_caveat", 2)
    assert ans["citations"] == [{"id": 1, "url": "https://x"}]
    # without a kept iteration the last one stands
    assert QueryRecord.from_doc({**doc, "best_iteration": None}).best_entry().query == "second"
    assert QueryRecord.from_doc({"iterations": []}).best_entry() is None


# ---------------------------------------------------------------- search


class _Embedder:
    model_name = "test"
    dimension = 3
    max_tokens = 16

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def embed(self, texts):
        self.seen.append(list(texts))
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)

    def token_spans(self, text):
        return []


class _Index:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[float, ...], int]] = []

    def search(self, text, vector, k, mode="hybrid"):
        self.calls.append((text, tuple(np.round(vector, 3)), k))
        chunks = [
            Chunk(f"d{n}:h:0", f"d{n}", 0, f"text {n}", title=f"T{n}", url=f"https://e/{n}")
            for n in range(k)
        ]
        return [ScoredChunk(c, score=1.0 / (i + 1)) for i, c in enumerate(chunks)]


def test_search_embeds_the_words_and_returns_chunks_best_first(state, clock):
    embedder, index = _Embedder(), _Index()
    deps = Deps(Settings(), state=state, clock=clock, embedder=embedder, index=index)
    results = search_documents(deps, " bm25 saturation ", 2)
    assert embedder.seen == [["bm25 saturation"]]
    assert index.calls == [("bm25 saturation", (0.577, 0.577, 0.577), 2)]
    assert results == [
        {"rank": 1, "score": 1.0, "text": "text 0", "document_id": "d0", "chunk_id": "d0:h:0",
         "title": "T0", "url": "https://e/0", "published": None},
        {"rank": 2, "score": 0.5, "text": "text 1", "document_id": "d1", "chunk_id": "d1:h:0",
         "title": "T1", "url": "https://e/1", "published": None},
    ]
    assert len(search_documents(deps, "x")) == Settings().top_k


@pytest.mark.parametrize(("text", "k", "expected"), [("", 3, "'q' is empty"), ("x", 0, "'k' is 0")])
def test_search_refuses_bad_input(state, clock, text, k, expected):
    deps = Deps(Settings(), state=state, clock=clock, embedder=_Embedder(), index=_Index())
    with pytest.raises(InvalidInput, match=expected):
        search_documents(deps, text, k)


# ---------------------------------------------------------------- tracing


def test_the_record_keeps_the_trace_that_the_submission_starts(state, clock):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from shared.observability.tracing import TracingPublisher, add_exporter

    exporter = InMemorySpanExporter()
    add_exporter(exporter, batch=False)
    deps = Deps(Settings(), publisher=TracingPublisher(RecordingPublisher()), state=state, clock=clock)
    record = submit_query(deps, "traced question")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    submit, publish = spans["gateway submit"], spans["query-submitted publish"]
    assert record.trace_id == format(submit.context.trace_id, "032x")
    assert publish.parent.span_id == submit.context.span_id
    assert publish.kind is SpanKind.PRODUCER
    assert submit.attributes["rag.query_id"] == record.id
    assert deps.publisher.inner.attributes[0]["traceparent"].split("-")[1] == record.trace_id


@pytest.mark.parametrize("text", ["?!?!...;;;", "???", "— … ¿?", "🙂🙂"])
def test_a_question_with_no_letters_or_digits_is_refused_naming_the_problem(text):
    with pytest.raises(InvalidInput, match="has no letters or digits"):
        validate_query_text(text, max_chars=2000, field="question")


def test_fullwidth_letters_and_digits_are_searched_as_ascii():
    from shared.contract.text import normalize_text

    assert validate_query_text("ｂｍ２５ ｓａｔｕｒａｔｉｏｎ？", max_chars=2000, field="question") == "bm25 saturation？"
    assert normalize_text("ＢＭ２５ ranks documents.") == "BM25 ranks documents."
    assert normalize_text("a² + b² = c²") == "a² + b² = c²"  # not NFKC: superscripts stay


def test_bidirectional_overrides_are_dropped_from_a_question_and_right_to_left_text_stays():
    # the page and every record would show "\u202eport" reordered; the letters are what was asked
    assert validate_query_text("What is the \u202edefault\u202c port?\u2066\u2069", max_chars=2000,
                               field="question") == "What is the default port?"
    assert validate_query_text("\u05de\u05d4 \u200fBM25?", max_chars=2000) == "\u05de\u05d4 \u200fBM25?"
    with pytest.raises(InvalidInput, match="has no letters or digits"):
        validate_query_text("\u202e?\u202c", max_chars=2000)


@pytest.mark.parametrize("text", ["Wie funktioniert BM25?", "¿Qué es BM25?", "2026?", "什么是向量检索？", "Что такое BM25?"])
def test_a_question_in_any_script_or_a_bare_number_is_accepted(text):
    assert validate_query_text(text, max_chars=2000, field="question") == text


# ------------------------------------------------------- filters the index cannot serve


@pytest.mark.parametrize(("filters", "named"), [
    ({"source": "https://example.com/feed", "where": {"author": "ada"}}, "not where author and source"),
    ({"where": {"author": "ada", "category": "gpu"}}, "not where author and where category"),
    ({"where": {"title": "GPUs"}, "kind": "feed"}, "cannot pre-filter on where title"),
])
def test_a_filter_combination_the_firestore_index_cannot_serve_is_refused_when_submitted(
    state, clock, publisher, filters, named
):
    # On GCP with the Firestore index the combination would fail later in the retriever, as a
    # failed query; the caller gets the error at once, and nothing is stored or published.
    deps = Deps(Settings(runtime="gcp", index_backend="firestore"), publisher=publisher, state=state, clock=clock)
    with pytest.raises(InvalidInput, match=named):
        submit_query(deps, "What did Ada write?", filters=filters)
    assert publisher.messages == []
    assert state.list(state_collections.QUERIES) == []

    # The embedded index and Vertex AI Vector Search take any combination.
    for settings in (Settings(), Settings(runtime="gcp", index_backend="vertex")):
        accepted = Deps(settings, publisher=publisher, state=state, clock=clock)
        assert submit_query(accepted, "What did Ada write?", filters=filters).filters


def test_a_filter_combination_the_firestore_index_serves_is_accepted_on_gcp(state, clock, publisher):
    deps = Deps(Settings(runtime="gcp", index_backend="firestore"), publisher=publisher, state=state, clock=clock)
    record = submit_query(deps, "What did Ada write?",
                          filters={"kind": "feed", "where": {"author": "ada"}, "since": "30d"})
    assert record.filters["where"] == {"author": "ada"}
