"""The page's edge of issue 35's problem 2: the planted document's answer in a real browser (Debian's
chromium driven by Playwright) shows its text, no element the markup would make, and loads nothing
from the planted addresses. The iterations panel may show the retrieved context's own text: that is
the document, shown as text, not the answer."""

from __future__ import annotations

from tests.hostile.test_answer_markup import LEAK, PLANTED, QUESTION
from tests.integration.test_web_page import browser, page  # noqa: F401 - the fixtures (skip without chromium)
from tests.support import serving_documents


def test_the_page_shows_the_planted_answer_as_text_and_loads_nothing_it_names(tmp_path, page):  # noqa: F811
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "blimp.txt").write_text(PLANTED)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    with serving_documents({"RAGBUS_HOME": str(tmp_path / "home")}, docs) as server:
        page.goto(server.url + "/")
        page.get_by_label("Your question").fill(QUESTION)
        page.get_by_role("button", name="Ask", exact=True).click()
        page.locator("#answer").filter(has_text="512 KB").wait_for()
        answer = page.locator("#answer")
        assert answer.locator("img, iframe, script, svg, object, embed").count() == 0
        links = answer.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert all(href and href.startswith("#source-") for href in links), links  # citation numbers only
        text = answer.inner_text()
        assert "<" not in text and "javascript:" not in text and LEAK not in text, text
    assert not [url for url in asked if LEAK in url or url.startswith(("javascript:", "data:"))], asked
    assert page.problems == []
