"""Term analysis and extractive answers, shared by the local language model and by the synthesizer's fallback when a
model call fails.

An extractive answer is a few sentences copied from the contexts, each cited by the number of the context it came from.
:class:`Reader` quotes the sentence that states the asked fact and says whether it does: its sentence score is learned
(:mod:`shared.query.reading.sentence_score`), its other choices named (:class:`ReaderWeights`). When no sentence
supports an answer, the result is an abstention, never invented text.

So that it reads as an answer (issue 11, item 2): only sentences that can be quoted are candidates (no headings,
questions, lead-ins ending in a colon: :mod:`shared.query.reading.answer_sentences`); the answer opens with the best
sentence that stands on its own; a sentence that points back ("These ...", "At that scale ...") is quoted only right
after the sentence before it, else not at all; and a further source is cited only for a part of the question the
sources already quoted leave out. A part of the question no source speaks to, and a name the question states that no
source names (the "ProTab X1" when the sources describe the ProTab X2), is said plainly at the end: "Not mentioned in
the sources: ...".
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.contract.ports import Answer, AnswerSentence, Finding, NumberedContext
from shared.contract.text import OPTION, split_header, strip_header
from shared.contract.text import split_sentences as _split_sentences
from shared.query.grading import strip_model_directives
from shared.query.reading.answer_sentences import (
    ANSWER_WORDS,
    PERMALINK,
    STATEMENT_END,
    TAIL_OPENERS,
    answer_sentence,
    heading_like,
    opens_with_connective,
    opens_with_reference,
    passage_pieces,
    question_parts,
    too_short,
    word_list,
)
from shared.query.reading.language import detect_language, phrase
from shared.query.reading.sentence_score import SCORED_ON, shipped_sentence_score
from shared.query.reading.stemming import stemmer
from shared.query.reading.verdict import ANSWERED, REFUSE, VerdictModel, shipped_verdict_model

Embed = Callable[[Sequence[str]], np.ndarray]
#: sees the reader's evidence (:data:`shared.query.reading.verdict.FEATURES`) and the answer before its verdict,
#: and the :class:`Reader` itself (its ranked sentences and what each was scored on: ``bench/fit_reader.py``)
Observe = Callable[[dict[str, float], Answer, "Reader"], None]

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#\-_.]*[A-Za-z0-9+#]|[A-Za-z0-9]|[^\W\d_]{2,}", re.UNICODE)

# words of no content (a question's asking words too), and those asking about a time (dropped before the others)
STOPWORDS, TEMPORAL_WORDS = word_list("stopwords"), word_list("temporal_words")

_HEADER_LINE = re.compile(r"^(Title|Published|Source):\s")
_FORMS = {stemmer().stemWord(f): stemmer().stemWord(fs.split("/")[0]) for fs in ANSWER_WORDS["word_forms"].split()
          for f in fs.split("/")}  # the forms of a word the stemmer keeps apart, each read as the first one's stem


def tokenize(text: str) -> list[str]:
    """Words of ``text`` as they appear (case kept), punctuation dropped."""
    return _WORD.findall(text)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """English Porter2 (Snowball) stem of ``word``, lower-cased: "saturate" and "saturation" meet at "satur",
    "retries" and "retry" at "retri"; and "long", "longer" and "lengths" at "long" (:data:`_FORMS`)."""
    if OPTION.fullmatch(word):
        return word  # "-N" is not "-n", nor "-9" "9"
    w = word.lower().strip(".-_").removesuffix("'s")
    if not w.isalpha():
        return w  # "bm25", "k1", "10/8": identifiers are compared as they are
    return _FORMS.get(found := stemmer().stemWord(w), found)


def content_terms(text: str, *, keep_temporal: bool = True) -> list[str]:
    """Distinct content words of ``text`` in order of first use (surface form kept)."""
    first: dict[str, str] = {}  # each stem's first form
    for word in [*tokenize(text), *OPTION.findall(text)]:  # an option is a term as written ("-9", "-N")
        if _content_word(low := word.lower()) and (keep_temporal or low not in TEMPORAL_WORDS):
            first.setdefault(stem(word), word)
    return list(first.values())


def _content_word(low: str) -> bool:
    """Whether a lower-cased word carries content: no stopword, no letter alone, no small number (rarely what a
    question is about)."""
    return low not in STOPWORDS and len(low) >= 2 and not (low.isdigit() and len(low) < 4)


def _word_stems(text: str) -> set[str]:
    return {stem(w) for w in tokenize(text)}


def term_set(text: str) -> set[str]:
    """Stems of every word of ``text`` and of the parts of hyphenated, snake_case and dotted words ("all-MiniLM-L6-v2"
    also gives "minilm", "PIP_CONFIG_FILE" "config", "csv.Dialect" "dialect"); stopwords included: membership tests only."""
    return set(_term_set(text))


@functools.lru_cache(maxsize=4096)
def _term_set(text: str) -> frozenset[str]:
    # The same chunks come back query after query (feedback, grading, synthesis all read
    # them): tokenising and stemming a passage costs more than the rest of its handling.
    out = set(OPTION.findall(text))
    for w in tokenize(text):
        out.add(stem(w))
        if "-" in w or "_" in w or "." in w:
            # an identifier's parts tie it to a question's words (PIP_CONFIG_FILE the pip config file); no digits or letters alone ("1.20.1", "e.g")
            out.update(stem(part) for part in re.split(r"[-_.]", w) if len(part) > 1 and not part.isdigit())
    return frozenset(out)


@functools.lru_cache(maxsize=2048)
def sentence_term_sets(text: str) -> tuple[frozenset[str], ...]:
    """:func:`term_set` of each sentence of ``text`` (:func:`split_sentences`), in order. Kept per
    passage text, as the grader reads the same passages query after query; the sentences do not
    go through the whole-passage cache behind :func:`term_set`, which they would crowd out."""
    return tuple(_term_set.__wrapped__(sentence) for sentence in split_sentences(text))


def body_lines(text: str) -> str:
    """``text`` without its metadata header (``Title:``/``Published:``/``Source:`` lines)."""
    body = strip_header(text)
    return "\n".join(line for line in body.splitlines() if not _HEADER_LINE.match(line))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` with their whitespace collapsed."""
    return [" ".join(p.split()) for p in _split_sentences(text)]


@dataclass(frozen=True)
class QuotableSentence:
    """A sentence of a passage that can be quoted (see :func:`quotable_sentences`)."""

    position: int  # the sentence's place among its passage's sentences
    text: str  # cleaned for quoting, at most about 400 characters
    leans_back: bool  # opens by pointing at the sentence before it
    stems: frozenset[str]  # term_set(text)
    # leans back on a list ("BM25 addresses these with ..." after three items): the sentence before
    # it is the list's last item, not what it points at, so it cannot be quoted with its antecedent
    leans_on_list: bool = False
    # the heading of its section in the passage ("Term frequency saturation and k1"), "" when the passage
    # shows none: what the section is about, which its sentences need not repeat
    heading: str = ""
    pairs: frozenset[tuple[str, str]] = frozenset()  # its content words' stems, pair by pair in order (_bigrams)
    item: bool = False  # a list's item or a table's row (quoted whole)


# A list item, table row or definition up to this long is quoted whole, its sentences together.
MAX_ITEM_CHARS = 400
# A list whose items are all this short ("; for Windows", "C99") is quoted with its lead-in as one piece ("Provides the
# platform-specific path delimiter: ; for Windows; : for POSIX"): an item alone is a fragment, the lead-in says nothing.
SHORT_ITEM_CHARS = 60

# Passages whose quotable sentences are kept: a query reads ten, and the same chunks come
# back question after question; about 8 KB each (text, sentences, stems) for a 1.4 KB chunk,
# ~16 MiB full (tracemalloc, the sample corpus cut in 1,400-character pieces).
QUOTABLE_CACHE_SIZE = 2048


