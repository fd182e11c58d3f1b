"""Text a browser does not render is no text of the page: an element with the ``hidden`` attribute, an
inline ``display: none`` or ``visibility: hidden`` style, or a ``<template>``. trafilatura drops some of
these on some of its paths only: a page that hid "the quux daemon listens on port 6666 and you should
visit ..." in a ``<p style="display:none">`` had that sentence indexed and quoted as the answer to "Which
port does the quux daemon listen on?", ``answered``, beside the visible port 9922. Hidden text is how a
page says one thing to its readers and another to a machine that reads it."""

from __future__ import annotations

import pytest

from shared.formats.text import extract_html

pytestmark = pytest.mark.unit

VISIBLE = ("<p>The quux daemon listens on port 9922 by default, and it answers every request on that port "
           "until it is stopped by its service manager.</p>"
           "<p>The quux daemon writes its log to /var/log/quux.log and rotates the log once a week.</p>")


def _page(hidden: str, *, body: str = "<body>") -> str:
    return (f"<html><head><title>Quux reference</title></head>{body}<h1>Quux reference</h1>"
            f"{VISIBLE}{hidden}</body></html>")


@pytest.mark.parametrize("hidden", [
    '<p style="display:none">HIDDEN the quux daemon listens on port 6666 instead.</p>',
    '<p style="color: red; DISPLAY : None !important">HIDDEN the quux daemon listens on port 6666 instead.</p>',
    '<div style="visibility:hidden"><p>HIDDEN the quux daemon listens on port 6666 instead.</p></div>',
    "<p hidden>HIDDEN the quux daemon listens on port 6666 instead.</p>",
    '<section hidden="hidden"><p>HIDDEN the quux daemon listens on port 6666 instead.</p></section>',
    "<template><p>HIDDEN the quux daemon listens on port 6666 instead.</p></template>",
    "<noscript><p>HIDDEN the quux daemon listens on port 6666 instead.</p></noscript>",
], ids=["display-none", "display-none-spaced", "visibility-hidden", "hidden", "hidden-valued", "template", "noscript"])
def test_text_a_browser_does_not_render_is_left_out_and_the_rest_stays(hidden):
    body = extract_html(_page(hidden), "file:///quux.html").body
    assert "port 9922" in body and "/var/log/quux.log" in body, body
    assert "HIDDEN" not in body and "6666" not in body, body


def test_a_page_hidden_until_its_script_shows_it_keeps_its_text():
    """Pages hide their <body> (or <html>) until a script has laid them out, so that no unstyled flash shows:
    a reader that runs no script must still read them, or every such page would have no text."""
    for body in ('<body style="display:none">', '<body style="visibility: hidden">', "<body hidden>"):
        assert "port 9922" in extract_html(_page("", body=body), "file:///quux.html").body, body


def test_hidden_until_found_is_text_a_reader_finds():
    """``hidden="until-found"`` is collapsed content the browser's find-in-page opens: it is the page's text."""
    body = extract_html(_page('<div hidden="until-found"><p>The quux daemon reads /etc/quux.conf when it '
                              "starts and again whenever it receives SIGHUP.</p></div>"), "file:///quux.html").body
    assert "/etc/quux.conf" in body, body


def test_a_tab_or_a_section_a_button_opens_is_text_a_reader_finds():
    """Docusaurus sets ``hidden`` on every tab panel but the first, and a FAQ's answer is hidden until its
    question's button (``aria-controls``) opens it: a click shows them, so they are the page's text."""
    tabs = ('<div role="tabpanel" hidden><p>On macOS the quux daemon reads /usr/local/etc/quux.conf when it '
            "starts.</p></div>"
            '<button aria-controls="a1 a2">Where are its logs kept?</button><div id="a2" hidden>'
            "<p>On macOS the quux daemon keeps its logs in /usr/local/var/log/quux.</p></div>")
    body = extract_html(_page(tabs), "file:///quux.html").body
    assert "/usr/local/etc/quux.conf" in body and "/usr/local/var/log/quux" in body, body
