"""A man page printed to PDF: its section headings (NAME, SYNOPSIS) are lines of their own, with no
blank line around them in the text PDFium gives, so a short page's usual width let the heading join the
line above it ("sleep - delay for a specified amount of time SYNOPSIS", the title and the first passage)."""
from __future__ import annotations

from shared.formats.pdf import read_pdf
from shared.formats.registry import Limits
from tests.hostile.bad_files import pdf, text_page

MAN_PAGE = (
    "DOZE(1) User Commands DOZE(1)",
    "NAME",
    "doze - wait for a while before going on",
    "SYNOPSIS",
    "doze NUMBER[UNIT]...",
    "DESCRIPTION",
    "Wait for NUMBER seconds before the next command of the script runs on.",
    "UNIT may be 's' for seconds (the default), 'm' for minutes or 'h' for hours.",
    "Given two or more arguments, wait for the sum of their values in turn.",
    "AUTHOR",
    "Written for the tests of this reader.",
)


def test_a_man_page_s_section_headings_stay_apart_from_the_line_above_them():
    reading = read_pdf(pdf([text_page(*MAN_PAGE)]), "application/pdf", "", Limits(ocr=False))
    assert reading.title == "doze - wait for a while before going on"
    texts = [p.text for p in reading.passages]
    assert "doze - wait for a while before going on" in texts
    assert "SYNOPSIS" in texts and "AUTHOR" in texts
    assert not any(text.endswith((" SYNOPSIS", " AUTHOR", " DESCRIPTION")) for text in texts)


def test_a_capitalised_word_that_runs_a_sentence_on_is_not_a_heading():
    lines = ("The probe was launched by the space agency of the",
             "USA",
             "and reached the outer planets after twelve years of flight through the dark.")
    reading = read_pdf(pdf([text_page(*lines)]), "application/pdf", "", Limits(ocr=False))
    assert "USA" not in [p.text for p in reading.passages]


OPTIONS = (
    "DESCRIPTION",
    "Count the widgets of each crate named, recursively for crates inside crates.",
    "-a, --all",
    "count every widget, not just the blue ones",
    "--loose-size",
    "print loose sizes rather than packed ones; although the loose size is usually",
    "larger, it may be smaller for crates that hold nothing but folded widgets",
    "-x, --one-crate",
    "skip crates that sit on other shelves of the store",
    "-d, --max-depth=N",
    "print the count for a crate only if it is N or fewer levels below the crate given,",
    "--max-depth=0 is the same as --summary",
)


def test_a_man_page_s_option_term_starts_a_passage_of_its_own():
    """A description that ends short of the line's width was joined with the option term below it ("count every
    widget, not just the blue ones --loose-size"), so the term's own description stood apart from it (newcomer15:
    du(1) as a PDF, 'skip directories on different file systems --help display this help and exit')."""
    reading = read_pdf(pdf([text_page(*OPTIONS)]), "application/pdf", "", Limits(ocr=False))
    texts = [p.text for p in reading.passages]
    assert "count every widget, not just the blue ones" in texts
    assert "--loose-size" in texts and "-x, --one-crate" in texts
    assert "skip crates that sit on other shelves of the store" in texts
    # a wrapped line that opens with an option but says more is the rest of its sentence, not a term
    assert any(text.endswith("given, --max-depth=0 is the same as --summary") for text in texts)
