"""The registry of document formats and what its readers yield: passages, positions, labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.indexer.chunking import chunk_document
from services.synthesizer.handler import cited_position
from shared.contract.errors import InvalidInput
from shared.formats import registry
from shared.formats.passages import (
    Passage,
    Reading,
    lay_out,
    page_link,
    position_label,
    positions_between,
)
from shared.formats.pdf import read_pdf
from shared.formats.registry import Limits, by_media_type, by_suffix
from tests.support import cpu_ratio
from tests.unit.loop_fakes import HashingEmbedder

pytestmark = pytest.mark.unit

PDF = Path(__file__).resolve().parents[1] / "data" / "formats" / "fontconfig-user.pdf"


def test_a_suffix_and_a_media_type_name_the_same_kind():
    for kind in registry.KINDS:
        for suffix in kind.suffixes:
            assert by_suffix(suffix.upper()) is kind
        for media in kind.media_types:
            assert by_media_type(f"{media}; charset=utf-8") is kind
    assert by_suffix(".png") is None and by_media_type("image/png") is None
    assert by_media_type("text/x-log").name == "plain text"  # any other text/* reads as plain text
    assert by_suffix(".doc").refused and "save it as .docx" in by_suffix(".doc").refused
    # every reader named exists
    for kind in registry.readable():
        assert callable(kind.load())


def test_passages_are_laid_out_with_where_each_starts():
    passages = [Passage("Intro", "heading", {"page": 1}), Passage("Body text.", "paragraph", {"page": 1}),
                Passage("a: 1", "row", {"page": 2}), Passage("a: 2", "row", {"page": 2}),
                Passage("Next page.", "paragraph", {"page": 3})]
    text, marks = lay_out(passages, start=10)
    assert text == "Intro\n\nBody text.\n\na: 1\na: 2\n\nNext page."
    assert marks == [(10, {"page": 1}), (10 + text.index("a: 1"), {"page": 2}),
                     (10 + text.index("Next"), {"page": 3})]
    start = 10 + text.index("a: 2")
    assert positions_between(marks, start, start + 20) == [{"page": 2}, {"page": 3}]
    assert position_label(positions_between(marks, start, start + 20)) == "pp. 2–3"


@pytest.mark.parametrize(("positions", "label"), [
    ([{"page": 12}], "p. 12"), ([{"page": 3}, {"page": 5}], "pp. 3, 5"), ([{"slide": 2}], "slide 2"),
    ([{"sheet": "Sales", "row": 4}, {"sheet": "Sales", "row": 5}], "Sales, rows 4–5"),
    ([{"sheet": "", "row": 7}], "row 7"), ([{"chapter": 2}], "chapter 2"), ([], ""),
])
def test_position_labels(positions, label):
    assert position_label(positions) == label


def test_a_pdf_link_opens_at_the_cited_page_and_a_citation_joins_its_chunks_pages():
    assert page_link("https://x.example/a.pdf", "pp. 12–13") == "https://x.example/a.pdf#page=12"
    assert page_link("https://x.example/a.html", "") == "https://x.example/a.html"
    assert page_link("https://x.example/deck.pptx", "slide 3") == "https://x.example/deck.pptx"
    assert cited_position(["p. 12", "pp. 15–16", "p. 12"]) == "pp. 12, 15"
    assert cited_position(["slide 2", "slide 4"]) == "slide 2; slide 4"


def test_a_pdf_of_one_line_a_page_keeps_its_lines():
    # every page's only line recurs, digits aside, so it read as a running header of every page, and the
    # whole document was refused as "no main text after cleaning" (newcomer11's generated 5-page PDF)
    from tests.hostile.bad_files import pdf, text_page
    raw = pdf([text_page(f"Step {n}: turn the valve {n * 3} degrees clockwise.") for n in range(1, 6)])
    reading = read_pdf(raw, "application/pdf", "", Limits(ocr=False))
    texts = [p.text for p in reading.passages]
    assert any("Step 4: turn the valve 12 degrees" in t for t in texts), texts
    # a header over a body is still a running header
    bodies = ["Close the inlet first.", "Turn the valve clockwise.", "Wait for the gauge to settle.",
              "Open the outlet slowly.", "Log the pressure reading."]
    raw = pdf([text_page("Valve manual, release 2", body) for body in bodies])
    text = " ".join(p.text for p in read_pdf(raw, "application/pdf", "", Limits(ocr=False)).passages)
    assert "Valve manual" not in text and "Open the outlet slowly." in text


_TEXINFO_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>The Widget API (libwidget manual)</title>
<link href="Next-Thing.html" rel="next" title="Next Thing"></head><body>
<div class="section-level-extent" id="The-Widget-API">
<div class="nav-panel"><p>Next: <a href="Next-Thing.html" accesskey="n" rel="next">Next Thing</a>, Previous: <a href="Prev.html" accesskey="p" rel="prev">Prev</a>, Up: <a href="Using.html" accesskey="u" rel="up">Using libwidget</a></p></div>
<hr><h4 class="section">3.1 The Widget API</h4>
<p>libwidget can build a widget at run time from a recipe of parts, which is useful for plug-ins and for tests.</p>
<p>Widgets need a buffer of their own on systems that forbid writing to code pages. Two functions manage it:</p>
<dl class="def"><dt id="index-a"><span class="category">Function: </span><span><strong>void</strong> <em>*widget_alloc (size_t <var>size</var>, void **<var>handle</var>)</em><a href="#index-a" class="copiable-anchor"> &para;</a></span></dt>
<dd><p>Reserve a buffer of <var>size</var> bytes. This returns the buffer's writable address and stores its handle in *<var>handle</var>.</p></dd></dl>
<dl class="def"><dt id="index-b"><span class="category">Function: </span><span><strong>void</strong> <em>widget_release (void *<var>buffer</var>)</em><a href="#index-b" class="copiable-anchor"> &para;</a></span></dt>
<dd><p>Give back a buffer reserved with <code>widget_alloc</code>. The argument is the writable address.</p></dd></dl>
<p>Then build the widget:</p>
<dl class="def"><dt id="index-c"><span class="category">Function: </span><span><strong>int</strong> <em>widget_build (void *<var>buffer</var>, int <var>parts</var>, void *<var>spare</var>)</em><a href="#index-c" class="copiable-anchor"> &para;</a></span></dt>
<dd><p>Build a widget. Its arguments are:</p>
<dl compact="compact">
<dt><span><var>buffer</var></span></dt><dd><p>The writable address that <code>widget_alloc</code> returned.</p></dd>
<dt><span><var>parts</var></span></dt><dd><p>How many parts the recipe lists.</p></dd>
<dt><span><var>spare</var></span></dt><dd><p>The handle stored by <code>widget_alloc</code>, unused here.</p></dd>
</dl>
<p><code>widget_build</code> returns 0 when the widget is built and a negative number otherwise.</p></dd></dl>
<p>After a build, the handle can be called as a function.</p>
<hr><div class="nav-panel"><p>Next: <a href="Next-Thing.html" accesskey="n" rel="next">Next Thing</a>, Up: <a href="Using.html">Using libwidget</a></p></div>
</div></body></html>"""


