"""A page nested past lxml's depth limit is refused by name, not read in part without a word."""

import pytest

from shared.contract.errors import InvalidInput
from shared.formats.text import extract_html

_OPENING = "<p>The opening paragraph says the lantern runs for nine hours on one charge of its cell.</p>"
_CLOSING = "<p>The closing paragraph says the lantern weighs four hundred grams with its handle fitted.</p>"


def _page(depth: int) -> str:
    inner = "<p>The inner paragraph says the lantern's cell is replaced through a hatch under its base.</p>"
    return ("<html><head><title>Lantern notes</title></head><body>" + _OPENING + "<font>" * depth + inner
            + "</font>" * depth + _CLOSING + "</body></html>")


def test_a_page_nested_within_the_limit_is_read_whole():
    body = extract_html(_page(200), "file:///lantern.html").body
    assert "nine hours" in body and "hatch under its base" in body and "four hundred grams" in body


@pytest.mark.parametrize("depth", [300, 5000])
def test_a_page_nested_past_the_parser_is_refused_naming_the_nesting(depth):
    # libxml2 stops at 255 levels: the inner and the closing paragraph were dropped and the page
    # indexed with its opening alone, without an error
    with pytest.raises(InvalidInput, match=r"nests its elements more than 255 levels deep"):
        extract_html(_page(depth), "file:///lantern.html")
