"""The note a caveat opens with (issue 36): what the reader found and what it did not, from the evidence it measured
(:class:`shared.contract.ports.Finding`), in the question's language. "Which GID must the tty group have on systemd
systems?", answered from passages about the tty group that state no GID, opens with "Note: the sources mention “tty
group” and “systemd systems”, but I found no sentence stating the GID; the closest passages are quoted below." Only
what was measured is said: the question's words the quoted passages hold, the parts and names they lack, and whether
a sentence states a value of the asked type (or the quoted text lists the asked items). Where the reader measured
nothing (a generative model's answer) or found none of the question's words, the note is the generic one."""

from __future__ import annotations

import re

from shared.contract.ports import Answer, Finding
from shared.query.reading import answer_types as kinds
from shared.query.reading.answer_types import asked_fact, holds_value, term_set
from shared.query.reading.extractive import STOPWORDS, stem, tokenize
from shared.query.reading.language import detect_language, phrase, quoted_words

# A note names at most MOST_NAMED of the question's terms found and missing, each in SHOWN_WORDS words and
# SHOWN_CHARS characters at most: a note is a line (a 1,809-character question made a 1,889-character note)
MOST_NAMED, SHOWN_WORDS, SHOWN_CHARS = 3, 5, 40

# What a value of each kind is called when the question's own words do not name it.
_KIND_LABELS = {kinds.AMOUNT: "an amount", kinds.COUNT: "a count", kinds.QUANTITY: "a value", kinds.DATE: "a date",
                kinds.NAME: "a name", kinds.STATUS: "a status code", kinds.FLAG: "an option", kinds.VERSION: "a version",
                kinds.RETURN: "a return value", kinds.DEFAULT: "a default", kinds.IDENT: "an identifier"}
# "Which GID must ...", "In which version ...", "What is the default value of ...", "What are the ...":
# the words after the asking word name what is asked, up to the first small word.
_OPENING = re.compile(r"^\W*(?:(?:in|on|at|for|from|since|to|by|with|of)\s+)?(?:which|what)\s+"
                      r"(?:(?:is|are|was|were)\s+)?(?:(?:the|an?)\s+)?(?P<rest>.+)", re.IGNORECASE | re.DOTALL)
# The items a question asking a list names: "Which request HEADERS make ...", "What are the LIMITS on ...",
# "List the OPTIONS ...", "In which TWO WAYS ...".
_LIST_PHRASE = re.compile(
    r"^\W*(?:which|what)\s+((?:[\w-]+\s+){0,2}?[\w-]+s)\s+(?:are|were|do|does|can|could|must|should|make|have|has|"
    r"did|will|is)\b|^\W*(?:what|which)\s+(?:are|were)\s+the\s+((?:[\w-]+\s+){0,2}?[\w-]+s)\b|"
    r"^\W*(?:list|name)\s+(?:the\s+|all\s+|every\s+)?((?:[\w-]+\s+){0,2}?[\w-]+s)\b|"
    r"\b((?:two|three|four|five|six|several)\s+(?:[\w-]+\s+)?[\w-]+s)\b", re.IGNORECASE)
OPENING_WORDS = 4
# A word as a question in any language writes it, accents and all ("conseillé", not the "conseill" an ASCII
# identifier pattern would cut from it), with the dots and hyphens inside it ("exim4", "Pre-Depends").
_WRITTEN = re.compile(r"[^\W_]+(?:[.\-_'][^\W_]+)*")