def test_a_page_whose_definition_terms_the_extractor_drops_keeps_them():
    # A texinfo page (makeinfo's section div, nav panels, <dl class="def">): trafilatura's default extraction
    # kept every <dd> and dropped every <dt>, the function signatures and parameter names, so a parameter's
    # description stood alone ("The writable address that widget_alloc returned.") and read as a statement
    # about the function (newcomer11, libffi's The-Closure-API.html). Its recall mode keeps the terms.
    from shared.formats.text import extract_html

    lines = extract_html(_TEXINFO_PAGE, "").body.splitlines()
    assert "- Function: void widget_release (void *buffer) \u00b6" in lines, lines
    at = lines.index("- spare")
    assert lines[at + 1] == "- The handle stored by widget_alloc, unused here."
    assert not any("Next Thing" in line for line in lines)  # the navigation panels stay out


def test_a_real_pdf_reads_in_order_without_page_furniture_and_every_passage_knows_its_page():
    reading = read_pdf(PDF.read_bytes(), "application/pdf", PDF.as_uri(), Limits())
    pages = {p.position["page"] for p in reading.passages}
    # page 14 holds nothing but its running header and number
    assert pages == set(range(1, 16)) - {14} and reading.unread == 0
    text, _ = lay_out(reading.passages)
    assert "fonts-conf" not in text  # the running header at the top of every page
    # PDFium's hyphen at a line end (U+0002) is gone, the word whole again
    assert "\x02" not in text and "customization and application access" in text
    # the page numbers printed at each page's foot are not text
    for passage in reading.passages:
        assert not passage.text.strip().isdigit(), passage
    first = [p.text for p in reading.passages if p.position["page"] == 1]
    assert first[:2] == ["Name", "fonts.conf — Font configuration files"]
    # no metadata title: what its "Name" heading heads names it, as a man page's NAME line (was "": the file's name)
    assert reading.title == "fonts.conf — Font configuration files"
    # a file list stays one path a line (rows), not one wrapped paragraph
    assert "/etc/fonts/fonts.conf\n/etc/fonts/fonts.dtd" in text


