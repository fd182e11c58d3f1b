"""The transformer's follow-up step: a follow-up made to stand on its own before anything else, by the
model when there is one and by the offline rule when its reply is unusable; the standalone question is
what is retrieved, graded, answered and recorded (one no well-formed rewrite was found for is read with the earlier
question in brackets, follows.question, and shown as typed)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.messages import QuerySubmitted, QueryTransformed
from shared.contract.ports import ConversationTurn, Transformation
from shared.observability.tracing import add_exporter
from shared.query import api
from shared.query.record import QueryRecord
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, chunk, make_loop

ACK = "What is the ack deadline in Pub/Sub?"


def _follow_up(loop, question="And what is its maximum?", first=ACK, answer="The default is 10 seconds [1]."):
    """A first turn that ended with ``answer``, then ``question`` in its conversation; the follow-up's id."""
    earlier = api.submit_query(loop.deps, first)

    def answered(doc):
        return {**doc, "status": "answered", "outcome": "answered", "answer": answer}

    loop.state.update(state_collections.QUERIES, earlier.id, answered)
    return api.submit_query(loop.deps, question, conversation_id=earlier.conversation_id).id


def _transform(loop, query_id):
    loop.deliver(QuerySubmitted(query_id=query_id))
    return loop.state.get(state_collections.QUERIES, query_id)


def test_a_follow_up_is_made_standalone_by_the_model_before_the_rewrite():
    llm = ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"])
    loop = make_loop(CORPUS, llm)
    query_id = _follow_up(loop)
    record = _transform(loop, query_id)

    assert record["standalone_question"] == "What is the maximum ack deadline in Pub/Sub?"
    assert record["original_query"] == "And what is its maximum?"
    (standalone,) = [args for op, args in llm.calls if op == "standalone"]
    assert standalone == ("And what is its maximum?", [ConversationTurn(ACK, "The default is 10 seconds [1].")])
    assert ("transform", "What is the maximum ack deadline in Pub/Sub?") in llm.calls  # rewritten after
    assert record["model_calls"] == 2
    assert record["iterations"][0]["query"] == "What is the maximum ack deadline in Pub/Sub?"
    detail = record["events"][-1]["detail"]
    assert "standalone: “What is the maximum ack deadline in Pub/Sub?”" in detail and "1 earlier turn" in detail
    assert not record.get("fallbacks")


def test_the_loop_retrieves_grades_and_answers_the_standalone_question():
    llm = ScriptedLLM(standalones=["How does BM25 saturate term frequency?"])
    loop = make_loop(CORPUS, llm)
    query_id = _follow_up(loop, "How does it saturate term frequency?", first="What is BM25?")
    loop.pump(QuerySubmitted(query_id=query_id))

    graded = [args for op, args in llm.calls if op == "grade"]
    assert graded  # the grader ran on the standalone question's contexts
    # the transformer finds the earlier turn's document by its answer (the follow-up leans on it), then
    # the retriever searches the standalone question
    searched = [text for text, _, _ in loop.index.searches]
    assert searched[:2] == ["The default is 10 seconds .", "How does BM25 saturate term frequency?"]
    record = loop.state.get(state_collections.QUERIES, query_id)
    assert record["status"] == "answered"


def test_an_unusable_model_reply_falls_back_to_the_offline_rule():
    for reply in (TimeoutError("model timed out"), "", "  "):
        loop = make_loop(CORPUS, ScriptedLLM(standalones=[reply]))
        record = _transform(loop, _follow_up(loop))
        assert record["standalone_question"] == "What is the maximum of the ack deadline in Pub/Sub?", reply
        (fallback,) = record["fallbacks"]
        assert fallback["stage"] == "transformer" and "offline rule" in fallback["reason"]
        assert record["model_calls"] == 2


def test_a_first_turn_needs_no_standalone_step():
    llm = ScriptedLLM()
    loop = make_loop(CORPUS, llm)
    record = api.submit_query(loop.deps, ACK)
    stored = _transform(loop, record.id)
    assert llm.count("standalone") == 0
    assert stored["standalone_question"] == ACK and stored["model_calls"] == 1


