"""The format set's plain-text ceiling for PDFs (``bench/formats_dataset.py``): poppler's text without
running heads, feet and page numbers, and with words hyphenated at a line's end joined, by rules of
its own (nothing of ragbus's PDF reader)."""

from __future__ import annotations

import pytest

from bench.formats_dataset import clean_pdf_text, joined_hyphens, rows_apart, without_running_lines

pytestmark = pytest.mark.unit


def _pages(*pages: str) -> str:
    return "\f".join(pages)


def test_a_running_head_and_the_page_numbers_go_and_the_text_stays() -> None:
    text = _pages("Chapter 7: Reference        8\nSHA256 is a member.\nIt is good.\n8",
                  "Chapter 7: Reference        9\nSHA512 is another.\n- 9 -",
                  "Chapter 7: Reference       10\nThe end.\nPage 10 of 12")
    assert without_running_lines(text) == _pages("SHA256 is a member.\nIt is good.", "SHA512 is another.", "The end.")


def test_a_head_on_fewer_than_half_the_pages_and_a_one_page_file_keep_their_lines() -> None:
    text = _pages("LaTeX News\nIssue 28\nBody one.", "Body two.\nMore.", "Body three.", "Body four.")
    assert without_running_lines(text) == text
    table = "NAME     DATE     AMOUNT\nsmith    01/02    100\njones    01/03    200"
    assert without_running_lines(table) == table
    assert without_running_lines("A word at the foot:\nill") == "A word at the foot:\nill"  # not a roman page number


def test_only_lines_at_the_edges_go_from_the_edge_inward() -> None:
    text = _pages("Head\nbody a\nHead\nbody b", "Head\nbody c")
    assert without_running_lines(text) == _pages("body a\nHead\nbody b", "body c")


def test_a_hyphenated_line_end_is_joined_unless_the_text_writes_the_word_with_its_hyphen() -> None:
    assert joined_hyphens("the confed-\n   eracy will fall") == "the confederacy will fall"
    assert joined_hyphens("run apt full-\nupgrade; or aptitude full-upgrade") == \
        "run apt full-upgrade; or aptitude full-upgrade"
    assert joined_hyphens("options -i -f\nand A-\nB stay") == "options -i -f\nand A-\nB stay"
    assert clean_pdf_text(_pages("Head\nbod-\ny one\n1", "Head\nbody two\n2")) == _pages("body one", "body two")


def test_a_tables_rows_are_set_apart_and_prose_stays_as_it_is() -> None:
    text = "Command     Description\nping        The ICMP network test utility\nA wrapped\nparagraph line."
    assert rows_apart(text) == ("Command     Description\n\nping        The ICMP network test utility\n\n"
                                "A wrapped\nparagraph line.")


def test_form_feeds_nels_and_unicode_separators_end_lines_not_glue_words():
    """Form feed, vertical tab, NEL (EBCDIC's newline) and U+2028/U+2029 were dropped as control characters, so
    the words on either side ran together ("every 23 seconds.The port is 6060.Done.") and a title ended by U+2029
    was not found (newcomer15)."""
    from shared.contract.text import normalize_text
    from shared.formats.text import extract_plain

    doc = extract_plain("Spool notes\u2029\u2029The spool lives in /var/spool/sep.\u2028It is flushed every 23 "
                        "seconds.\x0c\x0bThe port is 6060.\x85Done.\n")
    assert doc.title == "Spool notes"
    assert "seconds.The" not in doc.body and "6060.Done" not in doc.body
    assert doc.body.splitlines()[-2:] == ["The port is 6060.", "Done."]
    assert normalize_text("one\x0ctwo\u2029three") == "one\ntwo\n\nthree"


def test_a_form_feed_that_starts_a_line_does_not_split_its_paragraph():
    """pdftotext starts a page's first line with a form feed ("named in\\n\\fthe -c option"): beside a newline it
    is no line break of its own, dropped as before 8da6b32, where it had made a blank line mid-sentence."""
    from shared.formats.text import extract_plain

    lines = ["The tool reads its settings from the file named in", "the -c option and writes them back when",
             "it exits.", ""]
    plain = extract_plain("\n".join(lines)).body
    assert extract_plain("\n".join(lines[:1] + ["\x0c" + lines[1]] + lines[2:])).body == plain
    assert extract_plain("\n".join(lines[:1] + [lines[1] + "\x0b"] + lines[2:])).body == plain
    assert "\n\n" not in plain


def test_form_feeds_in_a_row_beside_a_newline_do_not_split_a_paragraph():
    """Two form feeds after a newline (pdftotext's blank page) were taken, the second, for a line break: a blank line
    mid-sentence (reviewer). A run of them between two characters is one line break."""
    from shared.contract.text import normalize_text
    from shared.formats.text import extract_plain

    assert normalize_text("named in\n\x0c\x0cthe -c option") == "named in\nthe -c option"
    assert normalize_text("named in\x0c\x0b\n\x0cthe -c option") == "named in\nthe -c option"
    assert normalize_text("it exits.\x0c\x0cThe port") == "it exits.\nThe port"
    lines = ["The tool reads its settings from the file named in", "the -c option and writes them back when",
             "it exits.", ""]
    plain = extract_plain("\n".join(lines)).body
    assert extract_plain("\n".join(lines[:1] + ["\x0c\x0c" + lines[1]] + lines[2:])).body == plain
