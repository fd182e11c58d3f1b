"""Does the retrieved text hold the *asked* fact, not only the question's topic?

A near miss names an entity the corpus knows but asks a fact it lacks: "How much does the Aurora plan cost?" against
passages that describe the plan and name no price. Topic similarity and term coverage cannot tell the two apart; this
module can, for the questions whose shape says what an answer holds:

- **answer type** (a *firm* check: a miss is strong evidence against answering): an *amount* (how much, the price, a
  fee: a currency figure or a percentage), a *count* (how many), a *quantity* (a rate, temperature, how long / far /
  old, what percentage: a number that is not just a year), a *date* (when, what year), a *name* (who), and in
  documentation a status code, a flag, a return value, a version, a default or an identifier. A sentence supports the
  question when it holds a value of that type and names the asked attribute or states the value in its unit ("40
  tons" for a load capacity), or names a question term;
- **asked aspect, cause, mechanism** (*soft* checks: a miss only weakens the grade): "the ingredients of X" needs a
  passage naming them, "what causes X" a causal sentence, "how does X work" a mechanistic one (on fitz-gov these
  refused as many answerable questions as they caught near misses: passages use other words);
- **the entity**: the supporting passage names every proper name, acronym and model number the question states and
  the year of an edition ("the 2024 World Series"), and covers a third (or two) of its other terms.

:func:`question_names` gives a question's names whatever its shape, for the off-topic check. The rules are English: a
question they cannot parse (another language, "is X better than Y?", "What is a version number?") gets a fact with no
requirement, and :func:`fact_support` reports ``checked=False``, which no caller may read as a reason to abstain. The
local grader (:mod:`shared.adapters.local.llm`) and the reader's verdict use them.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.query.reading.extractive import (
    ANSWER_WORDS,
    ASKS_LIMIT,
    STOPWORDS,
    content_terms,
    split_sentences,
    stem,
    term_set,
    tokenize,
)
from shared.query.reading.language import in_english

AMOUNT = "amount"
COUNT = "count"
QUANTITY = "quantity"
DATE = "date"
NAME = "name"
# What documentation is asked for: an HTTP status code ("Which status code ..."), a command-line
# flag or option ("Which option shows ..."), what a function returns ("What does ffi_call return?").
STATUS = "status code"
FLAG = "flag"
RETURN = "return value"
VERSION = "version"
DEFAULT = "default"
# An identifier a document assigns ("Filter ID: 0x21", "9073  Fix null deref ...", "port number 8080"):
# asked as "which ticket ID", "what Filter ID", "what port number"; stated only with a token holding a digit.
IDENT = "identifier"
LOCATION = "location"  # where a thing is kept: a path or a web address ("/etc/default", "Tools/freeze", "https://...")

# The nouns that name a value of each kind, not what it is the value of: "Which HTTP status code ...", "What port
# number ...", "What is the default value of ...".
_NAMES_AN_ID = "default defaults version versions release releases id ids identifier identifiers number numbers"
KIND_NOUNS = {STATUS: "http status code codes response reply error", FLAG: "option options flag flags switch switches",
              RETURN: "return returns returned", VERSION: _NAMES_AN_ID, DEFAULT: f"{_NAMES_AN_ID} value values setting",
              IDENT: f"{_NAMES_AN_ID} value uid uids gid gids port ports code codes"}

# lexicon/answer_words.tsv's word lists (the file says why each; the caveat reads them too), months in order, events
_WORDS = WORD_LISTS = {name: frozenset(words.split()) for name, words in ANSWER_WORDS.items()}
_EVENTS = {stem(form): n for n, forms in enumerate(ANSWER_WORDS["event_verbs"].split()) for form in forms.split("/")}
_MONTHS = ANSWER_WORDS["months"].split()  # in order: a pattern alternates them
# Units that state a value of a head without naming it ("40 tons" is a load capacity, "600 IU" a dose).
_LENGTH = r"km|kilomet\w*|miles?|mi|met(?:er|re)s?|m|feet|foot|ft|inch(?:es)?|yards?|cm|mm|light-years?|au"
_DURATION = r"seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|yrs?|hrs?|mins?"
# A number followed by one of these measures something ("12-ounce packages", "3 hours"): it is a count
# only of that unit, so it answers "how many hours?" but not "how many calories?".
_MEASURE = re.compile(
    rf"(?:{_LENGTH}|{_DURATION}|kg|kilograms?|pounds?|lbs?|tons?|tonnes?|grams?|g|ounces?|oz|mg|ml|"
    r"liters?|litres?|gallons?|percent|%|dollars?|cents?|euros?|degrees?|acres?|hectares?|mph|gb|tb|mb|kb|"
    r"kwh|mw|gw|watts?|volts?|x)$", re.IGNORECASE)
_DOSE = r"mg|mcg|µg|micrograms?|milligrams?|iu|grams?|g|ml"
_UNITS = {
    **dict.fromkeys(("distance", "height", "range", "dimensions"), _LENGTH), "length": rf"{_LENGTH}|bytes?|characters?",
    **dict.fromkeys(("duration", "period", "deadline", "tenure", "age", "lifespan", "half-life", "life", "time"),
                    _DURATION),
    **dict.fromkeys(("percentage", "share", "proportion", "fraction", "efficiency"), r"%|percent"),
    **dict.fromkeys(("dosage", "dose"), rf"{_DOSE}|units?|tablets?"), "intake": rf"{_DOSE}|calories|kcal|cups?|servings?",
    "temperature": r"°|degrees?|[fc]", "speed": r"mph|km/h|kph|knots?|m/s|miles\s+per\s+hour|kilomet\w*\s+per\s+hour",
    "size": rf"{_LENGTH}|bits?|bytes?|kb|mb|gb|tb|kib|mib|gib|k|m",
    "weight": r"kg|kilograms?|pounds?|lbs?|tons?|tonnes?|grams?|g|ounces?|oz",
    "capacity": r"seats?|passengers?|people|persons|tons?|tonnes?|teu|liters?|litres?|gallons?|gb|tb|mw|gw|kwh",
    "rate": r"%|percent|per\s+\w+|in\s+\d+|/\w+", "ratio": r"%|percent|to\s+\d+|:\d+",
    "density": r"per\s+\w+|/\w+", "footprint": r"co2\w*|tons?|tonnes?|kg|grams?|g",
}

# A question's start, past one word before the asking one ("And when ...", "So which ...")
_OPENS = r"^\W*(?:\w+\s+)?"
_LEADING_NOISE = re.compile(r"^\W*(?:(?:how|why|what|is|are|when|who|which)\s+)(?=(?:what|how|when|who|which|why)\b)", re.IGNORECASE)
_HOW_MANY = re.compile(r"\bhow\s+many\s+(?P<rest>.+)", re.IGNORECASE)
_HOW_MUCH = re.compile(r"\bhow\s+much\s+(?P<rest>.+)", re.IGNORECASE)
_HOW_ADJ = re.compile(r"\bhow\s+(?P<adj>long|far|old|big|large|tall|high|fast|heavy|deep|wide|often|hot|cold|expensive|"
                      r"frequently|quickly|soon)\b", re.IGNORECASE)
# "What is a version number?" asks what one is (a definition), no value; "What is a typical size ..." a value.
_DEFINITION = re.compile(r"^\W*what\s+(?:is|are)\s+an?\s+(?P<next>[\w-]+)", re.IGNORECASE)
# "When was / did / will X ..." asks for a date; "when is exact search good enough?" for a condition.
_WHEN = re.compile(_OPENS + r"(?:when\s+(?:was|were|did|will|would)|since\s+when|in\s+what\s+year|"
                   r"in\s+which\s+year|what\s+year)\b", re.IGNORECASE)
_WHO = re.compile(_OPENS + r"(?:who|whom)\b", re.IGNORECASE)
_WHERE = re.compile(_OPENS + r"where\b(?!.*\b(?:come|came|comes)\s+from\b)", re.IGNORECASE)  # an origin is no place
_PATH_VALUE = re.compile(r"(?<![\w/])(?:[~$][\w{}]*|[A-Za-z]:)?[\\/][\w.$-]+|\b[\w.-]+/[\w.$-]+|\bhttps?://\S+")
# A person's role after an article: "a primary handler", "the release team", "the maintainers".
_ROLE = re.compile(r"\b(?:a|an|the)\s+(?:[a-z][\w-]*\s+){0,2}?(?P<role>[a-z]{3,}(?:er|or|ist|ian)s?|team|teams|"
                   r"committee|group|person|people|staff)\b")
_WHAT_THE = re.compile(
    _OPENS + r"(?:(?:what|which|how)\s+(?:is|are|was|were|will\s+be|would\s+be)|how\s+(?:does|do|did))\s+"
    # "the price", or a name whose possessive was dropped ("What is Tesla('s) stock price")
    r"(?:(?:the|a|an|its|their)\s+|(?-i:(?:[A-Z][\w.-]*\s+){1,3})(?=[a-z]))"
    r"(?P<phrase>.+)", re.IGNORECASE)
_WHAT_NOUN = re.compile(_OPENS + r"(?:what|which)\s+(?P<phrase>(?:[\w'-]+\s+){0,3}?[\w'-]+)\s+"
                        r"(?:is|are|was|were|did|do|does|has|have|had|will|can|could|should|would|showed|show|shows)\b",
                        re.IGNORECASE)
_WHAT_CAUSES = re.compile(r"\bwhat\s+(?:causes|caused|causing|triggers|triggered|leads\s+to|led\s+to)\b|\bcauses?\s+of\b",
                          re.IGNORECASE)
_HOW_WORK = re.compile(r"\bhow\s+(?:does|do|did|is|are)\b.+?\bwork(?:s|ed)?\b", re.IGNORECASE)
_HOW_PROCESS = re.compile(_OPENS + r"how\s+(?:is|are|was|were)\s+.+\b(?:made|produced|manufactured|built|constructed|"
                          r"formed|created|generated|synthesi[sz]ed|calculated|measured|determined|transmitted|extracted|processed)\b", re.IGNORECASE)
_HOW_TO = re.compile(r"\bhow\s+(?:do|can|should|could|would)\s+(?:i|we|you|one)\b", re.IGNORECASE)
_COMPARISON = re.compile(r"\b(versus|vs\.?|compared?|comparison|differ\w*|than)\b", re.IGNORECASE)
_WHAT_SHARE = re.compile(r"\b(?:what|which)\s+(?:percentage|percent|proportion|share|fraction)\b", re.IGNORECASE)
_STATUS_Q = re.compile(r"\b(?:status|response|reply|error|http)\s+codes?\b", re.IGNORECASE)
# A which/what question opening with a noun asks for one of what that noun names: "Which request headers make the
# status code ... possible?" asks for headers, "Which options does version 2 add?" for options, "What uid does the
# backup user have?" for a uid. The noun phrase runs up to an auxiliary, an article or a preposition (so it may end
# with the verb: "Which GNU make option randomises the order"), at most OPENING_WORDS words; the last word of it
# that names a kind below says what is asked.
_OPENING = re.compile(_OPENS + r"(?:which|what)\s+(?P<rest>.+)", re.IGNORECASE)
OPENING_WORDS = 3
_OPENING_KINDS = {word: kind for kind, words in ((FLAG, "option options flag flags switch switches"),
                                                 (VERSION, "version versions release releases"),
                                                 (IDENT, "id ids identifier identifiers number numbers uid uids gid gids port"))
                  for word in words.split()}
# A code is a status code ("Which HTTP status code ...") or a number a program exits with ("Which exit code ...").
_CODE_KINDS = {"status": STATUS, "response": STATUS, "reply": STATUS, "error": STATUS, "http": STATUS, "exit": IDENT,
               "return": IDENT}
# "What does the --foo option do?", "What did version 2 add?": what the question is about, not what it asks for.
_ASKS_ABOUT = re.compile(_OPENS + r"(?:which|what)\s+(?:do|does|did)\b", re.IGNORECASE)
_FLAG_Q = re.compile(_OPENS + r"(?:which|what)\s+(?:[\w-]+\s+){0,2}?(?:option|flag|switch|command-line\s+option)s?\b", re.I)
_RETURN_Q = re.compile(r"\bwhat\s+(?:does|do|did|will|can)\s+.+?\breturns?\b", re.IGNORECASE)
_STATUS_VALUE = re.compile(r"(?<![\d.,-])[1-5]\d\d(?![\d.,%-])(?!\s*(?:ms|s|seconds?|bytes?|kb|mb|gb|chunks?|words?|"
                           r"tokens?|dimensions?|-dimensional)\b)", re.IGNORECASE)
_FLAG_VALUE = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*|\b(?:flag|option)s?:?\s+[A-Za-z]\w*[_=]\w+|\b[A-Za-z](?=\w*_)\w*+(?=\s+(?:flag|option)s?\b)")  # "-k", "option: name_x", "Py_X flag"
_RETURN_VALUE = re.compile(r"\breturn(?:s|ed|ing)?\b|\byields?\b|\bresults?\s+(?:in|is)\b|>>>|-->", re.IGNORECASE)  # a session
_VERSION_Q = re.compile(_OPENS + r"(?:(?:which|what)\s+(?:[\w-]+\s+){0,2}(?:version|release)s?\b|since\s+(?:which|what)\s+"
                        r"(?:version|release)\b|in\s+(?:which|what)\s+(?:version|release)\b)", re.IGNORECASE)
_DEFAULT_Q = re.compile(_OPENS + r"(?:what|which)\b.*\bdefaults?\b|^\W*(?:what|which)\b.*\bby\s+default\b", re.IGNORECASE)
# the default itself asked ("What is gzip's default level?", "... use by default?"), not a thing named by it ("Which line
# must a package installing into the default directories have?")
_DEFAULT_ASKED = re.compile(_OPENS + r"(?:what|which)\s+(?:is|are|was)\s+(?:the\s+|[\w-]+'s\s+)?default\b|\bby\s+default\b|"
                            r"\bdefault\s+values?\b", re.IGNORECASE)
# A question asking for a limit (extractive.ASKS_LIMIT: "the maximum reward", "which minimum version") is answered
# by a sentence stating one ("up to", "at most", "limited to", "or higher"), not by any value of the thing.
_BOUND = re.compile(r"\b(?:max(?:imum|imal)?|min(?:imum|imal)?|at\s+(?:most|least)|up\s+to|no\s+(?:more|less|fewer)\s+than|"
                    r"limit(?:s|ed)?|cap(?:s|ped)?|exceed\w*|(?:larger|greater|more|less|fewer|higher|lower|smaller)\s+than|"
                    r"or\s+(?:more|less|higher|lower|later|newer|above|greater)|largest|smallest|highest|lowest|"
                    r"requires?|required|needs?)\b", re.IGNORECASE)
_IN_VERSION = re.compile(r"\b(?:in|since|from|with|as\s+of)\s+(?:[\w-]+\s+){0,2}(?:version|release|v)\s*\d", re.IGNORECASE)
_RELEASE = re.compile(r"\b(?:releas\w*|published)\b", re.IGNORECASE)
_CODENAME = re.compile(r"\b[Tt]he\s+([A-Z][a-z][\w-]*)\s+(?:release|version)\b")
_VERSION_VALUE = re.compile(r"\b\d+(?:\.\d+)+[a-z]?\b|\bv\d+\b|\b(?:version|release)(?:\s+|\s*[=:]\s*)\d|"
                            r"\b(?:latest|newest|current|oldest|every|each)\s+(?:[\w-]+\s+)?(?:version|release)s?\b", re.IGNORECASE)
# A sentence saying what the default is ("By default, X is set to Release", "default is 75", "Default: 1",
# "defaults to 3000"), not one only naming a default ("overrides the default value specified ...").
# "the default (value) is (then) used (for ...)" names a default in use, not its value ("is used as 25" states one)
_IN_USE = r"(?!\s+(?:then\s+|always\s+)?(?:used|applied|assumed)\b(?!\s+(?:as|at)\b|\s+\d))"
_DEFAULT_VALUE = re.compile(r"\b(?:by|per)\s+default\b|\bdefaults?(?:\s+values?)?\s*(?::|=|\b(?:is|are|was)\b" + _IN_USE + r"|\bto\b|\bof\b)|"
                            r"\bdefault(?:ing)?\s+to\b|\(default\b|\bdefault\s+[\w-]+\s+(?:(?:of|for|in)\s+(?:[\w.,-]+\s+){1,4}|[\w-]+\s+)?(?:is|are)\b" + _IN_USE + "|"
                            r"\bunless\s+(?:told|set|given|configured)\b|,\s+the\s+default(?:\s+values?)?\s*[,;)]", re.IGNORECASE)
# "By default, when a timer is scheduled, the loop keeps running": a default behaviour under a condition,
# not a default value (unless the sentence gives a number).
_BEHAVIOUR_BY_DEFAULT = re.compile(r"\bby\s+default\s*,\s*(?:when|if|while|once|as\s+long\s+as|unless)\b", re.IGNORECASE)
# "Which ticket ID ...", "What Filter ID ...", "what port number ...", not "what is the number of ..." (a count).
_IDENT_Q = re.compile(_OPENS + r"(?:which|what)\s+(?:(?!(?:is|are|was|were|does|do|did|the|an?)\b)[\w-]+\s+){0,2}"
                      r"(?:ids?|identifiers?|numbers?)\b", re.IGNORECASE)
# A token holding a digit ("0x21", "9073", "CVE-2023-1234", "E042"): what an identifier is written as.
_IDENT_VALUE = re.compile(r"(?<![\w.-])[\w-]*\d[\w.-]*(?<![.-])")
# "described in Section 5.3", "see page 12": a pointer to another part of the document, not a value it states.
_CROSS_REFERENCE = re.compile(r"\b(?:sections?|chapters?|pages?|figures?|tables?|appendix|paragraphs?|steps?|lines?|"
                              r"§)\s*$", re.IGNORECASE)
# "1 byte", "30 days", "50 %": a measure, not an identifier.
_MEASURED = re.compile(r"^\s*(?:%|percent\b|(?:bytes?|bits?|[kmgt]i?b|ms|seconds?|minutes?|hours?|days?|weeks?|months?|"
                       r"years?|times|characters?|lines?)\b)", re.IGNORECASE)

_CAUSAL = re.compile(r"\b(caus\w*|due\s+to|because|result(?:s|ed)?\s+(?:from|of)|as\s+a\s+result|trigger\w*|attribut\w*|"
    r"lead\s+to|leads\s+to|led\s+to|driven\s+by|stem\w*\s+from|responsible\s+for|factors?|contribut\w*|"
    r"origin\w*|linked\s+to|associated\s+with|risk\s+factors?)\b", re.IGNORECASE)
_MECHANISM = re.compile(r"\b(works?\s+by|working\s+by|mechanism\w*|by\s+\w+ing|through|via|uses?|using|process|steps?|binds?|"
    r"inhibit\w*|blocks?|converts?|cuts?|targets?|activat\w*|enabl\w*|relies\s+on|consists?\s+of)\b", re.IGNORECASE)

_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_NUMBERING = re.compile(r"\d+(?:\.\d+){2,}\.?")  # a section's number or a version, no count or quantity
_DATE_VALUE = re.compile(
    r"\b(1[0-9]{3}|20[0-9]{2})s?\b|\b\d+\s*(?:BCE|BC|CE|AD)\b|\b\d{1,2}(?:st|nd|rd|th)\s+century\b|"
    r"\b(?:" + "|".join(_MONTHS) + r")\b\.?|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b(?:Q[1-4]|H[12])\b|"
    r"\b\d+\s+(?:years?|decades?|centuries|months?)\s+ago\b|\b(?:early|mid|late)-?\d{2,4}s?\b", re.IGNORECASE)
_CURRENCY = re.compile(
    r"[$€£¥₹]\s?\d|\b\d[\d,.]*\s*(?:k|m|bn|million|billion|trillion)?\s*(?:dollars?|euros?|pounds?|yen|"
    r"usd|eur|gbp|cents?|francs?|rupees?|yuan)\b|\b(?:usd|eur|gbp|chf|jpy|cad|aud)\s?\d|\b\d[\d,.]*\s*%|"
    r"\b\d[\d,.]*\s+percent\b|\bfree\s+of\s+charge\b|\bno\s+(?:cost|charge|fee)\b|\bat\s+no\s+cost\b", re.IGNORECASE)


# A supporting sentence's passage must cover at least this share of the question's topic terms
# (or TOPIC_TERMS of them): near misses name the entity, so the tie is loose; it only keeps a
# value about something else, in a passage about something else, from counting.
TOPIC_COVERAGE = 0.34
TOPIC_TERMS = 2
# A supporting passage must name at least this share of the question's names (see _anchored).
ANCHOR_SHARE = 1.0


@dataclass(frozen=True)
class AskedFact:
    """What a question asks for, as far as its shape tells.

    ``kind`` is the value type an answer must hold (``amount``, ``count``, ... ``identifier``) or None.
    ``aspect`` names the asked attribute ("price", "ingredients"): a supporting sentence names one of these words,
    or, for a value, states it in one of the head's units (``unit``, a regular expression: "40 tons" is a load
    capacity). ``named`` are words an on-topic passage (not necessarily the sentence) must contain. ``relation``
    is ``cause`` or ``mechanism`` for what-causes and how-does-it-work questions. ``topic`` are the remaining
    content terms (the entity asked about), of which a supporting sentence names at least one; ``specifics`` the
    years and proper names the question states.
    """

    kind: str | None = None
    aspect: tuple[str, ...] = ()
    unit: str | None = None
    named: tuple[str, ...] = ()
    relation: str | None = None
    topic: tuple[str, ...] = ()
    specifics: tuple[str, ...] = ()
    counted: tuple[str, ...] = ()  # the noun a count counts ("dimensions" of "how many dimensions ...")
    subject: tuple[str, ...] = ()  # the stems of what a value is asked about (see :func:`asked_subject`)

    @property
    def checkable(self) -> bool:
        """Whether the question's shape puts any requirement on an answer."""
        return bool(self.kind or self.aspect or self.relation or self.named)