@functools.lru_cache(maxsize=QUOTABLE_CACHE_SIZE)
def quotable_sentences(passage: str) -> tuple[QuotableSentence, ...]:
    """The sentences of ``passage`` (a chunk's text, header and all) an answer may quote, in order: no metadata header,
    no sentence addressed to a model, each one cleaned or rejected by
    :func:`~shared.query.reading.answer_sentences.answer_sentence`.

    A pure function of the text, and the costliest part of extractive synthesis (every sentence of ten passages
    screened), so it is computed once per passage text and kept in a bounded, thread-safe LRU cache: a chunk whose text
    changes is a new key."""
    clean, _ = strip_model_directives(body_lines(passage))
    out: list[QuotableSentence] = []
    pieces: list[tuple[str, bool]] = []
    for text, item in passage_pieces(clean):
        sentences = split_sentences(text)
        if item and (len(sentences) == 1 or len(text) <= MAX_ITEM_CHARS):
            # "pstree - shows the processes as a tree": no full stop needed; an item's sentences are quoted
            # together ("delay {number} The number of milliseconds ... Default: 1.")
            pieces.append((text, True))
        else:  # a sentence cut mid-way ("--kill-after=... will now exit", "(. or +) characters", "is 1000 (resp.") goes on
            for k, sentence in enumerate(sentences):
                pieces.append((f"{pieces.pop()[0]} {sentence}" if k and (sentence.split(" ", 1)[0] in TAIL_OPENERS or
                               pieces[-1][0].count("(") > pieces[-1][0].count(")") and len(pieces[-1][0]) < MAX_ITEM_CHARS)
                               else sentence, False))
    pieces = _joined(pieces)
    heading = ""
    for position, (piece, item) in enumerate(pieces):
        # a text file's heading is the line its underline is under ("Changes in 2.4" / "=====", or joined to it)
        if (line := _underlined(piece)) is not None and (title := _section_title((line or pieces[position - 1][0] if
                                                                                  position else line).rstrip(":"))):
            heading, out = title, out if line else [q for q in out if q.position != position - 1]
            continue
        sentence = answer_sentence(piece, item=item)
        if sentence is None:
            if (not item or piece.endswith(PERMALINK)) and (title := _section_title(piece)):
                heading = title
            continue  # fragments, headings, questions, lead-ins to a list are not answers
        if len(sentence) > 400:
            sentence = sentence[:400].rsplit(" ", 1)[0] + " …"
        leans = opens_with_reference(sentence)
        before = pieces[position - 1][0] if position else "#"
        first_of_section = before.lstrip().startswith("#") or before.endswith(PERMALINK) or heading_like(before)
        if leans and (first_of_section and (_DETERMINER_USE.match(sentence) or opens_with_connective(sentence))
                      or heading and _section_title(before) == heading):
            # a heading is what a sentence right under it names ("get-pip.py" / "This is a Python script ..."), as is a
            # section's ("This package contains ..."); "Additionally, the variable X ..." links to nothing it needs
            leans = False
        # (not a lone item, a definition "ENCRYPT_METHOD: This defines ...", unless it opens the passage: a list's last?)
        on_list = leans and not item and position > 0 and pieces[position - 1][1] and (position < 2 or pieces[position - 2][1])
        # (_term_set's own cache is for whole passages; these stems are kept here)
        out.append(QuotableSentence(position, sentence, leans, _term_set.__wrapped__(sentence), on_list, heading,
                                    _bigrams(sentence), item))
    return tuple(out)


def _underlined(piece: str) -> str | None:
    """The title on the line of an underline ``piece`` ends in (3+ of one of = ~ ^ * -, then at most a newline): "" for a
    rule alone, None for no underline or a title over two lines. Linear, as a lazy title before the rule was not."""
    body = piece.removesuffix("\n")
    before = body.rstrip(body[-1:]) if body[-1:] in ("=", "~", "^", "*", "-") else body
    return title if len(body) - len(before) >= 3 and "\n" not in (title := before.rstrip()) else None


_SECTION_NUMBER = re.compile(r"^(?:#+\s*)?(?:\d+(?:\.\d+)*\.?\s+)?")
# A heading is a short line that is no sentence: "Term frequency saturation and k1", "5.3.1. LZMA2".
MAX_HEADING_CHARS = 80


def _section_title(piece: str) -> str:
    """The title ``piece`` gives its section when it is a heading (a Markdown heading, or a short line
    that neither ends as a sentence nor leads into a list), else ""."""
    text = " ".join(piece.split())
    sphinx, text = text.endswith(PERMALINK), text.removesuffix(PERMALINK)  # a FAQ's question too ("How do I ...?¶")
    if not text or len(text) > MAX_HEADING_CHARS or not sphinx and text.endswith((":", ".", "!", "?", ";", ",")):
        return ""
    title = _SECTION_NUMBER.sub("", text).strip("`*_ ")
    return title if len(tokenize(title)) <= 10 else ""


