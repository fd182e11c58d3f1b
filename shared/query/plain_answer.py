"""An answer as text and citations only: the one sanitiser every answer passes before it is stored.

An answer quotes documents (the extractive reader) or is written by a model that read them, so
whatever markup a planted document holds, or a steered model writes, would otherwise reach every
surface that shows the answer: a chat client renders Markdown and often HTML, so an ``<img>`` or
``![img](http://…?d=SECRET)`` makes it load an address, and ``[here](http://…/phish)`` or
``javascript:`` hides where a link goes. The synthesizer passes every sentence through
:func:`plain_answer_text` before the record is written, so the page, the CLI, REST and its events,
MCP and ``/v1/chat/completions`` all show the same clean text (no copy of this rule per surface):

- a placeholder a document shows as text (``<key>=<value>``, ``git checkout <branch>``: an opening tag
  without attributes whose name is no HTML element's) is kept, set in a code span with the rest of its word
  (``-m<max-hits>``, one span, not ``-m`` beside a span), so a Markdown renderer shows it rather than hide it
  as an unknown element; one already inside the document's own code span is left as it is (a second span
  inside it would end the first and leave the placeholder bare); a browser would make nothing of it either;
- a tag without attributes inside the document's own code span ("use the `<br>` element") is kept there as text:
  a renderer shows a code span as it is, and such a tag can load and run nothing anyway (one with
  attributes is removed there too: it may carry an address or a handler);
- HTML comments, processing instructions, declarations and every other tag are removed; the elements
  whose content is code or another document (``script``, ``style``, ``iframe``, ``svg``, …) are
  removed with their content; what is left of an unclosed tag is made plain text (``< img``), so
  no two sentences joined later can close it;
- Markdown images (``![alt](url)``, ``![alt][ref]``) are removed and reference definitions
  (``[ref]: url``) too; what is left of one (a ``![`` or ``](`` alone) is spaced apart, so no
  two sentences joined later make a link or an image;
- a Markdown link or ``<scheme:…>`` autolink is kept only when it points at one of the answer's
  own cited sources over http(s); any other keeps its text and loses its address;
- a bare web address that is not one of those sources is set in a code span, so no Markdown
  renderer makes it a link (its text stays readable).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable

from shared.contract.text import HTML_ELEMENTS, without_code_elements

_ATTRIBUTES = r"""(?:[^<>"']|"[^"]*"|'[^']*')*"""
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)|<!\[CDATA\[.*?(?:\]\]>|\Z)", re.DOTALL)
_DECLARATION = re.compile(r"<[!?][^>]*>")
_TAG = re.compile(rf"</?[A-Za-z][A-Za-z0-9:-]*(?:[\s/]{_ATTRIBUTES})?>")
_UNCLOSED = re.compile(r"<(?=[A-Za-z/!?])")
# a browser's tag name runs to a space, "/" or ">": "<dir_fd>" is one too, though _TAG's names stop at "_"
_PLACEHOLDER = re.compile(r"<([A-Za-z][A-Za-z0-9_.:-]*)>")
# a Markdown code span: a run of backticks closed by a run of the same length (CommonMark); a backslash before the
# run escapes its first backtick and a blank line ends the paragraph, so neither opens a span a renderer would show
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(?:(?!\n\s*\n).)+?(?<!`)\1(?!`)", re.DOTALL)
# a word holding placeholders: what touches them up to a space, a quote, a bracket or a backtick; it starts
# only where such a run starts (a match from inside a run fails where one from its start fails: without the
# look-behind, a 16,000-character run with no tag was tried from each of its characters, quadratic)
_PLACEHOLDER_WORD = re.compile(r"""(?<![^\s`<>"'()\[\]])[^\s`<>"'()\[\]]*(?:<[A-Za-z][A-Za-z0-9_.:-]*>[^\s`<>"'()\[\]]*)+""")
_BARE_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9_.:-]*\s*/?>")  # an opening, closing or empty tag, no attributes

_LABEL = r"\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"
_DESTINATION = r"""\(\s*(<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)"""
_INLINE_IMAGE = re.compile(rf"!{_LABEL}{_DESTINATION}")
_REFERENCE_IMAGE = re.compile(rf"!{_LABEL}(?:\[[^\[\]]*\])?")
_INLINE_LINK = re.compile(rf"{_LABEL}{_DESTINATION}")
_DEFINITION = re.compile(r"^ {0,3}\[[^\[\]]+\]:[ \t]*\S+.*$", re.MULTILINE)
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>")
# GFM links an address after a space, "*", "_", "~" or "(": "_" is a word character, yet not one that hides it
_BARE_ADDRESS = re.compile(r"(?<![^\W_]|[@`/])(?:(?:https?|ftp)://|www\.)[^\s<>`\x00]+", re.IGNORECASE)
# in plain text (every character of it escaped) an address is one wherever it stands, and runs to a space or a backtick
_PLAIN_ADDRESS = re.compile(r"(?:(?:https?|ftp)://|www\.)[^\s`]+", re.IGNORECASE)
_TRAILING = ".,:;!?\"'*_~)]\u201d\u2019\u00bb\u203a"  # closing curly quotes and guillemets too
_WEB = re.compile(r"https?://\S+\Z", re.IGNORECASE)
_KEPT = re.compile(r"\x00(\d+)\x00")