@dataclass(frozen=True)
class FactSupport:
    """The verdict of :func:`fact_support`: ``missing`` says what no sentence holds (empty when supported).
    ``firm``: a missing value is a near miss; a missing aspect, cause or mechanism only weakens the grade (see the
    module docstring)."""

    fact: AskedFact
    checked: bool
    missing: tuple[str, ...] = ()
    sentence: str | None = None  # the supporting sentence, when one was found
    supporting: int = 0  # how many sentences (passages, for a named-aspect check) hold the asked fact

    @property
    def supported(self) -> bool:
        """True unless a checked requirement found no sentence (an unchecked question counts as supported)."""
        return not self.missing

    @property
    def firm(self) -> bool:
        return bool(self.fact.kind)

    @property
    def near_miss(self) -> bool:
        """The contexts are about the question's subject but evidently lack the asked fact: evidence against
        answering, which the local grader's fitted model weighs with the rest (``shared/adapters/local/grade_model.py``)."""
        return self.checked and not self.supported and self.firm


def _normalise(question: str) -> str:
    text = " ".join(re.sub(r"(?<=\w)['\u2019]s\b", "", question).replace("?", " ").split())
    # "Why what are the ..." / "How what were ...": a stray leading question word.
    return _LEADING_NOISE.sub("", text)