def _joined(pieces: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """``pieces`` with what cannot be quoted alone joined to what it belongs to: each list of short items or of fragments
    (no item a sentence of its own), or the one line, that a sentence ending in a colon leads into, to that sentence
    (see :data:`SHORT_ITEM_CHARS`), up to :data:`MAX_ITEM_CHARS` in all; a statement too short to stand alone ("Defaults
    to 0700.", "New in version 3.2.", "It had uid 37."), to the statement or definition before it (the value is often in it)."""
    out: list[tuple[str, bool]] = []
    n = 0
    while n < len(pieces):
        text, item = pieces[n]
        end = n + 1
        while end < len(pieces) and pieces[end][1]:
            end += 1
        items = [t.strip() for t, _ in pieces[n + 1:end]]
        # one line after it that is no item (a command, an example, a value) is read as its one item; a few short lines
        # that are no statements, up to a statement, as its items ("Use the following format:" / "real %e" / "user %U")
        one_line = not items and end < len(pieces) and not pieces[end][0].rstrip().endswith(":")
        if one_line:
            run = end
            while run < len(pieces) and run - end < MAX_LIST_ITEMS and not pieces[run][1] and _short_line(pieces[run][0]):
                run += 1
            lines = run - end >= 2 and (run == len(pieces) or pieces[run][1] or STATEMENT_END.search(pieces[run][0]))
            items, end = [t.strip() for t, _ in pieces[end:run if lines else end + 1]], run if lines else end + 1
        # an item leading into one line ("- To list them, run:" / "apt list"), a sentence into one short item that is no
        # statement ("... by running:" / "- $ echo 10 > debian/compat"); never into a block of code's first line
        alone = end == len(pieces) or pieces[end][1] or STATEMENT_END.search(pieces[end][0])
        single = len(items) == 1 and alone and len(items[0]) <= SHORT_ITEM_CHARS and not STATEMENT_END.search(items[0])
        # (not into items that lead into more themselves: "The options are:" / "-p: Use the following format:")
        if (text.rstrip().endswith(":") and (one_line and alone if item else len(items) >= 2 or one_line or single)
                and not any(t.endswith(":") for t in items)
                and (all(len(t) <= SHORT_ITEM_CHARS for t in items) or not any(STATEMENT_END.search(t) for t in items))
                and len(text) + sum(len(t) + 2 for t in items) <= MAX_ITEM_CHARS):
            out.append((f"{text.rstrip()} {'; '.join(items)}", True))
            n = end
            continue
        before = out[-1][0] if out and not item else ""
        short = not item and STATEMENT_END.search(text) and too_short(text)
        if short and before and len(before) + len(text) < MAX_ITEM_CHARS and STATEMENT_END.search(before) \
                and len(tokenize(text)) >= 2:
            out[-1] = (f"{before} {text}", out[-1][1])  # a definition's "New in version 3.2." too
        elif short and text[:1].isupper() and n + 1 < len(pieces) and not pieces[n + 1][1] \
                and STATEMENT_END.search(pieces[n + 1][0]):  # (not a chunk's cut "ee.")
            # after a question or a heading, an answer's first words ("No.", "From Nordic mythology.") open the next one
            pieces = [*pieces[:n + 1], (f"{text} {pieces[n + 1][0]}", False), *pieces[n + 2:]]
        else:
            out.append((text, item))
        n += 1
    return out


def _short_line(text: str) -> bool:
    """A line of a few words that is no statement nor a lead-in: a format's field, a value, a short command."""
    return len(text) <= SHORT_ITEM_CHARS and not STATEMENT_END.search(text) and not text.rstrip().endswith(":")


# "This package ...", "These options ...": a demonstrative with its own noun, which under a heading (or at a
# passage's start) points at the heading's subject, not at a sentence before.
_DETERMINER_USE = re.compile(r"^(?:this|these)\s+(?!(?:is|are|was|were|means|has|have|can|will|way|also|one)\b)[a-z][\w-]*\s",
                             re.IGNORECASE)


@dataclass(frozen=True)
class _Candidate(QuotableSentence):
    """A sentence that can be quoted, and the number of its context (which the answer cites)."""

    number: int = 0


#: Whether a sentence holds the value a question asks for (``value_check``) or states what it asks (``fact_check``);
#: None when it asks for nothing checkable (:func:`shared.query.reading.answer_types.reading_arguments`).
FactCheck = ValueCheck = Callable[[str, str], "bool | None"]
#: Whether one of the (heading, sentence) pairs states a value of the type the question asks (None: it asks none).
TypedCheck = Callable[[str, Sequence[tuple[str, str]]], "bool | None"]

# How many sentences the reader embeds per question: the cheap score's best. Each costs about one
# query embedding the first time a process reads it (a short text); they are kept per process.
READER_POOL = 8


@dataclass(frozen=True)
class ReaderWeights:
    """How the reader (:class:`Reader`) chooses beyond a sentence's learned score, chosen on the real-text development
    set, never refit on fitz-gov alone (issue 20)."""

    # A further sentence for an open question: as strong as this share of the first, with a term it lacks.
    further_share: float = 0.85
    # The next best sentences of the first one's document, as strong as this share of it, are quoted after it,
    # up to ``close_more`` of them (issue 36: the best sentence is often about the asked subject without stating
    # the asked value, and the next best one states it; dev part: the keys in the answer 0.55 -> 0.60).
    close_share: float = 0.8
    close_more: int = 2
    # ... and one as strong as this share of it when it names what the question and the quoted sentences do not (a
    # number, a name, an identifier: the asked value after a sentence restating the asked subject; writer a 269 -> 277)
    value_share: float = 0.5
    # Below this cosine, holding under half the question's terms, the best sentence is not about the question (MiniLM
    # scores unrelated text 0.0-0.2) and the answer is refused: too few dev questions (3) for the verdict to learn it.
    unrelated_cosine: float = 0.2


READER_WEIGHTS = ReaderWeights()

# A passage closer to the question than this (a cosine) is about it: unrelated text scores about 0.2 with
# all-MiniLM-L6-v2, a passage about the question 0.6 or more.
RELATED_PASSAGE = 0.2


def extractive_answer(
    query: str, contexts: Sequence[NumberedContext], *, language: str = "en", embed: Embed | None = None,
    context_similarity: Mapping[int, float] | None = None, question_vector: np.ndarray | None = None,
    sentence_embed: Embed | None = None, **reading: Any,
) -> Answer:
    """The sentences of ``contexts`` that answer ``query``, cited, as the :class:`Reader` chooses them, with its verdict
    (``states_fact``, ``unstated``); an abstention when no sentence supports an answer, never invented text.
    The local model passes ``question_vector``, ``sentence_embed`` and ``context_similarity`` (each passage's cosine to
    the question); what is not given (the synthesizer's fallback) is embedded with ``embed``, and without it every
    cosine is 0 (read by terms). ``reading``: the :class:`Reader`'s own arguments."""
    if question_vector is None or sentence_embed is None:
        sentence_embed = sentence_embed or embed or (lambda texts: np.zeros((len(texts), 1), dtype=np.float32))
        question_vector = sentence_embed([query])[0]
    if context_similarity is None:
        vectors = sentence_embed([ctx.text for ctx in contexts])
        context_similarity = {ctx.number: float(v @ question_vector) for ctx, v in zip(contexts, vectors, strict=True)}
    # a question asked in French is answered from the documents in French (all their passages: a French manual's code
    # too) as relevant as every other one by retrieval rank or by closeness: a French page ranked and scored below an
    # English document does not hide it (a document's language is detected until one passage shows it)
    best: dict[object, list] = {}  # a document's best rank, best closeness, whether it is in the question's language
    for c in contexts if language != "en" else ():
        b = best.setdefault(c.source or c.number, [c.number, -1.0, False])
        b[:] = min(b[0], c.number), max(b[1], context_similarity.get(c.number, 0.0)), b[2] or detect_language(
            body_lines(c.text)) == language
    kept = {s for s, (rank, close, own) in best.items() if own and all(rank <= r or close >= c for r, c, o in best.values() if not o)}
    quoted = [c for c in contexts if (c.source or c.number) in kept] or contexts
    # at most 40 sentences a passage, 240 in all
    candidates = list(itertools.islice((_Candidate(**vars(sentence), number=ctx.number) for ctx in quoted
                                        for sentence in quotable_sentences(ctx.text)[:40]), 240))
    if not candidates:
        return _abstention(language)
    return Reader(query, contexts, candidates, language=language, question_vector=question_vector,
                  sentence_embed=sentence_embed, context_similarity=context_similarity, **reading).answer()


class Reader:
    """The reader: the sentence that states the asked fact, quoted with what it leans on. Every quotable sentence is
    scored by the learned :class:`~shared.query.reading.sentence_score.SentenceScore` short of its cosine
    (``fact_check``: whether it states the asked value); the ``READER_POOL`` best are embedded (under their heading,
    with what they lean on) and ranked with their cosine to ``question_vector`` too. The answer opens with the best,
    adds sentences for unanswered parts, reading on, or as strong from its document (:class:`ReaderWeights`), and
    carries the verdict the learned model decides over the reader's evidence (``verdict``, default the shipped model;
    ``observe`` sees the evidence and the answer first: :mod:`shared.query.reading.verdict`). ``names``,
    ``value_check``, ``fact_check``, ``subject`` and ``typed_check`` for a question:
    :func:`~shared.query.reading.answer_types.reading_arguments`."""

    def __init__(self, query: str, contexts: Sequence[NumberedContext], candidates: list[_Candidate], *, language: str,
                 question_vector: np.ndarray, sentence_embed: Embed, context_similarity: Mapping[int, float],
                 names: Sequence[str] = (), value_check: ValueCheck | None = None, fact_check: FactCheck | None = None,
                 verdict: VerdictModel | None = None, observe: Observe | None = None, subject: Sequence[str] = (),
                 typed_check: TypedCheck | None = None) -> None:
        self.query, self.contexts, self.candidates, self.typed_check = query, contexts, candidates, typed_check
        self.language, self.names = language, names
        self.question_vector, self.sentence_embed = question_vector, sentence_embed
        self.value_check, self.fact_check, self.w = value_check, fact_check, READER_WEIGHTS
        terms = [stem(t) for t in content_terms(query, keep_temporal=False) or content_terms(query)]
        # a word the question negates ("has not changed") is not what a sentence holding it states ("has changed"):
        # stems cannot tell the two apart, so it does not count as a term held (the sentences' meaning still does)
        negated = {stem(m["word"]) for m in _NEGATED.finditer(query)}
        self.term_stems = term_stems = [t for t in terms if t not in negated] or terms
        # whether a text states the asked value, checked once a text (the lead is read by the ranking, its heading's
        # check and the evidence alike)
        self.stated = functools.cache(lambda text: bool(fact_check(text, query))) if fact_check else lambda text: False
        self.score = shipped_sentence_score()
        self.at = {(c.number, c.position): i for i, c in enumerate(candidates)}
        self.usable = [i for i in range(len(candidates)) if self.antecedents(i) is not None]
        self.related = {n for n, closeness in context_similarity.items() if closeness > RELATED_PASSAGE}
        self.closeness = context_similarity
        # a passage whose document is not named (no URL, no title) is taken as a document of its own
        self.source = {c.number: c.source or f"#{c.number}" for c in contexts}
        self.documents = _program_names(contexts)
        self.verdict, self.observe = verdict, observe
        # (each stem once: content_terms keeps one word a stem)
        self.asked_subject = [t for t in term_stems if t in subject] or term_stems
        # the question's terms weighed by how few retrieved sentences hold them: a term most hold ("debian",
        # "package") names the corpus, one few hold ("tty", "backup") the asked subject
        self.rarity = {t: float(np.log((len(candidates) + 1) / (1 + sum(t in c.stems for c in candidates))))
                       for t in term_stems}  # counted once: _evidence weighs the asked subject by it
        # the share of the question's terms a sentence holds, each weighing the same (a usable one's with what it leans
        # on, and its heading)
        self.each_term = dict.fromkeys(term_stems, 1)
        self.pair_overlap = np.array([_share(c.stems, self.each_term) for c in candidates], dtype=np.float32)
        # what each sentence is scored on (SCORED_ON's order): all but its cosine choose which are worth embedding
        self.columns = np.zeros((len(candidates), len(SCORED_ON)), dtype=np.float32)
        self.column = dict(zip(SCORED_ON, self.columns.T, strict=True))  # each a view of its column, by name
        self.subject = self.column["subject"]  # the share of the asked subject, by rarity
        self.column["rank"][:] = [1.0 / c.number for c in candidates]
        asked, definition = _bigrams(query), _DEFINITION_Q.match(query)
        # (the term as a glossary writes it too: 'A "block" is ...', "*frobnicator* means ...")
        opens = re.compile(r"(?:(?:an?|the)\s+)?[\"'“‘*_`]?" + re.escape(re.split(r"\s+(?:in|within)\s+", definition["subject"])[0])
                           + r"[\"'”’*_`]?\s+(?:is|are|was|means|stands|provides)\b", re.IGNORECASE) if definition else None

        for i in self.usable:
            unit = [candidates[j] for j in self.unit(i)]
            # the question's terms the sentences hold, or their section's heading ("Term frequency saturation
            # and k1" above "The fraction ... levels off"): a section's sentences need not repeat its subject
            held = self.held(i)
            self.pair_overlap[i] = _share(held, self.each_term)
            self.subject[i] = _share(held, self.rarity)
            # the subject the sentence before it adds: the sentence stating the asked value after one restating the asked
            # subject ("For the promisified setTimeout() ..." / "When canceled, the Promises are rejected with an
            # 'AbortError'."); not a list's item or a table's row, whose sibling before it names its own subject
            before = self.next_to(self.unit(i)[0], -1)
            self.column["before"][i] = _share(held | candidates[before].stems, self.rarity) - self.subject[i] \
                if before is not None and not unit[0].item else 0.0
            # how documentation states things, beside MiniLM's closeness: the share of the question's word pairs in
            # the same order ("distances are limited to" for "match distances limited to"), and a definition's
            # subject opening the sentence ("libcbor is a C library ..." for "What is libcbor?")
            self.column["word_order"][i] = len(asked & frozenset().union(*(c.pairs for c in unit))) / max(len(asked), 1)
            self.column["definition"][i] = bool(opens and opens.match(unit[0].text))
        self.cheap = self.columns @ self.score.vector()
        self.asks_fact = fact_check is not None and fact_check("", query) is not None

    @functools.cached_property
    def retrieved(self) -> frozenset[str]:
        """The stems the retrieved passages hold."""
        return frozenset().union(*(_term_set(c.text) for c in self.contexts))

    def antecedents(self, i: int) -> list[int] | None:
        """The sentences ``i`` leans on, back to one that stands alone ("all-MiniLM-L6-v2 comes from
        ... It is a small encoder ... It produces 384-dimensional vectors."), at most two; None
        when there is none to quote."""
        out: list[int] = []
        while self.candidates[i].leans_back:
            j = self.next_to(i, -1)
            if j is None or len(out) == 2 or self.candidates[i].leans_on_list:
                return None
            out.insert(0, j)
            i = j
        return out

    def unit(self, i: int) -> list[int]:
        return [*(self.antecedents(i) or []), i]

    def next_to(self, i: int, step: int = 1) -> int | None:
        """The quotable sentence ``step`` places after ``i`` in its passage (before it where ``step`` < 0), or None."""
        return self.at.get((self.candidates[i].number, self.candidates[i].position + step))

    def held(self, i: int, heading: bool = True) -> frozenset[str]:
        """The stems ``i`` holds with the sentences it leans on (and its section's heading)."""
        return frozenset().union(*(self.candidates[j].stems for j in self.unit(i)),
                                 _term_set(self.candidates[i].heading if heading else ""))

    def quoted_text(self, i: int) -> str:
        """What is quoted for ``i``: with the sentences it leans on, which say what "it" is."""
        return " ".join(self.candidates[j].text for j in self.unit(i))

    def _unquoted(self, i: int, chosen: list[int]) -> list[int]:
        """``i`` with the sentences it leans on, less those ``chosen`` quotes: what two overlapping chunks (or two
        copies of a page) both hold is quoted once."""
        quoted = {self.candidates[j].text for j in chosen}
        return [j for j in self.unit(i) if self.candidates[j].text not in quoted]

    def read_text(self, i: int) -> str:
        """``i`` as a reader of the document reads it: under its section's heading."""
        heading = self.candidates[i].heading
        return f"{heading}: {self.quoted_text(i)}" if heading else self.quoted_text(i)

    def answer(self) -> Answer:
        if not self.usable or not self._rank():
            return _abstention(self.language)
        lead = self._from_the_closest_passage(self.ranked[0])
        if self.cosine[lead] < self.w.unrelated_cosine and 2 * self.pair_overlap[lead] < 1:
            return _abstention(self.language)  # nothing quotable is about the question
        chosen = self.unit(lead)
        parts = _parts(self.query if self.language == "en" else "")
        if parts:
            missing = self._answer_parts(parts, chosen)
        else:
            missing = []
            if not self.asks_fact or self.states[lead] <= 0:
                self._read_on(lead, chosen)
            self._quote_close(lead, chosen)
        self._name_each_option(chosen)
        self._quote_the_list(chosen)
        self._read_past_colons(chosen)
        return self._verdict(lead, chosen, missing)

    def _read_past_colons(self, chosen: list[int]) -> None:
        """A quoted sentence ending in a colon says what it means in what follows it ("The tags are the following:" /
        "E: an error ..."): the passage's next piece is quoted after it, a list's items up to ``MAX_LIST_ITEMS``."""
        for i in list(chosen):
            run: list[int] = []
            j = i
            while (self.candidates[j].text.endswith(":") or run and self.candidates[j].item) and len(run) < MAX_LIST_ITEMS:
                j = self.next_to(j)
                if j is None or run and not self.candidates[j].item:
                    break
                run.append(j)
            chosen += [j for j in run if j not in chosen]

    def _rank(self) -> bool:
        """Score the usable sentences (``self.states``, ``self.pool``, ``self.cosine``,
        ``self.relevance``, ``self.ranked``); False when none is worth embedding."""
        candidates, usable = self.candidates, self.usable
        self.states = np.zeros(len(candidates), dtype=np.float32)  # +1 states the asked value, -1 lacks it, 0 unknown
        if self.asks_fact:
            # the regular-expression check on the cheap score's best third (it is the costly part for 240 sentences)
            for i in sorted(usable, key=lambda i: -self.cheap[i])[:max(3 * READER_POOL, 24)]:
                self.states[i] = 1.0 if self.stated(self.read_text(i)) else -1.0
        self.column["states"][:] = self.states > 0
        pre = self.columns @ self.score.vector()  # (among those holding a question term or from a related passage)
        self.pool = pool = []  # each text once, none within one embedded (with the next, leaning on it)
        for i in sorted((i for i in usable if self.pair_overlap[i] > 0 or candidates[i].number in self.related), key=lambda i: -pre[i]):
            if len(pool) < READER_POOL and all(self.quoted_text(i) not in self.quoted_text(j) for j in pool):
                pool.append(i)
        if not pool:
            return False
        self.cosine = self.column["cosine"]  # (0 for those not embedded)
        # each read under its section's heading, as a reader of the document reads it
        self.cosine[pool] = self.sentence_embed([self.read_text(i) for i in pool]) @ self.question_vector
        self.relevance = np.full(len(candidates), -1.0, dtype=np.float32)
        self.scored_on = self.columns[pool]  # kept for bench/fit_scorer.py's fit
        self.relevance[pool] = self.scored_on @ self.score.vector()
        self.ranked = sorted(pool, key=lambda i: (-self.relevance[i], candidates[i].number, candidates[i].position))
        return True

    def _from_the_closest_passage(self, best: int) -> int:
        """The sentence that opens the answer: ``best``, unless another retrieved document is closer to the question and
        has a sentence nearly as strong (``further_share``; stating the asked value if ``best`` does): a sentence can
        sound like the question in a document about something else (a famine of 1845 for one of 1943). Between chunks of
        one document the sentence decides (an introduction is often closer to a question than the section answering)."""
        nearest: dict[str, float] = {}  # a document's closeness: its closest chunk's
        for number, closeness in self.closeness.items():
            if number in self.source:
                nearest[self.source[number]] = max(closeness, nearest.get(self.source[number], closeness))
        own = self.source.get(self.candidates[best].number)
        closest = max(nearest, key=lambda s: nearest[s], default=None)
        if closest is None or own is None or closest == own or nearest[closest] <= nearest.get(own, 0.0):
            return best
        for i in self.ranked[1:]:
            if self.relevance[i] < self.w.further_share * self.relevance[best]:
                break
            if self.source.get(self.candidates[i].number) == closest and self.states[i] >= self.states[best]:
                return i
        return best

    def _answer_parts(self, parts: list[_Part], chosen: list[int]) -> list[str]:
        """Each part of a question asking several things answered where a sentence speaks to it
        (added to ``chosen``); the parts none does."""
        missing: list[str] = []
        for part in parts:
            def speaks_to(i: int, part: _Part = part) -> bool:
                # a part asking a value ("in which version was it deprecated") needs a sentence stating it
                stated = self.fact_check(self.quoted_text(i), part.question or part.label) if self.fact_check else None
                if stated is not None:
                    return stated
                return part.spoken_to(self.quoted_text(i), self.held(i, heading=False), self.value_check)

            if any(speaks_to(i) for i in chosen):
                continue
            found = [i for i in self.ranked if speaks_to(i)] or [
                i for i in sorted(self.usable, key=lambda i: -self.cheap[i]) if self.cheap[i] > 0 and speaks_to(i)]
            if not found:
                missing.append(part.label)
                continue
            chosen += self._unquoted(found[0], chosen)
        return missing

    def _read_on(self, lead: int, chosen: list[int]) -> None:
        """The first sentence does not state a value asked for: the passage read on one sentence, added to ``chosen`` (a
        definition's second sentence often holds what the first announces)."""
        after = self.next_to(chosen[-1])
        if after is not None and after not in chosen and len(chosen) == len(self.unit(lead)) and (
                self.candidates[after].leans_back or self.pair_overlap[after] > 0 or self.states[after] > 0):
            chosen.append(after)

    def _quote_close(self, lead: int, chosen: list[int]) -> None:
        """The next best sentences of ``lead``'s document, nearly as strong as it (``close_share``, or ``value_share``
        naming something new), added to ``chosen`` while it holds at most ``close_more`` sentences beyond ``lead``'s
        own: which of close sentences states the asked value the scores cannot tell, so each is quoted, from the one
        document the answer cites (after one the answer-type check finds stating the value, only another it does)."""
        own, top = self.source.get(self.candidates[lead].number), self.relevance[lead]
        for i in self.ranked[1:]:
            if len(chosen) - len(self.unit(lead)) >= self.w.close_more or self.relevance[i] < self.w.value_share * top \
                    or top <= 0:
                break
            shown = set(self.term_stems).union(*(self.candidates[j].stems for j in chosen))
            if self.relevance[i] < self.w.close_share * top and set(_specific_terms(self.quoted_text(i))) <= shown:
                continue  # less close, naming nothing the question and the quoted sentences do not
            added = self._unquoted(i, chosen)
            # after a sentence stating the asked value, only another stating one; a unit that would pass the budget
            # (a sentence with the one it leans on) is left out
            if added and self.source.get(self.candidates[i].number) == own and self.states[i] >= self.states[lead] \
                    and len(chosen) + len(added) - len(self.unit(lead)) <= self.w.close_more:
                chosen += added

    def _name_each_option(self, chosen: list[int]) -> None:
        """A question naming several options ("the default --maxvars and --maxparserdepth") asks about
        each: an option no quoted sentence names gets the best sentence of a quoted passage naming it."""
        candidates = self.candidates
        for flag in OPTION.findall(self.query):
            named = re.compile(rf"(?<![\w-]){re.escape(flag)}(?![\w-])")  # "-F", not inside "-FF"
            if any(named.search(self.quoted_text(i)) for i in chosen):
                continue
            quoted = {candidates[j].number for j in chosen}
            naming = [i for i in sorted(self.usable, key=lambda i: (-self.cheap[i], candidates[i].number,
                                                                     candidates[i].position))
                      if candidates[i].number in quoted and named.search(self.quoted_text(i))]
            if naming:
                chosen += self._unquoted(naming[0], chosen)

    def _quote_the_list(self, chosen: list[int]) -> None:
        """A question asking for several items (:func:`_asks_list`) answered by a list's item (or table row, definition) or
        by the sentence leading into a list (right before it, or before its lead-in ending in a colon): the list is quoted
        whole, in order (an item alone is a fragment of the answer), up to ``MAX_LIST_ITEMS``."""
        for i in chosen if _asks_list(self.query) else []:
            after = [j for p in (1, 2) if (j := self.next_to(i, p)) is not None]
            run = [i] if self.candidates[i].item else after[:1] if after and self.candidates[after[0]].item else []
            for step in (-1, 1):
                while run and (j := self.next_to(run[-1 if step > 0 else 0], step)) is not None \
                        and self.candidates[j].item and len(run) <= MAX_LIST_ITEMS:
                    run.insert(len(run) if step > 0 else 0, j)
            if 1 < len(run) <= MAX_LIST_ITEMS:
                chosen += [j for j in run if j not in chosen]
                return

    def _verdict(self, lead: int, chosen: list[int], missing: list[str]) -> Answer:
        """``chosen`` quoted with the learned verdict (:mod:`shared.query.reading.verdict`): refused, a caveat (``unstated``:
        what is not stated), or ``answered`` when no part or name is left unquoted, nor a name of the asked subject whose
        sibling is quoted ("DES" for "triple-DES"), and the values stated agree, for the asked case (:func:`unmet_condition`)."""
        language, query = self.language, self.query
        unknown = unnamed_names(query, self.names, self.contexts)
        sentences = [AnswerSentence(text=self._under_heading(lead) if i == self.unit(lead)[0] else self.candidates[i].text,
                                    citations=[self.candidates[i].number])
                     for i in _reading_order(chosen, self.candidates)]
        unnamed = ", ".join(name for name in unknown if name not in missing)
        sentences += [AnswerSentence(text=phrase("not_mentioned", language).format(part=part), citations=[])
                      for part in [*missing, unnamed] if part]
        text = " ".join(f"{s.text} [{s.citations[0]}]" if s.citations else s.text for s in sentences)
        evidence, stating = self._evidence(lead, chosen, unknown)
        if self.observe is not None:  # what the reader measured, beside the answer it would give
            self.observe(evidence, Answer(text=text, sentences=sentences, language=language, abstained=False), self)
        decision, _, _ = (self.verdict or shipped_verdict_model()).decide(evidence)
        # a release or a date asked that no sentence the value check holds states, read under its heading: not given
        if self.typed_check and self.typed_check(query, [(self.candidates[i].heading, self.quoted_text(i))
                                                         for i in self.usable if self.states[i]]) is False:
            decision = REFUSE
        if decision == REFUSE:
            return Answer(text=phrase("abstain", language), sentences=[], language=language, abstained=True,
                          states_fact=False, unstated=(_asked_label(query), *unknown))
        finding = self._finding(sentences, missing, unnamed, " ".join(self.candidates[i].heading for i in chosen), stating)
        quoted = " ".join(s.text for s in sentences if s.citations)
        # a name of the asked subject nothing quoted holds, where what is quoted names its sibling ("DES" for "triple-DES")
        # or it names a retrieved document the quoted text is not from ("watch" of watch.1, tail.1's interval quoted)
        unstated = tuple(run for run in finding.missing if run in (*missing, unnamed) or (words := _word_stems(run))
                         & set(self.asked_subject) and (names_a_sibling(run, quoted) or words & self.documents))
        states_fact = decision == ANSWERED and not unstated and not finding.disagree and not finding.condition
        return Answer(text=text, sentences=sentences, language=language, abstained=False, states_fact=states_fact,
                      unstated=unstated or (() if states_fact else (_asked_label(query),)), finding=finding)

    def _finding(self, sentences: list[AnswerSentence], missing: list[str], unnamed: str, headings: str,
                 stating: list[int]) -> Finding:
        """What the quoted ``sentences`` hold of the question and what they lack, the evidence a caveat names: in the
        quoted text, the ``headings`` it is quoted under and the names of the sources it cites ("cjpeg" of cjpeg.1);
        whether the quoted sentences ``stating`` the asked value give two values, or tie it to another condition."""
        quoted = " ".join(s.text for s in sentences if s.citations)  # not the "Not mentioned ..." notes
        names = " ".join(_source_name(c) for c in self.contexts if any(c.number in s.citations for s in sentences))
        # a name the answer says no source names ("Not mentioned in the sources: README.") is not found, whatever
        # a cited file is called (zstd-README.md)
        shown = _term_set(f"{quoted} {headings} {names}") - _word_stems(unnamed)
        found, lacking = question_runs(self.query, shown)
        specific = set(_specific_terms(self.query)) | self.documents  # a name, a number, an identifier, a document's
        absent = [run for run in lacking if _word_stems(run) & specific]
        # the question's other words no retrieved passage holds either: what the sources never say
        _, never = question_runs(self.query, shown | self.retrieved)
        unsaid = [run for run in never if not _word_stems(run) & specific]
        asks, stated = ("value", bool((self.states > 0).any())) if self.asks_fact else (
            ("list", _short_items(quoted) >= 2) if _asks_list(self.query) else ("", False))
        return Finding(found=found, missing=_longest([*missing, *([unnamed] if unnamed else []), *absent]),
                       unquoted=tuple(unsaid), asks=asks, stated=stated,  # two parts may ask two values:
                       disagree=self.asks_fact and not question_parts(self.query) and disagree(
                           self.query, [self.candidates[i].text for i in stating]),
                       condition=unmet_condition(self.query, [self.read_text(i) for i in stating], self.contexts,
                                                 self.stated))

    def _under_heading(self, lead: int) -> str:
        """The first sentence quoted for ``lead``: under its section's heading ("Uploaders: List of the names ...") when
        the heading holds question terms its sentences lack, or states the asked value they do not, as a reader sees it
        (the heading names what the section's sentences are about without repeating it)."""
        unit, heading = self.unit(lead), self.candidates[lead].heading
        text, held = self.candidates[unit[0]].text, self.held(lead, heading=False)
        stated = self.states[lead] > 0 and not self.stated(self.quoted_text(lead))
        named = heading and heading.lower() not in text.lower() and ((_term_set(heading) - held) & set(self.term_stems) or stated)
        return f"{heading}: {text}" if named else text

    def _evidence(self, lead: int, chosen: list[int], unknown: list[str]) -> tuple[dict[str, float], list[int]]:
        """The values of :data:`~shared.query.reading.verdict.FEATURES` for the answer quoting ``chosen``, and which of
        ``chosen`` state the asked value (a list asked: its lead and items)."""
        candidates, query, terms = self.candidates, self.query, self.term_stems
        own = self.source.get(candidates[lead].number)
        others = [i for i in self.pool if self.source.get(candidates[i].number) != own]
        next_three = [self.relevance[i] for i in self.ranked if i != lead][:3]
        asks_list = _asks_list(query)
        # the asked subject's share a sentence holds (with what it leans on and its heading), its terms weighed by how
        # few retrieved sentences hold them; not the words naming the asked value's type ("HTTP status code")
        rarity = {t: 0.5 + self.rarity[t] for t in self.asked_subject}

        def subject(i: int, own: bool = False) -> float:  # own: the sentences' own words, not their heading's
            return _share(self.held(i, heading=not own), rarity)

        # a quoted sentence states the asked value when it holds a value of the asked type tied to the question's terms and
        # most of what it is asked about (an item by its own words: a heading ties the subject to each of its items alike)
        # (under its heading, "IdleAction=" for IdleActionSec=, and as quoted: the lead under it where the answer shows it)
        shown = {lead} if self._under_heading(lead) != candidates[self.unit(lead)[0]].text else set()
        stating = [i for i in chosen if self.asks_fact and subject(i, own=candidates[i].item) >= STATED_SUBJECT and
                   self.stated(self.read_text(i)) and (i in shown or self.stated(self.quoted_text(i)))]
        stated = max((subject(i) for i in self.usable if self.states[i] > 0), default=0.0)
        # a list's items in the lead or the list it leads into, not a neighbour's commas ("creates a number of files.")
        listed = [i for i in chosen if i == lead or candidates[i].item and candidates[i].number == candidates[lead].number]
        return {
            "asks_value": float(self.asks_fact), "states_value": float(bool(stating)),
            "cosine": float(self.cosine[lead]),
            "relevance_margin": float(self.relevance[lead] - max((self.relevance[i] for i in others), default=0.0)),
            "relevance_gap": float(self.relevance[lead] - np.mean(next_three)) if next_three else 1.0,
            "asks_list": float(asks_list),
            "list_unquoted": float(asks_list and _short_items(" ".join(self.quoted_text(i) for i in listed)) < 2),
            "names_unnamed": float(bool(unknown)),
            "asks_open": float(bool(_ASKS_OPEN.match(query))),
            "coverage_retrieved": sum(t in self.retrieved for t in terms) / len(terms) if terms else 0.0,
            "subject_quoted": max((subject(i) for i in chosen), default=0.0),
            "subject_stated": stated, "limit_unstated": float(bool(ASKS_LIMIT.search(query))) * (1.0 - stated),
        }, stating if self.asks_fact else listed if asks_list else []


#: A list of more items than this is a reference section (every option of a manual), not a list a question asks for.
MAX_LIST_ITEMS = 8
#: The share of the asked subject (:meth:`Reader._evidence`'s weighing) a quoted sentence stating a value of the
#: asked type holds for it to state *the* asked value: most of what the value is asked about.
STATED_SUBJECT = 0.5


def _share(held: frozenset[str], weights: Mapping[str, float]) -> float:
    """The share of ``weights`` (a term's weight) that the terms ``held`` carry."""
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in held) / total if total > 0 else 0.0


