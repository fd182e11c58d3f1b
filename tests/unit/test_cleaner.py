"""The cleaner: decoding, main-content extraction, header, dead-lettering empty pages."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.cleaner.handler import clean_content, clean_key, decode_bytes, handle
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, PermanentError
from shared.contract.messages import DocumentCleaned, DocumentFetched
from shared.contract.text import split_header
from tests.fakes import FakeClock, InMemoryBlobStore, InMemoryStateStore, RecordingPublisher
from tests.support import cpu_ratio

ARTICLE = [
    ("Volcanic eruptions on the Kamchatka peninsula have been monitored by a network of seismometers "
     "since the nineteen sixties, and the data show a steady rise in shallow tremor before each event."),
    ("Researchers at the observatory compared tremor spectra from twelve eruptions and found that the "
     "dominant frequency drops by roughly a third in the final week, a pattern they call spectral gliding."),
    ("The team now publishes a daily bulletin that combines the tremor index with satellite measurements "
     "of ground deformation, giving pilots and residents several days of warning."),
]

REALISTIC_PAGE = f"""<!DOCTYPE html>
<html lang="en"><head>
<meta charset="utf-8">
<title>Listening to volcanoes | Example Science Blog</title>
<meta property="og:title" content="Listening to volcanoes">
<meta property="article:published_time" content="2026-09-14T08:30:00Z">
<style>.cookie-consent {{ position: fixed; bottom: 0 }} body {{ font-family: sans-serif }}</style>
<script>window.dataLayer = window.dataLayer || []; function gtag(){{dataLayer.push(arguments);}}</script>
</head><body>
<div id="cookie-consent" class="cookie-consent" role="dialog">
  <p>We use cookies to personalise content and ads. By clicking Accept all cookies you agree.</p>
  <button>Accept all cookies</button><button>Manage preferences</button>
</div>
<header class="site-header"><nav class="main-nav"><ul>
  <li><a href="/">Home</a></li><li><a href="/topics">Topics</a></li><li><a href="/newsletter">Newsletter signup</a></li>
</ul></nav></header>
<main><article class="post">
  <h1>Listening to volcanoes</h1>
  <p class="byline">By Ana Duarte · <time datetime="2026-09-14">14 September 2026</time></p>
  <p>{ARTICLE[0]}</p>
  <h2>Spectral gliding</h2>
  <p>{ARTICLE[1]}</p>
  <p>{ARTICLE[2]}</p>
  <script>trackScrollDepth("article-volcanoes");</script>
</article>
<aside class="related-posts"><h3>Related posts</h3><ul>
  <li><a href="/p/1">Ten gadgets every hiker needs</a></li><li><a href="/p/2">Our favourite sourdough recipes</a></li>
</ul></aside></main>
<footer class="site-footer"><p>Copyright 2026 Example Science Blog. All rights reserved.</p>
  <p><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of service</a></p></footer>