def test_a_pdf_s_first_heading_is_its_title_with_the_line_it_wraps_onto():
    from shared.formats.pdf import _title

    passages = [Passage("Everything the zap tool keeps but", "heading", {"page": 1}),
                Passage("forgets", "row", {"page": 1}), Passage("Ann Writer", "heading", {"page": 1})]
    reading = Reading(passages=passages)

    class Untitled:
        def get_metadata_value(self, key):
            return ""

    assert _title(Untitled(), reading) == "Everything the zap tool keeps but forgets"


def test_a_pdf_without_a_title_or_a_heading_is_titled_by_its_first_line_when_it_reads_as_one():
    """Not by its file's name: shared-mime-info's spec, whose first line "Shared MIME-info Database" recurs as
    every page's running header (so no passage holds it), was titled "mime-spec" (found by newcomer8)."""
    from shared.formats.pdf import _title

    class Untitled:
        def get_metadata_value(self, key):
            return ""

    reading = Reading(passages=[Passage("Lantern Guild (https://lantern.example)", "row", {"page": 1}),
                                Passage("Ann Writer", "heading", {"page": 1})])
    assert _title(Untitled(), reading, ["", "  Lantern Wick   Registry ", "Lantern Guild (https://lantern.example)"]) == (
        "Lantern Wick Registry")
    for junk in ("Page 1 of 9", "iv", "Chapter 1", "2 Lantern Wick Registry", "The wick burns for an hour.",
                 "Lantern Wick Registry " * 5, "2026-11-29"):
        assert _title(Untitled(), reading, [junk, "Lantern Wick Registry"]) == "", junk
    assert _title(Untitled(), reading) == ""  # no lines given: the file's name serves


def test_a_pdf_cut_at_the_page_bound_says_how_many_pages_were_not_read():
    reading = read_pdf(PDF.read_bytes(), "application/pdf", "", Limits(max_pages=4))
    assert {p.position["page"] for p in reading.passages} == {1, 2, 3, 4}
    assert reading.unread == 11 and "RAGBUS_MAX_PAGES" in reading.unread_reason


def test_bytes_that_are_no_pdf_are_refused_with_the_reason():
    with pytest.raises(InvalidInput, match="cannot be opened"):
        read_pdf(b"%PDF-1.7\nnot really", "application/pdf", "", Limits())


def test_every_chunk_knows_the_pages_it_covers():
    reading = read_pdf(PDF.read_bytes(), "application/pdf", "", Limits())
    header = "Title: fonts.conf\nPublished: unknown\nSource: file:///f.pdf\n\n"
    body, marks = lay_out(reading.passages, start=len(header))
    chunks = chunk_document(header + body, document_id="d", content_hash="h", embedder=HashingEmbedder(),
                            marks=marks)
    assert chunks and all(c.position.startswith(("p. ", "pp. ")) for c in chunks)
    assert chunks[0].position == "p. 1" and chunks[-1].position.endswith("15")
    pages = [int(c.position.split()[-1].split("–")[-1]) for c in chunks]
    assert pages == sorted(pages)  # reading order kept, page by page


def _scanned_pdf() -> bytes:
    """Page 1 of the fontconfig manual as a scan: its rendering at 150 dpi, the only thing on an
    image-only page (no text layer)."""
    import io

    import pypdfium2 as pdfium

    source = pdfium.PdfDocument(PDF.read_bytes())
    width, height = source[0].get_size()
    bitmap = source[0].render(scale=150 / 72, grayscale=True)
    scan = pdfium.PdfDocument.new()
    page = scan.new_page(width, height)
    image = pdfium.PdfImage.new(scan)
    image.set_bitmap(bitmap)
    image.set_matrix(pdfium.PdfMatrix().scale(width, height))
    page.insert_obj(image)
    page.gen_content()
    buffer = io.BytesIO()
    scan.save(buffer)
    return buffer.getvalue()


