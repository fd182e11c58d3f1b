"""A man page printed to PDF: its section headings (NAME, SYNOPSIS) are lines of their own, with no
blank line around them in the text PDFium gives, so a short page's usual width let the heading join the
line above it ("sleep - delay for a specified amount of time SYNOPSIS", the title and the first passage)."""
from __future__ import annotations

from shared.formats.pdf import read_pdf
from shared.formats.registry import Limits
from tests.hostile.bad_files import pdf, text_page


def _reading(*lines: str):
    """What the PDF reader makes of one text page holding ``lines``."""
    return read_pdf(pdf([text_page(*lines)]), "application/pdf", "", Limits(ocr=False))


def _passages(*lines: str) -> list[str]:
    return [passage.text for passage in _reading(*lines).passages]


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
    reading = _reading(*MAN_PAGE)
    assert reading.title == "doze - wait for a while before going on"
    texts = [p.text for p in reading.passages]
    assert "doze - wait for a while before going on" in texts
    assert "SYNOPSIS" in texts and "AUTHOR" in texts
    assert not any(text.endswith((" SYNOPSIS", " AUTHOR", " DESCRIPTION")) for text in texts)


def test_a_capitalised_word_that_runs_a_sentence_on_is_not_a_heading():
    lines = ("The probe was launched by the space agency of the",
             "USA",
             "and reached the outer planets after twelve years of flight through the dark.")
    assert "USA" not in _passages(*lines)


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


def test_a_man_page_s_option_term_starts_a_passage_of_its_own_with_its_description():
    """A description that ends short of the line's width was joined with the option term below it ("count every
    widget, not just the blue ones --loose-size"), so the term's own description stood apart from it (newcomer15:
    du(1) as a PDF, 'skip directories on different file systems --help display this help and exit'). The term
    then stood alone, its description a passage apart (reviewer): the description joins its term."""
    texts = _passages(*OPTIONS)
    assert "-a, --all count every widget, not just the blue ones" in texts
    assert "-x, --one-crate skip crates that sit on other shelves of the store" in texts
    assert any(text.startswith("--loose-size print loose sizes") for text in texts)
    assert not any(text in ("-a, --all", "--loose-size", "-x, --one-crate") for text in texts)
    # a wrapped line that opens with an option but says more is the rest of its sentence, not a term
    assert any(text.endswith("given, --max-depth=0 is the same as --summary") for text in texts)


def test_a_negative_number_wrapped_alone_is_no_option_term():
    """'-40' on a line of its own mid-sentence was taken for a term of options and stood as a passage apart."""
    lines = ("The press holds the temperature of each crate it seals somewhere between",
             "-40",
             "and eighty degrees, whatever the weather outside the store may be doing that day.")
    texts = _passages(*lines)
    assert "-40" not in texts
    assert any(text.endswith("somewhere between -40") for text in texts), texts


def test_an_option_term_that_starts_with_a_digit_is_a_term():
    """Requiring a letter after the dash (for '-40' above) glued '-0, --null' (du's first option) to the passage
    above it and left its description apart (reviewer); '-1, --fast' and a lone '-9' are terms too."""
    lines = ("DESCRIPTION",
             "Count the widgets of each crate named, recursively for crates inside crates.",
             "-0, --null",
             "end each line of the count with a NUL byte, not a newline",
             "-9",
             "count as slowly and as carefully as the counter can")
    texts = _passages(*lines)
    assert "-0, --null end each line of the count with a NUL byte, not a newline" in texts, texts
    assert "-9 count as slowly and as carefully as the counter can" in texts, texts


def test_an_option_that_ends_a_sentence_or_a_command_is_no_term():
    """An option on a line of its own that ends a sentence ('--dump-every-bb=count.') or a command continued by a
    backslash is no term: it stays with what it ends, and the line after it is not its description."""
    lines = ("To count the crates of every shelf at once, give the store's counter the option",
             "--every-shelf=yes.",
             "Counting then takes a little longer than usual, about a minute for each shelf of the store.",
             "crate-count --store=/srv/store --shelf=north --shelf=south --shelf=east \\",
             "--every-shelf=yes",
             "# and the totals are printed at the end, one line for each shelf of the store")
    texts = _passages(*lines)
    assert any(text.endswith("the option --every-shelf=yes.") for text in texts), texts
    assert any(text.endswith("\\ --every-shelf=yes") for text in texts), texts