def test_a_callers_history_is_read_like_stored_turns():
    llm = ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"])
    loop = make_loop(CORPUS, llm)
    record = api.submit_query(loop.deps, "And its maximum?", history=[{"question": ACK, "answer": "10 seconds."}])
    stored = _transform(loop, record.id)
    assert stored["standalone_question"] == "What is the maximum ack deadline in Pub/Sub?"
    assert [args for op, args in llm.calls if op == "standalone"] == [
        ("And its maximum?", [ConversationTurn(ACK, "10 seconds.")])]


def test_a_conversation_gone_before_the_transform_answers_the_question_as_typed():
    llm = ScriptedLLM()
    loop = make_loop(CORPUS, llm)
    query_id = _follow_up(loop)
    conversation = loop.state.get(state_collections.QUERIES, query_id)["conversation_id"]
    loop.state.delete(state_collections.CONVERSATIONS, conversation)
    record = _transform(loop, query_id)
    assert record["standalone_question"] == "And what is its maximum?"
    assert "no longer exists" in record["events"][-1]["detail"]
    assert llm.count("standalone") == 0


def test_the_follow_up_call_counts_against_the_budget():
    llm = ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"], transforms=[Transformation("x y z")])
    loop = make_loop(CORPUS, llm, Settings(max_model_calls=1))
    record = _transform(loop, _follow_up(loop))
    # the follow-up's call spent the one model call: the rewrite falls back to the standalone question
    assert record["standalone_question"] == "What is the maximum ack deadline in Pub/Sub?"
    assert record["model_calls"] == 1 and llm.count("transform") == 0
    assert record["iterations"][0]["query"] == "What is the maximum ack deadline in Pub/Sub?"


def test_redelivery_does_not_ask_again():
    llm = ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"])
    loop = make_loop(CORPUS, llm)
    query_id = _follow_up(loop)
    before = _transform(loop, query_id)
    after = _transform(loop, query_id)
    assert before == after and llm.count("standalone") == 1
    assert len(loop.publisher.of_type(QueryTransformed)) == 2


def test_the_offline_provider_uses_the_rule():
    loop = make_loop(CORPUS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, "How does it saturate term frequency?", first="What is BM25?"))
    assert record["standalone_question"] == "How does BM25 saturate term frequency?"


SPANS = InMemorySpanExporter()
add_exporter(SPANS, batch=False)


def _attributes(name_part: str) -> dict:
    spans = [s for s in SPANS.get_finished_spans() if name_part in s.name and s.attributes.get("rag.history_turns")]
    assert spans, [s.name for s in SPANS.get_finished_spans()]
    return dict(spans[-1].attributes)


def test_the_trace_shows_the_standalone_question_beside_the_typed_one():
    SPANS.clear()
    loop = make_loop(CORPUS, ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"]))
    query_id = _follow_up(loop)
    _transform(loop, query_id)
    attributes = _attributes("transformer")
    record = loop.state.get(state_collections.QUERIES, query_id)
    assert attributes["rag.standalone_question"] == "What is the maximum ack deadline in Pub/Sub?"
    assert attributes["rag.conversation_id"] == record["conversation_id"]
    assert (attributes["rag.history_turns"], attributes["rag.standalone_source"]) == (1, "model")
    submits = [s for s in SPANS.get_finished_spans() if s.name == "gateway submit"]
    assert submits[-1].attributes["rag.conversation_turn"] == 2


def test_redaction_keeps_the_standalone_question_out_of_the_trace():
    SPANS.clear()
    loop = make_loop(CORPUS, ScriptedLLM(standalones=["What is the maximum ack deadline in Pub/Sub?"]),
                     Settings(redact_query_text=True))
    _transform(loop, _follow_up(loop))
    attributes = _attributes("transformer")
    assert "rag.standalone_question" not in attributes and attributes["rag.history_turns"] == 1


# An "And ..." question that is a whole question: the corpus tells a continuation from a topic change.
BUILDS = [
    chunk(1, "Building zstd", "The Makefile is the build system officially maintained for zstd. make check: create "
          "and run zstd, test its behavior on local platform.", doc="zstd"),
    chunk(2, "Makefile targets", "By convention a Makefile's make check target runs a package's own test suite "
          "before make install copies it into place. What make check does is up to each package.", doc="make"),
    chunk(3, "Chunking", "Chunking splits documents into passages of a few hundred words before they are embedded.",
          doc="chunking"),
]
ZSTD_BUILD = "Which build system is officially maintained for zstd?"


def _offline(question):
    loop = make_loop(BUILDS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, question, first=ZSTD_BUILD, answer="The Makefile [1]."))
    return record["standalone_question"], record["events"][-1]["detail"]