</body></html>"""


def _fetched(raw_ref: str, content_type: str, *, title: str = "", published: str | None = None,
             url: str = "https://blog.example/posts/listening-to-volcanoes", source: str = "feed",
             fallback_title: str = "") -> DocumentFetched:
    return DocumentFetched(
        document_id="feed-0123456789abcdef", source=source, origin="https://blog.example/feed.xml",
        guid="guid-1", url=url, title=title, fallback_title=fallback_title, published=published, raw_ref=raw_ref,
        content_type=content_type, content_hash="c0ffee" * 10 + "abcd",
        fetched_at=datetime(2026, 11, 1, tzinfo=UTC),
    )


def _deps(blobs: InMemoryBlobStore, publisher: RecordingPublisher) -> Deps:
    return Deps(Settings(), blobs=blobs, publisher=publisher, clock=FakeClock(), state=InMemoryStateStore())


def _run(raw: bytes, content_type: str, **kwargs) -> tuple[str, DocumentCleaned, InMemoryBlobStore]:
    blobs, publisher = InMemoryBlobStore(), RecordingPublisher()
    ref = blobs.put("raw/doc", raw)
    message = _fetched(ref, content_type, **kwargs)
    handle(message, _deps(blobs, publisher))
    (event,) = publisher.of_type(DocumentCleaned)
    return blobs.get(event.clean_ref).decode("utf-8"), event, blobs


def test_realistic_page_keeps_the_article_and_drops_the_boilerplate():
    text, event, _ = _run(REALISTIC_PAGE.encode("utf-8"), "text/html; charset=utf-8")
    header, body = split_header(text)
    assert header is not None
    for paragraph in ARTICLE:
        assert paragraph in body
    assert "Spectral gliding" in body
    lowered = body.lower()
    for boilerplate in ("cookies", "accept all", "newsletter", "related posts", "sourdough", "gadgets",
                        "copyright", "privacy policy", "terms of service", "datalayer", "trackscrolldepth",
                        "font-family", "position: fixed"):
        assert boilerplate not in lowered, boilerplate
    # title and date come from the page's metadata when the message has none
    assert header.title == "Listening to volcanoes"
    assert header.published and header.published.startswith("2026-09-14")
    assert header.source == "https://blog.example/posts/listening-to-volcanoes"
    assert event.title == "Listening to volcanoes" and event.published == header.published
    assert event.clean_ref == "mem:" + clean_key(event.document_id, event.content_hash)
    assert event.characters == len(text)


def test_header_has_exactly_the_agreed_shape():
    text, _, _ = _run(REALISTIC_PAGE.encode("utf-8"), "text/html", title="Given title", published="2026-09-15")
    lines = text.split("\n")
    assert lines[:4] == [
        "Title: Given title",
        "Published: 2026-09-15",
        "Source: https://blog.example/posts/listening-to-volcanoes",
        "",
    ]
    assert lines[4].startswith("Listening to volcanoes") or lines[4].startswith("Volcanic eruptions")


def test_unknown_date_is_written_as_unknown():
    # the first line is prose, not a heading: the file's name is the title (issue 31)
    text, event, _ = _run(b"Just a plain note about copper and quartz.\nSecond line.", "text/plain",
                          url="file:///notes/copper.txt")
    assert text.startswith("Title: copper\nPublished: unknown\n"
                           "Source: file:///notes/copper.txt\n\n")
    assert event.published is None


def test_page_labelled_utf8_that_is_really_cp1252_comes_out_readable():
    page = (
        "<html><head><meta charset='utf-8'><title>Caf\u00e9 notes</title></head><body><article>"
        "<p>The caf\u00e9\u2019s na\u00efve owner said \u201cthe cr\u00e8me br\u00fbl\u00e9e sells out by noon\u201d "
        "\u2013 every single day of the week, rain or shine, according to regulars.</p>"
        "<p>Prices rose to 4\u20ac for an espresso, which na\u00efve tourists still pay without a second "
        "thought, while locals walk two streets further to the market stall.</p>"
        "</article></body></html>"
    ).encode("cp1252")
    text, _, _ = _run(page, "text/html; charset=utf-8")
    assert "caf\u00e9\u2019s na\u00efve owner" in text
    assert "\u201cthe cr\u00e8me br\u00fbl\u00e9e sells out by noon\u201d" in text
    assert "4\u20ac" in text
    assert "\ufffd" not in text


def test_decoding_order():
    cp1252 = "na\u00efve \u201cquotes\u201d".encode("cp1252")
    assert decode_bytes(cp1252, "utf-8") == "na\u00efve \u201cquotes\u201d"
    # valid UTF-8 wins over a wrong single-byte label
    assert decode_bytes("na\u00efve".encode("utf-8"), "iso-8859-1") == "na\u00efve"
    # a byte-order mark wins over everything
    assert decode_bytes("ol\u00e1".encode("utf-16"), "utf-8") == "ol\u00e1"
    assert decode_bytes(b"\xef\xbb\xbfhello", "cp1251") == "hello"
    # a correct non-Western label is honoured
    russian = "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440".encode("cp1251")
    assert decode_bytes(russian, "windows-1251") == "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440"
    # a meta charset is read when the header says nothing
    page = "<meta charset='windows-1251'><p>\u041f\u0440\u0438\u0432\u0435\u0442</p>".encode("cp1251")
    assert "\u041f\u0440\u0438\u0432\u0435\u0442" in decode_bytes(page, None, html=True)


def test_a_file_of_utf8_lines_and_code_page_lines_is_read_line_by_line():
    # A notes file appended to by a UTF-8 editor and a Latin-1 one: read whole it went to detection, which
    # chose a code page and turned the UTF-8 lines' letters into two each ("Größe" read "GrĂ¶Ăźe").
    utf8_line = "Die Größe der Tabelle ist 512 Zeilen.\n".encode()
    latin_line = "Der Lüfter dreht sich mit 900 Umdrehungen für das Gerät.\r\n".encode("latin-1")
    text = decode_bytes(b"Notizen\n" + utf8_line + latin_line + utf8_line, None)
    assert text == ("Notizen\nDie Größe der Tabelle ist 512 Zeilen.\n"
                    "Der Lüfter dreht sich mit 900 Umdrehungen für das Gerät.\r\n"
                    "Die Größe der Tabelle ist 512 Zeilen.\n")
    # the UTF-8 lines' script picks the code page of the others: Cyrillic lines in windows-1251
    russian = "«Привет, мир» — сказал он вчера.\n"
    assert decode_bytes(russian.encode("utf-8") + russian.encode("cp1251"), None) == russian + russian
    # a label that reads the bytes wins: windows-1251's "Вё" (C2 B8) is also valid UTF-8, yet the page says 1251
    labelled = "Вё\nПривет, мир.\n"
    assert decode_bytes(labelled.encode("cp1251"), "windows-1251") == labelled
    # a file that is all one code page is read as before
    assert decode_bytes("Der Lüfter für das Gerät.\n".encode("latin-1"), None) == "Der Lüfter für das Gerät.\n"
    # a UTF-8 line with one Latin-1 byte keeps its UTF-8 letters (read whole in the code page: "naĂŻve", newcomer16);
    # a code-page line whose bytes hold a UTF-8 character by chance ("ОН»" is UTF-8's "λ") stays in its code page
    stray = "Der Parser — von Jos".encode() + b"\xe9" + " — liest naïve Daten.\n".encode()
    assert decode_bytes(stray, None) == "Der Parser — von José — liest naïve Daten.\n"
    assert "Notizen — Der Parser — von Jos" in decode_bytes(b"Notizen \xe2\x80\x94 " + stray, None)
    chance = "«ОН» сказал: всё готово к запуску.\n"
    assert decode_bytes("Привет.\n".encode() + chance.encode("cp1251"), None) == "Привет.\n" + chance


def test_a_utf8_line_with_many_stray_bytes_is_read_in_linear_time():
    # each stray decoded the rest of the line again: a 1 MB line of them took 81 s (review of eb81838)
    from shared.formats.text import _utf8_with_strays

    unit = "é".encode() + b"\xe9" + b" and" * 15
    lines = {n: unit * n for n in (1000, 8000)}

    def check(n, text):
        assert text == ("éé" + " and" * 15) * n

    assert cpu_ratio(lambda n: _utf8_with_strays(lines[n], "cp1252"), 1000, 8000, check=check) < 32  # linear: 8;
    # quadratic: about 100. Each run of bytes UTF-8 cannot read is read alone in the code page, as before
    hostile = b"\xe2\x80 ok \xf0\x9f\x98\xc3" + "—".encode() + b"\x81\x40\xff\xed\xa0\x80"
    assert _utf8_with_strays(hostile, "cp1252") == "\xe2\u20ac ok \xf0\u0178\u02dc\xc3\u2014\ufffd@\xff\xed\xa0\u20ac"
    # shift_jis reads '\xe2\x80' (one run) as one character, '\x81' alone (its run) as none
    assert _utf8_with_strays(hostile, "shift_jis") == "\u7ab6 ok \ufffd\u6cbd\uff83\u2014\ufffd@" + "\ufffd" * 4


def test_windows_1252_punctuation_alone_is_not_read_as_a_dos_code_page():
    # A Windows text file whose only non-ASCII bytes are typographic punctuation (curly quotes, dashes,
    # the euro sign): charset_normalizer lists cp437/cp852 first and not cp1252 for such short text, which
    # read "It’s" as "Itĺs" and “quotes” as "ôquotesö".
    for text in ("The “widget” costs 5€ – cheap.\n",
                 "It’s the user’s “final” answer — really…\n"):
        assert decode_bytes(text.encode("cp1252"), None) == text
    # letters in the upper half still go to detection: a Russian windows-1251 text without a label
    russian = "«Привет, мир» — сказал он вчера вечером.\n"
    assert decode_bytes(russian.encode("cp1251"), None) == russian


def test_utf16_text_without_a_byte_order_mark_is_text_not_binary():
    # `iconv -t UTF-16LE` writes no byte-order mark: every other byte of English text is NUL, and the file was
    # refused as binary data ("it contains NUL bytes"); a binary file's NULs fall anywhere and it still is.
    from shared.formats.text import binary_reason

    text = "The gizmo battery lasts 31 hours on a single charge.\nIt charges in 95 minutes.\n"
    for encoding in ("utf-16-le", "utf-16-be"):
        raw = text.encode(encoding)
        assert binary_reason(raw) is None
        assert decode_bytes(raw, None) == text
    body, _, _ = _run(text.encode("utf-16-le"), "text/plain")
    assert "lasts 31 hours on a single charge." in body
    assert binary_reason(bytes(range(256)) * 8) == "it contains NUL bytes"
    assert binary_reason(b"\x00\x01PNG\x00\x00\x00\rIHDR" * 50) is not None


def test_markdown_becomes_plain_text_with_headings_and_list_items():
    markdown = (
        "---\ntitle: Field notes\ndate: 2026-08-02\n---\n"
        "# Glacier survey\n\nWe measured **twelve** glaciers with [GPS](https://gps.example) and `rtk` kits.\n\n"
        "## Findings\n\n- Retreat averaged *40 m* per year\n- Two glaciers advanced\n\n"
        "1. First step\n2. Second step\n\n```\ncode stays as text\n```\n\n![a crevasse photo](img.png)\n"
    )
    text, _, _ = _run(markdown.encode("utf-8"), "text/markdown")
    header, body = split_header(text)
    assert header.title == "Field notes" and header.published == "2026-08-02"
    assert "Glacier survey" in body and "Findings" in body
    assert "We measured twelve glaciers with GPS and rtk kits." in body
    assert "- Retreat averaged 40 m per year\n- Two glaciers advanced" in body
    assert "1. First step\n2. Second step" in body
    assert "code stays as text" in body and "a crevasse photo" in body
    for markup in ("#", "**", "](", "`", "---", "*40"):
        assert markup not in body, markup


def test_a_markdown_link_keeps_its_words_whatever_its_address():
    """markdown-it refuses to make a link of a javascript:, vbscript:, file: or data: address (a renderer's
    safety rule), so such a link stayed in the text as raw Markdown, address and all, where search results
    and MCP showed it; the cleaner renders nothing, so every link is read for its words alone."""
    markdown = ("The quux tool compresses files. [Quux homepage](javascript:alert('md')) has more, as do "
                "[the notes](file:///etc/quux/notes.txt), [v](vbscript:msgbox) and [d](data:text/html,hi).\n")
    body = clean_content(markdown.encode(), "text/markdown", "file:///quux.md").body
    assert body.endswith("Quux homepage has more, as do the notes, v and d."), body
    for markup in ("](", "javascript:", "file:", "vbscript:", "data:"):
        assert markup not in body, markup


def test_terminal_formatting_in_a_text_file_is_read_as_the_text_it_formats():
    """man-db's manual as Debian ships it (/usr/share/doc/man-db/man-db-manual.txt.gz, grotty's output) sets
    bold and italic with terminal escapes and its bullets by overstriking; the escapes' control characters
    went and their parameters stayed: the title read "[1mman-db - the database cached manual pager
    suite[0m" and the text held 1,042 such remnants. The lines are cut from that file."""
    raw = ("               \x1b[1mman-db - the database cached manual pager suite\x1b[0m\n\n"
           "                  \x1b[4mColin\x1b[24m \x1b[4mWatson\x1b[24m \x1b[4m<cjwatson@debian.org>\x1b[0m\n\n"
           " +\x08o file names and paths in \x1b[4mitalic\x1b[24m, e.g.  \x1b[4m/usr/share/man\x1b[24m.\n"
           " +\x08o program names in \x1b[1mbold\x1b[22m, eg.  \x1b[1mman\x1b[22m.\n\n"
           "N\x08NA\x08AM\x08ME\x08E\n     _\x08m_\x08a_\x08n - an interface to the \x1b]8;;man:man(1)\x07manuals\x1b]8;;\x07\n")
    result = clean_content(raw.encode(), "text/plain", "file:///usr/share/doc/man-db/man-db-manual.txt")
    assert result.title == "man-db - the database cached manual pager suite"
    assert "Colin Watson <cjwatson@debian.org>" in result.body
    assert "• file names and paths in italic, e.g. /usr/share/man." in result.body
    assert "• program names in bold, eg. man." in result.body
    assert "NAME\nman - an interface to the manuals" in result.body, result.body
    assert "[1m" not in result.body and "[24m" not in result.body and "8;;" not in result.body


@pytest.mark.parametrize(("raw", "content_type"), [
    ("# Timeouts\n\nThe \x1b[1mdefault\x1b[0m timeout is \x1b[31mforty\x1b[0m seconds.\n", "text/markdown"),
    ("Timeouts\n========\n\nThe \x1b[1mdefault\x1b[0m timeout is \x1b[31mforty\x1b[0m seconds.\n", "text/x-rst"),
    ("<html><body><article><p>The \x1b[1mdefault\x1b[0m timeout is \x1b[31mforty\x1b[0m seconds, and that "
     "is how long the service waits for its peers before it gives up.</p></article></body></html>", "text/html"),
], ids=["markdown", "rst", "html"])
def test_terminal_escapes_in_any_text_kind_leave_no_remnant(raw, content_type):
    # only plain text was read as a terminal shows it: Markdown kept "The [1mdefault[0m timeout"
    body = clean_content(raw.encode(), content_type, "file:///notes").body
    assert "The default timeout is forty seconds" in body and "[1m" not in body and "[31m" not in body, body


def test_a_web_pages_paragraph_reads_as_one_line_whatever_inline_code_it_holds():
    """trafilatura kept the source's line breaks in a paragraph that holds a <code> (and only there), and a
    line break ends a sentence: libffi's Introduction.html was quoted as "The libffi library provides a
    portable, high level programming [1] interface to various calling conventions." A browser shows a
    line break in a paragraph as a space; a <pre> block keeps its lines. Cut from that page."""
    page = ("<html><head><title>Introduction (libffi)</title></head><body><h2>1 What is libffi?</h2>"
            "<p>Compilers for high level languages generate code that follow certain conventions.  These\n"
            "conventions are necessary, in part, for separate compilation to work.</p>\n"
            "<p>The <code>libffi</code> library provides a portable, high level programming\n"
            "interface to various calling conventions.  This allows a programmer to\n"
            "call any function specified by a call interface description at run\ntime.</p>\n"
            "<pre class=\"example\">ffi_status ffi_prep_cif (ffi_cif *cif,\n    ffi_abi abi)</pre>\n"
            "<p>Some programs may not know at the time of compilation what arguments\nare to be passed to "
            "a function.</p></body></html>")
    body = clean_content(page.encode(), "text/html", "file:///usr/share/doc/libffi8/html/Introduction.html").body
    assert ("The libffi library provides a portable, high level programming interface to various calling "
            "conventions. This allows a programmer to call any function specified by a call interface description "
            "at run time.") in body, body
    assert "ffi_prep_cif (ffi_cif *cif,\n" in body  # a code block keeps its lines


def test_markdown_title_falls_back_to_first_heading():
    result = clean_content(b"# The real title\n\nSome body text here.", "text/x-markdown", "file:///a.md")
    assert result.title == "The real title"


def test_plain_text_is_normalised():
    raw = "Line one\r\nLine\x00 two\x07 with   spaces\r\n\r\n\r\n\r\nPara\u200b two\t\tend".encode("utf-8")
    result = clean_content(raw, "text/plain; charset=utf-8", "file:///x.txt")
    assert result.body == "Line one\nLine two with spaces\n\nPara two end"


def test_bidirectional_overrides_and_isolates_never_reach_the_clean_text_or_the_title():
    # "Trojan Source": U+202E shows "port 0808" as "port 8080"; the clean text feeds every answer and
    # citation, so no surface (page, JSON, OpenAI reply) may carry them, whatever the format
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    page = (f"<html><head><title>Widget{bidi} manual</title></head><body><article><p>The widget port is "
            f"\u202e0808\u202c and it listens on every interface of the host that runs it, day and night.</p>"
            f"<p>Written by \u2066Alice\u2069 in 2019{bidi}, the widget also rotates its logs every week.</p>"
            "</article></body></html>")
    text, event, _ = _run(page.encode("utf-8"), "text/html; charset=utf-8")
    assert not any(char in text for char in bidi), ascii(text)
    assert "The widget port is 0808 and it listens" in text
    assert event.title == "Widget manual"
    result = clean_content(f"The port is \u202e0808\u202c.{bidi}".encode(), "text/plain", "file:///x.txt")
    assert result.body == "The port is 0808."
    # right-to-left text itself and its marks (U+200E/U+200F) stay: only the overrides and isolates go
    assert clean_content("\u05e9\u05dc\u05d5\u05dd \u200fport 80.".encode(), "text/plain",
                         "file:///y.txt").body == "\u05e9\u05dc\u05d5\u05dd \u200fport 80."


def test_markup_slower_than_the_time_bound_is_stopped_and_refused_not_read_for_minutes():
    # 30,000 attributes on one element (300 kB): lxml, htmldate and jusText each cost their count squared,
    # about 40 s in the cleaner's own thread, where nothing could stop it
    page = ("<html><body><p " + " ".join(f"a{i}='x'" for i in range(30_000)) + ">The text.</p></body></html>")
    started = time.monotonic()
    with pytest.raises(InvalidInput, match=r"reading this HTML file took over 1 s \(RAGBUS_PARSE_SECONDS\)"):
        clean_content(page.encode(), "text/html", "file:///slow.html", Settings(parse_seconds=1.0))
    assert time.monotonic() - started < 20


def test_markup_nested_past_the_readers_recursion_is_refused_at_once_by_name():
    # 95 kB of reStructuredText lists 250 deep: docutils' RecursionError was retried five times as if the
    # file might read next time, then dead-lettered as "maximum recursion depth exceeded", naming no file kind
    deep = "".join("   " * depth + "- item\n\n" for depth in range(250)).encode()
    with pytest.raises(InvalidInput, match="the reStructuredText file nests deeper than its reader can follow"):
        clean_content(deep, "text/x-rst", "file:///deep.rst")


def test_a_restructuredtext_paragraph_on_one_long_line_is_read():
    # docutils' line_length_limit (10,000 characters) dropped the whole document: no passage, no error
    line = "An opening paragraph of plain words, never wrapped. " * 400
    body = clean_content(f"{line}\n\nA second paragraph.\n".encode(), "text/x-rst", "file:///long.rst").body
    assert line.strip() in body and "A second paragraph." in body


def test_markup_nested_past_the_readers_recursion_is_refused_by_name_in_a_process_of_its_own_too():
    # over ISOLATED_OVER_BYTES the same file is read in the bounded process: refused the same way, not as
    # "cannot be read: RecursionError: maximum recursion depth exceeded"
    from shared.formats.registry import ISOLATED_OVER_BYTES

    opening = b"An opening paragraph of plain words. " * (ISOLATED_OVER_BYTES // 30) + b"\n\n"
    deep = opening + "".join("   " * depth + "- item\n\n" for depth in range(250)).encode()
    assert len(deep) > ISOLATED_OVER_BYTES
    with pytest.raises(InvalidInput, match="the reStructuredText file nests deeper than its reader can follow"):
        clean_content(deep, "text/x-rst", "file:///deep.rst")


def test_a_large_text_file_read_in_its_own_process_reads_as_it_would_in_the_cleaners():
    from shared.formats.passages import lay_out
    from shared.formats.registry import ISOLATED_OVER_BYTES, Limits, by_suffix

    rows = "".join(f"<p>Paragraph {n} says that the widget number {n} is blue, and it is.</p>" for n in range(3000))
    page = f"<html><head><title>Widgets</title></head><body><article>{rows}</article></body></html>".encode()
    assert len(page) > ISOLATED_OVER_BYTES
    isolated = clean_content(page, "text/html", "file:///w.html")
    here = by_suffix(".html").load()(page, "text/html", "file:///w.html", Limits())
    assert isolated.title == here.title == "Widgets"
    assert isolated.body == lay_out(here.passages)[0] and "widget number 2999 is blue" in isolated.body


def test_empty_article_is_a_permanent_error_naming_the_document():
    blobs, publisher = InMemoryBlobStore(), RecordingPublisher()
    ref = blobs.put("raw/empty", b"<html><body><nav><a href='/'>Home</a></nav><script>x()</script>"
                                 b"<footer>Copyright</footer></body></html>")
    message = _fetched(ref, "text/html")
    with pytest.raises(InvalidInput) as caught:
        handle(message, _deps(blobs, publisher))
    assert str(caught.value).startswith(
        "document feed-0123456789abcdef (https://blog.example/posts/listening-to-volcanoes) has no main "
        "text after cleaning"
    )
    assert publisher.messages == []
    assert set(blobs.blobs) == {"raw/empty"}


def test_unsupported_content_type_is_a_permanent_error():
    with pytest.raises(InvalidInput, match="image/png"):
        clean_content(b"\x89PNG\r\n", "image/png", "https://x.example/a.png")


def test_a_truncated_pdf_is_refused_with_the_reason():
    # PDF is read now (shared/formats/pdf.py): a file that is not one is refused, named as such
    with pytest.raises(InvalidInput, match="the PDF cannot be opened"):
        clean_content(b"%PDF-1.7", "application/pdf", "https://x.example/a.pdf")


def test_missing_raw_blob_is_permanent():
    blobs, publisher = InMemoryBlobStore(), RecordingPublisher()
    with pytest.raises(PermanentError, match="not in the blob store"):
        handle(_fetched("mem:raw/gone", "text/html"), _deps(blobs, publisher))


def test_handling_twice_changes_nothing():
    blobs, publisher = InMemoryBlobStore(), RecordingPublisher()
    ref = blobs.put("raw/doc", REALISTIC_PAGE.encode("utf-8"))
    message = _fetched(ref, "text/html")
    handle(message, _deps(blobs, publisher))
    first = dict(blobs.blobs)
    handle(message, _deps(blobs, publisher))
    assert blobs.blobs == first
    one, two = publisher.of_type(DocumentCleaned)
    assert one == two and one.idempotency_key() == two.idempotency_key()


def test_short_but_real_text_survives_while_a_lone_menu_does_not():
    note = b"<html><body><p>Short real note: the meeting moved to Tuesday at noon.</p></body></html>"
    assert clean_content(note, "text/html", "https://x.example/n").body == (
        "Short real note: the meeting moved to Tuesday at noon.")
    menu = b"<html><body><nav>menu</nav><script>x()</script></body></html>"
    assert clean_content(menu, "text/html", "https://x.example/m").body == ""


def test_a_file_title_from_its_name_yields_to_the_document_own_title():
    text, _, _ = _run(b"# Volcano notes\n\nNotes about tremor.", "text/markdown", fallback_title="notes",
                      source="file", url="file:///docs/notes.md")
    assert text.startswith("Title: Volcano notes\n")
    text, _, _ = _run(b"Plain words without a title line that is short enough? no." * 10, "text/plain",
                      fallback_title="plain", source="file", url="file:///docs/plain.txt")
    assert text.startswith("Title: plain\n")
    # a feed's item title stays, whatever the page says
    text, _, _ = _run(REALISTIC_PAGE.encode(), "text/html", title="Feed title")
    assert text.startswith("Title: Feed title\n")


def test_a_version_1_file_message_already_on_the_bus_keeps_the_document_title():
    """v1 put a file's name in ``title``; it is read as the fallback it always was."""
    from shared.contract.messages import decode, encode

    data, attributes = encode(_fetched("raw/x", "text/markdown", source="file", title="notes"))
    body = json.loads(data)
    body.pop("fallback_title")
    v1 = decode(json.dumps(body).encode(), {**attributes, "schema_version": "1"})
    assert (v1.title, v1.fallback_title) == ("", "notes")
    feed = decode(json.dumps({**body, "source": "feed"}).encode(), {**attributes, "schema_version": "1"})
    assert (feed.title, feed.fallback_title) == ("notes", "")


def test_restructuredtext_reads_as_its_text_with_its_own_title():
    rst = (".. _install:\n\n===========\npip install\n===========\n\n:date: 2024-05-01\n\n"
           "Overview\n--------\n\nNote that ``pip install`` prefers :ref:`the installed version <pins>`.\n\n"
           ".. versionadded:: 22.1\n\n   The resolver backtracks.\n\n"
           ".. toctree::\n\n   other\n\n.. a comment nobody reads\n\n"
           ".. include:: /etc/passwd\n\n.. unknown-directive:: x\n\n   hidden\n")
    cleaned = clean_content(rst.encode(), "text/x-rst", "file:///docs/pip_install.rst")
    assert cleaned.title == "pip install" and cleaned.published == "2024-05-01"
    assert "Note that pip install prefers the installed version." in cleaned.body
    assert "22.1" in cleaned.body and "The resolver backtracks." in cleaned.body
    for gone in ("comment nobody", "other", "root:", "ERROR", "hidden", ":ref:", "``", "date"):
        assert gone not in cleaned.body


DATA = Path(__file__).resolve().parents[1] / "data"
# the same Debian man page the realdocs set holds (one copy in the repo)
XSLTPROC = Path(__file__).resolve().parents[2] / "shared/tools/eval/datasets/realdocs/documents/xsltproc.html"


def test_prose_between_preformatted_blocks_survives_cleaning():
    raw = (DATA / "zlib_how.html").read_bytes()
    cleaned = clean_content(raw, "text/html", "file:///usr/share/doc/zlib1g-dev/examples/zlib_how.html")
    body = " ".join(cleaned.body.split())
    for prose in ("We often get questions about how the deflate() and inflate() functions should be used.",
                  "This is an ugly hack required to avoid corruption",
                  "buffers sizes on the order of 128K or 256K bytes should be used.",
                  "The def() routine compresses data", "#define CHUNK 16384"):
        assert prose in body
    assert body.index("ugly hack") < body.index("128K") < body.index("#define CHUNK 16384")
    assert "Copyright (c) 2004, 2005 Mark Adler" not in body and cleaned.title == "zlib Usage Example"


def test_the_page_title_is_the_documents_own_title_not_a_heading_inside_it():
    raw = XSLTPROC.read_bytes()
    assert b"<title>xsltproc</title>" in raw and b"Important</h3>" in raw
    assert clean_content(raw, "text/html", "file:///x/xsltproc.html").title == "xsltproc"
    # a site name after the title is still cut, as trafilatura does
    page = ("<html><head><title>Release notes | Example Site</title></head><body><article><h1>Release notes</h1>"
            + "<p>The release processes each document in turn, and the options apply to all of them.</p>" * 5
            + "</article></body></html>").encode()
    assert clean_content(page, "text/html", "https://example.com/notes").title == "Release notes"


def _page(head: str, body: str) -> str:
    return (f"<html><head><title>Zorblax guide</title>{head}</head><body><article><h1>Zorblax guide</h1>"
            f"{body}<p>{'Engineers inspect each zorblax coupling every ninety days and replace it after ten years. ' * 3}"
            "</p></article></body></html>")


def test_a_year_mentioned_in_the_prose_is_not_taken_for_the_published_date():
    page = _page("", "<p>The zorblax coupling tolerates 17 kilonewtons of axial load, according to the 2024 test "
                     "series run by the manufacturer.</p>")
    cleaned = clean_content(page.encode(), "text/html", "https://example.com/zorblax")
    assert cleaned.published is None


@pytest.mark.parametrize("head,body,published", [
    ('<meta property="article:published_time" content="2025-06-03T10:00:00Z">', "<p>Seen in 2024.</p>", "2025-06-03"),
    ("", '<p><time datetime="2025-02-11">11 February 2025</time></p>', "2025-02-11"),
])
def test_a_date_the_page_states_is_still_read(head, body, published):
    cleaned = clean_content(_page(head, body).encode(), "text/html", "https://example.com/zorblax")
    assert cleaned.published and cleaned.published.startswith(published)


MYST = """(config-file)=

# Configuration

```{seealso}
{doc}`../cli/pip_config` command, which helps manage pip's configuration.
```

```{tab} Unix
:sync: unix

The user file is {file}`$HOME/.config/pip/pip.conf`, which respects `XDG_CONFIG_HOME`.
```

Setting {envvar}`PIP_CONFIG_FILE` to os.devnull disables loading. Plain `{x}` code stays.

```python
config = {"index-url": "https://example.com/simple"}
```
"""


def test_myst_markdown_reads_as_its_text():
    # pip's documentation as Debian ships it (/usr/share/doc/python3-pip/html/topics/configuration.md.gz)
    body = clean_content(MYST.encode(), "text/markdown", "file:///doc/configuration.md").body
    assert "The user file is $HOME/.config/pip/pip.conf, which respects XDG_CONFIG_HOME." in body
    assert "Unix\n\nThe user file" in body
    assert "Setting PIP_CONFIG_FILE to os.devnull disables loading. Plain {x} code stays." in body
    assert "../cli/pip_config command, which helps manage pip's configuration." in body
    for markup in ("{file}", "{doc}", "{envvar}", "```{", "{tab}", ":sync:", "(config-file)="):
        assert markup not in body, markup
    assert 'config = {"index-url": "https://example.com/simple"}' in body  # a code fence stays as written


def test_myst_directives_nested_beyond_reason_are_read_without_exhausting_the_stack():
    depth = 1000  # beyond the interpreter's recursion limit
    text = "".join("`" * (depth - i + 3) + "{note}\n" for i in range(depth)) + "The innermost note.\n" + "".join(
        "`" * (i + 4) + "\n" for i in range(depth))
    body = clean_content(("# Deep\n\n" + text).encode(), "text/markdown", "file:///doc/deep.md").body
    assert "The innermost note." in body


def test_docbook_section_headings_stay_in_the_text_of_an_xhtml_page():
    # the Debian FAQ, Policy and the New Maintainers' Guide are DocBook XHTML: an XML declaration
    # (which made lxml refuse the page, so nothing of it was prepared) and every heading three bare
    # divs deep (which trafilatura dropped): the FAQ's questions and the field names were lost
    paragraph = "<p>" + "The kernel supports replacing files even while they are being used. " * 6 + "</p>"
    section = ('<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="q{n}"></a>'
               '8.{n}. How is question {n} answered?</h2></div></div></div>' + paragraph + "</div>")
    page = ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
            'Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">'
            '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter 8. Tools</title></head><body>'
            '<div class="chapter"><div class="titlepage"><div><div><h1 class="title">Chapter 8. Tools</h1>'
            "</div></div></div>" + "".join(section.format(n=n) for n in range(1, 4)) + "</div></body></html>")
    cleaned = clean_content(page.encode(), "text/html", "file:///faq/tools.html")
    lines = cleaned.body.splitlines()
    for n in range(1, 4):
        heading = f"8.{n}. How is question {n} answered?"
        assert heading in lines, cleaned.body
        following = next(line for line in lines[lines.index(heading) + 1:] if line)
        assert following.startswith("The kernel supports")  # it stands before its section
    assert cleaned.title == "Chapter 8. Tools"


def test_a_heading_that_is_mostly_a_link_to_itself_stays_in_the_text():
    # Python's library reference (Sphinx): "lib2to3 — 2to3's library" is an <h2> in its <section>, mostly
    # a link to itself; made a paragraph with its links (as a6ef60c made every heading) trafilatura dropped
    # it as a run of links
    prose = "<p>" + "The fixers read the parse tree and rewrite the nodes they recognise into Python 3 code. " * 4
    sections = "".join(
        f'<section id="module-{name}"><h2><a class="reference internal" href="#module-{name}" title="{name}: x">'
        f'<code class="xref py py-mod docutils literal notranslate"><span class="pre">{name}</span></code></a> — '
        f'{name}’s library<a class="headerlink" href="#module-{name}" title="Permalink to this heading">¶</a></h2>'
        + prose + "</p></section>" for name in ("lib2to3", "fixers", "refactor"))
    page = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8" /><meta name="generator" content="Docutils '
            '0.19: https://docutils.sourceforge.io/" /><title>2to3 — Automated Python 2 to 3 code translation'
            '</title></head><body><div class="body" role="main"><section id="to3-automated"><h1>2to3 — Automated '
            'Python 2 to 3 code translation</h1>' + prose + "</p>" + sections + "</section></div></body></html>")
    lines = clean_content(page.encode(), "text/html", "file:///usr/share/doc/python3.11/html/library/2to3.html"
                          ).body.splitlines()
    for name in ("lib2to3", "fixers", "refactor"):
        assert f"{name} — {name}’s library¶" in lines, lines