def test_a_term_on_its_description_s_line_starts_a_passage_of_its_own():
    """A term short enough to share its description's line ('-k like --block-size=1K', '--help display this help
    and exit') ran on from a description above that ended near the line's width (du(1) as a PDF: 'skip directories
    on different file systems --help display this help and exit'). A wrapped sentence's line that opens with an
    option and a value ('--max-depth=0 is the same as ...'), or follows a comma or a word such as 'and' or 'with',
    stays with its sentence: a line of options alone too ('... start the counter with' / '--every-shelf')."""
    lines = ("DESCRIPTION",
             "Count the widgets of each crate named, recursively for crates inside crates and boxes.",
             "--loose-size",
             "print loose sizes rather than packed ones; the loose size is usually the larger",
             "-k like --block-size=1K, so that each widget counts as one kilobyte",
             "-x, --one-crate",
             "skip the crates that sit on the other shelves of the store while counting them",
             "--help display this help and exit",
             "-d, --max-depth=N",
             "print the count for a crate only if it is N or fewer levels below the crate given",
             "--max-depth=0 is the same as --summary and counts only the crates given to it",
             "-z, --zero",
             "count the empty crates too, which are left out of the count unless asked for, and",
             "--zero alone counts nothing else but those, whatever the other options may say")
    texts = _passages(*lines)
    assert "--loose-size print loose sizes rather than packed ones; the loose size is usually the larger" in texts
    assert "-k like --block-size=1K, so that each widget counts as one kilobyte" in texts, texts
    assert "--help display this help and exit" in texts, texts
    assert any(text.endswith("below the crate given --max-depth=0 is the same as --summary and counts only the "
                             "crates given to it") for text in texts), texts
    assert any(text.endswith("unless asked for, and --zero alone counts nothing else but those, whatever the "
                             "other options may say") for text in texts), texts
    texts = _passages("To count the crates of every shelf at once, start the counter of the store with",
                      "--every-shelf",
                      "and a count of the crates of each shelf is printed when the counter has finished.")
    assert not any(text.startswith("--every-shelf") for text in texts), texts


def test_the_paragraph_after_a_list_of_terms_is_not_the_last_term_s_description():
    """A term's description that ended near the line's width ran on into the paragraph after the list (du(1) and
    ten more coreutils pages as PDFs: '--version output version information and exit Display values are ...').
    A description begun in lower case and not ended by a stop does not go on into a line that opens a sentence;
    one ended by a stop does (the sentence after it is the same paragraph's), and so does a capitalised
    description under a term of options alone."""
    lines = ("DESCRIPTION",
             "Count the widgets of each crate named, recursively for crates inside crates and boxes.",
             "-x, --one-crate",
             "skip the crates that sit on the other shelves of the store while counting them",
             "--version print the version of the counter and the date it was built and exit",
             "Counts are in units of the first size given by --unit, and the COUNT_UNIT variable.",
             "-q, --quiet",
             "Print nothing but the total, whatever the other options may say about the crates",
             "--loud prints every widget of every crate it counts, one per line, as it goes.",
             "Nothing else is printed with it, not even the totals of each shelf of the store.")
    texts = _passages(*lines)
    assert "--version print the version of the counter and the date it was built and exit" in texts, texts
    assert any(text.startswith("Counts are in units") for text in texts), texts
    assert any(text.startswith("-q, --quiet Print nothing but the total") for text in texts), texts
    assert any(text.endswith("as it goes. Nothing else is printed with it, not even the totals of each shelf of "
                             "the store.") for text in texts), texts


def test_a_two_page_man_page_s_running_header_and_footer_are_dropped():
    """Running headers and footers were looked for on three pages or more: a two-page man page kept 'DU(1) User
    Commands DU(1)' as a passage on each page, and its footer ran on from the page's last line ('... do not include
    size of subdirectories GNU coreutils 9.1 September 2022 1'). A line at the edge of both of two pages is one."""
    def page(number: int, *lines: str) -> bytes:
        return text_page("DOZE(1) User Commands DOZE(1)", *lines, f"Doze 2.1 October 2026 {number}")

    first = page(1, "NAME", "doze - wait for a while before going on", "DESCRIPTION",
                 "Wait for NUMBER seconds before the next command of the script runs on, then go on with the",
                 "command after it, whatever it may be, as the script says in the order it says it in")
    second = page(2, "AUTHOR", "Written for the tests of this reader, by the people who wrote the reader itself.")
    reading = read_pdf(pdf([first, second]), "application/pdf", "", Limits(ocr=False))
    texts = [p.text for p in reading.passages]
    assert not any("User Commands" in text or "October 2026" in text for text in texts), texts
    assert any(text.endswith("in the order it says it in") for text in texts), texts
    assert reading.title == "doze - wait for a while before going on"
    # a line at the edge of one page only is the page's own
    reading = read_pdf(pdf([first, text_page("AUTHOR", "Written for the tests of this reader.")]),
                       "application/pdf", "", Limits(ocr=False))
    assert "DOZE(1) User Commands DOZE(1)" in [p.text for p in reading.passages]
