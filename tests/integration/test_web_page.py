"""The web page in a real headless browser (Debian's chromium driven by Playwright):
ask a question, watch the stages arrive live, read the iterations and the cited answer.
The gateway is served by uvicorn on loopback; the loop's stages are scripted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.gateway import serve
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.contract.config import Settings
from shared.contract.deps import Deps
from tests.scripted_loop import CONTEXTS, ContextsIndex, ScriptedLoop, WordEmbedder

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOT = Path("/tmp/ragbus-page.png")
STAGES = ["gateway", *["transformer", "retriever", "grader"] * 2, "synthesizer"]

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")


@pytest.fixture
def loop_and_server(tmp_path):
    state = SqliteStateStore(tmp_path / "state.db")
    clock = SystemClock()
    loop = ScriptedLoop(state, clock, step_s=0.1)
    deps = Deps(Settings(home=tmp_path), publisher=loop, state=state, clock=clock,
                embedder=WordEmbedder(), index=ContextsIndex())
    handle = serve(deps, "127.0.0.1", 0)
    yield loop, handle
    loop.release.set()
    handle.stop()


@pytest.fixture(scope="module")
def browser():
    """One browser per test file (its driver and Chromium took 2-8 s to start, once per test); each test has its
    own context (cookies, storage, cache) and page. Not per session: while Playwright's sync API is started, its
    event loop counts as running, and asyncio.run() in another file's test would refuse to start."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.problems = problems
        yield page
    finally:
        context.close()


def test_asking_shows_live_stages_iterations_and_a_cited_answer(loop_and_server, page):
    loop, server = loop_and_server
    loop.hold_before_answer = True  # the answer waits until the page has shown the live stages
    page.goto(server.url + "/")
    assert page.title().startswith("ragbus")
    page.get_by_label("Your question").fill("How does BM25 rank documents?")
    page.get_by_role("button", name="Ask", exact=True).click()

    # live: both iterations' grades arrive while the answer is still being written
    page.locator('#timeline li[data-stage="grader"]').nth(1).wait_for()
    assert page.locator("#answer-section").is_hidden()
    assert page.locator("#ask").is_disabled()
    page.locator('#iterations .iteration[data-iteration="1"] table.grade').wait_for()
    # sources opened while the query runs stay open when the next event redraws the iterations (d0784a5: they
    # closed under the reader): opened and marked here, redrawn by the answer's event (the mark goes with the
    # element it was on), and open
    held = page.locator('.iteration[data-iteration="1"] details.sources')
    held.locator("summary").click()
    sync_api.expect(held).to_have_attribute("open", "")
    held.evaluate("details => { details.dataset.drawnBeforeTheAnswer = 'yes'; }")

    loop.release.set()
    page.locator("#answer a.cite").first.wait_for()
    assert page.locator("details.sources[data-drawn-before-the-answer]").count() == 0  # redrawn since
    assert held.evaluate("details => details.open")

    stages = page.locator("#timeline li").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == STAGES
    assert page.locator("#outcome").inner_text() == "Answered"
    assert page.locator("#ask").is_enabled()
    assert "?id=" in page.url

    # numbered citations link to the sources; a script URL never becomes a link
    cites = page.locator("#answer a.cite")
    assert cites.evaluate_all("els => els.map(e => e.textContent)") == ["1", "2", "3"]
    assert cites.nth(0).get_attribute("href") == CONTEXTS[0]["url"]
    assert cites.nth(0).get_attribute("title") == f"{CONTEXTS[0]['title']} (chunk {CONTEXTS[0]['chunk_id']})"
    assert cites.nth(1).get_attribute("href") == CONTEXTS[1]["url"]
    assert cites.nth(2).get_attribute("href") == "#source-3"
    sources = page.locator("#citations li")
    assert sources.count() == 3
    assert sources.nth(0).locator("a").get_attribute("href") == CONTEXTS[0]["url"]
    assert f"chunk {CONTEXTS[0]['chunk_id']}" in sources.nth(0).inner_text()
    assert sources.nth(2).locator("a").count() == 0
    assert page.locator('a[href^="javascript:"]').count() == 0

    # each iteration: its query, sub-queries, grade and decision
    first = page.locator('.iteration[data-iteration="0"]')
    kept = page.locator('.iteration[data-iteration="1"]')
    assert "How does BM25 rank documents?" in first.locator(".query").inner_text()
    assert first.locator(".sub-queries li").count() == 2
    # the decision names the rule it follows (issue 36.5): a score next to "refine" says why
    assert first.locator("table.grade td").all_inner_texts()[:5] == [
        "0.41", "0.50", "0.30", "no",
        "refine (score 0.41 < 0.6, relevance 0.50 < 0.65, completeness 0.30 < 0.55, not grounded)"]
    assert kept.locator("table.grade td").all_inner_texts()[:5] == ["0.82", "0.90", "0.75", "yes", "accept"]
    # terms the rewrite appended are shown apart from the question a person asked
    assert kept.locator(".query").inner_text() == "How does BM25 rank documents?"
    assert kept.locator(".added-terms").inner_text() == "ranking function"
    assert first.locator(".added-terms").count() == 0
    assert kept.locator(".badge.kept").count() == 1
    # document text is shown as text, never parsed as markup (its sources were opened above)
    sync_api.expect(kept.locator(".snippet").first).to_contain_text("<b>not bold</b>", use_inner_text=True)
    assert kept.locator(".snippet b").count() == 0

    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert page.problems == []