def disagree(query: str, stating: Sequence[str]) -> bool:
    """Whether two quoted sentences ``stating`` the asked value give different numbers (not the question's) in one unit
    (the word after, else before: "port 7412"): "30 seconds by default" beside a planted "say it is 9999 seconds"."""
    number, values = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*"), [{} for _ in dict.fromkeys(stating)]
    for units, sentence in zip(values, dict.fromkeys(stating), strict=True):
        for m in (m for m in number.finditer(sentence) if m.group() not in number.findall(query)):
            words = re.findall(r"^\s*(%|[^\W\d_]+)", sentence[m.end():]) + re.findall(r"([^\W\d_]+)\s*$", sentence[:m.start()])
            units.setdefault(next((w.lower() for w in words if w.lower() not in STOPWORDS), ""), set()).add(m.group())
    return any(a[u].isdisjoint(b[u]) for n, a in enumerate(values) for b in values[n + 1:] for u in a.keys() & b.keys())


# A condition (issue 36): a command-line option ("--tab", "--follow=name", not "=N"; a short one is the long one a context
# pairs it with: "-f, --follow") or a word of a pair of opposites (lexicon/answer_words.tsv), negated by a word before it
# ("without -f", "not enabled") or a copula after it ("--tab is not given"); "instead of", "else": both cases are stated.
_CONDITION = re.compile(OPTION.pattern + r"(?:=['\"]?[a-z][\w-]*)?|[A-Za-z]+")
_OPPOSITES = {stem(w): (stem(p.split("/")[0]), n == 0) for p in ANSWER_WORDS["opposites"].split() for n, w in enumerate(p.split("/"))}
_NEGATED_BEFORE = re.compile(r"(?:\b(?:not|no|without|unless|never)|n't)\s+(?:[\w-]+\s+){0,2}$", re.IGNORECASE)
_NEGATED_AFTER = re.compile(r"^(?:\s+(?:option|flag))?\s+(?:is|are|was|were)(?:\s+not\b|n't\b)", re.IGNORECASE)
_REPLACED = re.compile(r"\b(?:instead\s+of|rather\s+than)\b", re.IGNORECASE)
_BOTH_CASES = re.compile(r"\b(?:instead\s+of|rather\s+than|otherwise|else)\b", re.IGNORECASE)
_ALIAS = re.compile(r"(?<![\w-])(-\w),\s+(--\w[\w-]*)")


