"""The offline rule that turns a follow-up question into one that stands on its own (en, de, fr, es).

"What is the ack deadline in Pub/Sub?" then "And what is its maximum?" is asked as "What is the maximum of the ack deadline in
Pub/Sub?"; a self-contained question is left as typed. Pure: text in, text out. A word or phrase of the follow-up that stands
for something of the earlier turn gives way to the earlier phrase of its number and role: "it" as a subject the earlier subject
(the function or option "which function/option ..." asked for), "it" as an object or "that" what was asked for ("which editor
does git use": the editor git uses; the earlier answer's value when it names one), "they" the plural noun phrase, a noun after
"that" the earlier phrase of its head, a fragment ("what about X?") the earlier phrase it parallels, a Spanish question with no
subject the earlier one. A rewrite must read as a question (:func:`_well_formed`); one that does not, or a word with nothing to
stand in its place, is read with the earlier question after it in brackets, and shown as typed (:func:`as_shown`)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from shared.contract.ports import ConversationTurn
from shared.query.reading.followup_languages import (
    EN,
    NEW_TOPIC,
    REMARK,
    RULES,
    Language,
    word_lists,
)
from shared.query.reading.language import detect_language, is_note

__all__ = ["CONNECTIVE", "UNMARKED", "Resolution", "answer_paragraphs", "as_shown", "leans_on", "standalone_question",
           "subject_of"]


@dataclass(frozen=True)
class Resolution:
    """A question as it stands on its own, and which rule made it so."""

    question: str
    rule: str  # "no history", "self-contained", "pronoun", "demonstrative", "what about", "ellipsis", ... "refers back"
    subject: str | None = None  # the earlier turn's subject, when it was carried in (refers back: the word)

    @property
    def rewritten(self) -> bool:
        return self.rule not in ("no history", "self-contained")


CONNECTIVE, UNMARKED = "connective", "unmarked"  # leans_on: a whole question opening with "and"; none leaning

# The words the rule reads a clause by (lexicon/followup_words.tsv's "rule" rows: English, and every language's determiners)
(_DETERMINERS, _NOUN_PHRASE_OPENERS, _CLAUSE_BREAKS, _PARTICLES, _RESULTATIVE, _AUXILIARIES, _HEAD_ENDS, _SUBORDINATORS,
 _PHRASE_PREPOSITIONS) = (word_lists("rule")[name] for name in (
    "determiners", "noun_phrase_openers", "clause_breaks", "particles", "resultative", "auxiliaries", "head_ends", "subordinators",
    "phrase_prepositions"))
# "Guido van Rossum", "Mar de Plata": a particle between two capitalised words names with them, but not German's "von"
# between nouns after an article ("die Installation von Dateien")
_NAME_PARTICLES = frozenset("van von de da di du del della ten ter".split())
_GERMAN_ARTICLES = frozenset("der die das den dem des ein eine einen einem einer eines".split())
_OF = frozenset("of de du des del von".split())  # what an attribute is "of" (a swapped head keeps its "in X" scope, not this)


def _alternation(words) -> str:
    """``words`` as a regex alternation, longest first, then alphabetical: a set's order varies with PYTHONHASHSEED."""
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


_GERMAN_ARTICLE_BEFORE = re.compile(rf"(?i)(?:^|\s)(?:{_alternation(_GERMAN_ARTICLES)})\s+$")
_ADVERBS = re.compile(r"(?:(?:[a-z]+ly|always|never|often|still|also|now|only|ever)\b\s*)+")  # whole words: linear
_AUX = "|".join(sorted(_AUXILIARIES))
_SINGULAR, _PLURAL = frozenset({"it", "its"}), frozenset({"they", "them", "their"})
_PRONOUNS = _SINGULAR | _PLURAL | frozenset("i you we he she one there this that these those".split())
_CLOSED = (EN.stop | EN.prepositions | _AUXILIARIES | frozenset("and or not to why how when where".split())) \
    - _DETERMINERS - frozenset(["many"])

# The shapes of a question and its parts; the interrogatives that open a noun phrase ("which id", "welche
# Stufe", "quel port") of every language
_WHICH = _alternation({w for rules in RULES.values() for w in rules.which})
_TOKEN = re.compile(r"[\w][\w/+.#'’-]*[\w+#](?:\(\))?|[\w](?:\(\))?", re.UNICODE)
_TRAILING = re.compile(r"[\s?!.¿¡]+$")
_VERSION = re.compile(r"\d+(?:\.\d+)+")
_VERSION_SCOPE = re.compile(r"\b(?i:in|of|for|since)\s+(?P<scope>(?:[A-Za-z][\w+-]*\s+)?v?\d+(?:\.\d+)*[a-z]?)\b")
_CONTRACTED = re.compile(r"(?i)\b(what|where|how|who|when|why|that|it|there)['’]s\b")
# "(and) when the command cannot be found": a condition (no auxiliary after "when"), nor a leading clause ("if X fails, ...")
_CONDITION_CLAUSE = re.compile(rf"(?i)^(?:when|whenever|if|unless)\s+(?!(?:{_AUX})\b)\S+\s+[^,]+$")
_CONDITION = re.compile(r"\s+(?:if|unless|wenn|falls|si|sauf)\s.*$", re.IGNORECASE)
_IRREGULAR = [w.split(":") for w in EN.past]  # "make:made", "write:wrote:written"
_PAST = {forms[0]: forms[1] for forms in _IRREGULAR}  # "make": "made"
_PARTICIPLE_WORD = rf"(?:[a-z]+(?:(?<!e)ed|en)|{'|'.join(sorted({forms[-1] for forms in _IRREGULAR}))})"
_PARTICIPLE = re.compile(rf"\s+{_PARTICIPLE_WORD}\s+(?:for|in|as|on|of|by|to|with|from)$")  # "X used for", "X set to"
# "Which status code does a server send when ...": the asked noun, "does"/"do", then the clause
_ASKED_NOUN = re.compile(r"^(?:which|what)\s+(?P<noun>(?:[\w/+.#-]+\s+){1,4}?)"
                         r"(?P<aux>does|do|did|can|could|should|must|will|would|may|might)\s+(?P<s>.+)$", re.IGNORECASE)
# "Which gzip release added the --keep option": the asked noun is the subject of the verb after it
_SUBJECT_ASKED = re.compile(r"^(?i:which|what)\s+(?P<noun>(?:[\w/+.#-]+\s+){0,5}?[\w/+.#-]+)\s+"
    r"(?:(?P<adverb>[a-z]+ly)\s+)?"
    r"(?P<verb>must|can|could|should|will|would|may|might|is|are|was|were|has|have|had|[a-z]+(?:(?<![su])s|ed)|[A-Z]+s(?=\s+(?:the|an?)\s)|"
    rf"{'|'.join(sorted(set(_PAST.values())))})\s+"
    r"(?P<rest>\S.*)$")
_ASKS_WHICH = re.compile(rf"^(?:which|what)\s+(?P<noun>(?:[\w/+.#-]+\s+){{0,5}}?[\w/+.#-]+?)\s+(?:of|{_AUX}|[a-z]+(?:s|ed))\s", re.IGNORECASE)
_CHANGED_IN = re.compile(r"(?i)^what\s+(?:else\s+)?(?:changed|changes|is\s+new|was\s+(?:added|removed|fixed))\s+(?:in|to|for|"
                         r"about|on)\s+(?P<s>(?:the|an?)\s.+)$")
_WHAT_DOES = re.compile(r"^what\s+(?:does|do|did)\s", re.IGNORECASE)
_WHAT_ACTS = re.compile(r"(?i)what\s+(?P<aux>does|do)\s+(?P<y>\S+)\s+(?P<v>[a-z]+)\s+(?P<s>to\s.+)")
_HOW_DOES = re.compile(r"^(?:(?:how|why|when|where)\s+|(?:which|what)\s+(?:[\w/+.#-]+\s+){1,3}?)?"
                       r"(?:does|do|did|is|are|was|were)\s", re.IGNORECASE)
_ACTION = re.compile(r"^(?:how\s+)?(?:can|could|do|does|did|will|would|should|may|might|must)\s+(?P<rest>\S+\s+\S.*)$",
                     re.IGNORECASE)
_CITATION = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_SCOPE = re.compile(r"\b(?P<prep>in|for|of|on|with|about|from)\s+(?P<scope>(?:[\w/+.#'’-]+(?![\w/+.#'’-])\s*){1,4})$", re.IGNORECASE)
_PASSIVE_IT = re.compile(r"(?i)\b(?:was|were|is|are)\s+(?P<it>it|they)\s+(?:\w+\s+)?(?P<verb>[a-z]+(?:ed|en))\b")
_PERSONAL = re.compile(r"\b(?:he|she|him|his)\b", re.IGNORECASE)
# "that release" anywhere (English); "which id would", "welche Stufe sollte" opening the question
_POINTED = re.compile(r"\b(?:(?:that|this|those|these)(?=\s+[a-z]{3,}\b(?!\s+(?:is|are|was|were|do|does|did|can|has|"
                      r"have)\b))|such\s+an?)\s+(?P<noun>[a-z]{3,})\b|"
                      rf"^(?P<which>(?i:{_WHICH}))\s+"
                      r"(?P<which_noun>[^\W\d_][\w-]*)(?=\s+(?i:is|are|was|were|would|will|should|must|can|could|does|do|did|has|"
                      r"have|ist|sind|war|wird|sollte|soll|muss|kann|hat|est|sont|doit|peut|es|son|debe|puede)\b)")
_OBJECT_IT = re.compile(rf"(?i)\b(?!(?:{_AUX}|how|what|why|when|where|which|who|and)\b)[a-z]+\s+it\b")
# "And how many threads?": an interrogative and its noun, no verb; the earlier question's opening up to its auxiliary
_ASKING = r"(?:how\s+(?:many|much|long|often|far)|which|what)\s+"
_ASKED_PHRASE = re.compile(rf"(?i){_ASKING}(?P<np>[^\W\d][\w/+.#-]*(?:\s+[\w/+.#-]+){{0,2}})")
_ASKED_OPENING = re.compile(rf"(?i)^{_ASKING}(?:[\w/+.#-]+\s+){{1,3}}?(?=(?:{_AUX})\s)")
_WHICH_ONE = re.compile(r"^(?:which|what)\s+one\s+(?P<x>\S+\s+\S.*)$", re.IGNORECASE)
_DEMONSTRATIVE = re.compile(r"\b(?:this|that|these|those)\b", re.IGNORECASE)
_THAT_ACTS = re.compile(r"(?i)\b(?:does|did|do|can|could|will|would)\s+(?:that|this)\s+[a-z]+\s+(?:it|them|the|an?)\b")
_TOPIC_PRONOUN = re.compile(r"\b(?:it|its|they|them|their)\b", re.IGNORECASE)
_FR_INVERSION = re.compile(r"(?<![\w-])\w+-(?:t-)?(?:il|elle|ils|elles)\b", re.IGNORECASE)
NAMELESS_WORDS = 2  # the most words of its own a follow-up naming nothing may say and still lean on the earlier turn
_INVERTED = re.compile(r"\b(?:did|does|do|can|could|will|would|should|must)\s", re.IGNORECASE)
_AUX_AFTER = re.compile(r"\s*(?:$|[?.!,;:]|(?:is|are|was|were|does|do|did|can|could|will|would|has|have|mean|"
                        r"means|work|works|cost|costs|support|supports|apply|applies|'s|for|with|in|on|to|from)\b)", re.IGNORECASE)