def test_a_scanned_page_is_read_by_ocr():
    import shutil

    if shutil.which("tesseract") is None:
        pytest.skip("Debian's tesseract-ocr is not installed (.ci/run installs it)")
    reading = read_pdf(_scanned_pdf(), "application/pdf", "", Limits())
    text, _ = lay_out(reading.passages)
    assert reading.unread == 0 and {p.position["page"] for p in reading.passages} == {1}
    assert "Fontconfig is a library designed to provide" in " ".join(text.split()), text[:500]


def test_without_an_ocr_engine_a_scanned_page_is_skipped_and_counted(monkeypatch):
    from shared.formats import pdf

    monkeypatch.setattr(pdf.shutil, "which", lambda name: None)
    reading = read_pdf(_scanned_pdf(), "application/pdf", "", Limits())
    assert reading.passages == [] and reading.unread == 1
    assert "no OCR engine installed" in reading.unread_reason and "tesseract-ocr" in reading.unread_reason
    off = read_pdf(_scanned_pdf(), "application/pdf", "", Limits(ocr=False))
    assert off.unread == 1 and "RAGBUS_OCR" in off.unread_reason


HWCLOCK = (  # util-linux's hwclock.txt as Debian ships it (/usr/share/doc/util-linux), wrapped at 72
    "Hwclock is a program that runs under Linux and sets and queries the\n"
    "Hardware Clock, which is often called the Real Time Clock, RTC, or CMOS\n"
    "clock.  Sometimes, you have to install hwclock in a different way.\n"
)
RULES = (  # debian-policy's upgrading-checklist: a heading, its underline, a cut sentence
    "Rules-Requires-Root\n===================\n\n"
    'If "no", then "debian/rules binary" will not require root at all (not even\n'
    "[1]), and dpkg-buildpackage will not run it under fakeroot or similar.\n\n"
    "  * first item of a list\n  * second item\n"
)


def test_a_text_file_s_wrapped_lines_are_joined_and_its_title_is_its_heading_or_none():
    from shared.formats.text import extract_plain

    wrapped = extract_plain(HWCLOCK)
    assert wrapped.title == ""  # a wrapped first line is no title: the file's name serves
    assert wrapped.body.startswith("Hwclock is a program that runs under Linux and sets and queries the Hardware "
                                   "Clock, which is often called the Real Time Clock, RTC, or CMOS clock.")
    rules = extract_plain(RULES)
    assert rules.title == "Rules-Requires-Root"
    assert ('If "no", then "debian/rules binary" will not require root at all (not even [1]), and '
            "dpkg-buildpackage will not run it under fakeroot or similar.") in rules.body
    assert "* first item of a list\n* second item" in rules.body  # list items stay lines


def test_a_rendered_man_page_s_title_is_its_name_line_not_its_header():
    from shared.formats.text import extract_plain

    # as `MANWIDTH=80 man -l zap.1 | col -bx` renders a page written for this test: the header is furniture
    page = ("ZAP(1)                      General Commands Manual                     ZAP(1)\n\n"
            "NAME\n       zap, unzap - squeeze or expand files and keep their\n       names\n\n"
            "SYNOPSIS\n       zap [ -9Nn ] [ name ...  ]\n\n"
            "DESCRIPTION\n       Zap reduces the size of the named files.\n\n"
            "                                  local                            ZAP(1)\n")
    assert extract_plain(page).title == "zap, unzap - squeeze or expand files and keep their names"
    assert extract_plain(page.replace("NAME", "NOM")).title.startswith("zap, unzap - ")  # any language's heading
    assert extract_plain("ZAP(1) and more\n\nNAME\n  zap\n").title == "ZAP(1) and more"  # no header: as before


def test_joining_wrapped_lines_costs_in_proportion_to_the_text():
    """Each wrapped line was joined onto the whole paragraph so far, which was copied and searched again:
    Boost's 2 MB copyright files (license texts joined into 136 kB lines) took 7-9 s to clean each. A
    paragraph eight times longer must cost about eight times as much, not sixty-four (a ratio within one
    run, the least of five tries each; the margin is wide, the two costs far apart). Measured in the thread's
    CPU time: in wall time a loaded machine that took the core away mid-try (load 18 on two cores here) put
    the ratio at 20-31 for the same code, past the bound."""
    from shared.formats.text import join_wrapped

    line = "Permission is hereby granted, free of charge, to any person obtaining a copy of this\n"

    def check(lines: int, joined: str) -> None:
        assert joined.count("\n") == 3  # the title, a blank line, one paragraph: every wrapped line joined

    assert cpu_ratio(lambda lines: join_wrapped("Copyright\n\n" + line * lines), 300, 2400, tries=5, check=check) < 24