def conditions(text: str, aliases: Mapping[str, str]) -> dict[str, dict[bool, str]]:
    """The conditions ``text`` names: whether each holds where named, as written ("124 if COMMAND times out, and
    --preserve-status is not specified": {"--preserve-status": {False: "--preserve-status"}})."""
    out: dict[str, dict[bool, str]] = {}
    both = bool(_BOTH_CASES.search(text))
    for m in _CONDITION.finditer(text):
        word = m.group().replace("'", "").replace('"', "")
        key, holds = (aliases.get(word, word), True) if word[0] == "-" else _OPPOSITES.get(stem(word), ("", True))
        if key:
            negated = bool(_NEGATED_BEFORE.search(text[max(0, m.start() - 40):m.start()]) or _NEGATED_AFTER.match(text[m.end():]))
            out.setdefault(key, {}).update(dict.fromkeys((True, False) if both else (holds != negated,), word))
    return out


def unmet_condition(query: str, stating: Sequence[str], contexts: Sequence[NumberedContext],
                    states: Callable[[str], bool] | None = None) -> str:
    """The condition ``query`` asks under that a sentence ``stating`` the asked value ties it to the opposite of ("124
    if ... --preserve-status is not specified"), or, an option no such sentence names, to others ("-l" for "-q"); "" if none.
    A value ``states`` finds only after "instead of" is the one the conditions named before it replace ("--tab: use a
    tab instead of two spaces": two spaces without --tab)."""
    if states and (done_to := next(filter(None, (roles_reversed(query, text, states) for text in stating)), "")):
        return done_to
    aliases = {short: long for ctx in contexts for short, long in _ALIAS.findall(ctx.text)}
    asked = {key: next(iter(cases.items())) for key, cases in conditions(query, aliases).items() if len(cases) == 1}
    named = [conditions(sentence, aliases) for sentence in stating]
    for n, sentence in enumerate(stating):
        if states and (m := _REPLACED.search(sentence)) and not states(sentence[:m.start()]) and states(sentence):
            named[n] = {k: {not h: w for h, w in c.items()} for k, c in conditions(sentence[:m.start()], aliases).items()}
    for key, (holds, written) in asked.items():  # "--follow" is named by "--follow=name"
        same = [[c for k, c in n.items() if k in (key, key.split("=")[0]) or key == k.split("=")[0]] for n in named]
        if any(s and not any(holds in c for c in s) for s in same) or not any(same) and holds and key[0] == "-" and any(
                k[0] == "-" for n in named for k in n) and not _ASKS_OPTION.match(query):
            return written
    return ""


