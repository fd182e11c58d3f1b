"""The cleaner on pages DocBook's stylesheets wrote (DocBook XSL: the Debian FAQ, Reference, New Maintainers'
Guide, valgrind's manual; Publican: the Debian Administrator's Handbook): every block of the content kept,
headings as lines of their own, navigation and tables of contents left out, links' text kept.

The snippets are cut from those pages' markup (bench/html_cleaner.py measures the real pages)."""

from __future__ import annotations

from services.cleaner.handler import clean_content
from shared.formats.docbook import docbook_text

XHTML_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
              'Strict//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd"><html xmlns="http://www.w3.org/1999/xhtml">'
              '<head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" /><title>{title}</title>'
              '{meta}</head><body>')


def _following(lines: list[str], line: str) -> str:
    """The first non-blank line after ``line``."""
    return next(following for following in lines[lines.index(line) + 1:] if following.strip())


def _para(text: str) -> str:
    return f'<div class="para">\n\t\t\t\t{text}\n\t\t\t</div>'


DOCNAV = ('<ul class="docnav{where}"><li class="previous"><a accesskey="p" href="packaging-system.html"><strong>Prev'
          '</strong>Chapter 5. Packaging System: Tools and Fundamenta...</a></li><li class="home">The Debian '
          "Administrator's Handbook</li><li class=\"next\"><a accesskey=\"n\" href=\"sect.source-package-structure.html\">"
          "<strong>Next</strong>5.3. Structure of a Source Package</a></li></ul>")

# sect.package-meta-information.html: trafilatura kept 10,112 of its 30,000 characters; the sidebars
# ("BACK TO BASICS", "DEBIAN POLICY") and the sections after them went with the prose around them
PUBLICAN_PAGE = (
    XHTML_HEAD.format(title="5.2. Package Meta-Information",
                      meta='<meta xmlns:d="http://docbook.org/ns/docbook" name="generator" content="publican v4.3.2" />')
    + '<div id="banner"><a href="http://debian-handbook.info/get/"><span class="text">Download the ebook</span></a></div>'
    '<p id="title"><a class="left" href="http://www.debian.org"><img alt="Product Site" src="x.png" /></a></p>'
    + DOCNAV.format(where=" top")
    + '<div class="section"><div class="titlepage"><div><div><h2 class="title"><a xmlns="" id="sect.meta"></a>'
    "5.2. Package Meta-Information</h2></div></div></div>"
    '<a id="id-1.8.6.2" class="indexterm"></a>'
    + _para("The Debian package is not only an archive of files intended for installation. It is part of a larger "
            "whole and describes its relationship with other Debian packages (requisites, dependencies, conflicts, "
            "suggestions).")
    + '<div class="section"><div class="titlepage"><div><div><h3 class="title"><a xmlns="" id="sect.control"></a>'
    "5.2.1. Description: the <code class=\"filename\">control</code> File</h3></div></div></div>"
    + _para('This file uses a structure similar to email headers (as defined by <a href="http://www.faqs.org/rfcs/'
            'rfc2822.html">RFC 2822</a>) and is fully described in the Debian Policy.')
    + '<pre class="screen"><code class="computeroutput">$ </code><strong class="userinput"><code>apt-cache show apt'
    "</code></strong>\nPackage: apt\nVersion: 2.2.4\n</pre>"
    + '<div class="sidebar"><div class="titlepage"><div><div><p class="title"><strong><span class="emphasis"><em>'
    "BACK TO BASICS</em></span> RFC — Internet standards</strong></p></div></div></div>"
    + _para("RFC is the abbreviation of “Request For Comments”. An RFC is generally a technical document that "
            "describes what will become an Internet standard.")
    + "</div>"
    + '<div class="section"><div class="titlepage"><div><div><h4 class="title"><a xmlns="" id="sect.depends"></a>'
    "5.2.1.1. Dependencies: the <code class=\"literal\">Depends</code> Field</h4></div></div></div>"
    + _para("The dependencies are defined in the <code class=\"literal\">Depends</code> field in the package "
            "header. Version comparison operators are as follows:")
    + '<div class="itemizedlist"><ul><li class="listitem">' + _para("<code class=\"literal\">&lt;&lt;</code>: less "
                                                                      "than;")
    + '</li><li class="listitem">' + _para("<code class=\"literal\">&gt;=</code>: greater than or equal to;")
    + "</li></ul></div></div></div></div>"
    + DOCNAV.format(where="") + "</body></html>")


