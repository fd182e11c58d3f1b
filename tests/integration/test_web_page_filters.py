"""The page's filter inputs (source, since, until) in a real headless browser over the real embedded
runtime: the question is asked with them, the answer shows the filters its searches applied and
the time read from the question, and the trace's retriever row names them."""

from __future__ import annotations

import os

from services.gateway import serve
from tests.integration.test_web_page import browser, page  # noqa: F401 - the browser fixtures

OLD_MTIME = 1_500_000_000  # 2017-07-14


def test_the_form_s_filters_reach_the_query_and_the_answer_shows_them(tmp_path, page):  # noqa: F811
    from shared.contract.config import load_settings
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import topic_paragraphs

    folders = {}
    for topic in ("volcano", "glacier"):
        folders[topic] = tmp_path / f"{topic}-notes"
        folders[topic].mkdir()
        (folders[topic] / f"{topic}.md").write_text(f"# {topic.title()} notes\n\n"
                                                    + "\n\n".join(topic_paragraphs(topic)))
        # a file's published date is its modification time (issue 31): old notes, so a question's
        # time words ("latest") find none of them and are widened, as this test shows
        os.utime(folders[topic] / f"{topic}.md", (OLD_MTIME, OLD_MTIME))
    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home")}))
    with LocalRuntime(local.deps, local.bus) as runtime:
        for folder in folders.values():
            ingest_path(folder, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                        clock=local.deps.clock)
        assert runtime.wait_idle(120)
        handle = serve(local.deps, "127.0.0.1", 0)
        try:
            page.goto(handle.url + "/")
            page.locator("summary", has_text="Options").click()
            # a bad date is the gateway's one-line error beside the form, and nothing is asked
            page.get_by_label("Your question").fill("What is the latest volcano report?")
            page.get_by_label("Published since").fill("soon")
            page.get_by_role("button", name="Ask", exact=True).click()
            page.locator("#form-error", has_text="since 'soon'").wait_for()
            assert page.locator("#progress-section").is_hidden()
            page.problems.clear()  # the browser logs that 400 as a failed resource; nothing else may fail

            page.get_by_label("Published since").fill("")
            page.get_by_label("From source").fill(str(folders["volcano"]))
            page.get_by_role("button", name="Ask", exact=True).click()
            page.locator("#outcome").filter(has_text="A").wait_for()
            assert page.locator("#filters").inner_text() == f"Searched only documents with: source {folders['volcano']}"
            # the files are years old: the 90 days "latest" reads found nothing and were widened
            # to any date, then searched with the month and year as words
            time_read = page.locator("#time-read").inner_text()
            assert time_read.startswith("Read “latest” in the question as published since ")
            # (the files are dated by their modification time, years ago: widened step by step to any date)
            assert "widened:" in time_read and time_read.rstrip(".").endswith("→ any date")
            cited = page.locator("#citations li").all_inner_texts()
            assert cited and all("volcano" in c.lower() for c in cited), cited
            page.wait_for_selector('#waterfall li[data-name="retriever.query-transformed process"]')
            retriever = page.locator('#waterfall li[data-name="retriever.query-transformed process"]').first
            assert f"filters: source {folders['volcano']}" in retriever.inner_text()

            # search only takes the same inputs as query parameters
            page.get_by_label("From source").fill(str(folders["glacier"]))
            page.get_by_label("Your question").fill("notes report")
            page.get_by_role("button", name="Search only").click()
            page.locator("#search-results li").first.wait_for()
            found = page.locator("#search-results li").all_inner_texts()
            assert found and all("glacier" in item.lower() and "volcano" not in item.lower() for item in found), found
            assert page.problems == []
        finally:
            handle.stop()
