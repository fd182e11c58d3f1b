"""The local language model: a deterministic, offline stand-in for Gemini.

It is a set of small retrieval and scoring algorithms over the local index and
embedder, not a generative model, and it gives the same reply to the same
input every time.

- **transform**: expands acronyms learned from the corpus itself
  (:mod:`shared.adapters.local.acronyms`), adds the month and
  year to temporal questions, and gives a question with no content words of its own
  (a date-only query) up to two feedback terms shared by the top retrieved chunks
  (light pseudo-relevance feedback; appended to every question they did not help
  retrieval, see :meth:`LocalLanguageModel.transform`). It decomposes a question into sub-queries
  only when its structure asks for it (:mod:`shared.adapters.local.decomposition`).
- **grade**: measures the evidence (:meth:`LocalLanguageModel.evidence`): embedding
  cosine between the question and each context (all-MiniLM-L6-v2 scores unrelated text
  about 0.0-0.2 and related text about 0.4-0.8), coverage of the question's content
  terms by all contexts, the best context, the most similar one and the best single
  sentence (acronyms, numbers and capitalised names weigh more than common words; an
  index offering :class:`~shared.contract.ports.TermStatistics` tells which terms the
  corpus lacks altogether), whether a sentence holds the asked price, count, date,
  quantity or name (:mod:`shared.query.reading.answer_types`; a near miss names the entity but
  not the fact), names and years the question states that no context does, and whether
  it asks for the current state. The **score** is a logistic regression's probability
  that the contexts answer the question, its weights fit on fitz-gov's calibration split
  (:mod:`shared.adapters.local.grade_model`, ``bench/fit_grader.py``); ``answerable`` is
  False below the probability chosen there for a bounded false-abstention rate, and when
  every name the question states is one the corpus never mentions ("Kafka"), or a name in code it writes is one
  no retrieved passage writes ("base32" over passages about base64: :func:`~shared.query.grading.names_unstated`). A question
  with no content terms at all ("what's new today?") stays answerable (a neutral grade).
  ``relevance`` and ``completeness`` remain readable sub-scores (similarity and
  coverage, completeness cut for a near miss), and ``grounded`` says that one strong
  context covers the key terms, or several do together. The reasoning names what held
  the probability down; ``missing_aspects`` are the question's terms no context contains.
- **refine**: the original question plus the missing aspects and acronym
  expansions (plus month/year for temporal questions).
- **synthesize**: the reader (:func:`shared.query.reading.extractive.extractive_answer`): the sentence
  that states what is asked, cited, chosen by the question's terms, its passage's closeness
  (vectors stored at indexing), the asked answer type and the MiniLM cosine of the few best
  candidates (embedded once per process); a sentence opening with a reference comes with
  the one it leans on; the answer carries the reader's verdict, which decides the outcome:
  two logistic regressions over the reader's evidence (:mod:`shared.query.reading.verdict`,
  fitted on the real-text development part by ``bench/fit_reader.py``) make it ``answered``,
  a caveat, or an abstention. The grade defers to that verdict when its own fitted
  probability would refuse: a question is answerable when the reader does not refuse it.

The question is embedded once per process (:mod:`shared.query.vectors`) and
that vector serves transform, grade and synthesize alike.

A German, French or Spanish question is put into English search terms first
(:mod:`shared.query.reading.translation`, a shipped lexicon), and every step above works
on those terms.

Limits: it cannot paraphrase, translate sentences, reason across sentences or
resolve pronouns; answers are in the language of the sources (only the
abstention and caveat sentences follow the question's language); a foreign
question's words outside the lexicon stay untranslated; decomposition is
pattern-based and English-only; acronyms are learned only from chunks a search
returns, so an acronym the corpus never spells out stays unexpanded. Text in
contexts is only ever evidence: sentences addressed to a model ("ignore
previous instructions...", "rate this 1.0") are removed before scoring or
extraction.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from types import MappingProxyType

import numpy as np

from shared.adapters.local.acronyms import ACRONYM, AcronymTable, long_form_words
from shared.adapters.local.decomposition import decompose
from shared.adapters.local.grade_model import GradeModel, shipped_model
from shared.contract.ports import (
    Answer,
    ConversationTurn,
    Embedder,
    Grade,
    Index,
    NumberedContext,
    RefineRequest,
    StoredVectors,
    TermStatistics,
    Transformation,
)
from shared.query.grading import (
    names_unstated,
    numbers_unstated,
    shown_apart,
    strip_model_directives,
)
from shared.query.reading.answer_types import (
    FactSupport,
    fact_support,
    question_names,
    reading_arguments,
)
from shared.query.reading.extractive import (
    STOPWORDS,
    Observe,
    body_lines,
    content_terms,
    extractive_answer,
    sentence_term_sets,
    stem,
    term_set,
    tokenize,
)
from shared.query.reading.followup import standalone_question
from shared.query.reading.language import in_english
from shared.query.reading.verdict import VerdictModel, shipped_verdict_model
from shared.query.vectors import passage_vectors, query_vector, sentence_vectors

log = logging.getLogger("ragbus.llm.local")

_TEMPORAL_CUES = re.compile(
    r"\b(today|yesterday|tonight|recent|recently|latest|newest|new|this (week|month|year)|"
    r"last (week|month|year)|past (week|month|year)|current|currently|now|upcoming)\b",
    re.IGNORECASE,
)

# Similarity calibration for all-MiniLM-L6-v2 (see module docstring).
SIM_FLOOR = 0.2
SIM_FULL = 0.6
UNANSWERABLE_SIM = 0.28  # below both: the reasoning says nothing retrieved is about the question
UNANSWERABLE_COVERAGE = 0.34
NEAR_MISS_FACTOR = 0.4  # completeness kept when no sentence holds the asked value, cause or mechanism
ASPECT_MISS_FACTOR = 0.7  # ... when no passage names the asked aspect ("the ingredients")
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
STRONG_SIM = 0.5  # a context this close to the question is about it (see SIM_FULL)


@dataclass(frozen=True)
class GradeEvidence:
    """What :meth:`LocalLanguageModel.grade` measured: ``features`` feed the calibrated model
    (:mod:`shared.adapters.local.grade_model`), the rest explains the grade."""

    sims: np.ndarray  # cosine of the question and each usable context
    terms: list[tuple[str, float, set[str]]]  # the key terms the corpus has (term, weight, stems)
    absent: list[str]  # key terms the corpus never uses, in no inflection the contexts show either
    absent_share: float
    missing: list[str]  # key terms no context contains
    coverage_union: float
    coverage_best: float
    coverage_most_similar: float
    support: FactSupport
    unknown: list[str]  # the question's names, when the corpus mentions none of them
    features: dict[str, float]


@dataclass(frozen=True)
class _FeedbackWords:
    """What pseudo-relevance feedback reads of one passage (see :func:`_feedback_words`)."""

    candidates: tuple[tuple[str, str], ...]  # (stem, surface form) of each distinct content word
    token_stems: Mapping[str, int]  # every word's stem, counted (read-only)


@functools.lru_cache(maxsize=2048)
def _feedback_words(text: str) -> _FeedbackWords:
    """The content words of a chunk's body that may become feedback terms (alphabetic, four
    letters or more, in order of first use) and the stems of all its words, counted.

    A pure function of the text, kept per chunk text (a bounded, thread-safe LRU): the top
    chunks of a question's neighbourhood come back question after question, and tokenising
    and stemming three of them was most of the feedback's cost."""
    body, _ = strip_model_directives(body_lines(text))
    candidates = tuple(
        (stem(w), w.lower() if not w.isupper() else w)
        for w in content_terms(body, keep_temporal=False) if w.isalpha() and len(w) >= 4
    )
    return _FeedbackWords(candidates, MappingProxyType(Counter(stem(w) for w in tokenize(body))))


