"""A manual's links to its neighbouring pages (HTML's rel="next"/"prev"/"up") are navigation, not
content: GNU Texinfo heads every node page of a manual (libffi's, bc's, nettle's in /usr/share/doc;
every manual under gnu.org/software/*/manual/html_node) with "Next: X, Previous: Y, Up: Z [Index]",
which trafilatura kept as the page's first line and the reader then quoted as an answer ("What is a
closure in libffi?" answered "Next: Thread Safety, Previous: The Closure API, Up: Using libffi [Index]").
The page's foot repeats the line with links that carry no rel: they go where the page's <head>
declares its neighbours (<link rel="next" href=...>). The snippets are cut from libffi 3.4's
Closure-Example.html (makeinfo 6.8) and a makeinfo 4 page."""

from __future__ import annotations

import pytest

from shared.formats.text import extract_html

pytestmark = pytest.mark.unit

PROSE = ("<p>A trivial example that creates a new <code>puts</code> by binding <code>fputs</code> with "
         "<code>stdout</code>. The closure is allocated with ffi_closure_alloc and prepared with "
         "ffi_prep_closure_loc before the bound function is called through it.</p>")

TEXINFO_6 = (
    '<html><head><title>Closure Example (libffi: the portable foreign function interface library)</title>'
    '<link href="Index.html" rel="index" title="Index"><link href="Using-libffi.html" rel="up" title="Using libffi">'
    '<link href="Thread-Safety.html" rel="next" title="Thread Safety">'
    '<link href="The-Closure-API.html" rel="prev" title="The Closure API"></head><body lang="en">'
    '<div class="section" id="Closure-Example"><div class="header"><p>'
    'Next: <a href="Thread-Safety.html" accesskey="n" rel="next">Thread Safety</a>, Previous: '
    '<a href="The-Closure-API.html" accesskey="p" rel="prev">The Closure API</a>, Up: '
    '<a href="Using-libffi.html" accesskey="u" rel="up">Using libffi</a> &nbsp; '
    '[<a href="Index.html" title="Index" rel="index">Index</a>]</p></div><hr>'
    '<h3 class="section">2.6 Closure Example</h3>' + PROSE + '</div><hr><div class="header"><p>'
    'Next: <a href="Thread-Safety.html">Thread Safety</a>, Previous: <a href="The-Closure-API.html">The Closure '
    'API</a>, Up: <a href="Using-libffi.html">Using libffi</a> &nbsp; [<a href="Index.html" title="Index" '
    'rel="index">Index</a>]</p></div></body></html>')

TEXINFO_4 = (
    '<html><head><title>Arrays - bc</title></head><body><div class="node"><a name="Arrays"></a><p>'
    'Next:&nbsp;<a rel="next" accesskey="n" href="Functions.html#Functions">Functions</a>, '
    'Previous:&nbsp;<a rel="previous" accesskey="p" href="Variables.html#Variables">Variables</a>, '
    'Up:&nbsp;<a rel="up" accesskey="u" href="index.html#Top">Top</a><hr></div>'
    '<h2 class="chapter">Arrays</h2>' + PROSE + "</body></html>")


@pytest.mark.parametrize("page", [TEXINFO_6, TEXINFO_4], ids=["makeinfo-6", "makeinfo-4"])
def test_a_manual_pages_next_previous_up_line_is_left_out(page):
    body = extract_html(page, "file:///usr/share/doc/libffi8/html/Closure-Example.html").body
    assert "ffi_prep_closure_loc" in body, body
    assert "Next:" not in body and "Previous:" not in body and "Up:" not in body, body


def test_prose_that_links_to_the_next_chapter_keeps_its_sentence():
    """A sentence of the content with a rel="next" link in it is content: its words outnumber its links, or
    it is one link with a word (Python's init_config.html: "See Memory Management.", the next page)."""
    page = ('<html><head><title>Types</title><link rel="next" href="Closures.html"></head><body><h2>Types</h2>' + PROSE +
            '<p>The next chapter, <a rel="next" href="Closures.html">Closures</a>, shows how a closure binds '
            "its data to a function pointer at run time.</p>"
            '<p>See <a href="Closures.html">Closures</a>.</p></body></html>')
    body = extract_html(page, "file:///types.html").body
    assert "shows how a closure binds its data" in body and "See Closures." in body, body