def test_a_publican_page_keeps_every_section_its_headings_and_its_links_text_without_its_navigation():
    cleaned = clean_content(PUBLICAN_PAGE.encode(), "application/xhtml+xml",
                            "file:///usr/share/doc/debian-handbook/html/en-US/sect.package-meta-information.html")
    body, lines = cleaned.body, cleaned.body.splitlines()
    assert cleaned.title == "5.2. Package Meta-Information"
    for heading, section in (("5.2. Package Meta-Information", "The Debian package is not only"),
                             ("5.2.1. Description: the control File", "This file uses a structure"),
                             ("5.2.1.1. Dependencies: the Depends Field", "The dependencies are defined")):
        assert heading in lines, body
        assert _following(lines, heading).startswith(section)
    assert "(as defined by RFC 2822) and is fully described" in body  # a link's text is prose
    assert "BACK TO BASICS RFC — Internet standards" in lines
    assert "RFC is the abbreviation of “Request For Comments”." in body  # the sidebar's prose
    assert "$ apt-cache show apt\nPackage: apt\nVersion: 2.2.4" in body  # a screen keeps its lines
    assert "- <<: less than;\n- >=: greater than or equal to;" in body  # a list's items, line by line
    for navigation in ("Prev", "Next", "5.3. Structure of a Source Package", "Download the ebook", "Product Site"):
        assert navigation not in body


# The Debian FAQ (DocBook XSL 1.79): a navheader and a navfooter table, the chapter's table of contents
DOCBOOK_XSL_PAGE = (
    XHTML_HEAD.format(title="Chapter 8. The Debian package management tools",
                      meta='<meta name="generator" content="DocBook XSL Stylesheets Vsnapshot" />'
                           '<link rel="next" href="uptodate.en.html" title="Chapter 9. Keeping your system '
                           'up-to-date" />')
    + '<div class="navheader"><table width="100%" summary="Navigation header"><tr><th colspan="3" align="center">'
    'Chapter 8. The Debian package management tools</th></tr><tr><td width="20%" align="left"><a accesskey="p" '
    'href="pkg-basics.en.html">Prev</a> </td><th width="60%" align="center"> </th><td width="20%" align="right"> '
    '<a accesskey="n" href="uptodate.en.html">Next</a></td></tr></table><hr /></div>'
    '<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a id="ch-pkgtools"></a>Chapter 8. The '
    "Debian package management tools</h1></div></div></div>"
    '<div class="toc"><p><strong>Table of Contents</strong></p><dl class="toc"><dt><span class="section">'
    '<a href="#s-pkgprogs">8.1. What programs does Debian provide for managing its packages?</a></span></dt>'
    "</dl></div>"
    "<p>This chapter describes the tools that manage Debian packages.</p>"
    '<div class="section"><div class="titlepage"><div><div><h2 class="title" style="clear: both"><a id="s-pkgprogs">'
    "</a>8.1. What programs does Debian provide for managing its packages?</h2></div></div></div>"
    "<p>There are multiple tools that are used to manage Debian packages, from graphic or text-based interfaces to "
    'the low level tools used to install packages. All the available tools rely on the lower level tools; see '
    '<a class="ulink" href="https://wiki.debian.org/PackageManagement" target="_top">the Package Management '
    "page</a> of the wiki.</p>"
    '<div class="informaltable"><table class="informaltable" border="1"><colgroup><col /><col /></colgroup><thead>'
    "<tr><th>tool</th><th>what it does</th></tr></thead><tbody><tr><td><span class=\"command\"><strong>dpkg</strong>"
    "</span></td><td>installs a .deb file</td></tr><tr><td>apt-get</td><td>installs from the archive</td></tr>"
    "</tbody></table></div>"
    '<div class="note" style="margin-left: 0.5in; margin-right: 0.5in;"><table border="0" summary="Note">'
    '<tr><td rowspan="2" align="center" valign="top" width="25"><img alt="[Note]" src="images/note.png" /></td>'
    '<th align="left">Note</th></tr><tr><td align="left" valign="top"><p>Only the superuser may install packages.'
    "</p></td></tr></table></div>"
    "</div></div>"
    '<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr><td width="40%" align="left">'
    '<a accesskey="p" href="pkg-basics.en.html">Prev</a> </td><td width="20%" align="center"> </td><td width="40%" '
    'align="right"> <a accesskey="n" href="uptodate.en.html">Next</a></td></tr><tr><td width="40%" align="left" '
    'valign="top">Chapter 7. Basics of the Debian package management system </td><td width="20%" align="center">'
    '<a accesskey="h" href="index.en.html">Home</a></td><td width="40%" align="right" valign="top"> Chapter 9. '
    "Keeping your system up-to-date</td></tr></table></div></body></html>")