GZIP_MAN = (  # `MANWIDTH=80 man -l gzip.1.gz | col -bx` (gzip 1.12): groff breaks a word with U+2010 HYPHEN
    "     By default, gzip keeps the original file name and timestamp in the com‐\n"
    "     pressed file. These are used when decompressing the file with the -N op‐\n"
    "     tion. This is useful when the compressed file name was truncated or when\n"
    "     the timestamp was not preserved after a file transfer. Use -f to force multi‐\n"
    "     ply-linked files to be compressed, as every self-contained archive tool\n"
    "     does for a well-known reason.\n"
)


def test_a_word_a_man_page_breaks_at_a_line_end_is_whole_again():
    """groff sets the hyphen of a word it breaks at a line's end as U+2010 (a hyphen the source wrote is
    ASCII in Debian's man pages): "the com‐ pressed file" was indexed and quoted so, and a search for
    "compressed" missed it."""
    from shared.formats.text import extract_plain

    body = extract_plain(GZIP_MAN).body
    assert "in the compressed file. These are used" in body, body
    assert "with the -N option." in body and "multiply-linked" in body, body
    assert "self-contained" in body and "well-known" in body and "\u2010" not in body, body


BSD_OPTIONS = (  # an mdoc page as `man -P cat` renders it: each option's text starts on its tag's line, hung
    "     The options are as follows:\n"
    "\n"
    "     -G      Grind the beans of every default roast (light, medium, and\n"
    "             dark) if they are not ground already.  The grounds are kept in\n"
    "             the default hopper, with the default fineness for the roast.\n"
    "\n"
    "     -z coarse   Grind the beans coarsely, for the press pot and the cold brew.\n"
    "     -z fine     Grind the beans finely [for espresso]. When the grinder was first\n"
    "                 sold, a fine grind took the whole morning of the shop's owner.\n"
    "\n"
    "     -w grams\n"
    "             Specifies the weight of the beans to grind for each cup that\n"
    "             the machine pours; the default is twelve grams of beans.\n"
    "\n"
    "     SIGHUP       P1990      Term    Hangup detected on controlling terminal\n"
    "                                     or death of controlling process\n"
)


def test_a_hung_option_s_text_runs_on_past_its_tag_s_line():
    """mdoc's hanging indent: "-A      Generate host keys of all default key types (rsa, ecdsa, and" goes on at the
    tag's text column ("ed25519) if ..."), deeper than the tag; the line was kept apart as a deeper-indented
    block, and ssh-keygen's answer quoted "... key types (rsa, ecdsa, and" without the third."""
    from shared.formats.text import extract_plain

    body = extract_plain(BSD_OPTIONS).body
    assert "(light, medium, and dark) if they are not ground already." in body, body
    assert "-w grams\nSpecifies the weight" in body, body  # a tag alone on its line stays a term
    assert "and the cold brew.\n-z fine Grind the beans finely [for espresso]. When the grinder" in body, body
    assert "Hangup detected on controlling terminal\nor death" in body, body  # a table's wrapped cell is no hang


def test_an_option_s_other_spellings_in_definition_terms_are_read_apart():
    # texinfo writes an option and its long form as two <dt> of one entry (@item/@itemx); the extractor ran
    # them together, "-o file--output=file" and "-a--append" (newcomer12, GNU time's manual)
    from shared.formats.text import extract_html

    page = ("<html><head><title>Saving the report</title></head><body><div><h2>Saving the report</h2>"
            "<p>The tool prints its report on the terminal unless one of these options names a file for it.</p>"
            "<dl compact=\"compact\">"
            "<dt><span><code>-w <var>path</var></code></span></dt><dt><span><code>--write=<var>path</var></code>"
            "</span></dt><dd><p>Write the report to path, replacing what the file held before.</p></dd>"
            "<dt><span><code>-k</code></span></dt><dt><span><code>--keep</code></span></dt>"
            "<dd><p>Add the report at the end of the file instead of replacing it.</p></dd>"
            "<dt><span><code>-q</code></span></dt><dd><p>Print nothing but errors.</p></dd>"
            "</dl></div></body></html>")
    lines = extract_html(page, "").body.splitlines()
    # set apart by a space, as gzip(1) writes "-c --stdout --to-stdout": the reader takes such a line for the
    # term its description defines ("-a --append: Append ..."); after "-a, " it did not, and the option went unnamed
    assert "-w path --write=path" in lines and "-k --keep" in lines and "-q" in lines, lines