def _phrase_words(phrase: str) -> list[str]:
    """The attribute phrase: the words up to the first preposition or verb-like word."""
    out: list[str] = []
    for word in tokenize(phrase):
        low = word.lower()
        if low in _WORDS["phrase_end"] or (out and low in {"is", "are", "was", "were", "do", "does", "did", "has",
                                                           "have"}):
            break
        out.append(word)
    return out


def _singular(word: str) -> str:
    low = word.lower()
    return low[:-1] if low.endswith("s") and not low.endswith("ss") else low


def _aspect_of(words: Sequence[str]) -> tuple[str | None, tuple[str, ...], str | None]:
    """(value kind, aspect words, unit pattern) of an attribute phrase ("average closing cost percentage")."""
    words = [w for w in words if w.lower() not in STOPWORDS]
    if not words:
        return None, (), None
    head = words[-1].lower()
    qualifiers, generic = _WORDS["qualifiers"], _WORDS["generic_heads"]
    modifiers = [w for w in words[:-1] if w.lower() not in qualifiers and w.lower() not in generic]
    heads = {head, _singular(head)}
    kind = next((k for k, h in ((AMOUNT, "money_heads"), (QUANTITY, "quantity_heads"), (DATE, "date_heads"))
                 if heads & _WORDS[h]), None)
    if kind is None:  # "the status of X", "the economic impact of X" ask for nothing a word can check
        return (None, (), None) if heads & generic or head in qualifiers else (None, (words[-1],), None)
    if head in {"number", "amount", "total", "figure", "value", "count", "level", "levels", "average", "median",
                "date", "year"}:
        # "the number of X": X is what is counted, named after the phrase; the value type is the requirement
        return kind, tuple(modifiers[-1:]), None
    unit = _UNITS.get(head) or _UNITS.get(_singular(head))
    return kind, (words[-1], *modifiers[-1:]), unit