def test_a_docbook_xsl_page_keeps_its_question_headings_once_and_its_tables_rows_without_its_navigation():
    cleaned = clean_content(DOCBOOK_XSL_PAGE.encode(), "text/html", "file:///usr/share/doc/debian/FAQ/pkgtools.en.html")
    body, lines = cleaned.body, cleaned.body.splitlines()
    question = "8.1. What programs does Debian provide for managing its packages?"
    assert lines.count(question) == 1, body  # as its section's heading, not again from the table of contents
    assert _following(lines, question).startswith("There are multiple tools")
    assert "see the Package Management page of the wiki." in body
    assert "| tool | what it does |\n|---|---|\n| dpkg | installs a .deb file |\n| apt-get | installs from the " \
           "archive |" in body
    assert "Note\n\nOnly the superuser may install packages." in body  # an admonition laid out in a table is text
    for navigation in ("Prev", "Next", "Home", "Table of Contents", "Chapter 7. Basics", "Chapter 9. Keeping"):
        assert navigation not in body


# valgrind's FAQ (DocBook XSL's qandaset): a list of the questions, then each question and answer a table row
QANDASET_PAGE = (
    '<html><head><title>Valgrind Frequently Asked Questions</title><meta name="generator" content="DocBook XSL '
    'Stylesheets Vsnapshot"></head><body><div class="article"><div class="titlepage"><div><div><h1 class="title">'
    '<a name="faq"></a>Valgrind Frequently Asked Questions</h1></div></div><hr></div><div class="qandaset"><dl><dt>1. '
    '<a href="faq.html#faq.background">Background</a></dt><dd>1.1. <a href="faq.html#faq.pronounce">How do you '
    'pronounce "Valgrind"?</a></dd><dd>1.2. <a href="faq.html#faq.whence">Where does the name "Valgrind" come '
    'from?</a></dd></dl><br><table width="100%" summary="Q and A Div" cellpadding="2" cellspacing="2" border="0">'
    '<tr class="qandadiv"><td align="left" valign="top" colspan="2"><a name="faq.background"></a><h3 class="title">'
    '<a name="faq.background"></a>1. Background</h3></td></tr>'
    '<tr class="toc" colspan="2"><td align="left" valign="top" colspan="2">1.1. <a href="faq.html#faq.pronounce">How '
    'do you pronounce "Valgrind"?</a><br></td></tr>'
    '<tr class="question"><td align="left" valign="top"><a name="faq.pronounce"></a><b>1.1.</b></td>'
    '<td align="left" valign="top"><b>How do you pronounce "Valgrind"?</b></td></tr>'
    '<tr class="answer"><td align="left" valign="top"><a name="a-pronounce"></a></td><td align="left" valign="top">'
    '<p>The "Val" as in the word "value".  The "grind" is pronounced\n  with a short \'i\'.</p>'
    "<p>Don't feel bad: almost\n  everyone gets it wrong at first.</p></td></tr>"
    '<tr class="question"><td align="left" valign="top"><a name="faq.whence"></a><b>1.2.</b></td>'
    '<td align="left" valign="top"><p>Where does the name "Valgrind" come from?</p><pre class="screen">'
    "valgrind --help</pre></td></tr>"
    '<tr class="answer"><td align="left" valign="top"></td><td align="left" valign="top"><p>From Nordic mythology.'
    "</p></td></tr></table></div></div></body></html>")