def test_headings_trafilatura_would_drop_before_a_list_stay_and_a_sidebars_headings_stay_out():
    # Debian Policy's README.html (XHTML written from Markdown), its start: each <h2> stands in <body> before
    # a list, where trafilatura dropped it (kept as a heading, as 7d6449c kept it, none of its 17 stayed);
    # Sphinx's sidebar (role="navigation") has a "Previous topic" heading that must not become prose
    mail = '<a href="mailto:debian-policy@lists.debian.org">debian-policy@lists.debian.org</a>'
    readme = (
        '<h1 id="debianpolicy">Debian Policy</h1>\n\n<h2 id="infrastructure">Infrastructure</h2>\n\n<ul>\n'
        '<li>Website:: <a href="https://www.debian.org/doc/devel-manuals#policy">https://www.debian.org/doc/devel-'
        f'manuals#policy</a></li>\n<li>Mailing list:: {mail}</li>\n<li>Source::\n<ul>\n<li><code>git clone '
        "https://salsa.debian.org/dbnpolicy/policy</code></li>\n<li>Browser: <a href=\"https://salsa.debian.org/"
        'dbnpolicy/policy">https://salsa.debian.org/dbnpolicy/policy</a></li>\n</ul></li>\n<li>Salsa group:: <a '
        'href="https://salsa.debian.org/dbnpolicy">https://salsa.debian.org/dbnpolicy</a> (exists\nto manage the '
        'repository but not otherwise used)</li>\n</ul>\n\n<h2 id="interactingwiththeteam">Interacting with the '
        f'team</h2>\n\n<ul>\n<li>Email contact:: {mail}</li>\n<li>Request tracker:: <a href="https://bugs.debian.'
        'org/src:debian-policy">https://bugs.debian.org/src:debian-policy</a></li>\n</ul>\n\n<p>Debian Policy uses '
        "a formal procedure and a set of BTS usertags to\nmanage the lifecycle of change proposals. For definitions "
        "of those\ntags and proposal states and information about what the next step is\nfor each phase, see "
        'Appendix 8 of the Debian Policy Manual, "Debian\nPolicy changes process."</p>\n\n<p>Given that most '
        "changes need to be discussed according to this\nprocess, we have merge requests on salsa turned off.  "
        "Please submit a\nbug to the BTS, either with patches attached, or a reference to a git\nbranch that is "
        'publically fetchable.  See "Seeking seconds for a\npatch", below, for more details.</p>\n')
    page = ('<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict'
            '.dtd">\n<html>\n<head>\n<title>Debian Policy</title>\n</head>\n<body>\n' + readme + "</body></html>")
    body = clean_content(page.encode(), "text/html", "file:///usr/share/doc/debian-policy/README.html").body
    lines = body.splitlines()
    assert "Infrastructure" in lines, body
    assert "Interacting with the team" in lines


