"""A PDF cited to its page on every surface (issue 31, item 5), over the real embedded runtime: a
feed served on 127.0.0.1 links a real 15-page PDF (fontconfig's manual, tests/data/formats), a
folder holds a two-page PDF; a question answered on page 4 is asked on the page in a real
headless browser (Debian's chromium driven by Playwright), over REST, through the `openai` SDK
against /v1/chat/completions, and with `ragbus ask`. The page shows "p. 4" and links the PDF at
``#page=4``; the file's citation shows its position as text, never as a link to the local file."""

from __future__ import annotations

import functools
import http.server
import shutil
import textwrap
import threading
import uuid
from pathlib import Path

import httpx
import openai

from services.gateway import serve
from shared.corpus import CORPUS
from tests.hostile.bad_files import pdf, text_page
from tests.integration.test_web_page import browser, page  # noqa: F401 - the browser fixtures
from tests.support import run_cli

MANUAL = Path(__file__).resolve().parents[1] / "data" / "formats" / "fontconfig-user.pdf"
ON_PAGE_4 = "Which debug value monitors fontconfig memory usage?"  # "MEMORY 512 Monitor fontconfig memory usage"
ON_PAGE_2 = "What is a DNS rebinding attack?"


def _two_page_pdf() -> bytes:
    """The sample corpus's SSRF note as a two-page PDF, its "Rebinding attacks" section on page 2."""
    text = (CORPUS / "docs" / "ssrf-when-fetching-untrusted-urls.txt").read_text(encoding="utf-8")
    before, after = text.split("Rebinding attacks")

    def lines(part: str) -> list[str]:
        out: list[str] = []
        for paragraph in part.strip().split("\n\n"):
            out += [*textwrap.wrap(paragraph.replace("\n", " "), 88), ""]
        return out

    return pdf([text_page(*lines(before)), text_page(*lines("Rebinding attacks\n\n" + after))])


def _serve_folder(folder: Path) -> http.server.ThreadingHTTPServer:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_pdf_citation_shows_its_page_and_opens_at_it_on_every_surface(tmp_path, page):  # noqa: F811
    from shared.contract.config import load_settings
    from shared.contract.messages import FeedPollRequested
    from shared.ingest.files import ingest_path
    from shared.ingest.listings import add_listing
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    site, folder, home = tmp_path / "site", tmp_path / "docs", tmp_path / "home"
    site.mkdir()
    folder.mkdir()
    shutil.copy(MANUAL, site / "fontconfig-user.pdf")
    (folder / "ssrf.pdf").write_bytes(_two_page_pdf())
    feed_server = _serve_folder(site)
    base = f"http://127.0.0.1:{feed_server.server_address[1]}"
    manual_url = f"{base}/fontconfig-user.pdf"
    (site / "feed.xml").write_text(
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Manuals</title>'
        f"<link>{base}/</link><description>Manuals as PDF</description><item><title>fonts.conf manual</title>"
        f"<link>{manual_url}</link><guid>fontconfig-user</guid>"
        "<pubDate>Tue, 10 Mar 2026 08:00:00 GMT</pubDate></item></channel></rss>", encoding="utf-8")

    local = build_local(load_settings({"RAGBUS_HOME": str(home)}).with_(allow_loopback=True))
    try:
        with LocalRuntime(local.deps, local.bus) as runtime:
            deps = local.deps
            add_listing(deps.state, f"{base}/feed.xml", allow_loopback=True, now=deps.clock.now())
            deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[f"{base}/feed.xml"],
                                                     requested_at=deps.clock.now()))
            ingest_path(folder, state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
            assert runtime.wait_idle(300)
            gateway = serve(deps, "127.0.0.1", 0)
            try:
                _on_the_page(page, gateway.url, manual_url, folder / "ssrf.pdf")
                _over_rest_and_openai(gateway.url, manual_url)
            finally:
                gateway.stop()
    finally:
        feed_server.shutdown()
        feed_server.server_close()

    shown = run_cli(home, "ask", ON_PAGE_4, timeout=600).stdout
    assert "(p. 4)" in shown and f"{manual_url}#page=4" in shown, shown


def _on_the_page(page, url: str, manual_url: str, local_pdf: Path) -> None:  # noqa: F811
    page.goto(url + "/")
    page.get_by_label("Your question").fill(ON_PAGE_4)
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#answer a.cite").first.wait_for()
    source = page.locator("#citations li").filter(has_text="fonts.conf manual")
    assert source.count() == 1, page.locator("#citations").inner_text()
    assert source.locator("a.source-title").get_attribute("href") == f"{manual_url}#page=4"
    assert source.locator(".meta").inner_text().startswith("p. 4 · ")
    cite = page.locator(f'#answer a.cite[href="{manual_url}#page=4"]').first
    assert "p. 4" in cite.get_attribute("title")

    page.get_by_label("Your question").fill(ON_PAGE_2)
    page.get_by_role("button", name="Ask", exact=True).click()
    local = page.locator("#citations li").filter(has_text=local_pdf.as_uri())
    local.wait_for()  # the first answer's sources are replaced by the second's
    assert local.count() == 1, page.locator("#citations").inner_text()
    # a file:// address is shown as text: the page never links the reader's own files
    assert local.locator("a").count() == 0 and local.locator(".source-title.unlinked").count() == 1
    assert local.locator(".meta").inner_text().startswith(("p. 2 · ", "pp. 1–2 · "))
    assert page.locator('a[href^="file:"]').count() == 0
    assert page.problems == []


def _over_rest_and_openai(url: str, manual_url: str) -> None:
    record = httpx.post(f"{url}/v1/queries", json={"question": ON_PAGE_4, "wait_s": 120}, timeout=180).json()
    (cited,) = [c for c in record["citations"] if c["url"].startswith(manual_url)]
    assert (cited["position"], cited["url"]) == ("p. 4", f"{manual_url}#page=4"), record["citations"]

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="not-needed", max_retries=0, timeout=180)
    completion = client.chat.completions.create(model="ragbus", messages=[{"role": "user", "content": ON_PAGE_4}])
    (cited,) = [c for c in completion.model_extra["citations"] if c["url"].startswith(manual_url)]
    assert (cited["position"], cited["url"]) == ("p. 4", f"{manual_url}#page=4")
    sources = completion.choices[0].message.content.split("\n\nSources:\n")[1].splitlines()
    assert f"{cited['id']}. [{cited['title']}]({manual_url}#page=4) (p. 4)" in sources, sources