_LAST_WORD = re.compile(r"\s+[\w'’-]+\s*[?.!]?\s*$")
# "is that configurable", "makes that possible": a verb whose object or subject an adjective follows
_COPULA_BEFORE = re.compile(r"(?:^|\b(?:is|are|was|were|be|been|isn't|aren't|wasn't|weren't|make|makes|made|making|"
                            r"keep|keeps|kept|render|renders))\s*$", re.IGNORECASE)
# an interrogative determiner right before a named thing ("Which GID", "Welche UID", "Quel port")
_ASKED_BEFORE = re.compile(rf"(?:^|\s)(?:{_WHICH})\s+$", re.IGNORECASE)
# what opens a noun phrase: a determiner or an interrogative
_OPENS_PHRASE = re.compile(r"\b(?P<opener>the|a|an|der|die|das|den|dem|ein|eine|einen|le|la|les|un|une|el|los|las|"
                           rf"{_WHICH})\s+", re.IGNORECASE)
# "the Urgency field, which says ...": what describes a thing named
_DESCRIBED = re.compile(r"(?i),?\s+(?:that|which|who)\s")
# what no well-formed question holds (nor "Is that ..." still leaning on the earlier answer): a determiner doubled ("Which the nobody UID"), a possessive before a verb
# ("Where is ssh's stored"), a determiner ("ed's the -s option") or nothing ("download pip's"), "of" after an
# auxiliary ("What does the -9 option do of gzip"), a word twice, a preposition where the subject goes, after the question's
# first auxiliary ("How does over ssh copy files", "Is behind a NAT ...", not "What does X do in Y"); and no bracket left open
_MALFORMED = re.compile(r"(?i)\b(?:the|an?|which|what|its|their|der|die|das|le|la|les|el|los|las)\s+(?:the|an?|its|their)\s"
                        r"|\w['’]s\s+(?:\w+(?:ed|en)|is|are|was|were|do|does|did|can|must|should)\s*[?.!]?$"
                        r"|\b(?:do|does|did|is|are|was|were|be|has|have|had)\s+(?:of|von|de)\b|\b(?:the|an?)\s+[a-z]+(?<!e)ed\s*[?.!]?$"
                        r"|\b(the|an?|of|in|for|to|is|von|de)\s+\1\b|\([^()]*\(|\bvon\s+(?:die|das)\b|\b(\w+\s+\w+)\s+\2\b"
                        r"|\w['’]s\s+(?:the|an?)\s|\w['’]s$|\b([a-z]{3,})\s+\3\b|^(?:is|was|are|were|do|does|did|can|will|has)\s+(?:that|this)\b"
                        rf"|^(?:(?:how|why|when|where|what|which|who)(?:\s+(?!(?:{_AUX})\b)\S+){{0,3}}\s+)?"
                        rf"(?:do|does|did|can|could|should|would|will|must|may|might)\s+(?:{_alternation(_PHRASE_PREPOSITIONS)})\s"
                        rf"|^(?:is|are|was|were|has|have|had)\s+(?:{_alternation(_PHRASE_PREPOSITIONS)})\s")


def _bare(question: str) -> str:
    """The question without its closing (and opening Spanish) marks and outer whitespace, "what's" as "what is"."""
    return _CONTRACTED.sub(r"\1 is", _TRAILING.sub("", " ".join(question.split())).lstrip("¿¡ ").strip())


def _plain(question: str, rules: Language = EN) -> str:
    """:func:`_bare` ``question`` without its opening connective ("And", "Und", "Et")."""
    return _bare(rules.connectives.sub("", _bare(question)))


def _named(token: str, first: bool) -> bool:
    """A token naming a thing: a digit, an inner capital, a path, an identifier's dot or underscore or a call's
    brackets ("path.isAbsolute", "CMAKE_BUILD_TYPE", "getch()") anywhere; a capital after the first word."""
    marked = any(c.isdigit() for c in token) or "/" in token or "_" in token or "." in token[1:-1] \
        or token.endswith("()") or any(c.isupper() for c in token[1:])
    return token != "I" and (marked or not first and token[:1].isupper())  # "I": capitalised wherever it stands


def named_runs(text: str, opening: bool = True) -> list[tuple[int, int]]:
    """Character spans of the runs of naming tokens in ``text`` ("Cloud Pub/Sub", "BM25", "Gemini 2.5");
    ``opening``: the text opens a sentence, so its first word's capital names nothing."""
    tokens, runs, before = list(_TOKEN.finditer(text)), [], False
    for position, match in enumerate(tokens):
        token = match.group()
        following = tokens[position + 1].group() if position + 1 < len(tokens) else ""
        option = re.search(r"(?:^|\s)--?$", text[max(0, match.start() - 3): match.start()]) is not None  # "-9", "--color", "-mtime"
        named = option or _named(token, opening and position == 0) or bool(_VERSION.fullmatch(following)) \
            and token.isalpha() and token.islower() and token not in _CLOSED | _CLAUSE_BREAKS \
            or before and token in _NAME_PARTICLES and following.istitle() and tokens[position - 1].group().istitle() \
            and (token != "von" or not _GERMAN_ARTICLE_BEFORE.search(  # an article is the token before: look from it
                text, max(0, tokens[max(position - 2, 0)].start() - 1), tokens[position - 1].start()))
        gap = text[runs[-1][1]: match.start()].strip() if before else ","
        if named and (not gap or option and gap in ("-", "--")):  # not across a bracket or a comma; "base64 -w" is one
            runs[-1] = (runs[-1][0], match.end())
        elif named:  # a path's or an option's leading "/" or "-" is part of its name ("/etc/fstab", "-9")
            window = max(0, match.start() - 32)  # not the whole text before each name: linear in its length
            lead = window + len(text[window: match.start()].rstrip("/.-"))  # where its leading marks start
            runs.append((lead if lead == 0 or text[lead - 1].isspace() else match.start(), match.end()))
        before = named
    return runs


def _leading_name(text: str, opening: bool = True) -> str | None:
    """The named thing ``text`` opens with (:func:`named_runs`), if it opens with one."""
    return text[: runs[0][1]] if (runs := named_runs(text, opening)) and runs[0][0] == 0 else None


def _content_words(text: str, rules: Language) -> list[str]:
    return [t for t in (m.group().lower() for m in _TOKEN.finditer(text)) if t not in rules.stop]


def subject_of(question: str, language: str | None = None) -> str:
    """The thing ``question`` asks about, as a phrase that can stand in for a pronoun ("the ack deadline in Pub/Sub";
    "Which status code does a server send when ...?": "the status code a server sends when ...")."""
    return _referent(question, language)[0]


def _referent(question: str, language: str | None = None, *, demonstrative: bool = True) -> tuple[str, bool]:
    """:func:`subject_of`, and whether it is a clause ("a server send when ...") that cannot take a
    pronoun's place; ``demonstrative``: the pronoun is "that", which stands for what the earlier question
    asked ("which status code ...": that status code), where "it" stands for its topic."""
    rules = RULES.get(language or detect_language(question), EN)
    text = rules.connectives.sub("", _bare(question)).strip()
    # "which X does Y verb": "that" is the X Y verbs ("it" is Y); "which X verbs ...": the X that verbs ...
    if rules is EN and (relative := demonstrative and _relative_phrase(text) or _subject_relative_phrase(text)):
        return relative, False
    if rules is EN and (event := re.match(r"(?i)what\s+happen(?:s|ed)?\s+(?:when|if)\s+(?P<s>.+)", text)):
        # "What happens when I create an X ...": "that" is the event (a clause); "it" the X, or the clause's subject ("a delay is")
        acted = rules.personal.match(event.group("s")) or re.match(r"(?P<s>.+?)\s+(?:is|are|was|were|has|have)\b", event.group("s"))
        return (text[0].lower() + text[1:]) if demonstrative or not acted else acted.group("s"), False
    if rules is EN and demonstrative and (what := _WHAT_ACTS.match(text)) and what.group("y").lower() not in _DETERMINERS:
        # "What does deflate use to find X?" then "... inserted into it?": what deflate uses to find X
        return f"what {what.group('y')} {_after_subject(what.group('aux'), what.group('v'))} {what.group('s')}", False
    if rules is EN and (changed := _CHANGED_IN.match(text)):
        return changed.group("s"), False  # "What changed in the json module in Python 3.1": the json module ...
    if rules is EN and (clause := _YES_NO.match(text)) and re.match(r"\S+['’]s\s", clause.group("rest")) \
            and (length := _subject_length(clause.group("aux").lower(), clause.group("rest").split())):
        return " ".join(clause.group("rest").split()[:length]), False  # "Is pip's zip application stable": not "pip's" alone
    for pattern in rules.copula:
        if match := pattern.match(text):
            # a condition ("... if not specified") or a participle ("What is the tty group used for") is asked of it
            subject = _PARTICIPLE.sub("", _CONDITION.sub("", match.group("s"))).strip()
            return subject or match.group("s").strip(), False
    if rules.yes_no_object is not None and (match := rules.yes_no_object.match(text)):
        # "Does Node.js run a bug bounty program?": "it" is the thing it was asked to have
        return "the " + re.sub(r"(?i)^(?:the|a|an)\s+", "", match.group("x")) + " " + match.group("y"), False
    for pattern in rules.other:
        if match := pattern.match(text):
            rest = match.group("s").strip()
            if personal := rules.personal.match(rest):  # "How do I make getch() non-blocking": the thing named
                resultative = (personal.groupdict().get("verb") or "").lower() in _RESULTATIVE
                named = _leading_name(personal.group("s"), opening=False) if resultative else None
                # "What should I send if X crashes": no object, a condition, a clause that no pronoun stands for
                return named or personal.group("s").strip(), personal.group("s").split()[0].lower() in _SUBORDINATORS
            words, named = rest.split(), _leading_name(rest)
            opens = words[0].lower() in _NOUN_PHRASE_OPENERS
            if not opens and named and len(words) > 1 and words[1].islower() and not named.endswith(("'s", "’s")):
                return named, False  # "What does __slots__ replace ...": a named subject, then its verb
            if rules is EN and (opens or _WHAT_DOES.match(text) or "be" in (w.lower() for w in words[1:])) \
                    and (phrase := _noun_phrase_before_verb(words, re.match(r"(?i)\w+\s+(?:is|are|was|were)\s", text) is not None)):
                return phrase, False  # "What does the Rules-Requires-Root field declare": the noun phrase before the verb
            phrase = _noun_phrase_before_verb(words) if rules is EN and words[0].lower() not in _CLOSED else None
            if phrase and len(phrase.split()) <= 3 and (named_runs(phrase, opening=False) or re.search(r"['’]s\s", phrase)
                                                        or re.fullmatch(r"[a-z]+(?:ed|en|pt)", words[-1])):
                # a named subject, a possessive's or a passive's: "Where does less 590 look", "Where is ssh's host key kept"
                return phrase, False
            if rules is EN and not demonstrative and _HOW_DOES.match(text) and len(words) >= 2 and words[1].isalpha() \
                    and words[1].islower() and words[0].lower() not in _CLOSED | _PRONOUNS | _DETERMINERS:
                # "How does deflate find repeated strings": a one-word subject ("it" is the topic, not what was asked)
                return words[0], False
            break
    runs, rest = named_runs(text), rest if match else text
    if not runs:
        return rest, True
    # with its determiner and the adjectives between ("die systemweite Standardpapiergröße")
    opened = re.search(r"\b(?:der|die|das|den|dem|le|la|les|el|los|las)\s+(?:[^\W\d_A-Z][\w-]*\s+){0,2}$", text[: runs[0][0]])
    the = re.search(r"(?i)\bthe\s+$", text[: runs[0][0]]) if rules is EN and not re.match(r"\s+[a-z]", text[runs[0][1]:]) else None  # "the X" ending it
    return text[opened.start() if opened and rules is not EN else the.start() if the else runs[0][0]: runs[0][1]], False