def roles_reversed(query: str, sentence: str, states: Callable[[str], bool]) -> str:
    """What ``query`` asks about ("--verbatim-files-from") when ``sentence`` names it only after the question's verb
    and the value ``states`` finds in it is not from the verb on ("The --null option implies --verbatim-files-from":
    what implies it, not what it implies); "" otherwise."""
    asked = m["rest"] if (m := _ASKS_WHAT_DOES.match(query)) else ""
    run = list(itertools.takewhile(lambda w: w.lower() not in STOPWORDS, itertools.dropwhile(
        lambda w: w.lower() in STOPWORDS, tokenize(asked))))  # "the frobnicator daemon listen" (on ...)
    verb = next((w for w in _WORD.finditer(sentence) if len(run) > 1 and stem(w.group()) == stem(run[-1])), None)
    if verb is None or _term_set(sentence[:verb.start()]) & (subject := {stem(w) for w in run[:-1]}) or not (
            subject & _term_set(sentence[verb.end():]) and states(sentence) and not states(sentence[verb.start():])):
        return ""
    return re.search(r"\S*" + re.escape(run[0]) + r".*?(?=\s+" + re.escape(run[-1]) + r"\b)", asked).group()


def names_a_sibling(name: str, text: str) -> bool:
    """Whether ``text`` names a sibling of ``name`` (a run of a question's words): a word sharing a part with one of its
    words ("DES" for "triple-DES") or of its kind (an option: "-l" for "-q"; a version: "2.8.5" for "2.8.6")."""
    words = set(tokenize(text) + OPTION.findall(text))
    return any(w.lower() != n.lower() and (_name_parts(w) & _name_parts(n) or any(k(w) and k(n) for k in _NAME_KINDS))
               for n in tokenize(name) + OPTION.findall(name) for w in words)


_MAN_PAGE_FILE = re.compile(r"[A-Za-z]\.\d\w*(?:\.\w+)?$")  # watch.1, watch.1.txt, glance.1p.gz


def _program_names(contexts: Sequence[NumberedContext]) -> set[str]:
    """The stems of the names retrieved documents are filed under where they name a program: a manual page's file
    ("watch" of watch.1.txt) or a name its title opens with as a man page does ("glance - paint a command"); not a
    word of any file name ("terminal" of terminal.html titled "Terminal settings")."""
    names = set()
    for context in contexts:
        file = context.source.rstrip("/").rsplit("/", 1)[-1]
        man_page = _MAN_PAGE_FILE.search(file) is not None
        title = "" if man_page else getattr(split_header(context.text)[0], "title", None) or ""
        for part in _name_parts(re.sub(r"\.\w+$", "", file)):
            if man_page or re.match(rf"(?i){re.escape(part)}(?:\(\d\w*\))?\s+[-–—]\s", title):
                names.add(stem(part))
    return names


def _name_parts(word: str) -> set[str]:
    """The parts of a name a sibling may share ("des" of "triple-DES"), not its digits or stopwords."""
    return {p for p in re.split(r"[-_./]", word.lower()) if len(p) > 1 and not p.isdigit() and p not in STOPWORDS}


#: Kinds of name whose members are siblings: options ("-l", "-q") and dotted versions ("2.8.5", "2.8.6").
_NAME_KINDS = (OPTION.fullmatch, re.compile(r"\d+(?:\.\d+)+").fullmatch)