def test_an_and_question_is_asked_as_typed_and_names_the_earlier_document():
    # no scope is carried into its wording (a carried "of a ninja build file" misread a whole question); its
    # retrieval weighs the earlier turn's document, where a continuation's words are (test_retriever.py)
    standalone, detail = _offline("And what does make check do?")
    assert standalone == "And what does make check do?"
    assert "leans on the earlier turn (connective): prefers its document" in detail


def test_a_model_reply_is_not_second_guessed_by_the_corpus():
    llm = ScriptedLLM(standalones=["And what does make check do?"])
    loop = make_loop(BUILDS, llm, Settings(llm_provider="openai"))
    record = _transform(loop, _follow_up(loop, "And what does make check do?", first=ZSTD_BUILD))
    assert record["standalone_question"] == "And what does make check do?"


def test_a_rewrite_ending_in_brackets_of_its_own_is_shown_not_taken_for_the_earlier_question():
    # only the earlier question in brackets is the rule's fallback; "(the official build system)" is part of the rewrite
    rewrite = "Who maintains the zstd Makefile (the official build system)?"
    loop = make_loop(BUILDS, ScriptedLLM(standalones=[rewrite]), Settings(llm_provider="openai"))
    record = _transform(loop, _follow_up(loop, "Who maintains it?", first=ZSTD_BUILD))
    assert record["standalone_question"] == rewrite
    assert "question" not in record.get("follows", {})
    assert not any("no well-formed rewrite" in str(event) for event in record["events"])


# A follow-up that leans on the earlier turn names that turn's document, for its retrieval to prefer.


def test_a_follow_up_that_points_back_names_the_earlier_answers_document():
    loop = make_loop(BUILDS, real_local_llm=True)
    answer = "Note: the retrieved sources only partly cover this question; the answer below may be incomplete.\n\n" \
             "The Makefile is the build system officially maintained for zstd. [1]"
    record = _transform(loop, _follow_up(loop, "Who maintains that file?", first=ZSTD_BUILD, answer=answer))
    # nothing the rule could put in the place of "that file": the loop reads it with the earlier question in brackets,
    # while the standalone question shown and recorded is the question as typed, not that malformed string
    assert record["standalone_question"] == "Who maintains that file?"
    assert record["follows"] == {"document_id": "zstd", "leans": "refers back (“that file”)",
                                 "earlier_question": ZSTD_BUILD,
                                 "question": f"Who maintains that file ({ZSTD_BUILD[0].lower()}{ZSTD_BUILD[1:-1]})?"}
    assert QueryRecord.from_doc(record).question == record["follows"]["question"]
    assert ("leans on the earlier turn (refers back (“that file”)): prefers its document zstd (found by its answer)"
            in record["events"][-1]["detail"])


class _HeardLLM(ScriptedLLM):
    """A scripted model that keeps the question each stage gave it."""

    def grade(self, query, contexts):
        self.calls.append(("graded question", query))
        return super().grade(query, contexts)

    def synthesize(self, query, contexts, *, language):
        self.calls.append(("answered question", query))
        return super().synthesize(query, contexts, language=language)


