"""Which sentences of a passage can be quoted as (part of) an answer, and which lean on
the sentence before them.

An extractive answer copies sentences out of their passages, so a sentence must read
as a statement on its own, or come right after the sentence it leans on:

- :func:`answer_sentence` cleans a sentence for quoting (list bullets, the source's
  own ``[n]`` reference markers and heading labels such as ``"Facilities Overview
  (2024): "`` are taken off) or rejects it: fragments, sentences ending in a colon
  (a lead-in to a list the answer would not show), questions and sentences quoting
  one, headings (Markdown ``#`` lines, Title Case lines without a lower-case word)
  and pieces that start in the middle of a sentence;
- :func:`opens_with_reference` tells whether a sentence starts by pointing back at
  what came before ("These ...", "It ...", "At that scale ...", "However, ...",
  "When you do, ...", "BM25 addresses these with ..."): quoted alone it is a riddle;
- :func:`question_parts` splits an English question that asks several things ("What
  is the return policy AND shipping cost?", "... and who funded it?") into its
  parts, so an answer can say which part its sources leave out.
"""

from __future__ import annotations

import re

MIN_CHARS = 25
MIN_WORDS = 5

_WORD = re.compile(r"[^\W_][\w'’\-]*", re.UNICODE)
_BULLET = re.compile(r"^(?:[-*•·▪◦>]+|\(?\d{1,2}[.)]|\(?[a-z][)])\s+")
_REFERENCE_MARKER = re.compile(r"\s*\[\d+(?:\s*[,–-]\s*\d+)*\]")
# Ends as a statement: a full stop or an exclamation mark, maybe inside quotes or brackets.
_STATEMENT_END = re.compile(r"[.!][\"'”’)\]]*$")
# "Atlas Corporation — Facilities Overview (Internal Documentation, 2024): The building ..."
_LABEL = re.compile(r"^(?P<label>[^:]{2,120}?):\s+(?=[\"'“‘(]?[A-Z0-9])")

# Small words that Title Case leaves in lower case, and words that do not make a
# line a sentence: a line whose other words are all capitalised is a heading.
_TITLE_SMALL = frozenset(
    "a an and as at but by en for from if in into nor of on or per the to up via vs with without".split()
)