def _specifics(question: str) -> tuple[str, ...]:
    """The names, acronyms, model numbers and years a question states, the entity it is about: a capitalised word
    not opening the question, an acronym, a year, or a number written right after a name ("iPhone 16", "Level 5")."""
    out: list[str] = []
    words = tokenize(question)
    for i, word in enumerate(words):
        low = word.lower()
        if low in STOPWORDS or word in _WORDS["name_fillers"] or low in _MONTHS or low in _WORDS["question_words"] \
                or low in _WORDS["qualifiers"]:
            continue  # "the EXACT figure" is emphasis, not a name
        if (_YEAR.match(word)
                or len(word) == 1 and word.isupper() and i > 0 and words[i - 1][:1].isupper()  # "Model Y"
                or word.isdigit() and i > 0 and (words[i - 1][:1].isupper() or words[i - 1].isupper())
                or i > 0 and word[:1].isupper() and len(word) > 1
                or i > 0 and any(ch.isupper() for ch in word[1:]) and any(ch.isalpha() for ch in word)):  # "iPhone"
            out.append(word)
    return tuple(dict.fromkeys(out))


def _edition_years(question: str) -> tuple[str, ...]:
    """Years written before a name or noun ("2024 World Series"), which pick one edition of a recurring thing."""
    words = tokenize(_normalise(question))
    return tuple(w for i, w in enumerate(words) if _YEAR.match(w) and i + 1 < len(words)
                 and words[i + 1].lower() not in STOPWORDS and words[i + 1].isalpha())


# A short model number ("X1", "S3", "Q1"): a letter and digits, which names one thing where "US" or "AI" may not.
_MODEL_NUMBER = re.compile(r"^[A-Z]\d+$")


def question_names(question: str) -> tuple[str, ...]:
    """The proper names, acronyms and model numbers an English question states (no years), whatever its shape:
    "Kafka" in "What triggers a consumer group rebalance in Kafka?", off topic for a corpus that never names it."""
    return tuple(s for s in _specifics(_normalise(question))
                 if not _YEAR.match(s) and not s.isdigit() and (len(s) > 2 or _MODEL_NUMBER.match(s)))


# Names a passage may write another way ("the U.S." for "the United States").
_US, _UK = ("us", "u.s", "usa", "america", "american"), ("uk", "u.k", "britain", "british")
_ALIASES = {"united": (*_US, *_UK), "states": _US, "kingdom": _UK, "america": ("us", "u.s", "usa", "american"),
            "european": ("eu",), "union": ("eu",)}


def _anchored(specifics: Sequence[str], stems: set[str], edition_years: Sequence[str] = ()) -> bool:
    """Whether a passage names enough of the question's specifics (see :func:`_specifics`) to be about the same
    entity: at least ANCHOR_SHARE of them (a passage may write "the Eastern Front" for "World War II in Europe"). A
    year counts only where it names an edition ("the 2024 World Series", ``edition_years``), not an event's date."""
    names = [s for s in specifics if not _YEAR.match(s)]
    if any(_YEAR.match(s) and s.lower() not in stems for s in specifics if s in edition_years):
        return False  # "the 2024 World Series" is not the 2022 one
    if not names:
        return True
    named = sum(1 for s in names if _present(s, stems) or any(a in stems for a in _ALIASES.get(s.lower(), ())))
    return named / len(names) >= ANCHOR_SHARE