def caveat_note(question: str, answer: Answer | None, language: str) -> str:
    """The note an ``answered_with_caveat`` answer to ``question`` opens with, in ``language``: what the reader
    found and did not (``answer.finding``), else the generic note."""
    if answer is None or (finding := answer.finding) is None:
        return phrase("caveat", language)
    english = language == "en"
    asked = _asked(question, finding) if english else ""
    asked_stems = {stem(w) for w in tokenize(asked)}
    # A question in another language is read by its English terms: a note names only the words it writes itself,
    # and what the passages lack only where they are in its language ("but not “length”" for "longueur" over
    # English text would name a word nobody asked for)
    written = None if english else {w.lower() for w in _WRITTEN.findall(question)}
    says_lacking = english or detect_language(" ".join(s.text for s in answer.sentences if s.citations)) == language

    def named(runs: tuple[str, ...]) -> list[str]:
        if written is not None:
            runs = tuple(dict.fromkeys(w for run in runs for w in run.split() if w.lower() in written))
        return [_shown(run) for run in runs[:MOST_NAMED]]

    def unasked(runs: tuple[str, ...]) -> list[str]:
        # what the note names as asked is not named again as missing ("the GID" and "“GID”")
        return named(tuple(r for r in runs if not {stem(w) for w in tokenize(r)} <= asked_stems)) if says_lacking else []

    # two values, or a value for another case: the first thing to say
    if finding.condition:
        return phrase("caveat_condition", language).format(
            condition=_shown(finding.condition), asked=_shown(asked) if asked[:4] == "the " else "the value")
    if finding.disagree:
        return phrase("caveat_disagree", language).format(asked=_shown(asked) if asked[:4] == "the " else "what is asked")
    found = quoted_words(named(finding.found), language)
    # the most telling first: a part or a name of the question no quoted passage holds, then the asked value
    # or list none states, then the question's other words no passage holds; else only what they hold
    missing = unasked(finding.missing)
    if not missing and asked and not finding.stated:
        # a quoted value of the asked kind the reader could not tie to the question: "no sentence stating" would belie it
        unsure = finding.asks == "value" and any(holds_value(s.text, asked_fact(question).kind, frozenset(term_set(
            question))) for s in answer.sentences if s.citations)
        key = "caveat_value_unchecked" if unsure else "caveat_value" if finding.asks == "value" else "caveat_list"
        return phrase(key if found else f"{key}_alone", language).format(found=found, asked=_shown(asked))
    missing = missing or unasked(finding.unquoted)
    if missing:
        return phrase("caveat_missing" if found else "caveat_missing_alone", language).format(
            found=found, missing=quoted_words(missing, language, either=True))
    return phrase("caveat_unsure", language).format(found=found) if found else phrase("caveat", language)


def _asked(question: str, finding: Finding) -> str:
    """What an English ``question`` asks for, as a note names it ("the GID", "the request headers", "a date");
    "" when it asks for no value or list."""
    if finding.asks == "value":
        fact = asked_fact(question)
        if not fact.kind:
            return ""
        words = _noun_words(m["rest"].split()) if (m := _OPENING.match(question)) else []  # "GID" of "Which GID must"
        nouns = set(kinds.KIND_NOUNS.get(fact.kind, "").split()) | {a.lower() for a in fact.aspect}
        if words and words[-1].lower() in nouns:
            return "the " + " ".join(words)
        if fact.kind == kinds.COUNT and fact.counted:
            return f"the number of {fact.counted[0]}"
        return f"the {fact.aspect[0]}" if fact.kind == kinds.QUANTITY and fact.aspect else _KIND_LABELS.get(fact.kind, "")
    if finding.asks == "list" and (m := _LIST_PHRASE.search(question)):
        words = next(g for g in m.groups() if g).split()
        # "configure option makes", "of the two does": what ends or opens in a verb or a small word is no list's items
        if words[-1].lower() not in STOPWORDS - kinds.WORD_LISTS["generic_heads"] and words[0].lower() not in kinds.WORD_LISTS["phrase_breaks"]:
            return "the " + " ".join(words)
    return ""  # a list asked in words no phrase names ("Which command lists all files ...?"): not named


def _shown(term: str) -> str:
    """``term`` as a note quotes it: its first words up to the bounds, cut at a word, with an ellipsis when cut."""
    shown, whole = " ".join(term.split()[:SHOWN_WORDS]), " ".join(term.split())
    while len(shown) > SHOWN_CHARS and " " in shown:
        shown = shown.rsplit(" ", 1)[0]
    return whole if shown[:SHOWN_CHARS] == whole else shown[:SHOWN_CHARS] + "…"


def _noun_words(words: list[str]) -> list[str]:
    """The first of ``words`` naming what is asked, up to the first small word or the end of a clause."""
    out: list[str] = []
    for word in words[:OPENING_WORDS]:
        bare = word.strip(".,;:!?")
        if bare.lower() in STOPWORDS or tokenize(bare)[:1] != [bare]:  # a small word, or not one word
            break
        out.append(bare)
        if bare != word:  # a word ending a clause ends the phrase
            break
    return out


__all__ = ["MOST_NAMED", "caveat_note"]
