"""Conversations: the record fields, the conversation document, the history a follow-up is read with
and its bounds (turns, characters, a conversation gone, an earlier turn that failed)."""

from __future__ import annotations

import pytest

from shared.contract import state_collections
from shared.contract.config import ConfigError, Settings, load_settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.contract.ports import ConversationTurn
from shared.query import api, conversation
from shared.query.conversation import MAX_TURNS, bound_history, read_history, validate_history
from shared.query.record import QueryRecord
from shared.query.state import fail_query, read_record
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher


@pytest.fixture
def deps() -> Deps:
    return Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())


def answer(deps: Deps, query_id: str, text: str, outcome: str = "answered") -> None:
    """End a query as the synthesizer would, with ``text`` as its answer."""

    def change(doc):
        record = QueryRecord.from_doc(doc)
        record.answer = text
        record.status, record.outcome = "answered", outcome
        return record.to_doc()

    deps.state.update(state_collections.QUERIES, query_id, change)


def history(deps: Deps, record: QueryRecord) -> conversation.History:
    stored = read_record(deps.state, record.id)
    return read_history(deps.state, stored, max_turns=deps.settings.conversation_max_turns,
                        max_chars=deps.settings.conversation_max_chars)


# ------------------------------------------------------------ submitting


def test_a_query_without_a_conversation_starts_one_and_stands_alone(deps):
    record = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")

    stored = deps.state.get(state_collections.QUERIES, record.id)
    assert stored["conversation_id"] == record.conversation_id
    assert stored["standalone_question"] == "What is the ack deadline in Pub/Sub?"
    assert "history" not in stored
    doc = deps.state.get(state_collections.CONVERSATIONS, record.conversation_id)
    assert doc["turns"] == [record.id]
    assert doc["expire_at"] == record.expire_at


def test_a_follow_up_joins_the_conversation_and_waits_for_its_standalone_question(deps):
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    second = api.submit_query(deps, "And what is its maximum?", conversation_id=first.conversation_id)

    assert second.conversation_id == first.conversation_id
    assert deps.state.get(state_collections.QUERIES, second.id)["standalone_question"] is None
    doc = deps.state.get(state_collections.CONVERSATIONS, first.conversation_id)
    assert doc["turns"] == [first.id, second.id]


def test_an_unknown_conversation_is_refused_at_submit_and_nothing_is_stored(deps):
    with pytest.raises(api.ConversationNotFound, match="no conversation with id"):
        api.submit_query(deps, "And its maximum?", conversation_id="0" * 32)
    with pytest.raises(api.ConversationNotFound):
        api.submit_query(deps, "And its maximum?", conversation_id="../../etc")
    with pytest.raises(InvalidInput, match="'conversation_id' must be a string"):
        api.submit_query(deps, "And its maximum?", conversation_id=12)
    assert deps.state.count(state_collections.QUERIES) == 0
    assert deps.publisher.messages == []
    assert issubclass(api.ConversationNotFound, LookupError)


def test_a_conversation_holds_a_bounded_number_of_turns(deps):
    first = api.submit_query(deps, "What is BM25?")

    def fill(doc):
        return {**doc, "turns": [f"{n:032x}" for n in range(MAX_TURNS)]}

    deps.state.update(state_collections.CONVERSATIONS, first.conversation_id, fill)
    with pytest.raises(InvalidInput, match=f"already has {MAX_TURNS} turns"):
        api.submit_query(deps, "And its origin?", conversation_id=first.conversation_id)


def test_a_callers_history_is_stored_bounded_and_stored_turns_win(deps):
    sent = [{"question": f"question {n}?", "answer": f"answer {n}."} for n in range(10)]
    record = api.submit_query(deps, "And its maximum?", history=sent)

    stored = deps.state.get(state_collections.QUERIES, record.id)
    assert stored["history"] == sent[-deps.settings.conversation_max_turns:]
    assert stored["standalone_question"] is None

    first = api.submit_query(deps, "What is BM25?")
    continued = api.submit_query(deps, "And its origin?", conversation_id=first.conversation_id, history=sent)
    assert "history" not in deps.state.get(state_collections.QUERIES, continued.id)
    assert history(deps, continued).turns == (ConversationTurn("What is BM25?", ""),)