@functools.lru_cache(maxsize=1024)  # the synthesizer checks each part's question against every candidate sentence
def asked_fact(question: str) -> AskedFact:
    """What ``question`` asks for (see :class:`AskedFact`); an empty fact when its shape says nothing."""
    text = _normalise(question)
    if (m := _DEFINITION.match(text)) and m["next"].lower() not in _WORDS["qualifiers"]:
        return AskedFact()
    kind, aspect, unit, named, ties, relation = _question_shape(text)
    if kind is None and aspect:
        # A noun aspect ("the ingredients", "the terms") is checked in the passage, not one sentence:
        # passages name it once and state its parts in the sentences that follow.
        named, aspect = aspect, ()
    if re.match(_OPENS + r"which\b", text, re.IGNORECASE) and kind is None:
        named = ()  # "which company has more revenue, A or B?" asks to choose among names it gives
    if not (kind or aspect or relation or named):
        # yes/no and open questions ("is X better than Y?"): nothing specific is asked
        return AskedFact()
    # "the default", "which version", "which HTTP status code" say what is asked, not what it is asked about
    asked = {stem(a) for a in (*aspect, *named, *KIND_NOUNS.get(kind or "", "").split())}
    topic = tuple(
        t for t in (*ties, *content_terms(text, keep_temporal=False))
        if stem(t) not in asked and t.lower() not in _WORDS["qualifiers"] and t.lower() not in _WORDS["question_words"]
        and not (kind == AMOUNT and t.lower() in _WORDS["money_heads"] | {"pay", "spend", "charge"})
    )
    # the noun phrase a question opens with up to the word naming the kind ("Which HTTP status code", "What port")
    # says what the value is, not whose: no entity a passage must name, nor the subject a stating sentence holds
    phrase = _opening_phrase(text)
    kinds = [n for n, w in enumerate(phrase) if w in _OPENING_KINDS or w in ("code", "codes")]
    naming = {*phrase[:kinds[-1] + 1 if kinds else 0], *KIND_NOUNS.get(kind or "", "").split()}
    return AskedFact(kind=kind, aspect=aspect, unit=unit, named=named, relation=relation,
                     topic=tuple(dict.fromkeys(topic)),
                     specifics=tuple(s for s in _specifics(text) if s.lower() not in naming),
                     counted=tuple(ties) if kind == COUNT else (),
                     subject=tuple(dict.fromkeys(stem(t) for t in topic if t.lower() not in naming)) if kind else ())


def _opening_phrase(text: str) -> list[str]:
    """The noun phrase a which/what question opens with ("http status code" of "Which HTTP status code does ..."),
    lower-cased; empty when a verb or an article follows which/what ("What does ...", "Which is ...")."""
    m = _OPENING.match(text)
    words = [w.lower().strip(".,;:") for w in m["rest"].split()] if m else []
    ends = _WORDS["auxiliaries"] | _WORDS["phrase_breaks"]
    return list(itertools.takewhile(lambda word: word not in ends, words[:OPENING_WORDS]))


def _opening_noun(text: str) -> tuple[str | None, ...]:
    """``(kind,)`` when a which/what question opens with a noun phrase (:func:`_opening_phrase`), the kind its last
    word of :data:`_OPENING_KINDS` asks for (None: none there, "Which request headers ..."); ``()`` when it opens
    with none."""
    phrase = _opening_phrase(text)
    if not phrase or phrase[0] in {"kind", "sort", "type"}:
        return ()
    for n in range(len(phrase) - 1, -1, -1):
        if phrase[n] in ("code", "codes") and n and phrase[n - 1] in _CODE_KINDS:
            return (_CODE_KINDS[phrase[n - 1]],)
        if phrase[n] in _OPENING_KINDS:
            return (_OPENING_KINDS[phrase[n]],)
    return (None,)


def _question_shape(text: str) -> tuple[str | None, tuple[str, ...], str | None, tuple[str, ...], tuple[str, ...],
                                        str | None]:
    """(kind, aspect, unit, named, ties, relation) as the wording of a normalised question gives them."""
    kind: str | None = None
    unit: str | None = None
    relation: str | None = None
    aspect: tuple[str, ...] = ()
    named = ties = aspect
    opening = _opening_noun(text)  # (kind,) when it opens with a noun (kind None: a noun of no kind), else ()
    asks_for = not opening and not _ASKS_ABOUT.match(text)  # neither a noun nor "what does ..." opens it
    if opening and opening[0]:
        kind = opening[0]
    elif _STATUS_Q.search(text) and not opening:
        kind = STATUS
    elif _FLAG_Q.search(text) and asks_for:
        kind = FLAG
    elif _RETURN_Q.search(text):
        kind = RETURN
    elif _VERSION_Q.search(text) and asks_for:
        kind = VERSION
    elif _IDENT_Q.search(text) and asks_for:
        kind = IDENT
    elif _DEFAULT_Q.search(text):
        kind = DEFAULT
    elif m := _HOW_MANY.search(text):
        kind = COUNT
        counted = [w for w in _phrase_words(m.group("rest")) if w.lower() not in STOPWORDS]
        # the counted noun ("users" of "active users") ties the count to the question, but a
        # sentence may count "deaths" or "viewers" for "people": it is a topic word, not a must
        ties = tuple(counted[:2]) + tuple(counted[2:3])  # "Header Magic Bytes": the head may come third
    elif m := _HOW_MUCH.search(text):
        kind = AMOUNT if re.search(r"\b(cost|costs|pay|paid|charge|charged|spend|spent|earn|earned|worth|price|fund\w*|"
                                   r"allocate\w*|money|owe|raise\w*)\b", m["rest"], re.IGNORECASE) else QUANTITY
    elif m := _HOW_ADJ.search(text):
        adj = m.group("adj").lower()
        kind = AMOUNT if adj == "expensive" else QUANTITY
        if adj == "soon":  # "how soon after X is Y published?": "within 6 hours", a duration
            unit = _DURATION
    elif _WHEN.search(text):
        kind = DATE
    elif _WHO.search(text):
        kind = NAME
    elif _WHERE.search(text):
        kind = LOCATION
    elif _WHAT_CAUSES.search(text):
        relation = "cause"
    elif _HOW_WORK.search(text):
        relation = "mechanism"
    elif _WHAT_SHARE.search(text):
        kind, unit = QUANTITY, _UNITS["percentage"]
    elif (m := _WHAT_THE.search(text)) and (
        (parsed := _aspect_of(_phrase_words(m.group("phrase"))))[0] or (parsed[1] and text[:3].lower() != "how")
    ):
        # "how is the <head> of ..." only when the head asks for a value ("how is the speed of X")
        kind, aspect, unit = parsed
    elif _HOW_PROCESS.search(text) and not _HOW_TO.search(text) and not _COMPARISON.search(text):
        relation = "mechanism"  # "how do I ...?" asks for steps, which no rule here can recognise
    elif (m := _WHAT_NOUN.search(text)) and not re.match(
        r"^(is|are|was|were|does|do|did|kind|type|sort)\b", m.group("phrase"), re.IGNORECASE
    ):
        kind, aspect, unit = _aspect_of(_phrase_words(m.group("phrase")))
    elif m := _OPENING.match(text):
        words = [w for w in tokenize(m.group("rest")) if w.lower() not in _WORDS["qualifiers"]]
        first = words[0].lower() if words else ""
        if first in _WORDS["causal_verbs"]:
            relation = "cause"  # "what determines X?"
        elif first and first not in STOPWORDS and first not in {"kind", "type", "sort"}:
            # "what materials compose X?": without a verb to end the phrase, one of its first
            # words is only required somewhere in an on-topic passage
            named = tuple(w for w in words[:3] if w.lower() not in STOPWORDS)
    return kind, aspect, unit, named, ties, relation


# ----------------------------------------------------------------- values


def _numbers(sentence: str) -> list[tuple[str, str]]:
    """(number token, the word after it) for each number written in digits or words."""
    words = tokenize(sentence)
    # (a digit opens it: "win32", "krb5" name things, they count nothing)
    return [(word, after.lower()) for word, after in itertools.zip_longest(words, words[1:], fillvalue="")
            if word[:1].isdigit() or word.lower() in _WORDS["number_words"]]