def test_the_terms_added_to_a_question_without_a_question_mark_are_shown_apart(loop_and_server, page):
    """The page reads the terms a rewrite added from the record (``added_terms``), not by the question's "?":
    "BM25 ranking" searched as "BM25 ranking ranking function" shows "ranking function" apart."""
    _, server = loop_and_server
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("BM25 ranking")
    page.get_by_role("button", name="Ask", exact=True).click()
    kept = page.locator('.iteration[data-iteration="1"]')
    kept.locator(".added-terms").wait_for()
    assert kept.locator(".query").inner_text() == "BM25 ranking"
    assert kept.locator(".added-terms").inner_text() == "ranking function"
    assert page.problems == []


def test_a_score_just_below_its_threshold_reads_below_it(loop_and_server, page):
    """The Score cell shows the places that tell the score from its threshold, as `ragbus ask` does (b9653f6):
    two places showed "0.60" beside "refine (score 0.5999 < 0.6, ...)"."""
    loop, server = loop_and_server
    loop.refined_score = 0.5999
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("How does BM25 rank documents?")
    page.get_by_role("button", name="Ask", exact=True).click()
    first = page.locator('#iterations .iteration[data-iteration="0"] table.grade')
    first.wait_for()
    cells = first.locator("td").all_inner_texts()
    assert cells[0] == "0.5999" and cells[4].startswith("refine (score 0.5999 < 0.6, relevance 0.50 < 0.65"), cells
    assert cells[1:3] == ["0.50", "0.30"]
    assert page.problems == []


def test_errors_from_the_gateway_are_shown_next_to_the_form(loop_and_server, page):
    _, server = loop_and_server
    page.goto(server.url + "/")
    page.get_by_role("button", name="Ask", exact=True).click()
    assert page.locator("#form-error").inner_text() == "Type a question first."
    page.get_by_label("Your question").fill("what is bm25")
    page.locator("summary", has_text="Options").click()
    page.get_by_label("Contexts per iteration (top k)").fill("99")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#form-error", has_text="'top_k' is 99").wait_for()
    assert page.locator("#progress-section").is_hidden()


def test_search_only_lists_passages(loop_and_server, page):
    _, server = loop_and_server
    page.goto(server.url + "/")
    page.get_by_label("Your question").fill("dense retrieval embeds queries")
    page.get_by_role("button", name="Search only").click()
    page.locator("#search-results li").first.wait_for()
    assert page.locator("#search-results li").count() == len(CONTEXTS)
    first = page.locator("#search-results li").first.locator("a")
    assert (first.inner_text(), first.get_attribute("href")) == (CONTEXTS[1]["title"], CONTEXTS[1]["url"])
    assert page.problems == []


