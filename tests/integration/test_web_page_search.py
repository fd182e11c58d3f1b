"""The page as a newcomer's second hour uses it (issue 25), in Debian's chromium: a search after
a question replaces what was shown, and the trace labels stay whole on a 400 px screen."""

from __future__ import annotations

from shared.contract.config import load_settings
from tests.integration.test_web_page import browser, loop_and_server, page  # noqa: F401 - the fixtures
from tests.scripted_loop import CONTEXTS


def test_search_only_after_a_question_replaces_the_answer_stages_and_trace(loop_and_server, page):  # noqa: F811
    loop, server = loop_and_server
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("how does bm25 rank")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#answer").filter(has_text="BM25").wait_for()
    assert page.locator("#progress-section").is_visible() and "id=" in page.url

    page.get_by_role("button", name="Search only").click()
    page.locator("#search-results li").first.wait_for()
    assert page.locator("#search-results li").count() == len(CONTEXTS)
    for gone in ("#answer-section", "#progress-section", "#iterations-section", "#trace-section"):
        assert page.locator(gone).is_hidden(), f"{gone} still shows the earlier question's"
    assert "id=" not in page.url  # a reload shows the search's page, not the old question
    # the results are right under the form, not below the old answer at the bottom
    form_bottom = page.locator("#ask-form").bounding_box()
    results_top = page.locator("#search-section").bounding_box()
    assert results_top["y"] - (form_bottom["y"] + form_bottom["height"]) < 120
    assert page.problems == []


def test_trace_labels_are_whole_on_a_400_px_screen(tmp_path, page):  # noqa: F811
    from services.gateway import serve
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import topic_paragraphs

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "volcano.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home")}))
    page.set_viewport_size({"width": 400, "height": 800})
    with LocalRuntime(local.deps, local.bus) as runtime:
        ingest_path(docs, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                    clock=local.deps.clock)
        assert runtime.wait_idle(120)
        handle = serve(local.deps, "127.0.0.1", 0)
        try:
            page.goto(handle.url + "/")
            page.fill("#question", "volcano report")
            page.click("#ask")
            page.wait_for_selector("#waterfall li")
            page.screenshot(path="/tmp/ragbus-trace-400.png", full_page=True)
            cut = page.evaluate("""() => [...document.querySelectorAll('#waterfall .span-label')]
                .filter((label) => label.scrollWidth > label.clientWidth + 1).map((label) => label.textContent)""")
            assert cut == [], f"trace labels cut at 400 px: {cut}"
            labels = page.locator("#waterfall .span-label").all_inner_texts()
            assert any("synthesizer.query-graded" in label.replace("\n", "") for label in labels)
            widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            assert widths[0] <= widths[1]
            assert page.problems == []
        finally:
            handle.stop()
