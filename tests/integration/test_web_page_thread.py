"""The page keeps a conversation (issue 24), in Debian's chromium: each answered question joins a
thread, a follow-up is sent with the conversation's id and shows the question it was read as, each
turn links to its stages and trace, a reload keeps the thread, and "New conversation" starts over."""

from __future__ import annotations

from shared.contract import state_collections
from tests import scripted_loop
from tests.integration.test_web_page import browser, loop_and_server, page  # noqa: F401 - the fixtures


def _ask(page, question: str, turns: int) -> None:  # noqa: F811 - the fixture, passed on
    page.get_by_label("Your question").fill(question)
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#thread li.turn").nth(turns - 1).filter(has_text="Answered").wait_for()
    page.locator("#ask:not([disabled])").wait_for()


def _records(server) -> dict[str, dict]:
    state = server.server.config.app.state.deps.state
    return {doc["original_query"]: doc for doc in state.list(state_collections.QUERIES)}


def test_a_thread_of_turns_with_follow_ups_trace_links_and_a_new_conversation(loop_and_server, page):  # noqa: F811
    _, server = loop_and_server
    page.goto(server.url + "/")
    assert page.locator("#thread-section").is_hidden()  # no conversation yet
    _ask(page, "What is the ack deadline in Pub/Sub?", 1)
    _ask(page, "And what is its maximum?", 2)

    records = _records(server)
    first, second = records["What is the ack deadline in Pub/Sub?"], records["And what is its maximum?"]
    assert first["conversation_id"] and second["conversation_id"] == first["conversation_id"]
    assert f"conversation={first['conversation_id']}" in page.url

    turns = page.locator("#thread li.turn")
    assert turns.count() == 2
    assert turns.nth(0).locator(".turn-question").inner_text() == "1. What is the ack deadline in Pub/Sub?"
    assert turns.nth(1).locator(".turn-read-as").inner_text() == f"Read as: {second['standalone_question']}"
    assert page.locator("#read-as").inner_text() == f"Read as: {second['standalone_question']}"
    assert turns.nth(1).get_attribute("class") == "turn current"
    assert "BM25 ranks documents" in turns.nth(0).locator(".turn-answer").inner_text()

    # each turn links to its own stages and trace; following the link keeps the conversation
    link = turns.nth(0).locator("a.turn-trace")
    assert f"id={first['id']}" in link.get_attribute("href")
    link.click()
    page.locator("#answer a.cite").first.wait_for()
    assert f"id={first['id']}" in page.url and page.get_by_label("Your question").input_value() == first[
        "original_query"]
    page.locator("#thread li.turn").nth(1).wait_for()
    assert page.locator("#thread li.turn").nth(0).get_attribute("class") == "turn current"

    page.get_by_role("button", name="New conversation").click()
    assert page.locator("#thread-section").is_hidden() and "conversation=" not in page.url
    _ask(page, "What is BM25?", 1)
    third = _records(server)["What is BM25?"]
    assert third["conversation_id"] != first["conversation_id"]
    assert page.locator("#thread li.turn").count() == 1 and page.locator("#read-as").is_hidden()
    assert page.problems == []


def test_an_expired_conversation_says_so_and_the_next_question_starts_one(loop_and_server, page):  # noqa: F811
    _, server = loop_and_server
    page.goto(server.url + "/?conversation=" + "0" * 32)
    page.locator("#form-error", has_text="no longer stored").wait_for()
    assert "conversation=" not in page.url
    _ask(page, "What is BM25?", 1)
    assert page.locator("#thread li.turn").count() == 1


def test_a_turn_with_one_source_says_source(loop_and_server, page, monkeypatch):  # noqa: F811
    monkeypatch.setattr(scripted_loop, "CONTEXTS", scripted_loop.CONTEXTS[:1])  # the answer cites one
    _, server = loop_and_server
    page.goto(server.url + "/")
    _ask(page, "What is BM25?", 1)
    links = page.locator("#thread li.turn .turn-links").inner_text()
    assert links.endswith(" · 1 source"), links  # it said "1 sources"
    assert page.problems == []