def plain_answer_text(text: str, sources: Iterable[str] = (), *, lines: bool = False) -> str:
    """``text`` with markup removed and links kept only to ``sources`` (the answer's cited
    URLs), as the module's docstring lists; whitespace left by a removal is collapsed (``lines``:
    within each line, a passage's line breaks kept, as search results show a chunk)."""
    allowed = {s for s in sources if s and _WEB.match(s)}
    text = text.replace("\x00", "")
    kept: list[str] = []
    # the spans this function adds are fenced by a backtick run no lone run of the text has (one that closes
    # no code span), so none of them can pair with it ("Press the ` key, then run ``<branch>``")
    runs = {len(r) for r in re.findall(r"`+", _CODE_SPAN.sub(" ", text))}
    fence = "`" * next(n for n in range(1, len(runs) + 2) if n not in runs)

    def keep(markdown: str) -> str:
        kept.append(markdown)
        return f"\x00{len(kept) - 1}\x00"

    def autolink(match: re.Match[str]) -> str:
        address = match.group(1)
        return keep(match.group(0)) if address in allowed else address

    def placeholder(match: re.Match[str]) -> str:
        word = match.group(0)
        if any(name.lower() in HTML_ELEMENTS for name in _PLACEHOLDER.findall(word)):
            return _PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1).lower() in HTML_ELEMENTS
                                    else keep(f"{fence}{m.group(0)}{fence}"), word)
        if any(a <= match.start() < b for a, b in spans):  # inside the document's own code span
            return keep(word)
        cut = len(word.rstrip(_TRAILING))
        return keep(f"{fence}{word[:cut]}{fence}") + word[cut:]

    text = _AUTOLINK.sub(autolink, text)  # before tags: <http://…> would read as one
    text = without_code_elements(text)
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]
    text = _PLACEHOLDER_WORD.sub(placeholder, text)
    text = _CODE_SPAN.sub(lambda m: _BARE_TAG.sub(lambda t: keep(t.group(0)), m.group(0)), text)
    text = _COMMENT.sub(" ", text)
    # a declaration runs to the next ">", as a browser reads "<!…>": searched only up to the last ">", where each
    # search succeeds (one from each "<!" of a long run with no ">" after it ran to the end: quadratic)
    end = text.rfind(">") + 1
    text = _DECLARATION.sub(" ", text[:end]) + text[end:]
    text = _TAG.sub(" ", text)
    text = _UNCLOSED.sub("< ", text)
    text = _INLINE_IMAGE.sub(" ", text)
    text = _REFERENCE_IMAGE.sub(" ", text)
    text = _DEFINITION.sub(" ", text)

    def link(match: re.Match[str]) -> str:
        label, destination = match.group(1), match.group(2).strip("<>")
        return keep(match.group(0)) if destination in allowed else label

    text = _INLINE_LINK.sub(link, text)
    # what is left of a link or an image (a "](" or "![" without its other half) could close one with a
    # later sentence's text once the sentences are joined: kept apart (kept links are placeholders here)
    text = text.replace("![", "! [").replace("](", "] (")

    text = addresses_in_code_spans(text, fence, allowed)
    text = _UNCLOSED.sub("< ", text)  # a "<" a removed link or image left beside a letter ("<[img](…)")
    text = text.replace("!\x00", "! \x00")  # "!" before a kept link would make it an image
    text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    paragraphs = (p.splitlines() if lines else [p] for p in re.split(r"\n\s*\n", text) if p.strip())
    return "\n\n".join("\n".join(" ".join(line.split()) for line in p if line.strip()) for p in paragraphs)


def addresses_in_code_spans(text: str, fence: str = "`", allowed: Collection[str] = (),
                            escape: Callable[[str], str] | None = None) -> str:
    """``text`` with each bare web address not in ``allowed`` set in a code span fenced by ``fence`` (the
    punctuation that closes a sentence left after it), so no Markdown renderer makes a link of it. ``escape``:
    ``text`` is plain text, not Markdown (a source's title), made Markdown by ``escape`` around its addresses;
    an address then runs to a space or a backtick wherever it stands, and keeps a closing ``*``, ``_`` or ``~``."""
    pattern, trailing = (_BARE_ADDRESS, _TRAILING) if escape is None else (_PLAIN_ADDRESS, _TRAILING.replace("*_~", ""))
    escape, shown, at = escape or str, [], 0
    for match in pattern.finditer(text):
        address = match.group(0).rstrip(trailing)
        if address and address not in allowed:
            shown += [escape(text[at: match.start()]), f"{fence}{address}{fence}"]
            at = match.start() + len(address)
    return "".join(shown) + escape(text[at:])