@pytest.mark.parametrize("sent, message", [
    ("hello", "'history' must be a list"),
    ([["q", "a"]], r"'history\[0\]' must be an object"),
    ([{"question": "", "answer": "a"}], r"'history\[0\].question' is empty"),
    ([{"question": "q", "answer": 3}], r"'history\[0\].answer' must be a string"),
    ([{"question": "q", "role": "user"}], r"unknown field\(s\) role"),
    ([{"question": "q\x00", "answer": ""}], r"U\+0000"),
])
def test_a_malformed_history_is_refused_naming_the_field(deps, sent, message):
    with pytest.raises(InvalidInput, match=message):
        api.submit_query(deps, "And its maximum?", history=sent)


def test_the_bounds_are_settings():
    settings = load_settings({"RAGBUS_CONVERSATION_MAX_TURNS": "3", "RAGBUS_CONVERSATION_MAX_CHARS": "900"})
    assert (settings.conversation_max_turns, settings.conversation_max_chars) == (3, 900)
    with pytest.raises(ConfigError, match="RAGBUS_CONVERSATION_MAX_TURNS"):
        load_settings({"RAGBUS_CONVERSATION_MAX_TURNS": "0"})
    with pytest.raises(ConfigError, match="RAGBUS_CONVERSATION_MAX_CHARS"):
        load_settings({"RAGBUS_CONVERSATION_MAX_CHARS": "ten"})
    # bounded above: a record holding a caller's history must stay within Firestore's document limit
    with pytest.raises(ConfigError, match="RAGBUS_CONVERSATION_MAX_CHARS=2000000 must be <= 100000"):
        load_settings({"RAGBUS_CONVERSATION_MAX_CHARS": "2000000"})
    with pytest.raises(ConfigError, match="RAGBUS_CONVERSATION_MAX_TURNS=51 must be <= 50"):
        load_settings({"RAGBUS_CONVERSATION_MAX_TURNS": "51"})


# ------------------------------------------------------------ the bounds


def test_bounding_keeps_the_newest_turns_within_the_turn_count():
    turns = [ConversationTurn(f"q{n}", f"a{n}") for n in range(8)]
    assert bound_history(turns, max_turns=3, max_chars=10_000) == turns[-3:]


def test_bounding_drops_older_turns_that_do_not_fit_the_characters():
    turns = [ConversationTurn("old question?", "x" * 300), ConversationTurn("new question?", "y" * 100)]
    kept = bound_history(turns, max_turns=5, max_chars=200)
    assert kept == [turns[1]]


def test_the_newest_turn_alone_over_the_budget_is_cut_not_dropped():
    turn = ConversationTurn("What is the ack deadline in Pub/Sub?", "word " * 200)
    (kept,) = bound_history([turn], max_turns=5, max_chars=120)
    assert kept.question == turn.question
    assert len(kept.question) + len(kept.answer) <= 120
    assert kept.answer.endswith("…")


def test_a_long_chat_is_bounded_before_it_is_checked():
    sent = [{"question": None, "answer": ""}] + [{"question": "q?", "answer": "a."}] * 20
    assert len(validate_history(sent, max_turns=4, max_chars=1000)) == 4


# ------------------------------------------------------------ reading


def test_a_follow_up_reads_the_earlier_turns_standalone_questions_and_answers(deps):
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    answer(deps, first.id, "The default ack deadline is 10 seconds [1].")
    second = api.submit_query(deps, "And what is its maximum?", conversation_id=first.conversation_id)

    assert history(deps, second) == conversation.History((
        ConversationTurn("What is the ack deadline in Pub/Sub?", "The default ack deadline is 10 seconds [1]."),
    ))
    assert history(deps, first).turns == ()  # nothing came before the first turn


def test_history_is_bounded_in_turns_and_characters(deps):
    settings = Settings(conversation_max_turns=2, conversation_max_chars=300)
    deps = Deps(settings, publisher=deps.publisher, state=deps.state, clock=deps.clock)
    first = api.submit_query(deps, "What is BM25?")
    previous = [first]
    for n in range(4):
        answer(deps, previous[-1].id, f"Answer {n}. " + "z" * 100)
        previous.append(api.submit_query(deps, f"Question {n}?", conversation_id=first.conversation_id))
    turns = history(deps, previous[-1]).turns
    assert [t.question for t in turns] == ["Question 1?", "Question 2?"]
    assert sum(len(t.question) + len(t.answer) for t in turns) <= 300