# What a question asks, read off its shape.
_DEGREE = "long|much|many|often|far|old|big|large|soon|quickly|fast|well"
# "How long does", "what is", "who": the words that ask, not what is asked about.
_ASKING = re.compile(
    rf"^\s*(?:how\s+(?:{_DEGREE})\b|what|which|who|whom|whose|"
    r"when|where|why|how)?\s*(?:(?:is|are|was|were|does|do|did|can|could|should|will|would|has|have|had)\b)?",
    re.IGNORECASE,
)
# A preposition before the asking word ("Since which ...", "Within how many days ..."), and "how" with the
# adverb that asks for a degree anywhere in a question ("..., and how many bytes does it take?").
_ASKED_AFTER = re.compile(r"^\W*(?:(?:in|on|at|for|from|since|to|by|with|of|within|after|before|until|during)\s+"
                          r"(?=(?:which|what|how|when|whom|whose)\b))?", re.IGNORECASE)
_HOW_MUCH = re.compile(rf"\bhow\s+(?P<adverb>{_DEGREE})\b", re.IGNORECASE)
# A question asking a method or a reason ("Why ...", "How does ..."), not a degree ("How many ...").
_ASKS_OPEN = re.compile(r"^\W*(?:why\b|how\s+(?!many|much|long|often|old|big|large|far|fast)\w+)", re.IGNORECASE)
# A question asking for several items: "Which options ...", "What are the ...s", "List ...", "two limits".
_ASKS_LIST = re.compile(
    r"^\W*(?:which|what)\s+(?:[\w-]+\s+){0,2}?[\w-]+s\s+(?:are|were|do|does|can|could|must|should|make|have|has|"
    r"did|will|is)\b|^\W*(?:what|which)\s+(?:are|were)\s+the\b|\blist\b|\bname\s+(?:the|all|every)\b|"
    r"\b(?:two|three|four|five|six|several|all)\s+(?:[\w-]+\s+)?[\w-]+s\b",
    re.IGNORECASE)
# A question asking for a limit ("the maximum length", "which minimum version"): only a sentence stating one answers it.
ASKS_LIMIT = re.compile(r"\b(?:max(?:imum|imal)?|min(?:imum|imal)?|at\s+(?:most|least)|upper\s+limit|lower\s+limit|"
                        r"largest|smallest|highest|lowest)\b", re.IGNORECASE)
# "Which option ...": asks for an option, not under one
_ASKS_OPTION = re.compile(r"^\W*(?:which|what)\s+(?:[\w-]+\s+)?(?:options?|flags?|switch(?:es)?)\b", re.IGNORECASE)
# "Which option does --verbatim-files-from imply?": what is asked about does the asking verb
_ASKS_WHAT_DOES = re.compile(r"^\W*(?:which|what)\b(?:\s+[\w-]+){0,3}?\s+(?:does|do|did)\s+(?P<rest>[^?]+)", re.IGNORECASE)
# "What is X?": "A package pool is ..." answers it, less where it is asked ("... a package pool in the archive?")
_DEFINITION_Q = re.compile(r"^\s*(?:what|who)\s+(?:is|are)\s+(?:an?\s+|the\s+)?(?P<subject>[^?]{1,60}?)"
                           r"(?:\s+(?:in|within)\s+[^?]++)?\s*+\??\s*$", re.IGNORECASE)  # "..., in the X manual?" says where
# (possessive: a greedy [^?]+ gave its spaces back to the \s* after it, one way per split: 13 s for 300 characters;
# and the first \s* too, else trailing spaces before a text that is no end split two ways between it and the last)
# The word a negation applies to: "has not changed", "does not yet support", "never called", "isn't set".
_NEGATED = re.compile(r"(?:\b(?:not|never)|n't)\s+(?:(?:yet|always|be|been|have|ever|even)\s+)?(?P<word>[A-Za-z][\w-]*)",
                      re.IGNORECASE)


def _asks_list(query: str) -> bool:
    """Whether ``query`` asks for several items; not a why or how question naming several things ("Why can two
    objects show the same id()?" asks a reason)."""
    return bool(_ASKS_LIST.search(query)) and not _ASKS_OPEN.match(query)


# What separates a list's items once quoted: commas, semicolons, bullets, "and"/"or" between items.
_LIST_SEPARATOR = re.compile(r"[,;•:]|\s(?:and|or|und|oder|et|ou|y|o)\s")
# A list's item is a few words ("gzip", "the Exim server"); a clause after a comma is not an item.
LIST_ITEM_WORDS = 4


def _short_items(text: str) -> int:
    """How many pieces of ``text`` between list separators are short enough to be a list's items: "supports
    gzip, bzip2 and xz" has two ("bzip2", "xz"); "supports several formats, and more can be added" none."""
    return sum(1 for piece in _LIST_SEPARATOR.split(text) if 0 < len(tokenize(piece)) <= LIST_ITEM_WORDS)


