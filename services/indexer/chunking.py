"""Cut a clean document into chunks the embedder reads whole.

The reference system cut 768 words with 128 words of overlap for a model that
reads about 2k tokens: windows of roughly a third of the model's input, and an
overlap of one sixth of the window. Our model reads only 256 word pieces, so
the window here is the whole model input (``embedder.max_tokens``, 254 content
tokens) and the overlap keeps the reference's ratio: ``max_tokens // 6`` (42
tokens). Windows are measured in the embedder's own tokens (not words), so a
chunk is never silently truncated by the model.

Cut points snap back to a sentence end when one lies in the second half of the
window, else to a word boundary, and only as a last resort (one enormous
"word") fall inside a word. Each chunk's text is the original substring with
its whitespace normalised. Chunks with fewer than 100 characters once the
metadata header is removed are dropped (the reference's rule against
header-only chunks), unless the document has no longer one: a short note is
one chunk of its own, not lost.

Each chunk carries the heading of the section it starts in (:func:`section_headings`),
beside its text, never in it: what it embeds is unchanged. A release note's "- Fixed
the frob cache" states its version in the heading above it ("2.3.0"), often in an
earlier chunk.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from shared.contract.ids import chunk_id
from shared.contract.ports import Chunk, Embedder
from shared.contract.text import header_length, sentence_ends
from shared.formats.passages import Marks, position_label, positions_between

MIN_BODY_CHARS = 100
OVERLAP_FRACTION = 1 / 6
# WordPiece reads a word over 100 characters as one [UNK] token: a 3 MB line without a space was one
# "token", so one chunk of 3 MB (stored, returned by search, quoted). Such a span counts one token per
# 100 characters, which bounds a chunk to ``max_tokens`` times this.
MAX_TOKEN_CHARS = 100

Spans = Sequence[tuple[int, int]]

# Boundary strengths between token i-1 and token i.
_INSIDE_WORD, _WORD, _SENTENCE = 0, 1, 2

_INLINE_SPACES = re.compile(r"[^\S\n]+")
# A heading is a block of one short line that is no sentence, list item nor lead-in ("* Noteworthy changes in
# release 3.8", "man-db 2.11.2 (8 January 2023)", "5.3.1. LZMA2"), or a line over an underline ("Changes" / "=====").
MAX_HEADING_CHARS = 80
MAX_HEADING_WORDS = 12
_BLOCK = re.compile(r"[^\n](?:.|\n(?![^\S\n]*\n))*")  # text between blank lines (linear: no \n in the look-ahead)
_UNDERLINE = re.compile(r"([=~^*#-])\1{2,}")
_OUTLINE = re.compile(r"^(\*+|#+)\s+")  # "** Bug fixes" (an Emacs outline), "## 2.3.0"
_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(?=\D)")  # "5.3.1. LZMA2"
_NOT_A_HEADING = re.compile(r"[.,;:!?](?:\s*\[\d+\])?$|^(?:[-+•>$|]|\d+[)\]]|\[)"  # (a footnote's mark after)
                            # an address or a command line ("dpkg --status foo", "cat a | tr b"), not a section's name
                            r"|://|^www\.|\s\|\s|^[a-z][\w.+-]*(?:\s+\S+)*?\s+--?[A-Za-z]")
_BLANK_LINES = re.compile(r"\n\s*\n\s*")


@dataclass(frozen=True)
class Window:
    """Tokens ``[first, last)`` of the text, i.e. characters ``[start, end)``."""

    first: int
    last: int
    start: int
    end: int


def normalize_chunk_text(text: str) -> str:
    """Single spaces, single line breaks kept, blank-line runs reduced to one."""
    text = _INLINE_SPACES.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()


def _boundaries(text: str, spans: Spans) -> list[int]:
    """Strength of the boundary before each token (index 0 is a sentence start)."""
    sentence_starts = set(sentence_ends(text))
    strengths = [_SENTENCE] * len(spans)
    for i in range(1, len(spans)):
        gap_start, gap_end = spans[i - 1][1], spans[i][0]
        if gap_end <= gap_start:
            strengths[i] = _INSIDE_WORD  # e.g. "token|##ization" or "word|,"
        elif gap_end in sentence_starts or "\n" in text[gap_start:gap_end]:
            strengths[i] = _SENTENCE
        else:
            strengths[i] = _WORD
    return strengths


def _best_cut(strengths: list[int], low: int, high: int, target: int) -> int:
    """The token index in ``[low, high]`` to cut before: strongest boundary, nearest ``target``."""
    best, best_key = target, None
    for i in range(max(low, 1), high + 1):
        key = (strengths[i], -abs(i - target))
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


def plan_windows(
    text: str, spans: Spans, max_tokens: int, overlap: int | None = None, *, first_min_chars: int = 0
) -> list[Window]:
    """Token windows of at most ``max_tokens`` covering ``spans``, overlapping by about ``overlap``.

    The first window reaches at least ``first_min_chars`` characters into the text
    when it can: the indexer passes the header's length plus the minimum body, so
    the first chunk is never a header with a sliver of body that would be dropped.
    """
    if max_tokens < 2:
        raise ValueError(f"max_tokens={max_tokens}: a window needs at least 2 tokens")
    n = len(spans)
    if n == 0:
        return []
    overlap = int(max_tokens * OVERLAP_FRACTION) if overlap is None else overlap
    overlap = max(0, min(overlap, max_tokens // 2))
    strengths = _boundaries(text, spans)
    windows: list[Window] = []
    first = 0
    # Token index the first window must reach to cover ``first_min_chars`` characters.
    first_floor = next((i + 1 for i, (_, end) in enumerate(spans) if end >= first_min_chars), n)
    while True:
        hard_last = min(first + max_tokens, n)
        if hard_last == n:
            last = n
        else:
            # Prefer a sentence end in the second half of the window, then any word boundary.
            low = first + max_tokens // 2
            if not windows:
                low = min(max(low, first_floor), hard_last)
            last = _best_cut(strengths, low, hard_last, hard_last)
            if strengths[last] == _INSIDE_WORD:
                last = hard_last
        windows.append(Window(first, last, spans[first][0], spans[last - 1][1]))
        if last == n:
            return windows
        target = last - overlap
        low = max(first + 1, target - overlap // 2)
        high = min(last - 1, target + overlap // 2)
        first = _best_cut(strengths, low, high, target) if low <= high else max(first + 1, target)


def _bounded(spans: Spans) -> list[tuple[int, int]]:
    """``spans`` with each one longer than :data:`MAX_TOKEN_CHARS` cut into pieces of that length."""
    bounded: list[tuple[int, int]] = []
    for start, end in spans:
        while end - start > MAX_TOKEN_CHARS:
            bounded.append((start, start + MAX_TOKEN_CHARS))
            start += MAX_TOKEN_CHARS
        bounded.append((start, end))
    return bounded


def chunk_text(
    text: str,
    token_spans: Callable[[str], list[tuple[int, int]]],
    max_tokens: int,
    overlap: int | None = None,
    *,
    first_min_chars: int = 0,
) -> list[str]:
    """Chunk texts (header included where it falls), each re-checked to fit ``max_tokens``."""
    return [piece for piece, _, _ in chunk_spans(text, token_spans, max_tokens, overlap,
                                                 first_min_chars=first_min_chars)]


def chunk_spans(
    text: str,
    token_spans: Callable[[str], list[tuple[int, int]]],
    max_tokens: int,
    overlap: int | None = None,
    *,
    first_min_chars: int = 0,
) -> list[tuple[str, int, int]]:
    """:func:`chunk_text`'s chunks with the characters ``[start, end)`` of ``text`` each came from."""
    pieces: list[tuple[str, int, int]] = []
    windows = plan_windows(text, _bounded(token_spans(text)), max_tokens, overlap, first_min_chars=first_min_chars)
    for window in windows:
        piece = normalize_chunk_text(text[window.start : window.end])
        # A cut inside a word can tokenise differently on its own ("##ization" vs
        # "ization"); trim from the end until the model sees the chunk whole.
        spans = _bounded(token_spans(piece))
        while len(spans) > max_tokens:
            piece = piece[: spans[max_tokens - 1][1]].rstrip()
            spans = _bounded(token_spans(piece))
        if piece:
            pieces.append((piece, window.start, window.end))
    return pieces