def _measures_other(token: str, after: str, question_terms: frozenset[str]) -> bool:
    """The number measures in a unit ("12-ounce", "3 hours", "40%") that the question does not count in."""
    unit = token.split("-", 1)[1] if "-" in token and token.split("-", 1)[0].replace(".", "").isdigit() else after
    if not unit:
        return token.endswith("%")
    return (bool(_MEASURE.match(unit)) or token.endswith("%")) and stem(unit) not in question_terms


def _is_year(token: str, after: str) -> bool:
    return bool(_YEAR.match(token.rstrip("s"))) and (not after or after in STOPWORDS or after in _MONTHS
                                                     or not after.isalpha())


def _akin(word: str, noun: str) -> bool:
    """The same word in another form: "dimensional" for "dimensions", "users" for "user"."""
    a, b = stem(word), stem(noun)
    return a == b or (min(len(a), len(b)) >= 5 and a[:5] == b[:5])


def _counts(sentence: str, counted: Sequence[str], question_terms: frozenset[str]) -> bool:
    """A number that counts the asked noun: right before it, or three words before ("384-dimensional
    vectors", "6 Transformer layers", "1070 paying users"): "6 layers" counts no dimensions."""
    words = tokenize(sentence)
    for i, word in enumerate(words):
        low = word.lower()
        head, _, tail = low.partition("-")
        spelled = _WORDS["number_words"]
        number = head if tail and (head.replace(".", "").replace(",", "").isdigit() or head in spelled) else low
        if not (any(ch.isdigit() for ch in number) or number in spelled):
            continue
        if stem(word) in question_terms or _is_year(number, words[i + 1].lower() if i + 1 < len(words) else ""):
            continue
        if tail and any(_akin(tail, noun) for noun in counted):
            return True
        following = words[i + 1:i + 4]
        if any(_akin(w, noun) for w in following for noun in counted):
            return True
        # "name/value pairs up to a maximum of 32": the noun a few words before a bound and the number
        before = words[max(0, i - 6):i]
        if any(_akin(w, noun) for w in before for noun in counted) and _BOUND.search(" ".join(before)):
            return True
        # "employs 1,240 people" counts employees: people are counted in many words
        people = _WORDS["people"]
        if following and following[0].lower() in people and any(n.lower() in people for n in counted):
            return True
    return False


def holds_value(sentence: str, kind: str, question_terms: frozenset[str] = frozenset(),
                counted: Sequence[str] = ()) -> bool:
    """Whether ``sentence`` holds a value of ``kind`` (see the module docstring)."""
    if kind == DATE:
        # "when was the API introduced?": "in OpenSSL version 0.9.6" dates it as software is dated
        return bool(_DATE_VALUE.search(sentence) or _IN_VERSION.search(sentence))
    if kind in (STATUS, FLAG, VERSION, LOCATION):  # a code, a flag, a version or a path the question does not name
        written = {STATUS: _STATUS_VALUE, FLAG: _FLAG_VALUE, VERSION: _VERSION_VALUE, LOCATION: _PATH_VALUE}[kind]
        if any(stem(m.group()) not in question_terms for m in written.finditer(sentence)):
            return True
        # a release named by its codename ("the Kestrel release"; not "the Frob release" of a Frob question, nor "the New
        # release")
        return kind == VERSION and any(stem(w) not in question_terms | _EVENTS.keys() and w.lower() not in _WORDS["qualifiers"]
                                       for w in _CODENAME.findall(sentence))
    if kind == RETURN:
        return bool(_RETURN_VALUE.search(sentence))
    if kind == DEFAULT:
        if _BEHAVIOUR_BY_DEFAULT.search(sentence) and not re.search(r"\d", sentence):
            return bool(_DEFAULT_VALUE.search(_BEHAVIOUR_BY_DEFAULT.sub("", sentence)))
        return bool(_DEFAULT_VALUE.search(sentence))
    if kind == IDENT:
        return any(stem(m.group()) not in question_terms and not _YEAR.match(m.group())
                   and not _CROSS_REFERENCE.search(sentence[:m.start()]) and not _MEASURED.match(sentence[m.end():])
                   for m in _IDENT_VALUE.finditer(sentence))
    if kind == AMOUNT:
        return bool(_CURRENCY.search(sentence))
    if kind == COUNT and counted:
        return _counts(sentence, counted, question_terms)
    if kind in (COUNT, QUANTITY):
        for token, after in _numbers(sentence):
            if _is_year(token, after) or stem(token) in question_terms or _NUMBERING.fullmatch(token):
                continue  # a year, a number the question itself states or a section's ("4.13.17.") is no value
            if kind == COUNT and _measures_other(token, after, question_terms):
                continue  # "12-ounce" counts no calories
            return True
        return kind == QUANTITY and bool(_CURRENCY.search(sentence))
    if kind == NAME:
        # "Who coordinates the fix?" - "... is assigned a primary handler": a role answers "who" as a name does
        if any(m["role"].lower() not in _WORDS["not_roles"] and stem(m["role"]) not in question_terms
               for m in _ROLE.finditer(sentence)):
            return True
        words = tokenize(re.sub(r"\b[A-Z]{2,}(?:\s+[A-Z]{2,})+\b", " ", sentence))  # a heading in capitals: "BUG FIXES"
        # a capitalised word, not one that only opens the sentence
        return any(word[:1].isupper() and len(word) >= 2 and word not in _WORDS["name_fillers"]
                   and word.lower() not in _MONTHS and stem(word) not in question_terms
                   and (i > 0 or (len(words) > 1 and words[1][:1].isupper()))
                   for i, word in enumerate(words))
    return True


# ----------------------------------------------------------------- support


def _present(term: str, stems: set[str]) -> bool:
    """``term`` is among ``stems``, allowing inflections the stemmer keeps apart ("employ"/"employe")."""
    key = stem(term)
    return key in stems or len(key) >= 4 and any(
        len(s) >= 4 and (s.startswith(key) or key.startswith(s)) and abs(len(s) - len(key)) <= 2 for s in stems)


def _on_topic(topic: Sequence[str], stems: set[str]) -> bool:
    if not topic:
        return True
    present = sum(_present(t, stems) for t in topic)
    return present >= TOPIC_TERMS or present / len(topic) >= TOPIC_COVERAGE


def _value_with_unit(sentence: str, unit: str) -> bool:
    return bool(re.search(r"\d[\d,.]*[\s-]*(?:" + unit + r")(?![a-z])", sentence, re.IGNORECASE))


def _sentence_supports(sentence: str, fact: AskedFact, question_stems: frozenset[str], *, strict: bool = False) -> bool:
    """Whether ``sentence`` states what ``fact`` asks (its passage already checked for topic)."""
    stems = term_set(sentence)
    if fact.kind and not holds_value(sentence, fact.kind, question_stems, fact.counted if strict else ()):
        return False
    named_aspect = any(_present(a, stems) for a in fact.aspect)
    if fact.aspect and not named_aspect and not (fact.unit and _value_with_unit(sentence, fact.unit)):
        return False
    if not named_aspect and fact.topic and not any(_present(t, stems) for t in fact.topic):
        return False  # the value must be tied to the question's terms, not float in its passage
    if fact.relation == "cause":
        return bool(_CAUSAL.search(sentence))
    # a sentence naming every term (four or more) of a how-question, its verb included, states its answer ("BM25 ranks
    # documents by term frequency" for "how does BM25 rank documents by term frequency?")
    return fact.relation != "mechanism" or bool(_MECHANISM.search(sentence)) or (
        len(fact.topic) >= 4 and all(_present(t, stems) for t in fact.topic))


