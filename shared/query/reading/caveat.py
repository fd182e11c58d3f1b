"""The note a caveat opens with (issue 36): what the reader found and what it did not, from the evidence
it measured (:class:`shared.contract.ports.Finding`), in the question's language.

"Which GID must the tty group have on systemd systems?", answered from passages about the tty group that
state no GID, opens with "Note: the sources mention “tty group” and “systemd systems”, but I found no
sentence stating the GID; the closest passages are quoted below." Only what was measured is said: the
question's words the quoted passages hold, the parts and names they lack, and whether a sentence states a
value of the asked type (or the quoted text lists the asked items). Where the reader measured nothing (a
generative model's answer) or found none of the question's words, the note is the generic one.
"""

from __future__ import annotations

import re

from shared.contract.ports import Answer, Finding
from shared.query.reading.answer_types import (
    AMOUNT,
    COUNT,
    DATE,
    DEFAULT,
    FLAG,
    IDENT,
    NAME,
    QUANTITY,
    RETURN,
    STATUS,
    VERSION,
    asked_fact,
)
from shared.query.reading.extractive import STOPWORDS, stem, tokenize
from shared.query.reading.language import phrase, quoted_words

# A note names at most this many of the question's words found, and of what is missing: a note is a line.
MOST_NAMED = 3

# What a value of each kind is called when the question's own words do not name it.
_KIND_LABELS = {
    AMOUNT: "an amount", COUNT: "a count", QUANTITY: "a value", DATE: "a date", NAME: "a name",
    STATUS: "a status code", FLAG: "an option", RETURN: "a return value", VERSION: "a version",
    DEFAULT: "a default", IDENT: "an identifier",
}
# The nouns that name a value of each kind: "Which GID ...", "What port number ...", "Which status code ...".
_KIND_NOUNS = {
    STATUS: "code codes status", FLAG: "option options flag flags switch switches",
    VERSION: "version versions release releases", DEFAULT: "default defaults value values",
    IDENT: "id ids identifier identifiers number numbers uid uids gid gids port ports code codes",
}
# "Which GID must ...", "In which version ...", "What is the default value of ...", "What are the ...":
# the words after the asking word name what is asked, up to the first small word.
_OPENING = re.compile(r"^\W*(?:(?:in|on|at|for|from|since|to|by|with|of)\s+)?(?:which|what)\s+"
                      r"(?:(?:is|are|was|were)\s+)?(?:(?:the|an?)\s+)?(?P<rest>.+)", re.IGNORECASE | re.DOTALL)
_LIST_OPENING = re.compile(r"^\W*(?:list|name)\s+(?:(?:the|all|every)\s+)?(?P<rest>.+)", re.IGNORECASE | re.DOTALL)
OPENING_WORDS = 4


def caveat_note(question: str, answer: Answer | None, language: str) -> str:
    """The note an ``answered_with_caveat`` answer to ``question`` opens with, in ``language``: what the reader
    found and did not (``answer.finding``), else the generic note."""
    finding = answer.finding if answer is not None else None
    if finding is None:
        return phrase("caveat", language)
    english = language == "en"
    asked = _asked(question, finding) if english else ""
    asked_stems = {stem(w) for w in tokenize(asked)}

    def unasked(runs: tuple[str, ...]) -> list[str]:
        # what the note names as asked is not named again as missing ("the GID" and "“GID”")
        return _named(tuple(r for r in runs if not {stem(w) for w in tokenize(r)} <= asked_stems), english)

    found = quoted_words(_named(finding.found, english), language)
    # the most telling first: a part or a name of the question no quoted passage holds, then the asked value
    # or list none states, then the question's other words they lack; else only what they hold
    missing = unasked(finding.missing)
    if not missing and asked and not finding.stated:
        key = "caveat_value" if finding.asks == "value" else "caveat_list"
        return phrase(key if found else f"{key}_alone", language).format(found=found, asked=asked)
    missing = missing or unasked(finding.unquoted)
    if missing:
        lacking = quoted_words(missing, language, either=True)
        return phrase("caveat_missing" if found else "caveat_missing_alone", language).format(
            found=found, missing=lacking)
    if found:
        return phrase("caveat_unsure", language).format(found=found)
    return phrase("caveat", language)


def _named(runs: tuple[str, ...], english: bool) -> list[str]:
    """The runs a note names: as the question writes them; in another language word by word (a German,
    French or Spanish question is read by its English terms, whose order is not the question's)."""
    if not english:
        runs = tuple(dict.fromkeys(word for run in runs for word in run.split()))
    return list(runs[:MOST_NAMED])


def _asked(question: str, finding: Finding) -> str:
    """What an English ``question`` asks for, as a note names it ("the GID", "the request headers", "a date");
    "" when it asks for no value or list."""
    if finding.asks == "value":
        fact = asked_fact(question)
        if not fact.kind:
            return ""
        words = _opening_words(question)
        nouns = set(_KIND_NOUNS.get(fact.kind, "").split()) | {a.lower() for a in fact.aspect}
        if words and words[-1].lower() in nouns:
            return "the " + " ".join(words)
        if fact.kind == COUNT and fact.counted:
            return f"the number of {fact.counted[0]}"
        if fact.kind == QUANTITY and fact.aspect:
            return f"the {fact.aspect[0]}"
        return _KIND_LABELS.get(fact.kind, "")
    if finding.asks == "list":
        words = _opening_words(question)
        return "the " + " ".join(words) if words else "the asked items"
    return ""


def _opening_words(question: str) -> list[str]:
    """The words naming what ``question`` asks for, after its asking word ("GID" of "Which GID must ..."), up to
    the first small word; none when it opens otherwise."""
    m = _OPENING.match(question) or _LIST_OPENING.match(question)
    if not m:
        return []
    words: list[str] = []
    for word in m["rest"].split()[:OPENING_WORDS]:
        bare = word.strip(".,;:!?")
        if not bare or bare.lower() in STOPWORDS or not tokenize(bare) or tokenize(bare)[0] != bare:
            break
        words.append(bare)
        if bare != word:  # a word ending a clause ends the phrase
            break
    return words


__all__ = ["MOST_NAMED", "caveat_note"]