def _about_another(numbers: Sequence[str], names: Sequence[str]) -> str:
    """The grade's note on the numbers and names in code the question turns on that no passage states."""
    return (f"; no passage states {' or '.join(numbers)}, which carries the question: the passages are about another "
            "version or release" if numbers else "") + (
        f"; no passage names {' or '.join(names)}: the passages are about something else" if names else "")


def _titled_whole(context: NumberedContext) -> str:
    """The whole passage under its title (the grading cut's first line): a changelog's section names the release,
    its title the program."""
    return f"{context.text.partition(chr(10))[0]}\n{context.whole}" if context.whole else context.text


def _scaled(similarity: float) -> float:
    return float(min(1.0, max(0.0, (similarity - SIM_FLOOR) / (SIM_FULL - SIM_FLOOR))))


class LocalLanguageModel:
    """The offline, deterministic :class:`~shared.contract.ports.LanguageModel` (see the module docstring)."""

    provider = "local"
    model = "ragbus-local-1"

    def __init__(self, index: Index, embedder: Embedder, *, feedback_terms: int = 2,
                 grade_model: GradeModel | None = None, verdict_model: VerdictModel | None = None) -> None:
        self.index = index
        self.embedder = embedder
        self.feedback_terms = feedback_terms
        # The shipped model (grade_model.json) unless one is given, read on the first grade: only grading
        # needs it, so the transformer and synthesizer work whatever the file holds. A process that grades
        # checks the file before it starts (shared.runtime.readiness); if it is broken anyway, grade()
        # raises ConfigError with the way to refit (the grader fails the query, never falls back).
        self._grade_model = grade_model
        self.acronyms = AcronymTable(index, embedder)
        self._verdict_model = verdict_model  # None: the reader's shipped verdict model (verdict_model.json)

    @property
    def verdict_model(self) -> VerdictModel:
        """The reader's verdict model (the shipped ``verdict_model.json`` unless one was given)."""
        return self._verdict_model or shipped_verdict_model()

    @property
    def grade_model(self) -> GradeModel:
        """The calibrated model the grade's score comes from (:class:`ConfigError` when the shipped file
        is missing, stale or hostile: each call tries the file again until it loads)."""
        if self._grade_model is None:
            self._grade_model = shipped_model()
        return self._grade_model

    # ------------------------------------------------------------ acronyms

    def expansion(self, acronym: str) -> str | None:
        """The long form of ``acronym`` as the corpus spells it (see :class:`AcronymTable`)."""
        return self.acronyms.expansion(acronym)

    # ------------------------------------------------------------ feedback

    def _search(self, text: str, k: int, *, meaning: str | None = None):
        """Hybrid search: ``text`` for the lexical side, the vector of ``meaning`` (default
        ``text``) for the dense side."""
        return self.index.search(text, query_vector(self.embedder, meaning or text), k, mode="hybrid")

    def _feedback(
        self, query: str, *, recent_first: bool, minimum_df: int, exclude: frozenset[str] = frozenset(),
        meaning: str | None = None,
    ) -> list[str]:
        """Discriminative terms of the top chunks for ``query`` (pseudo-relevance feedback).

        A term scores by how many of the top three chunks share it and how rare it
        is among the top twenty (an IDF over the neighbourhood, so words common to
        the whole topic, like "message" in a messaging corpus, do not win). Terms of
        ``query`` and stems in ``exclude`` (feedback already tried) are skipped.
        """
        try:
            hits = self._search(query, 20, meaning=meaning)
        except Exception as exc:  # noqa: BLE001 - feedback is optional
            log.warning("pseudo-relevance feedback search failed: %s", exc)
            return []
        if not hits:
            return []
        top = sorted(hits[:5], key=lambda h: h.chunk.published or "", reverse=True)[:3] if recent_first else hits[:3]
        present = term_set(query) | set(exclude)
        background: Counter[str] = Counter()
        for hit in hits:
            background.update(term_set(body_lines(hit.chunk.text)))
        df: Counter[str] = Counter()
        tf: Counter[str] = Counter()
        surface: dict[str, str] = {}
        for hit in top:
            words = _feedback_words(hit.chunk.text)
            for key, word in words.candidates:
                if key in present:
                    continue
                df[key] += 1
                surface.setdefault(key, word)
            tf.update(words.token_stems)
        # Terms must also be in the best hit: shared by weaker hits alone, they pull the query off topic.
        in_best = term_set(body_lines(top[0].chunk.text))
        n = len(hits)

        def weight(key: str) -> float:
            return df[key] * (1.0 + math.log(tf[key])) * math.log((n + 1) / (background[key] + 0.5))

        ranked = sorted(
            (k for k in df if df[k] >= minimum_df and k in in_best and background[k] < n),
            key=lambda k: (-weight(k), k),
        )
        return [surface[k] for k in ranked[: self.feedback_terms]]

    # ------------------------------------------------------------ the port

    def transform(self, query: str, *, today: date) -> Transformation:
        """Rewrite (acronyms, temporal context, feedback terms) and decompose ``query``.

        A German, French or Spanish question is first put into English search terms
        (:mod:`shared.query.reading.translation`): the corpus and the packaged embedder are English.
        """
        language, question = in_english(" ".join(query.split()))
        translated = [f"{language} -> en: {question}"] if language != "en" and question != query.strip() else []
        # The question's vector serves every stage of the query (grader and synthesizer compare
        # it with their contexts): the acronym lookups (lexical) and the feedback search's dense
        # side use it too, so transforming embeds one text, not one per rewrite.
        question_vector = query_vector(self.embedder, question)
        expanded, notes = self.acronyms.expand(question, vector=question_vector)
        notes = translated + notes
        temporal = bool(_TEMPORAL_CUES.search(question))
        date_only = not content_terms(question, keep_temporal=False)
        parts = [expanded]
        if temporal or date_only:
            month_year = today.strftime("%B %Y")
            if month_year.lower() not in expanded.lower():
                parts.append(month_year)
                notes.append(f"temporal: {month_year}")
        # Feedback terms only for a question with no content words of its own ("what's new this week?"):
        # appended to every question they did not help retrieval on the real-text development part
        # (bench/feedback_terms.py, 994 questions: the answering document in the top 10 for 0.977
        # without them, 0.972 with them; hit@1 0.886 both ways; 3 questions ranked better, 7 worse).
        feedback = self._feedback(
            expanded, recent_first=True, minimum_df=1, meaning=question
        ) if date_only else []
        if date_only and not feedback:
            feedback = ["articles", "announcements"]  # an empty corpus still needs content words
        if feedback:
            parts.append(" ".join(feedback))
            notes.append("feedback: " + ", ".join(feedback))
        sub_queries = decompose(question)
        return Transformation(
            rewritten=" ".join(parts), sub_queries=sub_queries, reasoning="; ".join(notes) or "unchanged"
        )

    def standalone(self, question: str, history: Sequence[ConversationTurn], *, today: date) -> str:
        """The follow-up rule (:mod:`shared.query.followup`): the earlier turn's subject carried into
        a question that leans on it, a self-contained question unchanged."""
        return standalone_question(question, history).question

    def refine(self, request: RefineRequest, *, today: date) -> str:
        """The original question, aimed at what the grader found missing: its acronyms expanded and the missing
        aspects appended; a question with no content words of its own also gets new feedback terms (terms any
        earlier query tried are excluded), as :meth:`transform` gives them. A question with content words gets
        none: appended to every refined question they did not help retrieval on the real-text development part
        (issue 36 item 5: answer keys in the retrieved contexts 0.9536 with them, 0.9545 without).
        """
        original = in_english(" ".join(request.original_query.split()))[1]  # a German question refines in English
        expanded, _ = self.acronyms.expand(original)
        present = term_set(expanded)
        extra: list[str] = []
        aspects: list[str] = []
        for aspect in request.missing_aspects:
            for term in content_terms(aspect, keep_temporal=False):
                aspects.append(term)
                if stem(term) not in present:
                    present.add(stem(term))
                    extra.append(term)
        date_only = not content_terms(original, keep_temporal=False)
        tried: set[str] = set()
        for earlier in (*request.earlier_queries, request.previous_query):
            tried |= term_set(earlier)
        tried -= present
        focus = " ".join(aspects) if aspects else " ".join([expanded, *extra])
        if date_only:
            extra += self._feedback(focus, recent_first=date_only, minimum_df=1, exclude=frozenset(tried | present))
        if date_only and not extra:
            extra = ["articles", "announcements"]  # never a date-only query
        parts = [expanded, *extra[:8]]
        if _TEMPORAL_CUES.search(original):
            month_year = today.strftime("%B %Y")
            if month_year.lower() not in expanded.lower():
                parts.append(month_year)
        return " ".join(parts)

    def _key_terms(self, query: str, vector: np.ndarray) -> list[tuple[str, float, set[str]]]:
        """(term, weight, stems that cover it) for each content term of ``query`` (``vector``: its own,
        for the acronym lookups)."""
        out = []
        for term in content_terms(query, keep_temporal=False):
            specific = bool(ACRONYM.match(term) or any(ch.isdigit() for ch in term) or term[:1].isupper())
            alternatives = {stem(term)}
            if ACRONYM.match(term):
                long_form = self.acronyms.expansion(term, vector=vector)
                if long_form:
                    alternatives.add("|".join(sorted(stem(w) for w in long_form_words(long_form))))
            out.append((term, 1.5 if specific else 1.0, alternatives))
        return out

    @staticmethod
    def _covered(alternatives: set[str], present: set[str]) -> bool:
        for alt in alternatives:
            if "|" in alt:
                if all(part in present for part in alt.split("|") if part not in STOPWORDS):
                    return True
            elif alt in present:
                return True
        return False

    def _document_frequency(self, terms: list[str]) -> dict[str, int] | None:
        """Chunks containing each term, when the index can tell (the local index can)."""
        if not isinstance(self.index, TermStatistics) or not terms:
            return None
        try:
            return self.index.document_frequency(terms)
        except Exception as exc:  # noqa: BLE001 - coverage without frequencies still works
            log.warning("document frequencies unavailable: %s", exc)
            return None

    def _context_vectors(self, contexts: Sequence[NumberedContext], cleaned: Sequence[str]) -> np.ndarray:
        """Embeddings of the contexts: the index's stored ones where it has them (computed
        once at indexing, so grading costs one query embedding, not ten passages), else
        computed now. A context that lost text to directive stripping is embedded afresh,
        so planted instructions never weigh in: once per process for each such text
        (:func:`~shared.query.vectors.passage_vectors`), which grading and synthesis share."""
        stored: dict[str, np.ndarray] = {}
        ids = [c.chunk_id for c in contexts if c.chunk_id]
        if isinstance(self.index, StoredVectors) and ids:
            try:
                stored = self.index.get_vectors(ids)
            except Exception as exc:  # noqa: BLE001 - recomputing is always possible
                log.warning("stored vectors unavailable, embedding contexts: %s", exc)
        out = np.zeros((len(contexts), self.embedder.dimension), dtype=np.float32)
        missing = []
        for n, (ctx, text) in enumerate(zip(contexts, cleaned, strict=True)):
            vector = stored.get(ctx.chunk_id or "")
            if vector is not None and text == ctx.text and vector.shape[0] == out.shape[1]:
                out[n] = vector
            else:
                missing.append(n)
        if missing:
            out[missing] = passage_vectors(self.embedder, [cleaned[n] for n in missing])
        return out

    def evidence(self, query: str, contexts: Sequence[NumberedContext]) -> GradeEvidence | None:
        """What the grade is made of (similarities, coverage, fact support, unknown names), measured
        on ``contexts`` for ``query``; None when no context has usable text. The values of
        :data:`~shared.adapters.local.grade_model.FEATURES` are in ``features``."""
        asked = query
        language, query = in_english(query)  # a German, French or Spanish question is graded by its English terms
        usable = [(c, strip_model_directives(c.text)[0]) for c in contexts]
        usable = [(c, text) for c, text in usable if text.strip()]
        if not usable:
            return None
        cleaned = [text for _, text in usable]
        asked_vector = query_vector(self.embedder, query)
        sims = self._context_vectors([c for c, _ in usable], cleaned) @ asked_vector
        order = np.argsort(-sims, kind="stable")
        sim_max = float(sims[order[0]])
        sim_top = float(np.mean(sims[order[:3]]))
        sim_second = float(sims[order[1]]) if len(order) > 1 else 0.0
        # terms count in the whole passage the reader quotes, not the grading cut's ("WIP: ..." past 500 characters)
        read = [strip_model_directives(c.whole)[0] if c.whole else text for c, text in usable]
        sets = [term_set(c) for c in read]
        union = set().union(*sets)

        terms = self._key_terms(query, asked_vector)
        key_terms = len(terms)
        # Terms the corpus never uses are phrasing ("hammering") or a subject it lacks
        # ("tungsten"): no context can cover them, so they count toward "cannot answer",
        # not toward completeness, and are not sent to refinement as missing aspects. The
        # index counts words as written (plurals folded), so a term whose stem a context
        # holds ("searching" beside "search") is an inflection the corpus has, not absent.
        frequency = self._document_frequency([t for t, _, _ in terms])
        absent = [t for t, _, alts in terms if frequency is not None and frequency.get(t, 1) == 0
                  and not self._covered(alts, union)]
        # A foreign question's word the lexicon left as it was ("kommen") is absent from an English
        # corpus whatever it holds: it says nothing about the corpus, so it does not count against it.
        untranslated = {t for t in absent if language != "en" and t.lower() in asked.lower()}
        all_weight = sum(w for _, w, _ in terms) or 1.0
        absent_share = sum(w for t, w, _ in terms if t in absent and t not in untranslated) / all_weight
        if absent and len(absent) < len(terms):
            terms = [x for x in terms if x[0] not in absent]
        total = sum(w for _, w, _ in terms)

        def coverage(present: set[str]) -> float:
            if not terms:
                return _scaled(sim_max)  # nothing to count: let similarity speak
            return sum(w for _, w, alts in terms if self._covered(alts, present)) / total

        cov_union = coverage(union)
        per_context = [coverage(s) for s in sets]
        cov_best = max(per_context)
        cov_of_most_similar = per_context[int(order[0])]
        # One sentence naming the question's terms together is firmer than terms scattered over a passage.
        cov_sentence = max((coverage(terms_of) for text in read for terms_of in sentence_term_sets(text)),
                           default=0.0)
        missing = [t for t, _, alts in terms if not self._covered(alts, union)]
        # On topic is not enough: the contexts must hold the asked fact (a price, a year, a
        # headcount, the ingredients). A near miss names the entity but not the fact.
        support = fact_support(query, cleaned)
        # Off topic though sharing vocabulary: every name the question states ("Kafka") is one the
        # corpus never mentions. (One unknown name among known ones is too common in answerable
        # questions: "the Tulsa Race Massacre" against passages saying "the massacre in Tulsa".)
        # Only English questions: other languages capitalise common nouns.
        names = question_names(query) if language == "en" else ()  # the asked language, not the translation's
        unknown = list(names) if names and all(n in absent for n in names) else []
        names_missing = sum(1 for n in names if stem(n) not in union) / len(names) if names else 0.0
        years = [w for w in tokenize(query) if _YEAR.match(w)]
        year_missing = any(y not in union for y in years)
        features = {
            "sim_max": sim_max, "sim_top3": sim_top, "sim_gap": sim_max - sim_second,
            "strong_contexts": math.log1p(int(np.sum(sims >= STRONG_SIM))),
            "coverage_union": cov_union, "coverage_best": cov_best, "coverage_most_similar": cov_of_most_similar,
            "coverage_sentence": cov_sentence, "absent_share": absent_share, "names_missing": names_missing,
            "year_missing": float(year_missing), "asks_current": float(bool(_TEMPORAL_CUES.search(query))),
            "fact_checked": float(support.checked), "near_miss": float(support.near_miss),
            "aspect_miss": float(support.checked and not support.supported and not support.firm),
            "support_sentences": math.log1p(support.supporting), "key_terms": math.log1p(key_terms),
        }
        return GradeEvidence(sims=sims, terms=terms, absent=absent, absent_share=absent_share, missing=missing,
                             coverage_union=cov_union, coverage_best=cov_best,
                             coverage_most_similar=cov_of_most_similar, support=support, unknown=unknown,
                             features=features)

    def grade(self, query: str, contexts: Sequence[NumberedContext]) -> Grade:
        """The calibrated probability that ``contexts`` answer ``query`` (the score), with the
        relevance, completeness and groundedness it rests on (see the module docstring)."""
        model = self.grade_model  # first: a broken model file fails every grade alike, context or none
        ev = self.evidence(query, contexts)
        if ev is None:
            return Grade(0.0, 0.0, 0.0, False, answerable=False, reasoning="no usable context text")
        sims = ev.sims
        sim_max = float(np.max(sims))
        sim_top = float(np.mean(np.sort(sims)[::-1][:3]))
        cov_union, cov_best, support = ev.coverage_union, ev.coverage_best, ev.support
        relevance = 0.65 * _scaled(sim_max) + 0.35 * cov_best
        completeness = 0.5 * cov_union + 0.5 * _scaled(sim_top)
        # Grounded: one strong context covers the key terms, or (for comparisons and multi-part
        # questions, which no single passage covers) several strong contexts cover them together.
        strong = int(np.sum(sims >= 0.35))
        grounded = sim_max >= 0.35 and (
            ev.coverage_most_similar >= 0.6 or cov_best >= 0.8 or (strong >= 2 and cov_union >= 0.8)
        )
        probability = model.probability(ev.features)
        answerable = probability >= model.answerable_from
        reader_states = False
        # nothing retrieved is about the question: neither similar nor sharing its terms ("the boiling point of
        # tungsten" in a corpus about retrieval); the real-text set the reader's verdict is fit on has no such case
        off_topic = sim_max < UNANSWERABLE_SIM and cov_union < UNANSWERABLE_COVERAGE
        # the number the question turns on ("grep 3.9") or a name in code it writes ("base32") that no passage states: the
        # passages are about something else (another release's, base64's); checked first, they overrule the rescue below
        titled = [_titled_whole(c) for c in contexts]
        other_number, other_name = self.unstated_number(query, titled), names_unstated(query, titled)
        refused = bool(ev.unknown or other_number or other_name)
        if not answerable and ev.terms and not off_topic and not refused:
            # The fitted probability was calibrated on fitz-gov's short synthetic passages and refuses real documentation
            # it never saw the like of (issue 20): a question the reader's learned verdict (issue 36) does not refuse is
            # not one "the corpus evidently cannot answer". It reads the passages whole, as the synthesizer will.
            whole = [dataclasses.replace(c, text=c.whole) if c.whole else c for c in contexts]
            seen: list[dict[str, float]] = []
            read = self.synthesize(query, whole, language="en", observe=lambda evidence, *_: seen.append(evidence))
            reader_states = not read.abstained and bool(seen) and self.verdict_model.rescues(seen[-1])
            answerable = reader_states
        if not ev.terms:
            # Nothing in the question to check ("what's new today?"): no evidence either way, so a
            # neutral grade that neither claims an answer nor abstains.
            answerable, grounded = True, False
        if refused:
            answerable, grounded = False, False
        near_miss = support.near_miss
        if near_miss:
            grounded = False
            completeness *= NEAR_MISS_FACTOR
        elif support.checked and not support.supported:
            completeness *= ASPECT_MISS_FACTOR  # a named aspect no passage names: weaker, not refused
        concerns = model.concerns(ev.features)
        shown_probability, shown_threshold = shown_apart(probability, model.answerable_from)
        reasoning = (
            f"answer probability {shown_probability} "
            + (f"(abstains below {shown_threshold})" if ev.terms
               else "(no content terms to check: neither claimed nor refused)")
            + (f", held down by: {'; '.join(concerns)}" if concerns else "")
            + f". Best similarity {sim_max:.2f}, top-3 mean {sim_top:.2f}; question terms"
            # absent terms left out of the coverage are said to be (beside "not in the corpus: ...")
            + (" the corpus uses" if ev.absent and not set(ev.absent) & {t for t, _, _ in ev.terms} else "")
            + f" covered {cov_union:.0%} across contexts, {cov_best:.0%} by one context"
            + (f"; missing: {', '.join(ev.missing)}" if ev.missing else "")
            + (f"; not in the corpus: {', '.join(ev.absent)}" if ev.absent else "")
            + ("; " + "; ".join(support.missing) if support.missing else "")
            + (f"; the corpus never mentions {', '.join(ev.unknown)}" if ev.unknown else "")
            + _about_another(other_number, other_name)
            + ("; nothing retrieved is about this question" if off_topic and not answerable else "")
            + ("; answerable all the same: the reader's verdict finds what it would quote likely right"
               if reader_states else "")
        )
        return Grade(
            score=round(probability, 4),
            relevance=round(relevance, 4),
            completeness=round(completeness, 4),
            grounded=grounded,
            answerable=answerable,
            reasoning=reasoning,
            missing_aspects=ev.missing,
        )

    @staticmethod
    def unstated_number(query: str, passages: Sequence[str]) -> list[str]:
        """The numbers ``query`` states that no passage states (:func:`~shared.query.grading.numbers_unstated`),
        when they carry a third or more of the question's key terms by weight (a number weighs as a name does):
        "What changed in grep 3.9?" asks about 3.9 and little else, so passages about other releases cannot answer
        it; "Which new readline command in bash 5.2 corrects spelling?" asks more than its release (a changelog
        names the release in a heading the passage may not hold), and is left to the rest of the evidence. Empty
        otherwise."""
        if not numbers_unstated(query, passages):  # most questions state no number: nothing to clean then
            return []
        unstated = numbers_unstated(query, [strip_model_directives(p)[0] for p in passages])
        terms = content_terms(in_english(query)[1], keep_temporal=False)
        weights = {t: 1.5 if ACRONYM.match(t) or any(ch.isdigit() for ch in t) or t[:1].isupper() else 1.0
                   for t in terms}
        # a number of three digits or fewer is no content term ("less version 600"), but it is what such a question asks
        weights.update({n: 1.5 for n in unstated if not any(n in t for t in weights)})
        carried = sum(w for t, w in weights.items() if any(n in t for n in unstated))
        return unstated if weights and carried * 3 >= sum(weights.values()) else []

    def synthesize(self, query: str, contexts: Sequence[NumberedContext], *, language: str,
                   observe: Observe | None = None) -> Answer:
        """An extractive, cited answer (see :func:`shared.query.reading.extractive.extractive_answer`): sentences
        ranked by the question's terms and by how close their passage is to the question; a name the
        question states that no context names is said to be not mentioned.
        A question in German, French or Spanish is matched by its English terms; ``language``
        (the question's) still decides the language of the abstention. ``observe`` sees the reader's
        evidence and answer before its verdict (``bench/fit_reader.py`` fits the verdict on it)."""
        query, reading = reading_arguments(query)
        usable = [(c, strip_model_directives(c.text)[0]) for c in contexts]
        usable = [(c, text) for c, text in usable if text.strip()]
        if not usable:
            return extractive_answer(query, contexts, language=language, **reading)
        sims = self._context_vectors([c for c, _ in usable], [t for _, t in usable]) @ query_vector(
            self.embedder, query)
        prior = {c.number: float(sim) for (c, _), sim in zip(usable, sims, strict=True)}
        # The reader embeds the few sentences its cheap score ranks best (kept per process: the same
        # passages come back question after question) and quotes the one closest to the question.
        return extractive_answer(query, contexts, language=language, context_similarity=prior,
                                 question_vector=query_vector(self.embedder, query),
                                 sentence_embed=lambda texts: sentence_vectors(self.embedder, texts),
                                 verdict=self._verdict_model, observe=observe, **reading)


__all__ = ["GradeEvidence", "LocalLanguageModel"]