def test_headings_in_a_pages_navigation_stay_headings_trafilatura_leaves_out():
    # Python's library/concurrent.html, a short page: its menu and sidebar (<nav>, role="navigation") head
    # their links "Previous topic", "Next topic", "This Page"; made paragraphs, trafilatura kept them as prose
    def topics(tag):
        return (f'<{tag} class="menu" role="navigation" aria-label="main navigation"><div><h4>Previous topic</h4>'
                '<p class="topless"><a href="multiprocessing.shared_memory.html" title="previous chapter"><code>'
                "multiprocessing.shared_memory</code> — Shared memory for direct access across processes</a></p></div>"
                '<div><h4>Next topic</h4><p class="topless"><a href="concurrent.futures.html" title="next chapter">'
                "<code>concurrent.futures</code> — Launching parallel tasks</a></p></div><div role=\"note\" aria-"
                'label="source link"><h3>This Page</h3><ul class="this-page-menu"><li><a href="../bugs.html">Report a '
                f"Bug</a></li><li><a href=\"https://github.com/python/cpython/blob/3.11/Doc/library/concurrent.rst\">"
                f"Show Source</a></li></ul></div></{tag}>")
    page = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8" /><title>The concurrent package</title>'
            '</head><body><div class="mobile-nav"><div class="menu-wrapper">' + topics("nav") + "</div></div>"
            '<div class="document"><div class="documentwrapper"><div class="bodywrapper"><div class="body" role="main">'
            '<section id="the-concurrent-package"><h1>The <code>concurrent</code> package<a class="headerlink" '
            'href="#the-concurrent-package">¶</a></h1><p>Currently, there is only one module in this package:</p>'
            '<ul class="simple"><li><p><a class="reference internal" href="concurrent.futures.html"><code>'
            "concurrent.futures</code></a> – Launching parallel tasks</p></li></ul></section></div></div></div>"
            '<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebar'
            'wrapper">' + topics("div") + "</div></div></div></body></html>")
    body = clean_content(page.encode(), "text/html", "file:///usr/share/doc/python3.11/html/library/concurrent.html"
                         ).body
    assert "Currently, there is only one module in this package:" in body
    for heading in ("Previous topic", "Next topic", "This Page"):
        assert heading not in body.splitlines(), body