def test_the_bracket_form_is_searched_graded_and_answered_but_shown_as_typed():
    # a follow-up no well-formed rewrite was found for: the loop reads it with the earlier question in brackets
    # (follows.question), byte for byte as before; the record's current_query and the transformer's events (the
    # progress the page and the SSE stream show) show it as typed, as standalone_question does
    from tests.unit.loop_fakes import weak_grade

    read = "Who maintains that file (which build system is officially maintained for zstd)?"
    llm = _HeardLLM(standalones=[read], grades=[weak_grade()])
    loop = make_loop(BUILDS, llm, Settings(llm_provider="openai"))
    query_id = _follow_up(loop, "Who maintains that file?", first=ZSTD_BUILD)
    loop.pump(QuerySubmitted(query_id=query_id))
    record = loop.state.get(state_collections.QUERIES, query_id)
    assert record["standalone_question"] == "Who maintains that file?" and record["follows"]["question"] == read
    # what the loop read: unchanged
    assert [args for op, args in llm.calls if op == "transform"] == [read]
    assert [args.original_query for op, args in llm.calls if op == "refine"] == [read]
    assert {args for op, args in llm.calls if op in ("graded question", "answered question")} == {read}
    assert [it["query"] for it in record["iterations"]] == [read, f"{read} refined"]  # read by the retriever
    searched = [text for text, _, _ in loop.index.searches]
    assert read in searched and f"{read} refined" in searched
    # what is shown: no bracket form
    assert record["current_query"] == "Who maintains that file? refined"
    details = {e["type"]: e["detail"] for e in record["events"] if e["type"] in ("transformed", "refined")}
    assert "query: “Who maintains that file?”" in details["transformed"]
    assert "refined query: “Who maintains that file?” + search terms “refined”" in details["refined"]
    assert not any("(which build system" in str(e.get("detail")) for e in record["events"])


@pytest.mark.parametrize(("query", "shown"), [
    ("Why (how does frobd rotate its logs)?", ("Why?", "Why?")),
    ("Why (how does frobd rotate its logs)? rotation gzip", ("Why?", "Why? rotation gzip")),  # terms a rewrite added
    ("Why exactly (How does frobd rotate its logs)?", ("Why?", "Why exactly?")),  # a model's rewrite keeping the bracket
    ("Why does frobd rotate logs?", (None, "Why does frobd rotate logs?")),  # a rewording: shown as it is
    ("Why (which signal stops frobd)?", (None, "Why (which signal stops frobd)?")),  # brackets of its own
])
def test_a_query_made_from_the_bracket_form_is_shown_without_the_earlier_question(query, shown):
    from services.transformer.handler import shown_search

    read = "Why (how does frobd rotate its logs)?"
    record = QueryRecord.from_doc({"id": "q", "status": "running", "original_query": "Why?",
                                   "standalone_question": "Why?", "follows": {"question": read}})
    assert shown_search(record, query) == (shown[0] or read, shown[1])
    plain = QueryRecord.from_doc({"id": "q", "status": "running", "original_query": "And how?",
                                  "standalone_question": "How does frobd rotate its logs?"})
    assert shown_search(plain, query) == ("How does frobd rotate its logs?", query)


def test_a_rewritten_follow_up_searches_the_earlier_document_without_the_earlier_question():
    # "Does it run the tests?" rewritten with the earlier turn's subject in it: the earlier question's words would pull
    # that document's search back to the chunk that answered it (fresh11: "Can it look up services by port?" was answered
    # from the chunk listing the databases the earlier turn asked for)
    first = "What does the zstd make check target do?"
    loop = make_loop(BUILDS, real_local_llm=True)
    query_id = _follow_up(loop, "Does it run the tests?", first=first,
                          answer="make check: create and run zstd, test its behavior on local platform. [1]")
    loop.pump(QuerySubmitted(query_id=query_id))
    record = loop.state.get(state_collections.QUERIES, query_id)
    assert record["standalone_question"] != "Does it run the tests?"
    # the record still names the earlier question (GET /v1/queries/{id}); the search of its document leaves it out
    assert record["follows"] == {"document_id": "zstd", "leans": record["follows"]["leans"], "earlier_question": first}
    searched = [text for text, _, _ in loop.index.searches]
    assert record["standalone_question"] in searched and not any(text.endswith(first) for text in searched)
    # left as typed, it is searched with the earlier question beside it
    loop = make_loop(BUILDS, real_local_llm=True)
    query_id = _follow_up(loop, "And what does make check do?", first=ZSTD_BUILD)
    loop.pump(QuerySubmitted(query_id=query_id))
    record = loop.state.get(state_collections.QUERIES, query_id)
    assert record["standalone_question"] == "And what does make check do?"
    assert record["follows"]["earlier_question"] == ZSTD_BUILD
    assert "And what does make check do? " + ZSTD_BUILD in [text for text, _, _ in loop.index.searches]