def states_value(sentence: str, question: str) -> bool | None:
    """Whether ``sentence`` states the value ``question`` asks for in the unit that names it ("30 days" for a
    deadline, "12 kg" for a weight), tied to the question's terms; None when it asks for no value with a unit (a
    bare value is no evidence: "47 parks" is not the share spent on maintenance)."""
    fact = asked_fact(question)
    if not (fact.kind and fact.unit):
        return None
    return _value_with_unit(sentence, fact.unit) and _sentence_supports(sentence, fact, frozenset(term_set(question)))


# What a question names exactly, which the sentence answering it names too: a version ("1.20.2"), a level ("level 19"),
# an identifier with digits ("des3-cbc-sha1"; not "krb5", which its document need not repeat); a dotted version only where
# the sentence names another release (a heading names it over its notes): a dotted one, or one of its name ("Debian 9").
_EXACT, _DOTTED = re.compile(r"(?<![\w.-])[\w.-]*\d[\w.-]*(?<![.-])"), re.compile(r"(?<![\w.])(?>\d+(?:\.\d+)+)(?![\w.]*\d)")
_CLAUSE = re.compile(r"([,;:()]|\b(?:which|and|but|while|whereas)\b|\b(?:beginning|starting)\s+(?:with|from|in|at)\b)", re.I)
_NOUN_PHRASE = re.compile(r"[,;:]|\b(?:the|an?)\b", re.I)  # what opens the noun phrase a "which" clause follows


def _exact_names(question: str) -> tuple[str, ...]:
    """The versions, numbers and compound identifiers with digits ``question`` names (see :data:`_EXACT`)."""
    return tuple(m.group().lower() for m in _EXACT.finditer(question) if not _YEAR.match(m.group()) and (
        re.fullmatch(r"-?\d[\d.]*", m.group()) or re.search(r"\w[-_]\w", m.group().strip("-"))))


def _value_of_event(sentence: str, fact: AskedFact, question_stems: frozenset[str]) -> bool:
    """Whether a clause of ``sentence`` holding the asked value (as :data:`_CLAUSE` ends one) is about what is asked. A
    version, date or name's names an asked event, or names none (or "changed" alone: "Changed in 3.2: Added X") while its
    sentence does ("X, added in 2.5, is deprecated" is no removal); where the sentence names the asked subject (by its
    names if any: "--legacy", not "switch"), a "which" clause states the value of the noun phrase it follows ("Y, which
    listens on port 7412") and an event's clause of what follows its verb ("Bash-4.0 introduced the concept of Z, ... the
    shopt builtin": Z's). Where no clause holds a value alone ("Default: 1"), the sentence states one if no event is asked."""
    kind_words, changed, seen = term_set(KIND_NOUNS.get(fact.kind, "")), _EVENTS[stem("changed")], False  # seen: a value
    released = _EVENTS[stem("released")]
    releases = {changed, released, _EVENTS[stem("published")]}  # a release's value (name, date) is that of all it brings
    events = {_EVENTS[s] for s, before in zip(fact.subject, ("", *fact.subject)[:len(fact.subject)], strict=True) if s in _EVENTS and
              before not in _EVENTS} if fact.kind in (VERSION, DATE, NAME) else set()  # "removed support": an object
    named = {s for s in fact.subject if not s.isalpha()} or set(fact.subject) - _EVENTS.keys()

    def said(text: str) -> set[int]:  # a version before a date in brackets is its release: "grep 3.4 (2020-01-02)"
        return {_EVENTS[s] for s in term_set(text) - kind_words if s in _EVENTS} | ({released} if re.search(r"\d\s+\((?:\d|[A-Z][a-z]+ \d)", text) else set())

    whole = said(sentence)
    for part in split_sentences(sentence):
        stated, bits, about = said(part), _CLAUSE.split(part), bool(term_set(part) & named)
        for k in range(0, len(bits), 2):  # the clauses, each after what ends the one before (bits[k - 1])
            clause, relative = bits[k], k > 0 and bits[k - 1].lower() == "which"
            seen |= (held := holds_value(clause, fact.kind, question_stems))
            if not held or events and not ((own := said(clause)) & events or not own - releases and (
                    whole if own - {changed} else stated) & events):  # a release's all the sentences quoted state
                continue
            host = [p for p in _NOUN_PHRASE.split("".join(bits[max(k - 7, 0):k - 1])) if p.strip()][-1:] if relative else [clause]  # 3 clauses back at most
            after = list(itertools.dropwhile(lambda w: _EVENTS.get(stem(w)) not in events, tokenize(clause)))[1:]
            if not about or term_set(" ".join(host)) & named or not relative and all(
                    stem(w) in question_stems | kind_words or not w.isalpha() for w in content_terms(" ".join(after))):
                return True
    return not seen and not events


# Names of one form, whose members are siblings: a setting ("IdleActionSec="), an option ("-B5", "--fast"), a function
# ("uncompress2()"), a constant ("PKG_CONFIG_PATH"); not one a default gives as its value ("Defaults to X= / 4096").
_NAME_FORMS = (re.compile(r"(?<![\w.$-])([A-Za-z][\w.]{2,})="), re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)"),
               re.compile(r"\b([A-Za-z_]\w*)\(\)"), re.compile(r"\b([A-Z][A-Z\d]*_[A-Z\d_]+)\b"))
_WORD_PAIR = re.compile(r"(?<![\w/.-])(?=([A-Za-z][\w-]*)\s+([A-Za-z][\w-]*)\b)")
_THE_NOUN = re.compile(r"\b(?:the|an?)\s+" + _WORD_PAIR.pattern, re.IGNORECASE)  # "the knurl cache"
_DEFAULT_IS = re.compile(r"\bdefault(?:s|ing)?(?:\s+values?)?\s*(?:\bto\b|\bis\b|:|=)\s*\S+", re.IGNORECASE)


def _of_another(text: str, question: str, kind: str) -> bool:
    """Whether no clause of ``text`` holding a value of ``kind`` is about what ``question`` asks of: one naming the head
    of a noun phrase the question names with another word ("the frob cache" for "the knurl cache") is not, nor one whose
    names of a form the question names a member of are others: its own, else the last label's (a clause of names alone,
    a heading: "IdleAction=: ... Defaults to ignore."), else the nearest clause's, else any in ``text`` (none: "lz4 offers
    500 MB/s" for --favor-decSpeed)."""
    def names(text: str) -> list[set[str]]:
        return [{m[1] for m in form.finditer(_DEFAULT_IS.sub(" ", text))} for form in _NAME_FORMS]

    pairs = {stem(m[2]): stem(m[1]) for m in _THE_NOUN.finditer(question) if not {m[1].lower(), m[2].lower()} & STOPWORDS}
    stems, asked, anywhere = frozenset(term_set(question)), names(question), names(text)
    owner, values, labelled = [set()] * len(_NAME_FORMS), [], False
    for clause in (clause for part in split_sentences(text) for clause in _CLAUSE.split(part)[::2]):
        own = names(clause)
        if label := any(own) and not re.sub(r"\W|\b(?:and|or)\b", "", functools.reduce(lambda t, f: f.sub("", t),
                                                                                        _NAME_FORMS, clause)):
            owner, labelled = own, True
        elif not labelled:
            owner = [here or before for here, before in zip(own, owner, strict=True)]
        if not label and holds_value(clause, kind, stems):
            held = term_set(clause)
            sibling = any(stem(b) in pairs and pairs[stem(b)] not in held and stem(a) not in stems and a.lower() not in
                          STOPWORDS for a, b in _WORD_PAIR.findall(clause))
            values.append(not sibling and all(not a or a & (h or o or e) for a, h, o, e in zip(asked, own, owner, anywhere,
                                                                                              strict=True)))
    return bool(values) and not any(values)