def question_runs(query: str, held: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the runs of ``query``'s content words, as it writes them, whose stems ``held`` holds; the runs it lacks):
    "Which GID must the tty group have?" over a text naming the tty group gives (("tty group",), ("GID",)). A run
    is broken by a stopword or punctuation, and by a word held where the one before is not; the words that ask
    ("how many", "what is") are not what is asked about."""
    # (both patterns match, if only the empty string) "Since which version ...": the preposition asks too
    asked = (lead := _ASKED_AFTER.match(query).end()) + _ASKING.match(query[lead:]).end()
    degree = {m.start("adverb") for m in _HOW_MUCH.finditer(query)}  # "..., and how MANY bytes"
    # words a path or an identifier joins ("/etc/cron.daily") are one unit, held when each of its words is
    units: list[tuple[int, int, bool, bool]] = []  # (start, end, holds a content word, held)
    for match in _WORD.finditer(query, asked):
        word, low = match.group(), match.group().lower()
        content = _content_word(low) and match.start() not in degree
        is_held = not content or stem(word) in held
        if units and _JOINED.fullmatch(query[units[-1][1]:match.start()]):
            first, _, some, all_held = units[-1]
            units[-1] = (first, match.end(), some or content, all_held and is_held)
        else:
            first = match.start() - (1 if match.start() and query[match.start() - 1] in "/~$" else 0)
            units.append((first, match.end(), content, is_held))
    runs: tuple[list[str], list[str]] = ([], [])  # (lacking, found)
    start = end = -1
    run_held = False
    for first, last, content, is_held in units:
        if start >= 0 and (not content or is_held != run_held or query[end:first].strip()):
            runs[run_held].append(query[start:end])
            start = -1
        if content:
            start = first if start < 0 else start
            run_held, end = is_held, last
    if start >= 0:
        runs[run_held].append(query[start:end])
    return _longest(runs[1]), _longest(runs[0])


def _longest(runs: list[str]) -> tuple[str, ...]:
    """``runs`` once each, without one a longer run holds ("README" beside "zstd README")."""
    return tuple(run for run in dict.fromkeys(runs)
                 if not any(other != run and re.search(rf"(?<!\w){re.escape(run)}(?!\w)", other) for other in runs))


def _source_name(context: NumberedContext) -> str:
    """What a citation shows of a context's source: its title (the chunk's header, when it has one) and the
    last part of its address ("cjpeg.1" of file:///usr/share/man/cjpeg.1), not the address's scheme or folders."""
    header, _ = split_header(context.text)
    address = context.source.rstrip("/")
    name = address.rsplit("/", 1)[-1] if "://" in address else address
    return " ".join(filter(None, (header.title if header else "", name, name.replace(".", " "))))


_JOINED = re.compile(r"[/._:-]+")


def _specific_terms(query: str) -> list[str]:
    """Stems of the question's specific words: numbers, names (capitalised past its first word), acronyms and
    identifiers ("--maxvars", "PIP_CONFIG_FILE", "1.20.2"): what an answer about the asked thing names too."""
    return list(dict.fromkeys(
        stem(word) for n, word in enumerate(tokenize(query)) if word.lower() not in STOPWORDS and (
            any(ch.isdigit() or ch in "_-./" for ch in word) or word.isupper() and len(word) > 1
            or n > 0 and word[:1].isupper())))


def _bigrams(text: str) -> frozenset[tuple[str, str]]:
    # an identifier's parts in its order: "PIP_CONFIG_FILE" says "config file" as the question may
    words = [stem(part) for w in tokenize(text) if w.lower() not in STOPWORDS for part in re.split(r"[-_]", w) if part]
    return frozenset(zip(words, words[1:], strict=False))


def _asked_label(query: str) -> str:
    """The question as a note names what the sources leave unsaid: "how many dimensions ... have"."""
    return _mid_sentence(" ".join(query.split()).rstrip(" ?.!"))


_NAME_JOINERS = word_list("name_joiners")  # "Bureau of National Statistics"


def _named_in(name: str, present: set[str], words: set[str]) -> bool:
    """Whether ``name`` (a word of the question) is among ``present`` (words and stems of the contexts), allowing
    another inflection of the word as written ("Mesopotamian" for "Mesopotamia", among ``words``, the contexts' words
    without their stems: "amazing", whose stem "amaz" begins "Amazon", does not name Amazon) and, for a hyphenated word
    ("CCPA-compliant"), naming its first part."""
    low = name.lower()
    written = {low, low.split("-", 1)[0]}
    return bool((written | {stem(k) for k in written}) & present) or any(len(k) >= 4 and any(
        len(p) >= 4 and abs(len(p) - len(k)) <= 2 and (p.startswith(k) or k.startswith(p)) for p in words) for k in written)


# About 15 KB an entry for a 1.4 KB chunk (measured): 1,024 entries, ~15 MiB, keep a hundred
# queries' contexts without crowding a 512 MiB function (4,096 held ~60 MiB).
NAMED_WORDS_CACHE_SIZE = 1024


@functools.lru_cache(maxsize=NAMED_WORDS_CACHE_SIZE)
def _named_words(text: str) -> tuple[frozenset[str], frozenset[str], str, frozenset[str]]:
    """The stems of a context's words (:func:`_term_set`'s own set), its words as written (lower case, dots dropped:
    "U.S." is "us"), its words' first letters run together, to find an acronym spelled out, and its abbreviations
    (dotted or in capitals, lower-cased: "U.S." and "US" are "us", the word "us" is not), to find a name written by its
    initials. Kept per text: the same contexts come back query after query."""
    words = tokenize(text)
    abbreviations = {letters.lower() for w in words for part in w.split("-")
                     if len(letters := part.replace(".", "")) > 1 and letters.isalpha() and (part.isupper() or "." in part)}
    return (_term_set(text), frozenset(w.lower().replace(".", "") for w in words),
            "".join(part[0] for w in words for part in w.split("-") if part).lower(), frozenset(abbreviations))


def unnamed_names(question: str, names: Sequence[str], contexts: Sequence[NumberedContext]) -> list[str]:
    """The question's names (``names``, words of ``question``) that no context names, each as the run of the question's
    name words it stands in ("ProTab X1" when only "X1" is missing: the sources name the ProTab X2), in question order.
    A run the contexts write by its initials ("U.S." for "United States") is named, and so is an acronym the contexts
    spell out ("MBTI" for "Myers-Briggs Type Indicator"); a run in capitals ("OBSTACLE AVOIDANCE", emphasis, not an
    acronym) is given in lower case."""
    if not names:
        return []
    wanted = {n.lower() for n in names}
    texts = [strip_model_directives(body_lines(ctx.text))[0] for ctx in contexts]
    read = [_named_words(t) for t in texts]
    written: set[str] = set().union(*(words for _, words, _, _ in read))
    present: set[str] = written.union(*(stems for stems, _, _, _ in read))
    abbreviations: set[str] = set().union(*(abbreviated for _, _, _, abbreviated in read))
    missing = {n for n in wanted if not _named_in(n, present, written)}
    # An acronym of three or more letters is named where its words are ("Myers-Briggs Type Indicator").
    missing = {n for n, written in ((n, next(w for w in names if w.lower() == n)) for n in missing)
               if not (len(n) >= 3 and written.isupper() and n.isalpha() and any(n in spelled for _, _, spelled, _ in read))}
    if not missing:
        return []
    matches = list(_WORD.finditer(question))
    words = [m.group() for m in matches]
    runs: list[list[str]] = [[]]  # the last one is being read (an empty one names nothing)
    for i, word in enumerate(words):
        low = word.lower()
        # a name runs over spaces only: "Acme, Globex" are two names, not "Acme Globex"
        if runs[-1] and question[matches[i - 1].end():matches[i].start()].strip():
            runs.append([])
        joins = bool(runs[-1]) and low in _NAME_JOINERS and i + 1 < len(words) and words[i + 1].lower() in wanted \
            and not question[matches[i].end():matches[i + 1].start()].strip()
        if low in wanted or joins:
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    out: list[str] = []
    for run in runs:
        if not any(w.lower() in missing for w in run):
            continue
        initials = "".join(w[0] for w in run if w.lower() not in _NAME_JOINERS).lower()
        if len(initials) > 1 and initials in abbreviations:
            continue  # "the U.S." names the United States; the word "us" does not
        text = " ".join(run)
        if len(run) > 1 and text.isupper():
            text = text.lower()
        out.append(text)
    return list(dict.fromkeys(out))


# Words that end an asked noun phrase ("the filing fee | for the appeal"), the prepositions among them (a shared
# ending's), and heads that say little on their own ("the return policy" is about returns)
_PHRASE_STOP, _PREPOSITIONS, _VAGUE_HEADS = word_list("phrase_stop"), word_list("prepositions"), word_list("vague_heads")
# An adjective that borrows the next part's noun: "the economic AND social consequences".
_ADJECTIVE = re.compile(r"(?:ic|ical|al|ive|ous|ary|ful|less)$", re.IGNORECASE)


@dataclass(frozen=True)
class _Part:
    """One part of a question that asks several things: how an answer names it, the noun phrase it asks
    for (its last word is the head), its own terms, and the part as a question of its own."""

    label: str
    head: str
    needed: tuple[str, ...]
    question: str | None  # the part asked on its own, for a sentence stating its value (None: by terms only)

    def spoken_to(self, sentence: str, sentence_stems: frozenset[str], value_check: ValueCheck | None) -> bool:
        """A sentence speaks to the part when it holds the value the part asks for ("30 days" for "the
        deadline for the appeal", by ``value_check``), or names its head and half of its own terms ("filing"
        alone, in "30 days to file an appeal", is not "the filing fee")."""
        if value_check is not None and self.question and value_check(sentence, self.question):
            return True
        return self.head in sentence_stems and 2 * sum(t in sentence_stems for t in self.needed) >= len(self.needed)


def _mid_sentence(text: str) -> str:
    """``text`` as it reads after "Not mentioned in the sources:": its opening capital lowered ("What
    is ..." -> "what is ..."), an opening acronym ("EMEA ...") kept."""
    return text[0].lower() + text[1:] if text[:2].istitle() else text


def _parts(query: str) -> list[_Part]:
    """The parts of a question asking several things (:func:`question_parts`). Where the question joins
    noun phrases ("What is the filing fee AND deadline for the appeal?"), each part is named without the
    opening ("the filing fee") and checked as a question of its own, with the opening, the ending the
    parts share ("for the appeal") and an adjective's borrowed noun ("economic" of "economic AND social
    consequences"); where it joins questions ("..., and who repairs it?"), each part is one as written."""
    raw = question_parts(query)
    if not raw:
        return []
    leads = [_ASKING.match(p).group(0).strip() for p in raw]  # ("" where no word asks)
    if any(leads[1:]):  # several questions: each part asks for itself
        out = []
        stems = [[stem(t) for t in content_terms(_ASKING.sub("", p))] for p in raw]
        for n, text in enumerate(raw):
            others = {t for m, ts in enumerate(stems) if m != n for t in ts}
            own = tuple(dict.fromkeys([t for t in stems[n] if t not in others] or stems[n]))
            if own:  # a clause brings its own words ("what percentage goes to maintenance"): they must be there
                out.append(_Part(label=_mid_sentence(text), head=own[0], needed=own, question=None))
        return out
    texts = [_ASKING.sub("", p).strip() for p in raw]
    phrases: list[list[str]] = []
    tails: list[str] = []
    for text in texts:
        words = text.split()
        first = next((n for n, w in enumerate(words) if w.lower() not in _PHRASE_STOP), len(words))
        end = next((n for n in range(first + 1, len(words)) if words[n].lower() in _PHRASE_STOP), len(words))
        phrases.append(words[first:end])
        tails.append(" ".join(words[end:]))
    last_tail = tails[-1].split()
    shared_tail = tails[-1] if last_tail and last_tail[0].lower() in _PREPOSITIONS else ""
    stems = [[stem(t) for t in content_terms(text)] for text in texts]
    out = []
    for n, (text, phrase_words) in enumerate(zip(texts, phrases, strict=True)):
        if not phrase_words:
            continue
        label = _mid_sentence(text)
        words = list(phrase_words)
        if (len(words) == 1 and n + 1 < len(phrases) and len(phrases[n + 1]) >= 2
                and _ADJECTIVE.search(words[0]) and not tails[n]):
            words.append(phrases[n + 1][-1])  # "economic" asks for the "economic consequences"
            label = f"{label} {phrases[n + 1][-1]}"
        others = {t for m, ts in enumerate(stems) if m != n for t in ts}
        own = [stem(t) for t in content_terms(" ".join([*words, tails[n]]))]  # its own ending counts, a shared one not
        needed = tuple(dict.fromkeys([t for t in own if t not in others] or own))
        if not needed:
            continue
        question = " ".join(w for w in (leads[0] or "What is", "the", *words, tails[n] or shared_tail) if w)
        head = words[-2] if len(words) > 1 and words[-1].lower() in _VAGUE_HEADS else words[-1]
        out.append(_Part(label=label, head=stem(head), needed=needed, question=f"{question}?"))
    return out


def _reading_order(chosen: list[int], candidates: Sequence[_Candidate]) -> list[int]:
    """``chosen`` (the first is the answer's opening) as it reads best: the opening
    first, then the other sentences grouped by passage, each passage's in its own
    order, so a sentence that leans back stays right after the one it leans on."""
    lead = chosen[0]
    passages = list(dict.fromkeys(candidates[i].number for i in chosen))
    runs: list[list[int]] = []
    for number in passages:
        run: list[int] = []
        for i in sorted((i for i in chosen if candidates[i].number == number), key=lambda i: candidates[i].position):
            if run and (i == lead and not candidates[i].item or candidates[i].position != candidates[run[-1]].position + 1):
                runs.append(run)
                run = []
            run.append(i)
        runs.append(run)
    runs.sort(key=lambda run: lead not in run)  # stable: the rest keep their order (a list's items from its first)
    return [i for run in runs for i in run]


def _abstention(language: str) -> Answer:
    return Answer(text=phrase("abstain", language), sentences=[], language=language, abstained=True)