def test_a_man_page_rendered_with_overstrikes_is_text_not_binary_data():
    """`man -Tutf8 chage > chage.txt` (and every catman page) sets each heading and option in bold or
    underline by overstriking, a backspace between two letters: chage's and flock's pages, 6-8 kB, were
    refused as "looks like binary data (over 5% of its first bytes are control characters)". A page
    written for the test, in that form; real control bytes are still counted."""
    def bold(word: str) -> str:
        return "".join(f"{c}\x08{c}" for c in word)

    def underline(word: str) -> str:
        return "".join(f"_\x08{c}" for c in word)

    raw = (f"QUUXCTL(1)                    User Commands                    QUUXCTL(1)\n\n{bold('NAME')}\n"
           f"       quuxctl - rotate the quux spool\n\n{bold('SYNOPSIS')}\n       {bold('quuxctl')} [{underline('options')}]\n\n"
           f"{bold('OPTIONS')}\n       {bold('-k')}, {bold('--keep')} {underline('COUNT')}\n"
           "           Keep COUNT old spools; the default is seven.\n").encode()
    assert raw.count(b"\x08") > len(raw) * 0.05
    from shared.formats.text import binary_reason
    assert binary_reason(raw) is None
    body = clean_content(raw, "text/plain", "file:///tmp/quuxctl.1.txt").body
    assert "quuxctl [options]" in body and "-k, --keep COUNT" in body and "\x08" not in body, body
    assert "the default is seven." in body
    assert binary_reason(b"\x01\x02\x03\x04 \x05\x06\x07\x0e" * 40) is not None
    assert binary_reason(b"ab\x08\x08cd\x01\x02" * 60) is not None  # backspaces not between two letters