def _noun_phrase_before_verb(words: list[str], participle: bool = False) -> str | None:
    """The subject of a clause whose verb comes right before a word that opens an adverbial
    ("the short description of a package | go | in ...") or ends a short clause, perhaps with a particle
    ("the Rules-Requires-Root field | declare", "X | stand for"), or ending in a ``participle`` (passive) at any length; None when neither can be told."""
    breaks = [i for i, w in enumerate(words) if w.lower() in _CLAUSE_BREAKS and i >= 2]
    passive = next((i for i, w in enumerate(words) if w.lower() == "be" and i >= 1), None)
    if passive is not None and passive <= 8:
        return " ".join(words[:passive])  # "Where can | pip's zip application | be downloaded from"
    named = _leading_name(" ".join(words), opening=False) if breaks and breaks[0] == len(words) - 1 else None
    if named and len(named.split()) < breaks[0] - 1 and words[len(named.split())].isalpha() and words[len(named.split())].islower():
        return named  # a preposition left at the end: the verb is after the named subject ("gzip 1.9 | drop support for")
    if breaks and breaks[0] <= 8 and words[breaks[0] - 1].isalpha():
        # a verb, not a noun after its determiner or "of" ("the default stack of a thread | in glibc")
        return None if words[breaks[0] - 2].lower() in (*_DETERMINERS, "of") else " ".join(words[: breaks[0] - 1])
    end = len(words) - (2 if words[-1].lower() in _PARTICLES else 1)
    if breaks or end < 1 or not words[end].isalpha() or not words[end].islower() or words[end - 1].lower() in _PARTICLES \
            or len(words) > 6 and not (participle and re.fullmatch(_PARTICIPLE_WORD, words[end])):  # not "versions of | packages"
        return None
    return " ".join(words[:end])


def _relative_phrase(text: str) -> str | None:
    """"Which wildcards can the Files field use" as "the wildcards the Files field can use" ("did add": "added"); None unless its
    subject (at most four words: one word, a name, "the/a/my ...", any "X and Y") has its verb before an adverbial or the end."""
    match = _ASKED_NOUN.match(text)
    words = match.group("s").split() if match else []
    subject = _noun_phrase_before_verb(words) if words else None
    if subject is None or words[0].lower() in ("be", "been", "not") or _ADVERBS.fullmatch(subject):  # "can always be loaded"
        return None
    verb_at, named = len(subject.split()), named_runs(subject, opening=False)
    if verb_at > 4 or words[0].lower() not in _NOUN_PHRASE_OPENERS and named != [(0, len(subject))] and verb_at > 1 and " and " not in subject:
        return None
    phrase = [*words[:verb_at], _after_subject(match.group("aux"), words[verb_at]), *words[verb_at + 1:]]
    return f"the {' '.join(match.group('noun').split())} {' '.join(phrase)}"


def _subject_relative_phrase(text: str) -> str | None:
    """"Which marker fires when ..." as "the marker that fires when ..." ("Which of the parts
    is ..." as "the one of the parts that is ..."); None for an inverted question ("Which GID must the tty
    group have") or a verb the pattern cannot tell from a noun."""
    chosen = re.match(r"(?i)^(?:which|what)\s+(?P<noun>of\s.+?)\s+(?P<aux>is|are|was|were|has|can|must)\s+(?P<rest>.+)$", text)
    if chosen is not None:
        # "Which of the three parts of a version number is a small integer": one of them, asked by what it is
        return f"the one {chosen.group('noun')} that {chosen.group('aux')} {chosen.group('rest')}"
    if (match := _SUBJECT_ASKED.match(text)) is None:
        return None
    noun, verb, rest = match.group("noun"), match.group("verb"), match.group("rest")
    if noun.split()[1:2] and noun.split()[1].lower() in _DETERMINERS or {w.lower() for w in noun.split()} & (_CLAUSE_BREAKS | _PRONOUNS):
        return None  # "What limits the number ...": a verb, then its object; "What happens when I ...": a clause
    first = rest.split()[0]
    if first.lower() in _AUXILIARIES and verb.lower() not in _AUXILIARIES and len(rest.split()) > 1:
        # "Which X Ys are [always] present": the subject before an adverb, adjective or participle; else the object ("has Ubuntu removed")
        after, be = rest.split()[1:], first.lower() in ("is", "are", "was", "were", "has", "have", "had")
        at = next((i for i, w in enumerate(after[:4]) if _participle_at(after, i)), None)
        if (acting := " ".join(after[:at or 0]) if at is not None or be else _noun_phrase_before_verb(after)) and not set(acting.split()) \
                & (_CLAUSE_BREAKS | _PARTICLES) and not _ADVERBS.fullmatch(acting):
            n = len(acting.split())
            return f"the {noun} {verb} that {' '.join([acting, _after_subject(first, after[n]), *after[n + 1:]])}"
        return None if acting is None else f"the {noun} {verb} that {rest}"
    # after an auxiliary the asked noun is its subject only before a participle, "be"/"not" ("which function must
    # be called") or a verb and its object ("which variable can hold the format"); else the question is inverted ("which C
    # standard is libcbor written in": the noun is the object)
    inverted = verb.lower() in _AUXILIARIES and not (first.lower() in ("be", "been", "not", "being")
                                                      or re.fullmatch(r"[a-z]+(?:ed|en)", first)
                                                      or first.isalpha() and first.islower() and first not in _CLOSED
                                                      and rest.split()[1:2] and rest.split()[1].lower() in _DETERMINERS)
    if noun.split()[0].lower() in _AUXILIARIES or inverted:
        return None
    adverb = f"{match.group('adverb')} " if match.group("adverb") else ""
    return f"the {noun} that {adverb}{verb} {rest}"