def sentence_states(sentence: str, question: str, fact: AskedFact | None = None) -> bool | None:
    """Whether ``sentence`` states the value ``question`` asks for (a value of the asked type, named with its aspect
    or tied to the question's terms); None when it asks for no value of a type (a cause, a mechanism or an open answer
    is stated in too many words for a rule). A sentence answering a limit states one, an event the same event in the
    clause holding the value, and it names the question's versions, levels and identifiers with digits (:data:`_EXACT`).
    ``fact``: what is asked, when not :func:`asked_fact`'s reading of ``question``."""
    fact = fact or asked_fact(question)
    if not fact.kind:
        return None
    question_stems = frozenset(term_set(question))
    if sentence:
        if ASKS_LIMIT.search(question) and not _BOUND.search(sentence):
            return False  # "the maximum depth": "a depth of 1" is a depth, not its limit
        if not _value_of_event(sentence, fact, question_stems) or _of_another(sentence, question, fact.kind):
            return False
        words = {w.lower() for w in tokenize(sentence)} | {m.group().lower() for m in _EXACT.finditer(sentence)}
        words |= {part for w in list(words) for part in re.split(r"[-_/]", w) if part}  # "krb5-1.18" names krb5
        for name in (name for name in _exact_names(question) if name not in words):
            owner = re.search(rf"([\w-]+)\W+{re.escape(name)}", question)  # "Debian" of "Debian 6.0": "Debian 9" is another
            if not _DOTTED.fullmatch(name) or _DOTTED.search(sentence) or owner and re.search(rf"\b{re.escape(owner[1])}\W+\d", sentence, re.I):
                return False
    return _sentence_supports(sentence, fact, question_stems, strict=True)


def states_under_heading(question: str, sentences: Iterable[tuple[str, str]]) -> bool | None:
    """Whether one of ``sentences`` (each ``(heading, text)``: read under the heading of its section, as a reader of the
    document reads it) states a value of the type ``question`` asks for, of what it asks about (:func:`sentence_states`:
    "2.3.0: Fixed the frob cache" states the release of the frob cache's fix; "The knurl cache holds 64 MB" no size of
    the frob cache; the heading gives a release or a date, no other value); None when it asks no value of a type. The release
    of an asked event may be named by its date ("Published on 2021-09-14, this release adds X"): no version stated, nor
    refused (not so a version of what a release ships: "Debian 8 (April 2015) ships systemd" names no systemd version)."""
    fact = asked_fact(question)
    if not (kind := fact.kind):
        return None
    if kind == DEFAULT:  # any sentence holding a default tied to the question's terms (no clause read)
        return any(_sentence_supports(text, fact, frozenset(term_set(question))) for _, text in sentences)
    asked = (fact, dataclasses.replace(fact, kind=DATE)) if kind == VERSION and _EVENTS.keys() & set(fact.subject) else (fact,)
    # a heading names a release and its date, which its items need not repeat; any other value is stated by the sentence
    return any(sentence_states(read, question, each) and (each is fact or _RELEASE.search(read))
               and (kind in (VERSION, DATE) or not heading or sentence_states(text, question))
               for heading, text in sentences for each in asked if (read := f"{heading}: {text}" if heading else text))


def asked_subject(question: str) -> tuple[str, ...]:
    """The stems of what a question asking a value of a type asks it *about*: its topic without the words naming the
    kind (:data:`KIND_NOUNS`, the noun phrase it opens with up to such a word). A sentence stating the value need
    not repeat them ("If the feed is unchanged, the server replies 304 Not Modified."). Empty: no value asked."""
    return asked_fact(question).subject


def reading_arguments(question: str) -> tuple[str, dict[str, Any]]:
    """``question`` as the reader reads it (a German, French or Spanish one by its English terms: :func:`in_english`)
    and :func:`~shared.query.reading.extractive.extractive_answer`'s arguments for it, the local model's and the
    fallback's: the names it states, said when no source names them (none from a translation: its capitals are not
    names); :func:`states_value`; :func:`sentence_states` and its :func:`asked_subject` for the verdict's evidence."""
    asked_in, english = in_english(question)
    # a release or a date asked of no release it names, or a default asked: one no retrieved sentence states (under its
    # heading) is refused
    kind = asked_fact(english).kind
    typed = (kind in (VERSION, DATE) or kind == DEFAULT and _DEFAULT_ASKED.search(english)) and not _DOTTED.search(english)
    return english, {"names": question_names(english) if asked_in == "en" else (), "value_check": states_value,
                     "fact_check": sentence_states, "subject": asked_subject(english),
                     "typed_check": states_under_heading if typed else None}


def fact_support(question: str, passages: Sequence[str]) -> FactSupport:
    """Whether any sentence of ``passages`` holds what ``question`` asks (see the module docstring)."""
    fact = asked_fact(question)
    if not fact.checkable or not passages:
        return FactSupport(fact, checked=False)
    question_stems = frozenset(term_set(question))
    passage_stems = [term_set(p) for p in passages]
    union = set().union(*passage_stems)
    absent = [s for s in fact.specifics if not _YEAR.match(s) and not _anchored([s], union)]
    named = not fact.named or any(_present(n, union) for n in fact.named)  # some passage names the named aspect
    editions = _edition_years(question)
    found: str | None = None
    supporting = 0  # every supporting sentence is counted: several agreeing ones are firmer evidence than one
    for text, stems in zip(passages, passage_stems, strict=True):
        if not named or not _on_topic((*fact.topic, *fact.aspect[:1]), stems) \
                or not _anchored(fact.specifics, stems, editions):
            continue
        quotes = [text[:200]] if not (fact.kind or fact.aspect or fact.relation) else [
            s for s in split_sentences(text) if _sentence_supports(s, fact, question_stems)]
        for quote in quotes:
            found = found or quote
            supporting += 1
    what = " ".join((*fact.aspect[:1], *fact.named)) or fact.relation or ""
    label = f"{fact.kind} ({what})" if fact.kind and what else (fact.kind or what)
    missing = () if found is not None else (
        f"no sentence states the asked {label}" + (f" (no context names {', '.join(absent)})" if absent else ""),)
    return FactSupport(fact, checked=True, missing=missing, sentence=found, supporting=supporting)


__all__ = ["AMOUNT", "COUNT", "DATE", "DEFAULT", "FLAG", "IDENT", "KIND_NOUNS", "NAME", "QUANTITY", "RETURN", "STATUS", "VERSION", "WORD_LISTS", "AskedFact", "FactSupport",
           "asked_fact", "asked_subject", "fact_support", "holds_value", "question_names", "sentence_states", "states_under_heading",
           "states_value"]
