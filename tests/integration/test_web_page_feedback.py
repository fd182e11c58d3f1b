"""Feedback from the page (issue 33), in Debian's chromium against the real embedded runtime: a question
answered by the real stages, thumbs down with a comment (markup in it) and a wrong citation, and then
`ragbus trace` shows the rating and the comment; the comment is shown on the page as text, never markup;
a rating from the thread's thumbs, and a second rating replacing the first."""

from __future__ import annotations

import pytest
from opentelemetry import trace as otel_trace

from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.corpus import CORPUS
from shared.runtime.bootstrap import build_local
from tests.integration.test_web_page import browser, page  # noqa: F401 - the fixtures
from tests.support import ragbus_env, run_cli, serving_documents

pytestmark = pytest.mark.integration
COMMENT = 'Cites the wrong page <img src=x onerror="window.pwned=1"> [bold]x[/bold]'


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = tmp_path_factory.mktemp("feedback-home")
    env = ragbus_env(home)
    with serving_documents(env, CORPUS / "site" / "articles") as server:
        yield home, server


def _records(home):
    deps = build_local(load_settings(ragbus_env(home))).deps
    return {doc["original_query"]: doc for doc in deps.state.list(state_collections.QUERIES)}


def test_thumbs_down_with_a_comment_is_kept_and_shown_by_ragbus_trace(served, page):  # noqa: F811
    home, server = served
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("What is BM25?")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#answer a.cite").first.wait_for(timeout=120_000)
    assert page.locator("#feedback-details").is_hidden()

    page.get_by_role("button", name="Wrong", exact=True).click()
    page.locator("#feedback-status", has_text="rated wrong").wait_for()
    assert page.get_by_role("button", name="Wrong", exact=True).get_attribute("aria-pressed") == "true"
    page.get_by_label("Comment (optional)").fill(COMMENT)
    page.locator("#feedback-citation-list input[data-cite='1']").check()
    page.get_by_label("The right answer (optional)").fill("a ranking function")
    page.get_by_role("button", name="Send feedback").click()
    page.locator("#feedback-status", has_text="citation [1] wrong").wait_for()
    # the comment is shown as the text it is: no element made of it, nothing run
    assert page.locator("#feedback-comment-shown").inner_text() == f"Your comment: {COMMENT}"
    assert page.locator("#feedback-comment-shown img").count() == 0
    assert page.evaluate("window.pwned") is None

    record = _records(home)["What is BM25?"]
    (kept,) = record["feedback"]
    assert (kept["rating"], kept["comment"], kept["wrong_citations"], kept["expected"]) == (
        "down", COMMENT, [1], "a ranking function")
    otel_trace.get_tracer_provider().force_flush()  # the query's spans, batched in this process: in the store first
    trace = run_cli(home, "trace", record["id"][:10]).stdout
    assert "rated down" in trace and "wrong citations: [1]" in trace
    assert "comment: " + " ".join(COMMENT.split()) in " ".join(trace.split())  # as text, however it wraps

    # the thread's thumbs rate in one click, as the same browser: the rating is replaced
    page.locator("#thread li.turn .turn-rate[data-rating='up']").first.click()
    page.locator("#thread li.turn .turn-rated", has_text="rated up").wait_for()
    (kept,) = _records(home)["What is BM25?"]["feedback"]
    assert kept["rating"] == "up"
    assert page.problems == []


def test_a_refused_rating_says_why_on_the_page(served, page):  # noqa: F811
    home, server = served
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("What is reciprocal rank fusion?")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#rate-up").wait_for(timeout=120_000)  # shown once the answer is
    page.get_by_role("button", name="Right", exact=True).click()
    page.locator("#feedback-status", has_text="rated right").wait_for()
    page.evaluate("document.getElementById('feedback-comment').removeAttribute('maxlength')")
    page.get_by_label("Comment (optional)").fill("y" * 2001)
    page.get_by_role("button", name="Send feedback").click()
    page.locator("#feedback-error", has_text="more than the limit of 2000").wait_for()
    assert all("status of 400" in p for p in page.problems), page.problems  # the refused POST, nothing else