def body_characters(piece: str) -> int:
    """Characters of ``piece`` that are not the metadata header."""
    return len(piece[header_length(piece):].strip())


def _heading_level(line: str, underline: str, underlines: list[str]) -> int:
    """How deep a heading stands: its outline marks ("**": 2), numbers ("5.3": 2), its underline's rank among those
    seen (the first seen is 1, as reStructuredText orders them); 0 when it does not say."""
    if underline:
        if underline not in underlines:
            underlines.append(underline)
        return underlines.index(underline) + 1
    if outline := _OUTLINE.match(line):
        return len(outline[1])
    return numbered[1].count(".") + 1 if (numbered := _NUMBERED.match(line)) else 0


def section_headings(text: str, start: int = 0) -> list[tuple[int, int, str]]:
    """The headings of ``text`` from ``start`` on (see :data:`MAX_HEADING_CHARS`), as (offset, level, title): the
    title without its outline marks, its level as :func:`_heading_level` says."""
    out: list[tuple[int, int, str]] = []
    underlines: list[str] = []
    for block in _BLOCK.finditer(text, start):
        lines = [line.strip() for line in block.group().split("\n")]
        underline = lines[1][0] if len(lines) == 2 and _UNDERLINE.fullmatch(lines[1]) else ""
        # (an outline's heading may have its list right under it: "* Version 2.5.4 - April 21, 2022" / "- Fix ...")
        listed = len(lines) > 1 and _OUTLINE.match(lines[0]) and lines[1][:2] in ("- ", "+ ")
        if len(lines) > 1 + bool(underline) and not listed:
            continue
        line = lines[0]
        title = _OUTLINE.sub("", line).strip("`*_ ")
        if (not title or len(title) > MAX_HEADING_CHARS or len(title.split()) > MAX_HEADING_WORDS
                or not re.search(r"\w", title) or _UNDERLINE.fullmatch(title)
                or _NOT_A_HEADING.search(title) and not underline):
            continue
        out.append((block.start(), _heading_level(line, underline, underlines), title))
    return out


