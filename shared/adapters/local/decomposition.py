"""Decomposing a question into sub-queries when its structure asks for it.

Pattern-based and English-only: a comparison ("A vs B", "difference between A
and B", "compare A with B"), "how and why", a list of aspects ("the benefits
and limitations of X"), several questions joined by "and how/why/what", or a
broad request ("explain X", "overview of X"). A single, simple question gives
no sub-queries, and no sub-query is cut out of a bracket: "Why (how does X rotate its logs and why does it
compress them)?" (a follow-up read with the earlier question in brackets) is one question, never split at the
"and why" inside them; a structure whose sub-queries would leave a bracket open gives none.
"""

from __future__ import annotations

import re

from shared.query.reading.extractive import content_terms

_TRAILING = re.compile(r"[\s?.!]+$")
_LEADING = re.compile(
    r"^(?:what|which|who|how)\s+(?:is|are|was|were|does|do)\s+(?:the\s+|a\s+|an\s+)?", re.IGNORECASE
)
_COMPARISONS = (
    re.compile(r"\bdifferences?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>.+)$", re.IGNORECASE),
    re.compile(r"\bcompar(?:e|ing)\s+(?P<a>.+?)\s+(?:and|with|to|against)\s+(?P<b>.+)$", re.IGNORECASE),
    re.compile(r"\b(?:how\s+)?(?:does|do|is|are)\s+(?P<a>.+?)\s+compare[sd]?\s+(?:to|with|against)\s+(?P<b>.+)$",
               re.IGNORECASE),
    re.compile(r"^(?:(?:is|are|should i use)\s+)?(?P<a>.+?)\s+(?:vs\.?|versus)\s+(?P<b>.+)$", re.IGNORECASE),
    re.compile(r"^(?:is|are)\s+(?P<a>.+?)\s+better\s+than\s+(?P<b>.+)$", re.IGNORECASE),
)
_HOW_AND_WHY = re.compile(r"^(?:how\s+and\s+why|why\s+and\s+how)\s+(?P<rest>.+)$", re.IGNORECASE)
_ASPECTS = re.compile(
    r"^(?:what\s+are|what\s+is|list|describe|explain)\s+(?:the\s+)?(?P<aspects>[\w\s,\-]+?\s+and\s+[\w\-]+"
    r"(?:\s[\w\-]+)?)\s+of\s+(?P<subject>.+)$",
    re.IGNORECASE,
)
_BROAD = re.compile(
    r"^(?:explain|describe|tell me (?:all )?about|give (?:me )?an? (?:overview|introduction) (?:of|to)|"
    r"(?:an? )?(?:overview|introduction) (?:of|to)|what should i know about)\s+(?P<subject>.+)$",
    re.IGNORECASE,
)
_JOINED = re.compile(r"\s*(?:[?;]\s*|,?\s+and\s+)(?=(?:how|why|what|when|where|which|who)\b)", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(it|they|them|this|these)\b", re.IGNORECASE)


def _phrase(text: str) -> str:
    return _TRAILING.sub("", text).strip(" ,;:\"'")


def _subject(question: str) -> str:
    return _phrase(_LEADING.sub("", _phrase(question)))


def _balanced(text: str) -> bool:
    """Every bracket of ``text`` closed after it opened, none closed that was not open."""
    depth = 0
    for char in text:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _top_level(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` split where ``pattern`` matches outside brackets only."""
    pieces, start, depth, counted = [], 0, 0, 0
    for match in pattern.finditer(text):
        for char in text[counted: match.start()]:
            depth = max(0, depth + (char in "([{") - (char in ")]}"))
        counted = match.start()
        if depth == 0 and match.end() > match.start():
            pieces.append(text[start: match.start()])
            start = match.end()
    return [*pieces, text[start:]]


def _compared(q: str) -> list[str]:
    for pattern in _COMPARISONS:
        match = pattern.search(q)
        if match:
            a, b = _subject(match["a"]), _subject(match["b"])
            if a and b and len(a.split()) <= 8 and len(b.split()) <= 8:
                return [f"What is {a}?", f"What is {b}?", f"How does {a} compare with {b}?"]
    return []


def _how_and_why(q: str) -> list[str]:
    match = _HOW_AND_WHY.match(q)
    if not match:
        return []
    rest = _phrase(match["rest"])
    return [f"How {rest}?", f"Why {rest}?"]


def _aspects(q: str, limit: int) -> list[str]:
    match = _ASPECTS.match(q)
    if not match:
        return []
    subject = _phrase(match["subject"])
    aspects = [a.strip() for a in re.split(r",\s*|\s+and\s+", match["aspects"]) if a.strip()]
    return [f"What are the {a} of {subject}?" for a in aspects] if 2 <= len(aspects) <= limit else []


def _joined(q: str) -> list[str]:
    pieces = [p for p in _top_level(q, _JOINED) if p and p.strip()]
    if len(pieces) < 2:
        return []
    subject = _subject(pieces[0])
    subs = [_phrase(pieces[0]) + "?"]
    for piece in pieces[1:]:
        text = _phrase(piece)
        if subject:
            text = _PRONOUN.sub(lambda _: subject, text, count=1)  # the subject as written: \include is no escape
        subs.append(text[:1].upper() + text[1:] + "?")
    return subs


def _broad(q: str) -> list[str]:
    match = _BROAD.match(q)
    subject = _phrase(match["subject"]) if match else ""
    if not 0 < len(subject.split()) <= 6:
        return []
    return [f"What is {subject}?", f"How does {subject} work?", f"What are the applications of {subject}?"]


def decompose(question: str, limit: int = 5) -> list[str]:
    """Sub-queries a question's structure asks for (empty for a single, simple question); the first structure found
    whose sub-queries close every bracket they open."""
    q = _phrase(" ".join(question.split()))
    if not q:
        return []
    subs: list[str] = []
    for structure in (_compared, _how_and_why, lambda text: _aspects(text, limit), _joined, _broad):
        found = structure(q)  # tried in turn: a question's first structure ends the search
        if found and all(_balanced(s) for s in found):
            subs = found
            break
    subs = [s for s in dict.fromkeys(subs) if len(content_terms(s)) >= 1]
    return subs[:limit] if len(subs) >= 2 else []