def _participle_at(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` reads as the participle (or "be"/"not") after an auxiliary. Inside a noun phrase a
    determiner opened ("has the screen reader skipped"), a word shaped like one ("screen", "string") is a noun
    unless it ends the question or a preposition follows it ("the kitchen team removed from sid")."""
    if not re.fullmatch(rf"{_PARTICIPLE_WORD}|[a-z]{{2,}}ing|be|been|not", words[i]):
        return False
    in_phrase = any(w.lower() in _NOUN_PHRASE_OPENERS for w in words[:i])
    return not in_phrase or i + 1 == len(words) or words[i + 1].lower() in _CLAUSE_BREAKS


def _after_subject(aux: str, verb: str) -> str:
    """``verb`` after its subject, ``aux`` gone: "does use" as "uses", "do use" as "use"; a modal stays ("can use")."""
    if (aux := aux.lower()) == "did":  # "add" as "added", "drop" as "dropped", "try" as "tried", "get" as "got"
        return _PAST.get(verb) or re.sub(r"(?<=[^aeiou])y$", "i", verb) + ("d" if verb.endswith("e") else verb[-1] * bool(re.fullmatch(r"[^aeiou]*[aeiou][bdgmnpt]", verb)) + "ed")
    if aux != "does":
        return verb if aux == "do" else f"{aux} {verb}"
    return {"have": "has", "be": "is"}.get(verb) or (verb + "es" if verb.endswith(("s", "sh", "ch", "x", "z", "o")) else
        verb[:-1] + "ies" if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou" else verb + "s")


# ----------------------------------------------------------------- the rule


def standalone_question(question: str, history: Sequence[ConversationTurn]) -> Resolution:
    """``question`` as it stands on its own given the earlier turns (oldest first)."""
    typed = " ".join(question.split())
    if not history or not typed:
        return Resolution(typed, "no history")
    if REMARK.match(_bare(typed)):  # "Thanks?", "Really?": no follow-up, never the earlier question asked again
        return Resolution(typed, "self-contained")
    earlier, resolved = history[-1].question, None
    for code in _codes(typed, earlier):  # a short follow-up says too little to tell its language
        resolved = _resolve(typed, earlier, code, history[-1].answer)
        if resolved is not None and _well_formed(resolved.question, RULES[code]) and _whole_phrase(resolved, earlier):
            then = _in_time(_plain(earlier), _bare(resolved.question), RULES[code])  # "What did it use before?": before when
            return Resolution(_finish(then, typed, "?"), resolved.rule, resolved.subject) if then else resolved
        if resolved is not None:  # a splice that does not read as a question: the safe form instead
            break
    # "When was that series broadcast?": nothing to put in its place (``referring``), so the earlier question follows in brackets
    referring = (resolved.subject or earlier) if resolved else None if NEW_TOPIC.match(_bare(typed)) else next(
        (m.group().lower() for c in _codes(typed, earlier) if (m := RULES[c].referring.search(_bare(typed)))), None)
    if referring is None and not resolved and not NEW_TOPIC.match(_bare(typed)) and not named_runs(_plain(typed)) \
            and re.search(r"(?i)\bthe\s", _plain(typed)):
        # "Where does the output go?", "How do I skip the password?": "the" thing of the earlier turn, nothing named, a word or two
        own = [w for w in _content_words(_plain(typed), EN) if w not in _CLOSED | _PRONOUNS]
        referring = " ".join(own) if 0 < len(own) <= NAMELESS_WORDS else None
    if referring is None and not resolved and typed.endswith("?") and not NEW_TOPIC.match(_bare(typed)) \
            and not named_runs(_plain(typed)) and not any(_asks(_plain(typed, RULES[c]), RULES[c]) for c in _codes(typed, earlier)):
        referring = _bare(typed)  # a fragment asking nothing of its own ("Before or after reading X?") leans; "Thanks!" asks nothing
    if referring is None:
        return Resolution(typed, "self-contained")
    if not resolved and (framed := _in_frame(_plain(typed), _plain(earlier))):
        return Resolution(_finish(framed, typed, "?"), "refers back", referring)
    text = f"{_bare(typed)} {_in_context(earlier)}"
    return Resolution(_finish(text, typed, "?" if typed.endswith("?") else ""), "in context" if resolved else "refers back", referring)


#: a question's closing brackets ("Why (which option does X use)?"), one level of brackets inside them allowed
TRAILING_BRACKET = re.compile(r"\s\(([^()]|\([^()]*\))*\)\W*$")


def same_words(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` hold the same words in the same order, case and punctuation aside."""
    return re.findall(r"\w+", a.casefold()) == re.findall(r"\w+", b.casefold())


def as_shown(typed: str, standalone: str, earlier: str) -> str:
    """The standalone question a person is shown and the record keeps: ``standalone``, or the question as typed when
    ``standalone`` ends in ``earlier``, the earlier question, in brackets (no well-formed rewrite was found: "Why (which
    option does X use)?" is what the loop reads, no question anyone would ask). A rewrite ending in brackets of its own
    ("Who maintains the GNU C Library (glibc)?") is shown."""
    bracket = TRAILING_BRACKET.search(standalone)
    return typed if bracket and same_words(bracket.group(), _in_context(earlier)) else standalone


_NOT_AFTER_PARTICIPLE = frozenset(("for", "in", "as", "on", "of", "by", "to", "with", "from", "at", "into", "under",
                                   "over", "while", "when", "during", "after", "before", "since", "until", "via"))


_YES_NO = re.compile(r"(?i)(?P<aux>is|are|was|were|does|do|did|can|could|will|would|should|must|has|have|had)\s+(?P<rest>\S.*)$")


def _in_frame(typed: str, earlier: str) -> str | None:
    """A bare "Why?", "Why not?" or "Since which version?" after a yes/no question asked in that question's own words ("Is
    X deprecated?": "Why is X deprecated?"); None after any other (its clause lacks what it asked for: "Which codec does
    X use?" then "Since when?" is no "Since when does X use?"), when the earlier question then follows in brackets."""
    why = re.fullmatch(r"(?i)(why|how\s+come)(\s+not)?", typed)
    manner = re.fullmatch(r"(?i)how|when|where", typed)  # "Can I X?" then "How?": how I can X
    fragment = re.fullmatch(r"(?i)(?:since|until)\s+when|(?:since|until|in|from|on|at|for|by|with|under)\s+(?:which|what)"
                            r"\s+\w+(?:\s+and\s+\w+)?", typed)
    clause = _YES_NO.match(earlier)
    if not (why or manner or fragment) or clause is None or len(earlier) > 200:  # a pasted log: the bracket bounds it
        return None
    rest = clause.group("rest")
    if re.search(r"[.!?]\s", rest):  # a second sentence ("Is X deprecated? I saw a warning."): no clause to reuse
        return None
    if why and why.group(2):  # "Why not?" after "Can Valgrind be attached ...?": "not" after the clause's subject
        words = rest.split()
        at = _subject_length(clause.group("aux").lower(), words)
        if at is None:
            return None
        rest = " ".join([*words[:at], "not", *words[at:]])
    return f"{'Why' if why else typed.capitalize() if manner else typed} {clause.group('aux').lower()} {rest}"


def _subject_length(aux: str, words: list[str]) -> int | None:
    """How many of ``words`` (a yes/no question's clause after ``aux``) are its subject: a personal pronoun ("can I list
    ..."), or the words before "be"/"been", after "is"/"has" a participle closing the clause or followed by a preposition
    ("are PAM modules | loaded by", "is GRUB hidden menu | enabled": "hidden" opens the subject), after "is" a last word
    ("is pip's zip application | stable"), an adverb before it with it; None when no verb is told ("does frob
    verify ...": "verify" is a noun's shape too), or a clause break comes first ("faster than X when compiled")."""
    if words and words[0].lower() in ("i", "you", "we", "they", "it", "he", "she"):
        return 1
    passive = aux in ("is", "are", "was", "were", "has", "have", "had")
    at = None
    for i, word in enumerate(words[:7]):
        if i and (word in ("be", "been") or passive and re.fullmatch(_PARTICIPLE_WORD, word) and (
                i + 1 == len(words) or words[i + 1].lower() in _NOT_AFTER_PARTICIPLE)):
            at = i
            break
        if word.lower() in _CLAUSE_BREAKS or not passive and i and word.isalpha() and word.islower() \
                and word.lower() not in _DETERMINERS and words[i - 1].lower() not in (*_DETERMINERS, "of"):
            return None  # a verb of its own before "be" ("does frob keep ... be"): no subject told
    if at is None and aux in ("is", "are", "was", "were") and 1 < len(words) <= 7 and words[-1].isalpha() \
            and words[-1].islower() and words[-1] not in _CLOSED:
        at = len(words) - 1
    while at is not None and at > 1 and _ADVERBS.fullmatch(words[at - 1]):  # an adverb before it: "| still experimental"
        at -= 1
    return at


def _well_formed(question: str, rules: Language) -> bool:
    """A rewrite that reads as a question: its interrogative or auxiliary first (after a leading clause), none of
    :data:`_MALFORMED`'s garbles."""
    text = re.split(r"[.!?]\s+", _plain(question, rules))[-1]  # its last sentence asks ("My patch was merged. What ...")
    return _asks(text, rules) and _MALFORMED.search(text) is None and question.count("(") == question.count(")")


# what may follow a clause's verb but never its subject after "does", "can", "would": a preposition or a particle
_AFTER_VERB = EN.prepositions | _PARTICLES | frozenset("out up down off over back away against into onto through".split())
_BARE_VERB_NEXT = re.compile(r"(?i)\b(?:do|does|did|can|could|would|should|will|must|may|might)\s+$")


def _whole_phrase(resolved: Resolution, earlier: str) -> bool:
    """Whether the earlier phrase a rewrite carried in is whole: after "does", "can", "would" a subject running to the clause's
    end or a stranded preposition took its verb ("What does X protect against?": not "X protect"); "systemd's" lost its noun."""
    carried = resolved.subject if resolved.rule not in ("ellipsis", "what about") else None  # those name what they replaced
    if not carried:
        return True
    if re.search(r"\w['’]s$", carried):
        return False
    plain = _plain(earlier)
    at = plain.lower().find(carried.lower())
    if at <= 0 or not _BARE_VERB_NEXT.search(plain[:at]):
        return True
    after = [w.lower() for w in re.findall(r"[\w'’-]+", plain[at + len(carried):])][:2]  # not "SKEL in adduser.conf specify"
    return bool(after) and not (after[0] in _AFTER_VERB and (len(after) == 1 or after[1] in EN.prepositions))


def _identified(earlier: str, subject: str, answer: str) -> str | None:
    """``subject`` with the thing the earlier answer identified, when the earlier question asked "which X" and the
    subject is that X ("... replies 304 Not Modified ...": "the 304 Not Modified status code a server sends when
    ..."): the name beside X's head noun in the answer's first sentence ("the Urgency field", "InfoMagic, a CD
    vendor"), else the one name there the question lacks, not in a list. None when there is none or several."""
    asked = _ASKS_WHICH.match(earlier)
    words = subject.split()
    if asked is None or len(words) < 2 or words[0].lower() != "the" or words[1].lower() != asked.group("noun").split()[0].lower():
        return None
    head = re.escape(asked.group("noun").split()[-1])
    text = " ".join(" ".join(answer_paragraphs(answer)).split())
    first = re.split(r"(?<=[.!])\s+(?=[A-Z])", text[: mark.start()] if (mark := _CITATION.search(text)) else text)[0]  # its first sentence
    known = {w.lower() for w in _TOKEN.findall(earlier)}
    # a name among others ("tools like xz, lzip and bzip2") is mentioned, not what was asked for
    names = [(a, b) for a, b in named_runs(first) if not all(w.lower() in known for w in _TOKEN.findall(first[a:b]))
             and "," not in first[a:b] and not re.search(r"(?:,|\band|\bor)\s*$", first[:a])
             and re.search(r"[^\W\d_]", first[a:b]) and not re.search(r"[:;]\s", first[a:b])]
    # a capitalised word opening a clause ("Urgency: This is ...") is a name only beside the head noun ("Acme, a vendor")
    new = [first[a:b] for a, b in names if not (first[a:b].isalpha() and first[a + 1:b].islower()
                                                and re.search(r"[:.;!?]\s*$", first[:a]))]
    beside = [run for run in (first[a:b] for a, b in names) if re.search(rf"(?i)(?:{re.escape(run)}(?:,\s+(?:an?|the)(?:\s+[\w-]+){{0,2}})?\s+{head}|"
                                              rf"\b{head}\s+{re.escape(run)})\b", first)]
    found = beside or new
    # the thing named, not described again ("the Urgency field of a .changes file", not "... that says ...")
    return f"the {found[0]} {_DESCRIBED.split(' '.join(words[1:]))[0]}" if len(found) == 1 else None


def answer_paragraphs(answer: str) -> list[str]:
    """An earlier answer's own paragraphs: without the notes and refusal ragbus writes around them."""
    return [p for p in answer.split("\n\n") if p.strip() and not is_note(p)]


def _codes(typed: str, earlier: str) -> list[str]:
    return [c for c in dict.fromkeys((detect_language(typed), detect_language(earlier), "en")) if c in RULES]


def leans_on(question: str, history: Sequence[ConversationTurn]) -> str | None:
    """Why ``question`` leans on the earlier turn: the rule rewrote it, it opens with a connective ("And when does
    --color stop colorizing?"), or a word in it points back ("When was that series broadcast?"). None when nothing
    in its form leans; what leans may still change topic ("And what is chunking?"): the caller checks the corpus."""
    typed = " ".join(question.split())
    if not history or not typed or NEW_TOPIC.match(_bare(typed)) or REMARK.match(_bare(typed)):
        return None
    if (resolved := standalone_question(typed, history)).rewritten:
        return f"refers back (“{resolved.subject}”)" if resolved.rule == "refers back" else resolved.rule
    opens = (RULES[c].connectives.match(_bare(typed)) for c in _codes(typed, history[-1].question))
    return CONNECTIVE if any(m is not None and m.end() > 0 for m in opens) else None


def _resolve(typed: str, earlier: str, language: str, answer: str = "") -> Resolution | None:
    rules = RULES[language]
    bare = _bare(typed)
    stripped = rules.connectives.sub("", bare).strip()
    connective = stripped != bare
    if rules is EN and (condition := re.match(r"(?i)what\s+(?=if\s)", stripped)) and not _TOPIC_PRONOUN.search(stripped):
        # "What if the file cannot be read?": the earlier question asked under that condition, as "And if ...?" is
        # ("What if it is missing?": the pronoun's thing, below)
        stripped, connective = stripped[condition.end():], True
    fragment = (m := rules.referring.match(bare)) is not None and m.end() == len(bare)  # "And before?", "In which unit?"
    mark = "?" if typed.rstrip().endswith("?") or typed.lstrip().startswith("¿") else ""

    about = rules.what_about.match(bare) or rules.what_about.match(stripped)
    base = _plain(earlier, rules)
    then = _in_time(base, about.group("x").strip() if about else stripped, rules) \
        if about or connective and not _asks(stripped, rules) else None
    if then is not None:  # "And before 3.9?", "And before?": the earlier question asked of another time
        return Resolution(_finish(then, earlier, mark), "ellipsis", base)
    if about:
        return _swap(earlier, about.group("x").strip(), language, rules, "what about")
    elliptical = False  # "And its X?": the earlier question asked of X
    if connective and stripped and (possessive := rules.possessive.match(stripped)) is not None:
        # "And its hostmask?" after "How do I get the netmask of ...?": asked as the netmask was, else what it is
        owned = f"{rules.possessive_articles.get(possessive.group('pos').lower()) or 'the'} {possessive.group('np')}"
        replaced = (_parallel_part(base, possessive.group("np")) or _same_head(base, owned, rules)) \
            if possessive.end() == len(stripped) else None
        if replaced is not None:
            return Resolution(_finish(replaced, earlier, mark), "ellipsis", earlier)
        stripped, elliptical = f"{rules.what_is} {stripped}", True
    elif connective and rules is EN and (asked := _ASKED_PHRASE.fullmatch(stripped)) and (opening := _ASKED_OPENING.match(base)) \
            and not {w.lower() for w in asked.group("np").split()} & (_CLOSED | _PRONOUNS | {"one", "ones", "else"}):
        # "How much memory does sort use?" then "And how many threads?": asked in the earlier question's words
        return Resolution(_finish(f"{stripped} {base[opening.end():]}", earlier, mark), "ellipsis", base)
    elif connective and stripped and (not _asks(stripped, rules) or rules is EN and _CONDITION_CLAUSE.match(stripped)) \
            and not fragment:
        return _swap(earlier, stripped, language, rules, "ellipsis")  # not "And before?": no phrase for it to stand in
    found = _PERSONAL.search(stripped) if rules is EN else None
    person, his = (_person(base), found.group().lower() == "his") if found else (None, False)
    if person is not None and not (his and " who " in person):
        # "Who became Debian leader ...?" then "What was he trying to build?": the person asked about, or named
        stripped = stripped[: found.start()] + (f"{person}'s" if his else person) + stripped[found.end():]
        if _TOPIC_PRONOUN.search(stripped) is None:
            return Resolution(_finish(stripped, typed, mark), "pronoun", person)
        if person in _referent(earlier, language)[0]:
            return None  # "How did he describe it?": one phrase cannot stand for both
    if rules is EN and (one := _WHICH_ONE.match(stripped)) and one.group("x").split()[0].lower() in rules.prepositions:
        return _swap(earlier, one.group("x"), language, rules, "ellipsis")  # "And which one for user accounts?"
    for reading in (_acted_on, _pointed_phrase, _one_of, _extraposed, _doing):
        found = reading(stripped, base, answer) if rules is EN or reading is _pointed_phrase else None
        if found is not None:  # the question as read, the rule, and the earlier phrase it took
            return Resolution(_finish(found[0], typed, mark), found[1], found[2])
    subject, clause = _standing_for(stripped, earlier, base, language, answer)
    if not subject:
        return None
    plural = None
    if language == "en" and (clause or not _plural(subject)):
        # "Do they match leading dots?": a plural pronoun stands for a plural noun phrase
        refs = {w.lower() for w in re.findall(r"\w+", rules.expletive.sub(" ", stripped))}
        plural = _plural_phrase(earlier) if refs & _PLURAL else None
    if clause:
        # "Why do clients retry when ...?" then "What makes that necessary?": the pronoun stays, explained
        subject = _in_context(earlier)
    masked = rules.expletive.sub(lambda m: "\0" * len(m.group()), stripped)
    if language == "fr" and not clause and (inverted := _FR_INVERSION.search(masked)) is not None:
        # "Comment fonctionne-t-elle ?": the subject before the inverted verb (French complex inversion)
        text = f"{stripped[: inverted.start()]}{subject} {stripped[inverted.start():]}"
        return Resolution(_finish(text, typed, mark), "pronoun", subject)
    text = _replace_pronouns(stripped, masked, subject, rules, plural, elliptical)
    if text is not None:
        if clause and (plural is None or {w.lower() for w in re.findall(r"\w+", masked)} & _SINGULAR):
            text = f"{stripped} {subject}"  # a plural pronoun alone takes the plural phrase
        return Resolution(_finish(text, typed, mark), "pronoun", subject)
    if (content := _content_words(stripped, rules)) and not named_runs(stripped) and not fragment \
            and all(w in rules.relational for w in content) and rules.frame.match(stripped):
        subject = (_relative_phrase(base) if rules is EN and _ASKS_WHICH.match(base) else None) or subject  # "which X": that X
        text = f"{stripped} {subject}" if clause else f"{stripped} {rules.of} {subject}"
        return Resolution(_finish(text, typed, mark), "elided subject", subject)
    # a language that drops the subject ("¿Cómo se distribuyen?"): its verbs alone, after them the earlier subject
    dropped = rules.dropped_subject(stripped, base) if rules.dropped_subject and not named_runs(stripped) else None
    return Resolution(_finish(f"{stripped} {dropped}", typed, mark), "pro-drop", dropped) if dropped else None


def _standing_for(text: str, earlier: str, base: str, language: str, answer: str) -> tuple[str, bool]:
    """What the pronouns of ``text`` stand for in the earlier question, and whether that is a clause (kept in context)."""
    rules = RULES[language]
    # "that", and "it" as an object ("how do I change it") after "which X does Y verb" (X its object), stand for what was
    # asked: the X Y verbs; "it" as a subject ("what does it bring") for Y, unless X is a function or option (below)
    demonstrative = language == "en" and (_DEMONSTRATIVE.search(text) is not None and _TOPIC_PRONOUN.search(text) is None
                                          or (_OBJECT_IT.search(text) or _PASSIVE_IT.search(text))
                                          and (_relative_phrase(base) is not None or _WHAT_ACTS.match(base)))
    subject, clause = _referent(earlier, next(c for c in (detect_language(earlier), language) if c in RULES), demonstrative=demonstrative)
    # "that" is a claim, a clause: after "Why must X be Y?" ("What does that mean?"), before a verb and object ("Did that change it?")
    clause = clause or demonstrative and re.match(r"(?i)why\s", base) is not None or _THAT_ACTS.search(text) is not None
    if not subject:
        return subject, clause
    # "it" after "Which function does X use?" is that function (as the answer named it); after a past act, only in another tense
    # ("Which tool did X buy?" then "How much did it pay?": X); after a release's present act never; never a plural (below)
    asked = _ASKED_NOUN.match(base) if not demonstrative and language == "en" else None
    if asked and asked.group("noun").split()[-1].lower() in EN.named_nouns and ((did := asked.group("aux").lower() == "did") or not
            _VERSION.search(base)) and not (did and re.search(r"(?i)\bdid\s+it\b", text)) and (relative := _relative_phrase(base)):
        return _identified(earlier, relative, answer) or relative, False
    pronouns = {w.lower() for w in re.findall(r"\w+", text)}
    if asked and not clause and pronouns & _SINGULAR and not pronouns & _PLURAL and _plural(subject) \
            and (actor := _leading_name(asked.group("s"), opening=False) or _noun_phrase_before_verb(asked.group("s").split())):
        return actor, False
    subject = (_identified(earlier, subject, answer) if answer and not clause else None) or subject
    head, _, owner = subject.partition(f" {rules.of} ") if rules is EN else ("", "", "")
    if owner and (_plural(head) and not _plural(owner) and not pronouns & _PLURAL
                  or len(head.split()) in (2, 3) and head.split()[-1].lower() in rules.relational):
        subject = owner  # "it" is not "the members of a group" but the group; not "the (code) name of X" but X
    return subject, clause


def _in_time(base: str, text: str, rules: Language) -> str | None:
    """A time asked of ``base``'s version ("How is X buffered in Python 3.9?"): ``text`` "before", "before 3.9" asks
    "How was X buffered before Python 3.9?"; a question ending "before" ("What did it use before?"), before Python 3.9."""
    when = re.fullmatch(r"(?i)(?P<q>.+\s)?(?P<prep>before|prior\s+to|after|since|until|earlier|previously)(?:\s+(?P<x>\S.*))?", text)
    scopes = list(_VERSION_SCOPE.finditer(base)) if rules is EN and when else []
    scope = ([s for s in scopes if s.group("scope") not in text] or scopes or [None])[-1]
    x = when and when.group("x") and named_runs(when.group("x"), opening=False)
    if scope is None or x is not None and (when.group("q") or not x or when.group("x")[x[-1][0]: x[-1][1]].lower()
                                           not in scope.group("scope").lower()):
        return None
    prep = "before" if when.group("prep").lower() in ("earlier", "previously") else when.group("prep").lower()
    if when.group("q"):
        return f"{when.group('q')}{prep} {scope.group('scope')}"
    text = f"{base[: scope.start()]}{prep} {scope.group('scope')}{base[scope.end():]}"
    verb = re.search(r"\b(?:is|are|does|do|has|have|can)\b", text[: scope.start()]) if prep == "before" else None
    past = {"is": "was", "are": "were", "does": "did", "do": "did", "has": "had", "have": "had", "can": "could"}
    return text if verb is None or len(text[: verb.start()].split()) > 3 else \
        text[: verb.start()] + past[verb.group().lower()] + text[verb.end():]


def _doing(text: str, base: str, answer: str = "") -> tuple[str, str, str] | None:
    """"Is that the default?" after "What does lsof's -l option do?": is the thing that does it the default; "Does that
    work on Y?" after "How do I get X?": the way to get X."""
    does, that = re.fullmatch(r"(?i)what\s+(?:does|do)\s+(?P<x>.+?)\s+do", base), re.match(r"(?i)(?:is|was)\s+(?:that|this)\b", text)
    if does and that:
        return f"{text[: that.end() - 4]}{does.group('x')}{text[that.end():]}", "pronoun", does.group("x")
    way = re.match(r"(?i)how\s+(?:do|can|should)\s+(?:i|you|we|one)\s+(?P<s>.+)", base)
    that = re.search(r"(?i)\b(?:that|this)(?=\s+(?:also\s+)?work)", text) if way else None
    return (f"{text[: that.start()]}the way to {way.group('s')}{text[that.end():]}", "pronoun", f"the way to {way.group('s')}") \
        if that else None


def _acted_on(text: str, base: str, answer: str = "") -> tuple[str, str, str] | None:
    """"Which gzip release added the --keep option?" then "Why was it added?": what that verb acted on."""
    passive = _PASSIVE_IT.search(text)
    acted = re.search(rf"(?i)\b{passive.group('verb')}\s+(?P<np>(?:the|a|an)\s+[^?,;]+?)\s*(?:\b(?:in|on|for|to|from|by|"
                      r"with|when|if)\b|$)", base) if passive else None
    return (text[: passive.start("it")] + acted.group("np") + text[passive.end("it"):], "pronoun",
            acted.group("np")) if acted else None


def _person(base: str) -> str | None:
    """Who "he" or "she" is: the person the earlier question asked about ("Who became ...": the person
    who became ...) or named ("Ian Murdock"); None when neither, or it holds such a person already."""
    who = re.match(r"(?i)^who\s+(?P<rest>\S.*)$", base)
    if who is not None or " person who " in base:
        return f"the person who {who.group('rest')}" if who else None
    names = [base[a:b] for a, b in named_runs(base) if re.fullmatch(r"[A-Z][a-z]+(?:\s+(?:[a-z]+\s+)?[A-Z][a-z]+){1,2}", base[a:b])]
    return names[0] if names else None


def _extraposed(text: str, base: str, answer: str = "") -> tuple[str, str, str] | None:
    """``text`` whose "that" (before its verb or a closing adjective) stands for what the earlier question asked
    to be done, with "it" in its place and that action after it: "Will APT ever downgrade a package?" then "What
    priority does that take?" asks "What priority does it take for APT to downgrade a package?"."""
    that = re.search(r"(?i)\b(?:that|this)\b(?=\s+(?:(?:is|was|does|did|do|can|could|would|will|make|makes|"
                     r"made|take|takes|took|become|became|require|requires|need|needs|cost|costs)\b|[a-z]+\s*$))", text)
    asked = _ACTION.match(base)
    if that is None or asked is None or text[that.end():].strip().split()[0].lower() in _CLOSED - _AUXILIARIES:
        return None
    words = asked.group("rest").split()
    if words[0].lower() in ("i", "you", "we", "one"):
        subject = ""
    elif named := _leading_name(asked.group("rest"), opening=False):
        subject = named  # "Will APT ever downgrade a package": APT
    else:  # "Can a method of a C class reach the module state": the verb is before its object's determiner
        verb = next((i for i in range(1, min(len(words) - 1, 8)) if words[i].isalpha() and words[i].islower()
                     and words[i] not in _CLOSED and words[i - 1].lower() not in _CLOSED
                     and words[i + 1].lower() in _DETERMINERS), None)
        if verb is None or words[0].lower() not in _NOUN_PHRASE_OPENERS:
            return None
        subject = " ".join(words[:verb])
    verb_at = len(subject.split()) or 1
    subject = f"for {subject} " if subject else ""
    rest = [w for w in words[verb_at:] if w.lower() not in ("ever", "still", "also", "always", "actually")]
    if not rest or not rest[0].isalpha() or rest[0].lower() in _CLOSED:
        return None
    clause = f"{subject}to {' '.join(rest)}"
    return f"{text[: that.start()]}it{text[that.end():]} {clause}", "proposition", clause


def _pointed_phrase(text: str, base: str, answer: str = "") -> tuple[str, str, str] | None:
    """``text`` with a noun the earlier question (``base``) named more fully in its place: after a demonstrative
    ("that release") the earlier phrase of its head with "the" (the asked noun with its clause), else the earlier
    answer's, with the name beside it ("“Monty Python’s Flying Circus”, a comedy series") or the place it is in
    ("a file in /etc/cron.d"); after an interrogative ("which id") the earlier phrase's words ("static uid")."""
    if (match := _POINTED.search(text)) is None:
        return None
    key, rule = "noun" if match.group("noun") else "which_noun", "same head" if match.start() == 0 else "demonstrative"
    noun, asked = match.group(key), _ASKS_WHICH.match(base)
    if match.group("which") is None and asked is not None and _same_noun(asked.group("noun").split()[-1], noun) \
            and (phrase := _relative_phrase(base) or _subject_relative_phrase(base)) is not None:
        return text[: match.start()] + phrase + text[match.end():], rule, phrase
    found, told = _earlier_phrase(base, noun), False
    if found is None and match.group("which") is None and answer:
        base = _CITATION.sub("", " ".join(answer_paragraphs(answer)))  # named only in the earlier answer
        found, told = _earlier_phrase(base, noun), True
    if found is None or base[found[2]: found[1]].lower() == noun.lower() and not told:
        return None
    phrase = base[found[2]: found[1]]
    if match.group("which") is not None:
        return text[: match.start(key)] + phrase + text[match.end():], rule, phrase
    if base[found[0]: found[2]].strip().lower() not in ("the", "a", "an"):
        return None
    beside = re.search(r"(?P<name>[“\"]?[^\s,“”\"][^,“”\"]*[”\"]?),\s*$", base[max(0, found[0] - 120): found[0]])
    place = re.match(r"\s+(?:in|of|for|on|under)\s+\S+", base[found[1]:])
    if beside and named_runs(name := beside.group("name").strip("“”\""), opening=False) == [(0, len(name))]:
        phrase = name.replace("’", "'")  # the answer's typography is not the question's
    elif place and named_runs(place.group(), opening=False):
        phrase = f"{'a' if match.group().startswith('such') else 'the'} {phrase}{place.group().rstrip('.,;:')}"
    elif told:
        return None  # "the file": the answer's phrase says no more than the demonstrative did
    else:
        phrase = f"the {phrase}"
    return text[: match.start()] + phrase + text[match.end():], rule, phrase


def _one_of(text: str, base: str, answer: str = "") -> tuple[str, str, str] | None:
    """``text`` with "one" standing for one of the earlier plural noun phrase: "Which one is ..." after
    "Which two flavours does BLAKE2 come in?" asks "Which of the two flavours BLAKE2 comes in is ...", "Is
    one written ..." after "Where does Python write .pyc files?" asks "Is a .pyc file written ..."."""
    plural, asked = _plural_phrase(base), _ASKED_NOUN.match(base) or _ASKS_WHICH.match(base)
    which = re.search(r"(?i)^(which|what)\s+one\b|\b(the\s+(?:first|second|third|last))\s+one\b", text)  # "the second of the two ..."
    if plural is None or which is None and not re.search(r"(?i)(?:^(?:is|was|are|can|does)\s+|\b(?:for|of|to|with|on|get|want|"
                                                       r"need|use|ask|add|remove|delete|create|install|load|unload|"
                                                       r"enable|disable|pick|choose)\s+)one\b(?!\s+(?:of|another)\b)", text):
        return None
    if which is not None:
        if asked is None or not _plural_noun(asked.group("noun").split()[-1]) or not _OPENS_PHRASE.match(plural):
            return None  # not "Which of options ...": a plural without its determiner says too little
        return f"{text[: which.start()]}{which.group(1) or which.group(2)} of {plural}{text[which.end():]}", "pronoun", plural
    words = plural.split()
    words = [] if len(words) > 4 else words[1:] if words[0].lower() in (*_DETERMINERS, "many", "some", "all", "two", "three") else words
    if not words:
        return None
    single = " ".join([*words[:-1], words[-1][:-1]])
    found = re.search(r"(?i)\bone\b", text)
    return f"{text[: found.start()]}{'an' if single[:1].lower() in 'aeiou' else 'a'} {single}{text[found.end():]}", \
        "pronoun", plural


def _asks(text: str, rules: Language) -> bool:
    """A whole question, or one after a leading clause ("if postrm purge then fails, what state is it in")."""
    return bool(rules.frame.match(text)) or any(rules.frame.match(part.strip()) for part in text.split(",")[1:])


def _in_context(earlier: str) -> str:
    """The earlier question in brackets, to follow a question whose pronoun it explains, without its opening "and";
    brackets do not nest: the question the earlier one had in brackets, the oldest, follows it ("(who contributed that
    code; which library does grep -P use since 3.8)"), as it grounds both."""
    grounded = re.search(r"\s+\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*$", _bare(earlier))
    parts = [_bare(earlier)[: grounded.start()], grounded.group(1).split("; ")[-1]] if grounded else [earlier]
    parts = [_bare(next((r.connectives.sub("", _bare(p)) for r in RULES.values() if r.connectives.match(_bare(p))), p))
             or _bare(p) for p in parts]
    # a long earlier question (a pasted log) gives its last sentence, at most 200 characters: the follow-up is not drowned
    parts = [p if len(p) <= 200 else p[:201].rsplit(" ", 1)[0] for p in (p if len(p) <= 200 else re.split(r"(?<=[.!?])\s+", p)[-1] for p in parts)]
    return f"({'; '.join(p[:1].lower() + p[1:] for p in parts)})"


def _replace_pronouns(text: str, masked: str, subject: str, rules: Language, plural: str | None = None,
                      elliptical: bool = False) -> str | None:
    """``text`` with its possessives and pronouns (found in ``masked``, where empty ones are hidden)
    replaced by ``subject``; None when it has none. In English "them" takes ``plural`` when there is one, and
    in a question with both numbers only the pronouns of the subject's number take the subject."""
    numbers = {w.lower() in _PLURAL for w in re.findall(r"\w+", masked) if w.lower() in _PLURAL | _SINGULAR}

    def referent(word: str) -> str | None:
        many = rules is EN and word.lower() in _PLURAL
        if many and plural:
            return plural
        return None if rules is EN and len(numbers) == 2 and many != _plural(subject) else subject

    edits: list[tuple[int, int, str, bool]] = []
    for match in rules.possessive.finditer(masked):
        if (owner := referent(match.group("pos"))) is None or rules is EN and any(
                text[a] != "-" and not _ASKED_BEFORE.search(text, 0, a) for a, _ in named_runs(text[: match.start()])):
            continue  # "Where does GNU time write its statistics?": its owner named before it (not an option, nor "which RFC")
        article = rules.possessive_articles.get(match.group("pos").lower(), "")
        noun, verb = text[match.start("np"): match.end("np")], ""
        if rules is EN and not text[match.end():].strip(" ?.!") and len(noun.split()) > 1 \
                and (_INVERTED.search(text, 0, match.start()) or re.search(r"(?i)\b(?:is|are|was|were)\s", text[: match.start()])
                     and re.fullmatch(_PARTICIPLE_WORD, noun.rsplit(" ", 1)[-1])):
            noun, verb = noun.rsplit(" ", 1)  # "Which value did its authors | fix", "When is its value | unset": its verb last
        noun, owner = _owner(owner, noun, rules, elliptical)
        phrase = " ".join(p for p in (article, noun, _of(rules, owner), verb) if p)
        edits.append((match.start(), match.end(), phrase, match.group("pos").lower() in _PLURAL))
    taken = [(e[0], e[1]) for e in edits]
    for match in rules.pronoun.finditer(masked):
        if any(s <= match.start() < e for s, e in taken):
            continue
        # a demonstrative stands for a thing before a verb or the end ("how does that work"), or after "is" or "make"
        # before the question's last word ("is that configurable?"); not as a determiner or a relative ("this limit")
        if match.group().lower() in ("this", "that", "these", "those") and not (_AUX_AFTER.match(masked, match.end()) or _LAST_WORD.match(
                masked, match.end()) and _COPULA_BEFORE.search(masked, 0, match.start())):
            continue
        if (phrase := referent(match.group())) is not None:
            edits.append((match.start(), match.end(), phrase, match.group().lower() in _PLURAL))
    if not edits:
        return None
    # a referent goes where the question first names it; a later "its" refers back to it ("uses it as its default")
    first: dict[str, tuple[int, int, str, bool]] = {}
    for edit in sorted(edits):
        first.setdefault(edit[2] if edit[3] else subject, edit)
    out = text
    for start, end, phrase, _ in sorted(first.values(), reverse=True):
        out = out[:start] + phrase + out[end:]
    return out


def _owner(subject: str, noun: str, rules: Language, elliptical: bool = False) -> tuple[str, str]:
    """"its <noun>" as the noun and what it is asked of: ``subject``, or, when the subject is an attribute of
    something, not a named thing ("the default action of SIGSEGV") and the noun is another thing, not a relational
    word ("its signal number", not "its maximum"), that something: a value has no signal number. An ``elliptical``
    follow-up ("And its quotechar?" after "the default delimiter of a csv dialect") keeps the attribute's relational
    words: its owner's default quotechar; a question of its own ("What is its signal number?") asks only its words."""
    content = _content_words(noun, rules)
    head, of, owner = subject.partition(f" {rules.of} ")
    alone = len(head.split()) == 2 and head.split()[-1].lower() in rules.relational  # "the purpose" has no format
    if rules is not EN or not of or not content or all(w in rules.relational for w in content) and not alone \
            or not head.lower().startswith("the ") or len(head.split()) > 4 or head.lower() == "the one" \
            or named_runs(head, opening=False):  # "the halfdelay() function of curses": a thing of its own
        return noun, subject
    return " ".join([*(w for w in head.split()[1:-1] if elliptical and w.lower() in rules.relational), noun]), owner


def _plural(phrase: str) -> bool:
    """A noun phrase whose head noun (before its "of", "that", "in" ...) is a lower-case plural."""
    words = phrase.split()
    cut = next((i for i, w in enumerate(words) if i and w.lower() in _HEAD_ENDS), len(words))
    return bool(cut) and _plural_noun(words[cut - 1])


def _plural_noun(word: str) -> bool:
    return word.isalpha() and word.islower() and len(word) > 3 and word.endswith("s") \
        and not word.endswith(("ss", "us", "is")) and word not in EN.stop and word not in _AUXILIARIES


def _plural_phrase(earlier: str) -> str | None:
    """What "they" or "them" stands for in ``earlier``: the asked noun with its clause when that is plural
    ("the wildcards the Files field can use"), else its first plural noun phrase, with the determiner,
    names and participles before its head ("the Debian patches", "compiled .pyc files")."""
    # "How many filters can X have": the filters X can have, a plural whatever its case ("How many Header Magic Bytes")
    text, counted = re.subn(r"(?i)^how\s+many\s", "Which ", _plain(earlier))
    relative = _relative_phrase(text)
    if relative is not None and (counted or _plural_noun(_ASKED_NOUN.match(text).group("noun").split()[-1])):
        return relative
    words = text.split()
    for end in range(1, len(words)):
        if not _plural_noun(words[end]) or end == 1 and words[0].lower() == "who" or end == 2 \
                and words[0].lower() in ("what", "which") and not _plural_noun(words[1]):
            continue  # "Who maintains ...", "Which directory holds ...": a verb
        start = end
        # left over its modifiers, to a determiner; not over a closed-class word or a verb (after a named
        # subject, "to" or an auxiliary and one word: "does Python put | compiled .pyc files", "to join | many strings")
        while start > 0 and words[start - 1].lower() not in _CLOSED:
            before = words[start - 2] if start > 1 else ""
            verb = before.lower() not in _DETERMINERS and (_named(before, start == 2) or before.lower() == "to"
                               or start > 2 and words[start - 3].lower() in _AUXILIARIES)
            if verb and words[start - 1].lower() not in _DETERMINERS:
                break
            start -= 1
            if words[start].lower() in _DETERMINERS:
                break
        return " ".join(words[start + (words[start - 1: start + 1] == ["How", "many"]): end + 1])  # "How many | X"
    return None


def _of(rules: Language, subject: str) -> str:
    """"of the ack deadline" in the rules' language, with French and Spanish contractions."""
    lowered = subject.lower()
    for language, article, contracted in (("fr", "le ", "du "), ("fr", "les ", "des "), ("es", "el ", "del ")):
        if rules is RULES[language] and lowered.startswith(article):
            return contracted + subject[len(article):]
    return "d'" + subject if rules is RULES["fr"] and lowered[:1] and lowered[:1] in "aeiouyéèh" else f"{rules.of} {subject}"


def _swap(earlier: str, fragment: str, language: str, rules: Language, rule: str) -> Resolution:
    """The earlier question asked of ``fragment`` instead, in the place of the first earlier phrase it parallels:
    the one opening with its preposition or conjunction ("with apt" / "with aptitude"; :func:`_prepositional`), of its head
    noun ("the cleandead tool" / "the compdb tool"), the named thing ("Pub/Sub" / "Cloud Tasks"), the plural noun phrase, the
    subject; an attribute ("the maximum") is asked of the earlier subject; else the earlier question in brackets."""
    mark, fragment, base = "?", _bare(fragment), _plain(earlier, rules)
    opener = words[0].lower() if len(words := fragment.split()) > 1 else ""
    if opener in rules.prepositions or opener in _SUBORDINATORS or rules is EN and opener in _PHRASE_PREPOSITIONS:
        found = _prepositional(earlier, fragment, language, rules, rule)
        if isinstance(found, Resolution):
            return found
        fragment = found
    call = re.search(r"\b[\w.]+\((?P<args>['\"\d][^()]*)\)", base) if words[0].lower() in ("a", "an") else None
    if call and not named_runs(fragment):  # "What does f('a.b') return?" then "What about a name with no dot?"
        return Resolution(_finish(f"{base[: call.start('args')]}{base[call.end('args'):]} for {fragment}", earlier, mark), rule, base)
    if rules is EN:  # "ones" stands for the head noun it parallels ("Protected packages" / "Essential ones"): the modifier swaps
        fragment = re.sub(r"(?i)(?<=\w)\s+ones$", "", fragment)
    replaced = _parallel_part(base, fragment) or _parallel_phrase(base, fragment, rules) or _same_head(base, fragment, rules)
    if replaced is not None:
        return Resolution(_finish(replaced, earlier, mark), rule, base)
    content = _content_words(fragment, rules)
    attribute = not content or all(w in rules.relational for w in content)
    # a German noun after its article is capitalised, not named ("der Mentor")
    fragment_names = [r for r in named_runs(fragment, opening=False) if language != "de" or not _GERMAN_ARTICLE_BEFORE.search(fragment[: r[0]])]
    runs = named_runs(base)
    # the name of the fragment's shape ("IPv6" for "IPv4"), else the asked one, else the last for a name (not "the number of X")
    shaped = [r for r in runs if os.path.commonprefix([base[r[0]: r[1]].lower(), fragment.lower()])[2:]]
    shaped += [r for r in runs if _ASKED_BEFORE.search(base[: r[0]])] + runs[-1:] * (not set(fragment.split()) & rules.prepositions)
    if fragment_names and shaped:
        start, end = shaped[0]
        if _ASKED_BEFORE.search(base[:start]):
            # "Which GID must the tty group have ...?" then "what about the nobody UID?": a value of the asked kind
            closing = _SCOPE.search(base, end)  # "on systemd systems": where it was asked
            scope = (closing.group("prep"), closing.group("scope").strip()) if closing else ()
            asked = " ".join(p for p in (rules.what_is, fragment, *scope) if p)
            return Resolution(_finish(asked, earlier, mark), rule, base[start:end])
        alias = re.match(r"\s*\([^()]*\)", base[end:])  # "OpenStack Compute (nova)": the alias goes with the name
        end += alias.end() if alias else 0
        if fragment.split()[0].lower() in _DETERMINERS and re.search(r"(?i)(?:\b(?:the|a|an)|\w['’]s)\s+$", base[:start]):
            fragment = fragment.split(None, 1)[1]  # "the 1st digit" and "the 3rd": "the 3rd digit"; "ed's -s"
        head = re.match(r"\s+(\w+)\b", base[end:])  # "ed's -p option" and "the -s option": the head once
        end += head.end() if head and fragment.lower().endswith(f" {head.group(1).lower()}") else 0
        return Resolution(_finish(base[:start] + fragment + base[end:], earlier, mark), rule, base[start:end])
    subject, clause = _referent(base, next(c for c in (detect_language(earlier), language) if c in RULES), demonstrative=False)
    leans = rules.pronoun.search(fragment) is not None  # "versions that do not belong to it": the earlier question
    plural = _plural_phrase(base) if rules is EN and _plural(fragment) and not attribute else None
    if plural and plural in base and leans:
        # "versions that do not belong to it" for "versions from the target release": "it" is the target release
        about_it = re.search(rf"{re.escape(plural)}\s+(?:{_alternation(rules.prepositions)})\s+(?P<np>(?:the|a|an)\s[^,;]+)$", base)
        if about_it is not None:
            fragment = _TOPIC_PRONOUN.sub(about_it.group("np"), fragment, count=1)
            return Resolution(_finish(base[: about_it.start()] + fragment, earlier, mark), rule, about_it.group())
    elif plural and plural in base:
        return Resolution(_finish(base.replace(plural, fragment, 1), earlier, mark), rule, plural)
    if not attribute and not clause and not leans and not fragment_names and subject in base:
        # the subject's head gives way; what it is "of" stays ("the default maximum depth of ... of xsltproc")
        head = re.sub(rf"(?i)\s+(?:{_alternation(rules.prepositions - _OF)})\s+\S+$", "", subject.rsplit(f" {rules.of} ", 1)[0])  # "k1 in BM25": k1
        return Resolution(_finish(base.replace(head, fragment, 1), earlier, mark), rule, head)
    first, _, rest = fragment.partition(" ")
    if rest and first.lower() in rules.possessive_articles:
        # "its maximum" is asked of the earlier subject: "the maximum of the ack deadline", not "its maximum of" it
        fragment = " ".join(p for p in (rules.possessive_articles[first.lower()], rest) if p)
    if clause or leans or not attribute and (not fragment_names or set(fragment.split()) & rules.prepositions):
        asked = f"{rules.about} {fragment} {_in_context(earlier)}"
        return Resolution(_finish(asked, asked, mark), rule, subject)
    asked = f"{rules.what_is} {fragment} {_of(rules, subject)}"
    return Resolution(_finish(asked, asked, mark), rule, subject)


def _prepositional(earlier: str, fragment: str, language: str, rules: Language, rule: str) -> Resolution | str:
    """A ``fragment`` opening with a preposition or conjunction, which is no subject: the earlier question with it in the
    place of the earlier phrase of its preposition, or added ("How does rsync copy files?" then "What about over ssh?":
    "... copy files over ssh?", never "How does over ssh copy files?"); or, a name alone after one of the language's own
    prepositions ("in MySQL"), that name, to take the earlier name's place."""
    mark, base, words = "?", _plain(earlier, rules), fragment.split()
    opener = words[0].lower()
    if closing := _closing(base, opener, words[-1], rules):
        start, end = closing[-1]
        scope = _SCOPE.search(base, start + 1)  # "for an alpha version of Python" then "for a release candidate": of Python
        kept = f" {scope.group()}" if scope and scope.group("prep").lower() in ("in", "on", "of") \
            and named_runs(scope.group("scope"), opening=False) and scope.group("scope").lower() not in fragment.lower() else ""
        return Resolution(_finish(base[:start] + fragment + kept + base[end:], earlier, mark), rule, base[start:end])
    if rules is EN and _ASKS_WHICH.match(base) and _TOPIC_PRONOUN.search(fragment):
        # "Which lsof option ANDs the selections?" then "And without it?": "it" is the thing asked for
        thing = _referent(base, language)[0]
        return Resolution(_finish(f"What happens {_TOPIC_PRONOUN.sub(thing, fragment, count=1)}", earlier, mark), rule, thing)
    rest = " ".join(words[1:])
    if not named_runs(fragment) or not named_runs(base) or opener in _SUBORDINATORS or rules is EN and (
            opener not in rules.prepositions or named_runs(rest, opening=False) != [(0, len(rest))]):
        # "How do I report a bug in Debian?" then "What about by email?", a condition: added, never asked "of" the subject
        return Resolution(_finish(f"{base} {fragment}", earlier, mark), rule, base)
    return rest


def _closing(base: str, opener: str, last: str, rules: Language) -> list[tuple[int, int]]:
    """Where in ``base`` a fragment "<opener> ... <last>" goes: from its "with" to the end ("on hold with apt" / "with aptitude"),
    else the phrase of its head noun ("to system groups" / "for user groups"), else up to the next preposition ("for X | at")."""
    prepositions = _alternation(rules.prepositions) if opener in rules.prepositions else ""
    word = rf"(?!(?:{prepositions})\b)[\w/+.#'’-]+"  # whitespace between words: a long word splits one way, not n² ways
    to_end = [(m.start(), len(base)) for m in re.finditer(rf"(?i)\b{re.escape(opener)}\s+", base)
              if len(base[m.end():].split()) <= (6 if prepositions else 20)]
    return to_end if to_end or not prepositions else [m.span() for m in re.finditer(
        rf"(?i)\b(?:{prepositions})\s+(?:[\w/+.#'’-]+\s+){{0,3}}?{re.escape(last)}\b", base)] or [m.span() for m in re.finditer(
        rf"(?i)\b{re.escape(opener)}\s+(?:{word}\s+){{0,2}}{word}\s*(?=\s(?:{prepositions})\s)", base)]


def _alike(a: str, b: str) -> int:
    """Two names' common start and end, when one is 3+ letters and 2/5 of the longer ("ref", "unref"; "egrep", "fgrep")."""
    a, b = a.lower(), b.lower()
    start, end = len(os.path.commonprefix([a, b])), len(os.path.commonprefix([a[::-1], b[::-1]]))
    return start + end if a != b and max(start, end) >= max(3, 0.4 * max(len(a), len(b))) else 0


def _parallel_part(base: str, fragment: str) -> str | None:
    """``base`` with ``fragment`` (a word, call or quoted value) in the place of the part of a name it is like: "What does
    timeout.ref() do?" then "What about unref?" asks of timeout.unref(); "--files='all'" then "'none'": --files='none'."""
    if re.fullmatch(r"(?<!\w)['\"‘“].+['\"’”]", fragment):
        values = list(re.finditer(r"(?<!\w)['\"‘“][^'\"‘’“”]+['\"’”](?!\w)", base))
        return base[: values[-1].start()] + fragment + base[values[-1].end():] if values else None
    call = re.fullmatch(r"(?P<core>[\w-]+)(?P<args>\([^()]*\))?", fragment)
    parts = [(_alike(p.group(), call.group("core")), w.start() + p.start(), w.start() + p.end())
             for w in re.finditer(r"[\w][\w./:=+-]*(?:\([^()]*\))?", base) if w.group().lower() not in _CLOSED
             for p in re.finditer(r"[^\W_][\w-]*", w.group())] if call else []
    alike, start, end = max(parts, default=(0, 0, 0))
    if not alike:
        return None
    args = re.match(r"\([^()]*\)", base[end:]) if call.group("args") else None
    return base[:start] + fragment + base[end + (args.end() if args else 0):]


def _parallel_phrase(base: str, fragment: str, rules: Language) -> str | None:
    """``base`` with the phrase of its determiner that shares a word (or a bound: "the first", "the second") with the
    noun phrase ``fragment`` changed word for word as it says ("the default X cache file" and "the cache directory")."""
    wanted = fragment.split()
    if len(wanted) < 2 or wanted[0].lower() not in (*_DETERMINERS, "un", "une", "ein", "eine"):
        return None
    for opener in _OPENS_PHRASE.finditer(base):
        if opener.group("opener").lower() != wanted[0].lower() and {opener.group("opener").lower(), wanted[0].lower()} != {"a", "an"}:
            continue
        words = base[opener.start():].split()[:9]
        ops = SequenceMatcher(None, [w.lower() for w in words], [w.lower() for w in wanted], autojunk=False).get_opcodes()
        if ops[-1][0] == "replace" and ops[-1][4] == len(wanted) and words[ops[-1][1]].lower() not in rules.stop:
            # the fragment's last words for as many earlier ones, the earlier words after them kept
            op, i1, i2, j1, j2 = ops.pop()
            ops += [(op, i1, i1 + min(i2 - i1, j2 - j1), j1, j2), ("delete", i1 + min(i2 - i1, j2 - j1), i2, j2, j2)]
        equal = [w for op, i1, i2, _, _ in ops if op == "equal" for w in words[i1:i2] if w.lower() not in rules.stop]
        swaps = [(words[i1:i2], wanted[j1:j2]) for op, i1, i2, j1, j2 in ops if op == "replace"]
        if any(op == "insert" for op, *_ in ops) or not swaps or any(len(a) > 2 or len(b) > 2 for a, b in swaps) \
                or not equal and not all(
                    a[0].lower() in rules.scale and b[0].lower() in rules.scale for a, b in swaps):
            continue
        merged = [w for op, i1, i2, j1, j2 in ops for w in (wanted[j1:j2] if op == "replace" else words[i1:i2])]
        return base[: opener.start()] + " ".join(merged) + base[opener.start() + len(" ".join(words)):]
    return None


def _same_head(base: str, fragment: str, rules: Language) -> str | None:
    """The earlier question with the bound before its head replaced by the bound ``fragment`` asks ("the maximum" for
    "the default minimum backoff": the default maximum backoff); None when it has none."""
    head = fragment.split()[-1]
    before = [m for m in re.finditer(r"\b(?P<attribute>[\w'’-]+)(?=\s+(?P<head>[\w'’-]+))", base)
              if m.group("attribute").lower() in rules.scale and m.group("head").lower() not in rules.stop | rules.scale
              and m.group("attribute").lower() != head.lower()] if len(fragment.split()) == 2 and head.lower() in rules.relational else []
    return base[: before[-1].start()] + head + base[before[-1].end("attribute"):] if before else None


def _same_noun(word: str, other: str) -> bool:
    """Two nouns of one head: the same word (either plural), a compound and its last part ("uid" and "id",
    "debhelper-Kompatibilitätsstufe" and "Stufe"), or two compounds of one last part ("netmask", "hostmask")."""
    a, b = word.lower().removesuffix("s"), other.lower().removesuffix("s")
    short, long = sorted((a, b), key=len)
    if long.endswith(short):
        return len(short) >= 2
    common = len(os.path.commonprefix([a[::-1], b[::-1]]))
    return common >= 4 and min(len(a), len(b)) - common >= 2


def _earlier_phrase(base: str, noun: str) -> tuple[int, int, int] | None:
    """Where the earlier question's noun phrase whose head is ``noun``'s (:func:`_same_noun`) starts, where it ends,
    and where its words after the determiner or interrogative that opens it start (at most three words: "a static
    uid"). None when it has none."""
    for match in _OPENS_PHRASE.finditer(base):
        window = re.split(r"[.,;:!?](?:\s|$)", base[match.end(): match.end() + 200])[0]  # three words, one sentence
        for word in list(re.finditer(r"[\w/+.#'’-]*[\w/+#'’-]", window))[:3]:
            if word.group()[:1].isalpha() and _same_noun(word.group(), noun):
                return match.start(), match.end() + word.end(), match.end()
    return None


def _finish(text: str, like: str, mark: str) -> str:
    """``text`` as a question: one space between words, a capital first letter, the closing mark."""
    text = " ".join(text.split())
    text = text[:1].upper() + text[1:] if like[:1].isupper() or like[:1] in "¿¡" else text
    text = "¿" + text if like.lstrip().startswith("¿") and not text.startswith("¿") else text
    return text + mark if mark and not text.endswith(mark) else text