def headings_at(headings: Sequence[tuple[int, int, str]], offsets: Sequence[int]) -> list[str]:
    """The heading of the section each of ``offsets`` stands in ("" before the first): the nearest heading at or
    above it, after the one it stands under: of a higher level where it states its level ("Noteworthy changes in
    release 3.8 > Bug fixes"); where it does not (a Markdown heading once cleaned), the nearest above that states
    one ("Version 1.3" / "-----" > "Released 2013-07-03"), else, for a title the document repeats (a release's
    "Added", "Fixes"), the nearest it does not ("0.11.0 - 2022-10-12 > Added"). Each heading's outer one is found
    in one pass and each offset bisected, so a document of many short headings costs linear time, not their
    number times its chunks'."""
    repeated = {t for t, n in Counter(h[2] for h in headings).items() if n > 1}
    shown: list[str] = []
    latest: dict[int, tuple[int, int, str]] = {}  # level -> the latest heading of that level, none deeper after it
    last_leveled = last_unrepeated = None
    for heading in headings:
        _, level, title = heading
        if level:
            outer = max((h for lv, h in latest.items() if lv < level), key=lambda h: h[0], default=None)
            latest = {lv: h for lv, h in latest.items() if lv < level}
            latest[level] = last_leveled = heading
        else:
            outer = last_leveled or (last_unrepeated if title in repeated else None)
        shown.append(f"{outer[2]} > {title}" if outer else title)
        if title not in repeated:
            last_unrepeated = heading
    starts = [h[0] for h in headings]
    return [shown[at - 1] if (at := bisect.bisect_right(starts, offset)) else "" for offset in offsets]


def heading_at(headings: Sequence[tuple[int, int, str]], offset: int) -> str:
    """The heading of the section ``offset`` stands in (see :func:`headings_at`)."""
    return headings_at(headings, [offset])[0]


def chunk_document(
    text: str,
    *,
    document_id: str,
    content_hash: str,
    embedder: Embedder,
    title: str = "",
    url: str = "",
    published: str | None = None,
    source: str = "",
    origin: str = "",
    metadata: Mapping[str, str | list[str]] | None = None,
    overlap: int | None = None,
    marks: Marks = (),
) -> list[Chunk]:
    """The document's chunks, header-only ones dropped (a document whose every chunk has a body
    under :data:`MIN_BODY_CHARS` keeps those with any), numbered 0.. in reading order; each
    with the position (pages, slides, rows) of the passages it covers, when ``marks`` (where
    each passage of ``text`` starts, :func:`shared.formats.passages.lay_out`) are given."""
    pieces = chunk_spans(text, embedder.token_spans, embedder.max_tokens, overlap,
                         first_min_chars=header_length(text) + MIN_BODY_CHARS)
    least = MIN_BODY_CHARS if any(body_characters(p) >= MIN_BODY_CHARS for p, _, _ in pieces) else 1
    pieces = [(p, start, end) for p, start, end in pieces if body_characters(p) >= least]
    headings = headings_at(section_headings(text, header_length(text)), [start for _, start, _ in pieces])
    kept = [(p, position_label(positions_between(marks, max(start, header_length(text)), end)), heading)
            for (p, start, end), heading in zip(pieces, headings, strict=True)]
    return [
        Chunk(
            chunk_id=chunk_id(document_id, content_hash, ordinal),
            document_id=document_id,
            ordinal=ordinal,
            text=piece,
            title=title,
            url=url,
            published=published,
            source=source,
            origin=origin,
            metadata=dict(metadata or {}),
            position=position,
            heading=heading,
        )
        for ordinal, (piece, position, heading) in enumerate(kept)
    ]