def test_a_qandaset_reads_each_question_with_its_number_on_one_line_before_its_answer():
    body = clean_content(QANDASET_PAGE.encode(), "text/html", "file:///usr/share/doc/valgrind/html/faq.html").body
    lines = body.splitlines()
    for question, answer in (('1.1. How do you pronounce "Valgrind"?', 'The "Val" as in the word "value". The '
                                                                         '"grind" is pronounced with a short \'i\'.'),
                             ('1.2. Where does the name "Valgrind" come from?', "valgrind --help")):
        assert lines.count(question) == 1, body  # not again from the qandaset's list of questions
        assert _following(lines, question) == answer
    assert "1. Background" in lines
    assert "Don't feel bad: almost everyone gets it wrong at first." in lines  # a paragraph's line ends are spaces
    assert _following(lines, "valgrind --help") == "From Nordic mythology."


def test_pages_other_tools_wrote_are_not_read_as_docbook():
    sphinx = ('<!DOCTYPE html><html><head><meta name="generator" content="Docutils 0.19" /><title>x</title></head>'
              '<body><div class="section"><h2>Heading</h2><p>Text of a section.</p></div></body></html>')
    assert docbook_text(sphinx) is None
    assert docbook_text('<div class="titlepage"><h2>A</h2></div><p>Text.</p>') == "A\n\nText."


def test_a_short_docbook_page_is_its_content_without_its_navigation():
    # the Securing Debian Manual's 12.3, whole: under 250 characters of content, which sent it back to
    # trafilatura, and trafilatura kept both docnav lists ("Prev", "Up", "Home", "Next" and the neighbours)
    page = (XHTML_HEAD.format(title="12.3. Questions regarding the Debian security team",
                              meta='<meta xmlns:d="http://docbook.org/ns/docbook" name="generator" content="publican '
                                   'v4.3.2" />')
            + '<p id="title"><a class="left" href="http://www.debian.org"><img alt="Product Site" src="l.png" /></a>'
            '</p><ul class="docnav top"><li class="previous"><a accesskey="p" href="ch12s02.html"><strong>Prev</strong>'
            '</a></li><li class="home">Securing Debian Manual</li><li class="next"><a accesskey="n" href="changelog_'
            'history.html"><strong>Next</strong></a></li></ul><div class="section"><div class="titlepage"><div><div>'
            '<h2 class="title"><a xmlns="" id="debian-sec-team-faq"></a>12.3. Questions regarding the Debian security '
            'team</h2></div></div></div>'
            + _para('The security team keeps its list of Frequently Asked Questions at the <a href="http://www.debian.'
                    'org/security/faq">http://www.debian.org/security/faq</a>. Please refer to that web page for up to '
                    "date information.")
            + '</div><ul class="docnav"><li class="previous"><a accesskey="p" href="ch12s02.html"><strong>Prev</strong>'
            '12.2. Specific software</a></li><li class="up"><a accesskey="u" href="#"><strong>Up</strong></a></li><li '
            'class="home"><a accesskey="h" href="index.html"><strong>Home</strong></a></li><li class="next"><a '
            'accesskey="n" href="changelog_history.html"><strong>Next</strong>Appendix A. Changelog/History</a></li>'
            "</ul></body></html>")
    body = clean_content(page.encode(), "application/xhtml+xml",
                         "file:///usr/share/doc/harden-doc/html/en-US/debian-sec-team-faq.html").body
    assert body == ("12.3. Questions regarding the Debian security team\n\nThe security team keeps its list of "
                    "Frequently Asked Questions at the http://www.debian.org/security/faq. Please refer to that web "
                    "page for up to date information.")


def test_a_book_front_page_that_is_all_table_of_contents_has_no_docbook_text_so_it_is_read_as_any_page():
    # the Debian FAQ's index: nothing of DocBook's reading is left, and extract_html reads the page the
    # general way (an empty text never replaces it)
    page = ('<html><head><title>Debian FAQ</title><meta name="generator" content="DocBook XSL Stylesheets" /></head>'
            '<body><div class="toc"><p><b>Table of Contents</b></p><dl class="toc"><dt><span class="chapter"><a href='
            '"basic-defs.en.html">1. Definitions and overview</a></span></dt><dt><span class="chapter"><a href="'
            'choosing.en.html">2. Choosing a Debian distribution</a></span></dt></dl></div></body></html>')
    assert docbook_text(page) == ""