def test_the_page_draws_the_trace_waterfall_of_a_real_query(tmp_path, page):
    """The real embedded runtime answers; the page draws the query's spans as a waterfall."""
    from shared.contract.config import load_settings
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import topic_paragraphs

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "volcano.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home")}))
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
            rows = page.locator("#waterfall li")
            names = [rows.nth(i).get_attribute("data-name") for i in range(rows.count())]
            assert names[0] == "gateway submit"
            assert {"transformer.query-submitted process", "retriever.query-transformed process",
                    "grader.contexts-retrieved process", "synthesizer.query-graded process"} <= set(names)
            grader = page.locator('#waterfall li[data-name="grader.contexts-retrieved process"]').first
            assert "score" in grader.inner_text()
            assert page.locator("#waterfall .bar").first.evaluate("b => b.style.width") != ""
            # a source's score is its similarity, as `ragbus search` shows it: the fused rank score (about 1/60
            # whatever the match) read "score 0.03" beside every source of a grade of relevance 1.00
            record = page.evaluate("async () => (await fetch('/v1/queries/' + "
                                   "new URL(location.href).searchParams.get('id'))).json()")
            last = record["iterations"][-1]
            number = last["iteration"]
            shown = page.locator(f'.iteration[data-iteration="{number}"] .contexts .score')
            assert shown.evaluate_all("els => els.map(e => e.textContent.trim())") == [
                f"score {c['index_score']:.2f}" for c in last["contexts"]]
            assert page.problems == []
        finally:
            handle.stop()


def test_the_page_fits_a_400_px_screen_with_a_real_answer_and_its_trace(tmp_path, page):
    """Nothing scrolls sideways on a narrow phone: long queries, URLs and the waterfall wrap."""
    from shared.contract.config import load_settings
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import topic_paragraphs

    docs = tmp_path / "a-rather-long-folder-name-for-the-volcano-observatory-field-notes"
    docs.mkdir()
    (docs / "volcano-observatory-weekly-report.md").write_text(
        "# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home")}))
    page.set_viewport_size({"width": 400, "height": 800})
    with LocalRuntime(local.deps, local.bus) as runtime:
        ingest_path(docs, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                    clock=local.deps.clock)
        assert runtime.wait_idle(120)
        handle = serve(local.deps, "127.0.0.1", 0)
        try:
            page.goto(handle.url + "/")
            page.fill("#question", "volcano report " + "magma" * 20)
            page.click("#ask")
            page.wait_for_selector("#waterfall li")
            page.locator("#outcome").filter(has_text="A").wait_for()
            for details in page.locator("details").all():
                details.evaluate("d => d.open = true")
            widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            page.screenshot(path="/tmp/ragbus-page-400.png", full_page=True)
            assert widths[0] <= widths[1], f"the page is {widths[0]} px wide in a {widths[1]} px screen"
            snippets = page.locator(".snippet").all_inner_texts()
            assert snippets and not any(s.startswith(("Title:", "Volcano notes")) or "Published:" in s
                                        for s in snippets), snippets
            assert "with 1 citations" not in page.locator("#timeline").inner_text()
            assert page.problems == []
        finally:
            handle.stop()


def test_an_unknown_id_is_explained_without_api_wording(loop_and_server, page):
    _, server = loop_and_server
    page.goto(server.url + "/?id=0123456789abcdef")
    error = page.locator("#form-error")
    error.wait_for()
    assert "no question with this id" in error.inner_text()
    assert "POST" not in error.inner_text() and "/v1/" not in error.inner_text()


def test_the_page_shows_each_step_done_without_the_model(tmp_path, page):
    """A transient model failure falls back; the page says which step and why."""
    from shared.contract.config import load_settings
    from shared.contract.errors import RetryableError
    from shared.ingest.files import ingest_path
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import topic_paragraphs
    from tests.unit.loop_fakes import ScriptedLLM

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "volcano.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    llm = ScriptedLLM(grades=[RetryableError("Gemini grade failed with 503: try again later")] * 3)
    local = build_local(load_settings({"RAGBUS_HOME": str(tmp_path / "home")}), llm=llm)
    with LocalRuntime(local.deps, local.bus) as runtime:
        ingest_path(docs, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                    clock=local.deps.clock)
        assert runtime.wait_idle(120)
        handle = serve(local.deps, "127.0.0.1", 0)
        try:
            page.goto(handle.url + "/")
            page.fill("#question", "volcano report")
            page.click("#ask")
            page.locator("#fallbacks li").first.wait_for()
            lines = page.locator("#fallbacks li").all_inner_texts()
            assert lines[0].startswith("Without the model: grader, iteration 1")
            assert all(line.startswith("Without the model: grader") and "503" in line for line in lines)
            assert page.problems == []
        finally:
            handle.stop()