def test_an_earlier_turn_that_failed_still_gives_its_question(deps):
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    fail_query(deps.state, first.id, "a stage kept crashing", deps.clock.now())
    second = api.submit_query(deps, "And its maximum?", conversation_id=first.conversation_id)

    assert history(deps, second).turns == (ConversationTurn("What is the ack deadline in Pub/Sub?", ""),)


def test_an_abstention_is_not_history_but_its_question_is(deps):
    first = api.submit_query(deps, "What is the price of Spanner?")
    answer(deps, first.id, "The documents do not say.", outcome="not_answerable")
    second = api.submit_query(deps, "And its latency?", conversation_id=first.conversation_id)
    assert history(deps, second).turns == (ConversationTurn("What is the price of Spanner?", ""),)


def test_a_conversation_that_no_longer_exists_gives_no_history_and_says_so(deps):
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    second = api.submit_query(deps, "And its maximum?", conversation_id=first.conversation_id)
    deps.state.delete(state_collections.CONVERSATIONS, first.conversation_id)  # its TTL ran out

    read = history(deps, second)
    assert read.turns == ()
    assert "no longer exists" in read.note
    with pytest.raises(api.ConversationNotFound):
        api.get_conversation(deps, first.conversation_id)


def test_an_earlier_turn_no_longer_stored_is_left_out_and_named(deps):
    first = api.submit_query(deps, "What is BM25?")
    second = api.submit_query(deps, "What is TF-IDF?", conversation_id=first.conversation_id)
    third = api.submit_query(deps, "How do they differ?", conversation_id=first.conversation_id)
    deps.state.delete(state_collections.QUERIES, first.id)

    read = history(deps, third)
    assert read.turns == (ConversationTurn("What is TF-IDF?", ""),)
    assert "1 earlier turn(s)" in read.note
    assert [t["query_id"] for t in api.get_conversation(deps, first.conversation_id)["turns"]] == [second.id, third.id]


def test_a_callers_history_precedes_the_stored_turns(deps):
    sent = [{"question": "What is the ack deadline in Pub/Sub?", "answer": "10 seconds."}]
    first = api.submit_query(deps, "And its maximum?", history=sent)
    second = api.submit_query(deps, "How do I change it?", conversation_id=first.conversation_id)

    assert [t.question for t in history(deps, first).turns] == ["What is the ack deadline in Pub/Sub?"]
    assert [t.question for t in history(deps, second).turns] == [
        "What is the ack deadline in Pub/Sub?", "And its maximum?"]


# ------------------------------------------------------------ listing


def test_get_conversation_lists_the_turns_oldest_first(deps):
    first = api.submit_query(deps, "What is the ack deadline in Pub/Sub?")
    answer(deps, first.id, "10 seconds [1].")
    second = api.submit_query(deps, "And its maximum?", conversation_id=first.conversation_id)

    listed = api.get_conversation(deps, first.conversation_id)
    assert listed["conversation_id"] == first.conversation_id
    assert [t["query_id"] for t in listed["turns"]] == [first.id, second.id]
    one, two = listed["turns"]
    assert set(one) == {"query_id", "question", "standalone_question", "status", "outcome", "answer",
                        "citations", "created_at"}
    assert (one["question"], one["standalone_question"], one["status"], one["answer"]) == (
        "What is the ack deadline in Pub/Sub?", "What is the ack deadline in Pub/Sub?", "answered", "10 seconds [1].")
    assert (two["question"], two["standalone_question"], two["status"]) == ("And its maximum?", None, "pending")


def test_get_conversation_ends_an_overdue_turn_as_timed_out(deps):
    first = api.submit_query(deps, "What is BM25?", timeout_s=5)
    deps.clock.advance(10)
    (turn,) = api.get_conversation(deps, first.conversation_id)["turns"]
    assert turn["status"] == "timed_out"


def test_a_callers_history_is_read_with_each_question_standing_on_its_own(deps):
    # a chat client sends the questions as typed; stored turns keep their standalone forms: both read alike
    record = api.submit_query(deps, "Who maintains that file?", history=[
        {"question": "What is the frob cache file?", "answer": "A file of hashes [1]."},
        {"question": "Where is it kept?", "answer": "Under /var/cache/frob [1]."}])
    turns = history(deps, record).turns
    assert [t.question for t in turns] == ["What is the frob cache file?", "Where is the frob cache file kept?"]
    assert turns[1].answer == "Under /var/cache/frob [1]."