def test_an_earlier_turn_without_an_answer_is_found_by_its_question():
    loop = make_loop(BUILDS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, "And what does make check do?", first=ZSTD_BUILD, answer=""))
    assert record["follows"] == {"document_id": "zstd", "leans": "connective", "earlier_question": ZSTD_BUILD}
    assert "(found by its question)" in record["events"][-1]["detail"]


def test_a_whole_question_names_the_earlier_document_unmarked_for_the_retriever_to_weigh():
    # nothing in its form leans on the earlier turn, and no rule on its wording decides: the retriever weighs
    # the earlier document's chunks against the question's own search (tests/unit/test_retriever.py)
    loop = make_loop(BUILDS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, "How are documents split before embedding?", first=ZSTD_BUILD,
                                         answer="The Makefile [1]."))
    assert record["standalone_question"] == "How are documents split before embedding?"
    # "The Makefile [1]." is matched best by the page on Makefiles
    assert record["follows"] == {"document_id": "make", "leans": "unmarked", "earlier_question": ZSTD_BUILD}
    assert ("nothing in its form leans on the earlier turn: weighs its document make (found by its answer)"
            in record["events"][-1]["detail"])


def test_a_remark_stays_as_typed_and_names_the_earlier_document_unmarked():
    # as docs/conversations.md and shared/query/record.py say: "Thanks?" is never the earlier question asked again
    # (no follows.question) and nothing in it leans, so its earlier document is only weighed
    loop = make_loop(BUILDS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, "Thanks?", first=ZSTD_BUILD, answer="The Makefile [1]."))
    assert record["standalone_question"] == "Thanks?" and record["iterations"][0]["query"] == "Thanks?"
    assert record["follows"] == {"document_id": "make", "leans": "unmarked", "earlier_question": ZSTD_BUILD}


def test_a_question_that_announces_a_new_topic_names_no_earlier_document():
    loop = make_loop(BUILDS, real_local_llm=True)
    record = _transform(loop, _follow_up(loop, "Something else: how are documents split before embedding?",
                                         first=ZSTD_BUILD, answer="The Makefile [1]."))
    assert "follows" not in record and "its document" not in record["events"][-1]["detail"]


def test_a_refusal_a_client_kept_as_the_earlier_answer_does_not_name_a_document():
    # a chat client sends the assistant's refusal back as the earlier answer; the earlier question finds the document
    from shared.query.reading.language import phrase

    loop = make_loop(BUILDS, real_local_llm=True)
    record = api.submit_query(loop.deps, "Who maintains that file?",
                              history=[{"question": ZSTD_BUILD, "answer": phrase("abstain", "en")}])
    stored = _transform(loop, record.id)
    assert stored["follows"]["document_id"] == "zstd"
    assert "(found by its question)" in stored["events"][-1]["detail"]


def test_the_earlier_answers_document_is_found_by_its_words_without_embedding_it():
    # an answer quotes its document word for word: BM25 alone finds it; embedding a 500-character answer cost
    # 5-8 query embeddings per follow-up (bench/followup_latency.py)
    loop = make_loop(BUILDS, real_local_llm=True)
    embedded: list[str] = []
    embed = loop.deps.embedder.embed

    def counting(texts, *args, **kwargs):
        embedded.extend(texts)
        return embed(texts, *args, **kwargs)

    loop.deps.embedder.embed = counting
    answer = "The Makefile is the build system officially maintained for zstd. [1]"
    record = _transform(loop, _follow_up(loop, "Who maintains that file?", first=ZSTD_BUILD, answer=answer))
    assert record["follows"]["document_id"] == "zstd"
    assert not any(text.startswith("The Makefile") for text in embedded) and embedded  # the question only