def test_a_word_broken_at_a_pdf_line_end_with_groff_s_hyphen_is_whole_again():
    # a man page printed to PDF keeps groff's U+2010 where it broke a word; the PDF reader joined only an
    # ASCII hyphen, so "op\u2010 tions" and "transpar\u2010 ently" were indexed and quoted (newcomer12, gzip(1) as PDF)
    from shared.formats.pdf import _paragraphs

    lines = ["The obsolescent environment variable can hold a set of default op\u2010",
             "tions for the tool, read before the command line is."]
    assert _paragraphs(lines, 70.0)[0][0] == ("The obsolescent environment variable can hold a set of default "
                                              "options for the tool, read before the command line is.")


def test_a_box_drawn_table_in_plain_text_is_read_as_labelled_rows():
    # text browsers draw a page's tables with box characters (X.Org's specifications as .txt): a cell's value
    # was read apart from its column's name, so "what is the default timeout" found "│timeout │CARD32 │60 │"
    # with nothing saying 60 is the default (newcomer12, xextproto's security.txt)
    from shared.formats.text import extract_plain

    text = ("The lease a badge grants is set when it is made:\n\n"
            "┌──────────┬─────────────┬────────┐\n"
            "│Attribute │Type         │Default │\n"
            "├──────────┼─────────────┼────────┤\n"
            "│lifetime  │whole minutes│45      │\n"
            "├──────────┼─────────────┼────────┤\n"
            "│holder    │{Guest,      │        │\n"
            "├──────────┼─────────────┼────────┤\n"
            "│          │Staff}       │Guest   │\n"
            "└──────────┴─────────────┴────────┘\n\n"
            "A badge past its lifetime opens no door.\n")
    lines = extract_plain(text).body.splitlines()
    assert "- Attribute: lifetime; Type: whole minutes; Default: 45" in lines, lines
    assert "- Attribute: holder; Type: {Guest, Staff}; Default: Guest" in lines, lines
    assert "A badge past its lifetime opens no door." in lines and not any("│" in line for line in lines), lines


def test_an_xhtml_document_type_with_an_internal_subset_leaves_no_markup_in_the_text():
    # the HTML parser ended "<!DOCTYPE html [<!ENTITY ...>]>" at the first ">" and read "]>" as the page's first
    # words (newcomer12, an EPUB chapter declaring an entity); the entity is resolved neither way
    from shared.formats.text import extract_html

    page = ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html [<!ENTITY sys SYSTEM "file:///etc/hostname">]>\n'
            '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Ferns</title></head><body>'
            "<p>The fern uncurls its fronds in spring, one coil at a time. &sys;</p></body></html>")
    body = extract_html(page, "").body
    assert "]>" not in body and body.startswith("The fern uncurls its fronds in spring"), body


def test_a_box_drawn_table_without_lines_between_rows_reads_each_line_as_a_row():
    # tabulate's simple_outline, rich's box.SQUARE and psql draw no line between body rows: every line
    # between the header's separator and └─┘ was joined as one wrapped row ("item: spam eggs; qty: 42 451")
    from shared.formats.text import box_tables

    text = ("┌──────┬─────┐\n"
            "│ item │ qty │\n"
            "├──────┼─────┤\n"
            "│ spam │ 42  │\n"
            "│ eggs │ 451 │\n"
            "│      │ box │\n"
            "└──────┴─────┘")
    assert box_tables(text).splitlines() == ["- item: spam; qty: 42", "- item: eggs; qty: 451 box"]


def test_a_box_drawn_table_whose_cell_count_changes_stays_as_it_is():
    # a line with a cell more replaced the rows gathered before it unsaved: only "- a: 5; b: 6" was left
    from shared.formats.text import box_tables

    text = ("Before.\n"
            "┌───┬───┐\n"
            "│ a │ b │\n"
            "├───┼───┤\n"
            "│ 1 │ 2 │\n"
            "│ x│y │ 3 │\n"
            "│ 5 │ 6 │\n"
            "└───┴───┘\n"
            "After.")
    assert box_tables(text) == text


def test_a_footer_spanning_a_box_drawn_table_is_not_labelled_with_the_first_column():
    from shared.formats.text import box_tables

    text = ("┌────────┬─────┐\n"
            "│ a      │ b   │\n"
            "├────────┼─────┤\n"
            "│ pears  │ 3   │\n"
            "├────────┴─────┤\n"
            "│ total 3      │\n"
            "└──────────────┘")
    assert box_tables(text).splitlines() == ["- a: pears; b: 3", "- total 3"]