@pytest.mark.parametrize(("deep", "line"), [
    ("".join("  " * i + f"- step {i} of the grommet procedure\n" for i in range(12)), 14),  # the tenth level
    (">" * 24 + " The grommet is fastened last.\n", 5),
], ids=["list", "quote"])
def test_markdown_nested_past_the_parsers_limit_is_refused_by_name_not_cut_short(deep, line):
    """markdown-it stops reading at its block nesting limit (20: a list ten levels deep, 20 quote marks) and
    skips what lies below and, for a list, the rest of the file without a word: a 9 MB file of nested list
    items was indexed as its first nine lines, one of 20 quote marks as "no main text". It is refused by
    name, as HTML nested past its parser is; nesting up to the limit reads whole."""
    text = f"# Grommets\n\nThe grommet comes first.\n\n{deep}\nThe closing paragraph names the washer.\n"
    with pytest.raises(InvalidInput, match=rf"nests its lists or quotes more than 20 levels deep \(line {line}\)"):
        clean_content(text.encode(), "text/markdown", "file:///grommets.md")
    shallow = "".join("  " * i + f"- step {i}\n" for i in range(9)) + ">" * 19 + " quoted deep\n"
    body = clean_content(f"{shallow}\nThe closing paragraph names the washer.\n".encode(), "text/markdown",
                         "file:///grommets.md").body
    assert "step 8" in body and "quoted deep" in body and body.endswith("names the washer."), body