# A sentence that opens with one of these points back at the one before it.
_REFERRING_FIRST = frozenset(
    """
    this these that those it its it's they them their theirs such he she him his her hers
    another here latter former
    however but and or also so thus therefore hence instead otherwise then still yet
    moreover furthermore additionally similarly likewise consequently accordingly
    nevertheless nonetheless meanwhile conversely besides secondly second thirdly third
    fourth finally lastly next again indeed alternatively rather overall
    """.split()
)
_REFERRING_PHRASES = (
    "in contrast", "in addition", "as a result", "for example", "for instance", "by contrast",
    "on the other hand", "in other words", "in turn", "even so", "that said", "as such",
    "to do so", "to do this", "to that end", "to this end", "at the same time", "on top of that",
    "as mentioned", "as noted", "as described", "as shown", "as above", "as below", "as before",
    "the same", "the above", "the following", "the latter", "the former",
)
_REFERRING_PREFIXES = tuple(p + " " for p in _REFERRING_PHRASES)
# "At that scale", "In this case", "For these reasons", "Because of this", "All of them":
# only prepositions (or a quantifier and "of") before a demonstrative or a pronoun.
_LEAD_IN = frozenset(
    """
    at in on for with by from to of under over after before during despite beyond given
    because due unlike like besides apart all both each many most some none one few several
    much any either neither part
    """.split()
)
_DEMONSTRATIVE = frozenset("this that these those such it them they their its which".split())
# "When you do, ...", "If so, ...", "If not, ...": the clause stands for the previous one.
_ELLIPTIC_CLAUSE = re.compile(
    r"^(?:when|if|once|unless|until|as|where|while|whenever)\s+"
    r"(?:so|not|(?:you|we|they|it|one|i|he|she)(?:\s+(?:do|does|did|don't|doesn't|can|cannot|can't|will|would|"
    r"are|is|have|has|had|must|should))?)\s*[,.;]",
    re.IGNORECASE,
)
# "those who ...", "those that ...": the words after it say what it means
_CATAPHORIC = frozenset("who whom whose that which with of in on at for from where".split())
# "these" is read back to something already named ("BM25 addresses these with ...");
# "this" too when it stands alone as the subject ("... because this is rare").
# "them" among the first words ("Systems built on them ..."), and "this" standing for
# a thing named before ("Some brokers offer this within ...").
_BACK_POINTER = re.compile(
    r"^(?:\S+\s+){0,3}them\b|"
    r"\bthese\b|\bthis\s+(?:is|was|means|meant|makes|made|allows|lets|gives|has|had|can|could|will|would|"
    r"also|helps|happens|works|requires|ensures|explains|within|in|for|to|with|by|on|at|from|as|because|"
    r"when|only|too)\b|\bthis[.,;]|\bthose\s+(?!(?:who|whom|whose|that|which|with|of|in|on|at|for|from|where)\b)",
    re.IGNORECASE,
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def heading_like(text: str) -> bool:
    """True for a Title Case line without a lower-case word of its own (a heading,
    a label, a byline), e.g. "Term Frequency Saturation and k1" or "Pros"."""
    # Stops at the first word of its own in lower case (a sentence's second or third word),
    # rather than classifying them all: every sentence of every passage is asked this. A
    # word opening with a lower-case letter has a letter, so it counts as a word.
    for w in _words(text):
        if w[0].islower() and w.lower() not in _TITLE_SMALL and not any(
                ch.isdigit() or ch.isupper() for ch in w[1:]):
            return False
    return True


def answer_sentence(sentence: str) -> str | None:
    """``sentence`` cleaned for quoting in an answer, or None when it cannot be quoted
    (see the module docstring for what is cleaned and what is rejected)."""
    text = " ".join(sentence.split())
    if text.startswith("#"):
        return None  # a Markdown heading
    text = _BULLET.sub("", text)
    text = _REFERENCE_MARKER.sub("", text).strip()
    label = _LABEL.match(text)
    # a short label with a number ("Q3 2024: Revenue rose") says when or which: it stays
    if label and heading_like(label["label"]) and not (
            len(label["label"].split()) <= 3 and any(ch.isdigit() for ch in label["label"])):
        text = text[label.end():]
    if len(text) < MIN_CHARS or len(_words(text)) < MIN_WORDS:
        return None
    if not _STATEMENT_END.search(text) or "?" in text:
        return None  # cut at a colon or a chunk edge, or a question (asked or quoted)
    first = text.lstrip("\"'“‘(")
    if first[:1].islower() and not any(ch.isdigit() or ch.isupper() for ch in _words(first)[0][1:]):
        return None  # the tail of a sentence split at an inner quotation or a line break
    if heading_like(text):
        return None
    return text


def opens_with_reference(sentence: str) -> bool:
    """True when ``sentence`` starts by pointing back at what came before it."""
    text = sentence.lstrip("\"'“‘(").strip()
    words = [w.lower().replace("’", "'") for w in _words(text)]
    if not words:
        return False
    if words[0] in _REFERRING_FIRST and not (words[0] == "those" and words[1:2] and words[1] in _CATAPHORIC):
        return True
    if (" ".join(words[:6]) + " ").startswith(_REFERRING_PREFIXES):  # the phrase, then a word or the end
        return True
    for i, word in enumerate(words[:4]):
        if word in _DEMONSTRATIVE:
            if i > 0:
                return True
            break
        if word not in _LEAD_IN:
            break
    if _ELLIPTIC_CLAUSE.match(text):
        return True
    # a back-pointing "these"/"this is" in the sentence's first clause
    first_clause = re.split(r"[,;:]\s", text, maxsplit=1)[0]
    return bool(_BACK_POINTER.search(" ".join(first_clause.split()[:12])))


# "X AND Y" (written in capitals to stress it), or "..., and how/what/who ..." starting a new question.
_PART_BREAK = re.compile(
    r"\s+AND\s+|,?\s+(?i:and)\s+(?=(?i:how|why|what|when|where|which|who|whom|whose|is|are|was|were|does|do|did|"
    r"can|could|should|will|would|has|have)\b)"
)


def question_parts(question: str) -> list[str]:
    """The parts of an English question that asks several things, in order; empty
    for a question that asks one thing."""
    text = " ".join(question.split()).rstrip(" ?.!")
    parts = [p.strip(" ,;") for p in _PART_BREAK.split(text)]
    parts = [p for p in parts if _words(p)]
    return parts if len(parts) > 1 else []