def test_a_box_drawn_table_with_a_line_between_every_row_joins_a_row_s_wrapped_lines():
    # X.Org's specifications as .txt: a separator between every row, so a group's lines are one row
    from shared.formats.text import box_tables

    text = ("┌─────────┬──────┐\n"
            "│Name     │Bits  │\n"
            "├─────────┼──────┤\n"
            "│Pointer  │8     │\n"
            "├─────────┼──────┤\n"
            "│Keyboard │16    │\n"
            "│Bell     │      │\n"
            "├─────────┼──────┤\n"
            "│Screen   │32    │\n"
            "└─────────┴──────┘")
    assert box_tables(text).splitlines() == ["- Name: Pointer; Bits: 8", "- Name: Keyboard Bell; Bits: 16",
                                             "- Name: Screen; Bits: 32"]


def test_a_box_drawn_table_with_sections_of_several_rows_keeps_each_line_a_row():
    # three or more separator-parted sections were read as "a separator between every row", so each
    # section's lines were joined as one row ("item: spam eggs; qty: 1 2")
    from shared.formats.text import box_tables

    text = ("┌──────┬─────┐\n"
            "│ item │ qty │\n"
            "├──────┼─────┤\n"
            "│ spam │ 1   │\n"
            "│ eggs │ 2   │\n"
            "├──────┼─────┤\n"
            "│ ham  │ 3   │\n"
            "│ jam  │ 4   │\n"
            "├──────┼─────┤\n"
            "│ tea  │ 5   │\n"
            "│ rum  │ 6   │\n"
            "└──────┴─────┘")
    assert box_tables(text).splitlines() == ["- item: spam; qty: 1", "- item: eggs; qty: 2", "- item: ham; qty: 3",
                                             "- item: jam; qty: 4", "- item: tea; qty: 5", "- item: rum; qty: 6"]


def test_a_two_row_box_drawn_table_with_a_line_between_rows_joins_a_wrapped_cell():
    # with fewer than three groups each line was a row: the wrapped "r" stood alone as "- a: r"
    from shared.formats.text import box_tables

    text = ("┌──────┬──────────┐\n"
            "│ a    │ b        │\n"
            "├──────┼──────────┤\n"
            "│ p    │ long val │\n"
            "│      │ ue r     │\n"
            "└──────┴──────────┘")
    assert box_tables(text).splitlines() == ["- a: p; b: long val ue r"]
    text = ("┌─────────┬──────┐\n"
            "│ a       │ b    │\n"
            "├─────────┼──────┤\n"
            "│ Keyboard│ 16   │\n"
            "│ Bell    │      │\n"
            "└─────────┴──────┘")
    assert box_tables(text).splitlines() == ["- a: Keyboard Bell; b: 16"]


def test_a_box_drawn_row_with_an_empty_cell_is_a_row_of_its_own():
    # sqlite3's .mode box writes a NULL as an empty cell: the line was read as the wrapped end of the full
    # row above ("id: 1 2; name: ann bob; mail: a@x"); a line whose first cell alone is filled still wraps
    from shared.formats.text import box_tables

    text = ("┌────┬──────┬──────┐\n"
            "│ id │ name │ mail │\n"
            "├────┼──────┼──────┤\n"
            "│ 1  │ ann  │ a@x  │\n"
            "│ 2  │ bob  │      │\n"
            "│ 3  │      │ c@x  │\n"
            "└────┴──────┴──────┘")
    assert box_tables(text).splitlines() == ["- id: 1; name: ann; mail: a@x", "- id: 2; name: bob",
                                             "- id: 3; mail: c@x"]


def test_a_blank_spacer_line_in_a_box_drawn_table_is_no_row():
    # a spacer line below the header was written as an empty item, "- "
    from shared.formats.text import box_tables

    text = ("┌──────┬─────┐\n"
            "│ item │ qty │\n"
            "├──────┼─────┤\n"
            "│      │     │\n"
            "│ spam │ 1   │\n"
            "│ eggs │ 2   │\n"
            "└──────┴─────┘")
    assert box_tables(text).splitlines() == ["- item: spam; qty: 1", "- item: eggs; qty: 2"]


def test_a_gnu_info_file_reads_as_its_nodes_text_without_navigation():
    """/usr/share/info's manuals (sed.info.gz) were skipped as no document type; read as plain text their
    node lines, menus, index and tag table (DEL bytes) would be passages of their own."""
    info = ("This is frob.info, produced by makeinfo version 7.1 from frob.texi.\n\nINFO-DIR-SECTION Tools\n"
            "\x1f\nFile: frob.info,  Node: Top,  Next: Options,  Up: (dir)\n\nFrob\n****\n\n"
            "This manual documents version 2.4 of Frob.\n\n* Menu:\n\n* Options::   Options\n* Index::     Index\n\n"
            "\x1f\nFile: frob.info,  Node: Options,  Prev: Top,  Up: Top\n\n1 Options\n*********\n\n"
            "‘-s DIR’\n‘--spool=DIR’\n     Keep the spool in DIR.  The default is\n     ‘/var/spool/frob’.\n\n"
            "\x1f\nFile: frob.info,  Node: Index,  Prev: Options,  Up: Top\n\nIndex\n*****\n\n\x00\x08[index\x00\x08]\n"
            "* Menu:\n\n* spool:                 Options.             (line 6)\n\n"
            "\x1f\nTag Table:\nNode: Top\x7f120\nNode: Options\x7f400\n\x1f\nEnd Tag Table\n\n"
            "\x1f\nLocal Variables:\ncoding: utf-8\nEnd:\n")
    kind = by_suffix(".info")
    reading = kind.load()(info.encode(), kind.media_type, "file:///frob.info", Limits())
    text = reading.passages[0].text
    assert reading.title == "Frob"
    assert "This manual documents version 2.4 of Frob." in text
    assert "‘-s DIR’, ‘--spool=DIR’\nKeep the spool in DIR. The default is ‘/var/spool/frob’." in text
    assert not any(word in text for word in ("File: frob.info", "Menu", "(line 6)", "Tag Table", "Local Variables",
                                             "INFO-DIR", "\x7f", "\x1f", "\x00"))
    # an index part opens with Info's ^@^H[index^@^H] cookies: markup, not binary data
    from shared.formats.text import binary_reason

    assert binary_reason(info.split("\x1f")[3].encode()) is None and binary_reason(b"ab\x00cd") is not None
    # a manual split in parts: frob.info-2.gz is one (it was sniffed as plain text), frob.info their index
    from shared.ingest.files import file_kind

    assert file_kind(Path("/nowhere/frob.info-2.gz")) == (kind, True)
    # known as a part by the registry, where every way in (a bucket's object, a feed's link) asks, not by file_kind only
    assert by_suffix(".info-2") is kind and by_suffix(".INFO-12") is kind
    assert by_suffix(".txt-2") is None and by_suffix(".info-") is None and by_suffix(".info-1234") is None
    index = "This is frob.info.\n\x1f\nIndirect:\nfrob.info-1: 120\nfrob.info-2: 4000\n\x1f\nTag Table:\n(Indirect)\n"
    with pytest.raises(InvalidInput, match=r"only lists the parts its manual is split in \(frob.info-1, frob.info-2\)"):
        kind.load()(index.encode(), kind.media_type, "file:///frob.info", Limits())


def test_a_long_gnu_info_cookie_is_markup_to_the_binary_check_as_to_the_reader():
    # the binary check took a cookie of at most 300 characters, the reader one of any length (review of 2300df8): an
    # image's cookie holding its text picture refused the part as binary data that the reader would have read
    from shared.formats.text import binary_reason

    picture = "+-------+\n| frob  |--> spool\n+-------+\n" * 10
    node = ("File: frob.info,  Node: Spool,  Prev: Top,  Up: Top\n\n2 Spool\n*******\n\nThe spool looks so:\n\n"
            f'\x00\x08[image src="spool.png" text="{picture}"\x00\x08]\n\nFrob keeps one file per message.\n')
    assert len(picture) > 300 and binary_reason(node.encode()) is None
    kind = by_suffix(".info")
    text = kind.load()(("\x1f\n" + node).encode(), kind.media_type, "file:///frob.info", Limits()).passages[0].text
    assert "Frob keeps one file per message." in text and "spool.png" not in text


def test_a_page_opening_with_an_xml_declaration_and_no_head_keeps_its_text():
    # trafilatura given the declaration kept none of such a page ("has no main text after cleaning", newcomer16)
    from shared.formats.text import extract_html

    page = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body>'
            "<p>The lantern runs for nine hours on one charge of its cell.</p></body></html>")
    assert "nine hours" in extract_html(page, "file:///lantern.xhtml").body
