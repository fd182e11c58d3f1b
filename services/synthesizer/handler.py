"""The synthesizer stage: writes the answer once the grader has stopped the loop.

It answers from the best-graded iteration's contexts only, in the question's
language where the provider can. Outcomes:

- ``answered``: the best grade passes every threshold;
- ``answered_with_caveat``: it does not, and the answer opens with a caveat
  saying the sources only partly cover the question;
- ``not_answerable``: the grader abstained, nothing was retrieved, or the
  model found nothing to support an answer: a clear abstention, nothing invented.

Citations are numbered in order of first use and resolve to title, URL,
document id and chunk id. Contexts were already merged across sub-queries by
chunk, so the same chunk always keeps one number; chunks of one document (or one
URL) share a number too, so a source is listed once. A model call that fails falls
back to an extractive answer, so the query always ends.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.messages import AnswerReady, Message, QueryGraded
from shared.contract.ports import (
    Answer,
    AnswerSentence,
    Clock,
    Embedder,
    GradingContext,
    Index,
    LanguageModel,
    Publisher,
    StateStore,
    StoredVectors,
)
from shared.observability import metrics
from shared.observability.tracing import annotate
from shared.query.grading import failed_thresholds, strip_model_directives
from shared.query.model_health import model_answered, model_unusable, note_fallback
from shared.query.prompts import CITATION_MARKER, cited_numbers
from shared.query.reading.answer_types import question_names, states_value
from shared.query.reading.extractive import extractive_answer
from shared.query.reading.language import detect_language, phrase
from shared.query.record import Citation, Context, QueryRecord
from shared.query.state import SYNTHESIZE, apply_stage, live_record, read_record
from shared.query.vectors import query_vector

log = logging.getLogger("ragbus.synthesizer")

FINAL_DECISIONS = ("accept", "abstain", "exhausted")

Embed = Callable[[Sequence[str]], np.ndarray]
PassageSimilarity = Callable[[str, Sequence[GradingContext]], dict[int, float]]


def handle(message: Message, deps: Deps) -> None:
    """Dispatch a final ``QueryGraded`` to :func:`synthesize_answer`; ignore ``refine``."""
    if not isinstance(message, QueryGraded):
        log.warning("synthesizer ignores %s", type(message).__name__)
        return
    if message.decision not in FINAL_DECISIONS:
        return  # the transformer refines

    def embed(texts: Sequence[str]) -> np.ndarray:
        return deps.embedder.embed(texts)

    def passage_similarity(query: str, contexts: Sequence[GradingContext]) -> dict[int, float]:
        return stored_passage_similarity(query, contexts, embedder=deps.embedder, index=deps.index)

    has_vectors = deps.provided("embedder") and deps.provided("index")
    synthesize_answer(
        message,
        state=deps.state,
        publisher=deps.publisher,
        clock=deps.clock,
        llm=deps.llm,
        settings=deps.settings,
        embed=embed if deps.provided("embedder") else None,
        passage_similarity=passage_similarity if has_vectors else None,
    )


def stored_passage_similarity(
    query: str, contexts: Sequence[GradingContext], *, embedder: Embedder, index: Index
) -> dict[int, float]:
    """Cosine of the question to each context's vector stored at indexing (context number ->
    cosine), for an extractive answer that embeds no sentence. Empty when the index keeps no
    vectors; a context with text addressed to a model is left out, so planted text never lends
    its passage weight."""
    if not isinstance(index, StoredVectors):
        return {}
    clean = {c.number: c for c in contexts if c.chunk_id and strip_model_directives(c.text)[0] == c.text}
    if not clean:
        return {}
    stored = index.get_vectors([c.chunk_id for c in clean.values() if c.chunk_id])
    question = query_vector(embedder, query)
    return {n: float(stored[c.chunk_id] @ question) for n, c in clean.items()
            if c.chunk_id in stored and stored[c.chunk_id].shape == question.shape}


def number_citations(
    answer: Answer, contexts: list[Context]
) -> tuple[str, list[dict[str, Any]], list[Citation]]:
    """Answer text, sentences and citations with citation ids in order of first use.

    The provider cites context numbers (1-based positions in ``contexts``);
    unknown numbers are dropped. Contexts from one source (the same document id, or
    the same URL) share one citation id, whose ``chunk_id`` is the first chunk cited
    and ``chunk_ids`` every chunk cited under it: a reader sees each source once. A
    sentence's inline ``[n]`` markers are folded into its citations so text and
    citation list never disagree.
    """
    sentences = list(answer.sentences)
    if not sentences and answer.text.strip():
        sentences = [AnswerSentence(text=answer.text, citations=[])]
    sources = _SourceNumbers(contexts)
    out_sentences: list[dict[str, Any]] = []
    for sentence in sentences:
        cited = list(sentence.citations)
        cited.extend(cited_numbers(sentence.text))
        text = CITATION_MARKER.sub("", sentence.text).strip()
        numbers: list[int] = []
        for n in cited:
            if 1 <= n <= len(contexts):
                citation_id = sources.cite(n)
                if citation_id not in numbers:
                    numbers.append(citation_id)
        if text:
            out_sentences.append({"text": text, "citations": sorted(numbers)})
    text = " ".join(s["text"] + "".join(f" [{n}]" for n in s["citations"]) for s in out_sentences)
    return text, out_sentences, sources.citations()


class _SourceNumbers:
    """Citation ids by source: contexts with the same document id or URL share one."""

    def __init__(self, contexts: list[Context]) -> None:
        self.contexts = contexts
        self.by_key: dict[tuple[str, str], int] = {}
        self.chunks: dict[int, list[int]] = {}  # citation id -> context numbers cited under it

    def _keys(self, number: int) -> list[tuple[str, str]]:
        ctx = self.contexts[number - 1]
        keys = [("document", ctx.get("document_id") or ""), ("url", ctx.get("url") or "")]
        return [k for k in keys if k[1]] or [("context", str(number))]

    def cite(self, number: int) -> int:
        keys = self._keys(number)
        citation_id = next((self.by_key[k] for k in keys if k in self.by_key), len(self.chunks) + 1)
        for key in keys:
            self.by_key.setdefault(key, citation_id)
        numbers = self.chunks.setdefault(citation_id, [])
        if number not in numbers:
            numbers.append(number)
        return citation_id

    def citations(self) -> list[Citation]:
        out: list[Citation] = []
        for citation_id, numbers in self.chunks.items():
            ctx = self.contexts[numbers[0] - 1]
            chunk_ids = [self.contexts[n - 1].get("chunk_id", "") for n in numbers]
            out.append({
                "id": citation_id,
                "title": ctx.get("title", ""),
                "url": ctx.get("url", ""),
                "document_id": ctx.get("document_id", ""),
                "chunk_id": ctx.get("chunk_id", ""),
                "chunk_ids": list(dict.fromkeys(c for c in chunk_ids if c)),
            })
        return out


def synthesize_answer(
    message: QueryGraded,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    llm: LanguageModel,
    settings: Settings,
    embed: Embed | None = None,
    passage_similarity: PassageSimilarity | None = None,
) -> None:
    """Write the answer from the best iteration, end the query, publish ``AnswerReady``.

    Without a model answer the answer is extractive: ranked by ``passage_similarity``
    (vectors stored at indexing: no embedding at query time) where it gives any, else by
    embedding the candidate sentences with ``embed``, else by term overlap."""
    query_id, iteration = message.query_id, message.iteration
    current = read_record(state, query_id)
    if current is not None and current.status == "answered" and current.stage_done_in_any_iteration(SYNTHESIZE):
        # Redelivery after the answer was stored: the first AnswerReady may have been lost.
        publisher.publish(AnswerReady(query_id=query_id, outcome=current.outcome))
        return
    record = live_record(state, query_id, clock.now())
    if record is None:
        log.info("query %s is gone, ended or overdue; not synthesizing", query_id)
        return
    final = record.entry(iteration)
    if final is None or final.decision is None:
        raise RetryableError(
            f"query {query_id}: the grade of iteration {iteration} is not recorded yet; retry once it is"
        )
    if final.decision not in FINAL_DECISIONS:
        log.info("query %s: iteration %d was sent to refinement; not answering", query_id, iteration)
        return

    # A follow-up is answered as it stands on its own, in the language it was typed in.
    original = record.question
    language = detect_language(record.original_query)
    best = record.entry(record.best_iteration) or final
    contexts = list(best.contexts)
    best_grade = best.grade

    start = clock.monotonic()
    calls = 0
    provider = "none"
    answer: Answer | None = None
    fallback_why = ""
    if final.decision == "abstain" or not contexts or best_grade is None or not best_grade.answerable:
        outcome = "not_answerable"
    else:
        numbered = [
            GradingContext(number=n, source=c.get("url") or c.get("title") or "", text=c.get("text") or "",
                           chunk_id=c.get("chunk_id"))
            for n, c in enumerate(contexts, start=1)
        ]
        if record.model_calls_left > 0:
            calls = 1
            try:
                answer = llm.synthesize(original, numbered, language=language)
                provider = getattr(llm, "provider", "model")
                model_answered(state, getattr(llm, "model", None))
            except ModelUnusable as exc:
                model_unusable(state, query_id=query_id, stage=SYNTHESIZE, error=exc, now=clock.now())
                return
            except Exception as exc:  # noqa: BLE001 - any other model failure falls back to extraction
                log.warning("query %s: synthesis failed, answering extractively: %s", query_id, exc)
                fallback_why = f"model call failed ({type(exc).__name__}: {exc}); answered extractively"
        else:
            fallback_why = "no model call: model-call budget spent; answered extractively"
        if answer is None:
            answer = _extract(original, numbered, language, embed, passage_similarity)
            provider = "extractive-fallback"
        outcome = answer_outcome(answer, passes=not failed_thresholds(best_grade, settings.thresholds))

    if outcome == "not_answerable":
        text, sentences, citations = phrase("abstain", language), [], []
    else:
        text, sentences, citations = number_citations(answer, contexts)
        if not text:
            outcome, text, sentences, citations = "not_answerable", phrase("abstain", language), [], []
        elif outcome == "answered_with_caveat":
            text = phrase("caveat_no_model" if fallback_why else "caveat", language) + "\n\n" + text
    verdict = reader_verdict(answer, outcome) if answer is not None else ""
    elapsed_ms = (clock.monotonic() - start) * 1000.0

    def change(r: QueryRecord) -> None:
        if verdict:
            _align_decision(r, iteration, outcome, verdict)
        r.status = "answered"
        r.outcome = outcome
        r.answer = text
        r.answer_sentences = sentences
        r.citations = citations
        r.language = language
        r.answer_provider = provider
        r.answered_from_iteration = best.iteration
        if provider == "extractive-fallback":
            note_fallback(r, stage=SYNTHESIZE, iteration=iteration, reason=fallback_why)

    annotate(outcome=outcome, citation_count=len(citations), answered_from_iteration=best.iteration,
             answer_provider=provider)
    # iterations are numbered from 1 wherever a person reads them (page, CLI, trace)
    n = len(citations)
    detail = f"{outcome} from iteration {best.iteration + 1} with {n} citation{'' if n == 1 else 's'}"
    result = apply_stage(
        state, query_id, iteration=iteration, stage=SYNTHESIZE, event_type="answered", detail=detail,
        now=clock.now(), change=change, model_calls=calls, elapsed_ms=elapsed_ms,
    )
    if result.applied:
        metrics.query_ended(outcome, len(result.record.iterations))
        publisher.publish(AnswerReady(query_id=query_id, outcome=outcome))
    elif result.record is not None and result.record.status == "answered":
        publisher.publish(AnswerReady(query_id=query_id, outcome=result.record.outcome))


def answer_outcome(answer: Answer, *, passes: bool) -> str:
    """The outcome follows what is quoted: with the reader's verdict (the extractive reader gives
    one), ``answered`` only when a quoted sentence states what the question asks and no part is left
    unstated, else ``answered_with_caveat``; a generative model's answer (no verdict) is ``answered``
    when the grade ``passes`` every threshold. An abstention is ``not_answerable`` either way."""
    if answer.abstained:
        return "not_answerable"
    if answer.states_fact is None:
        return "answered" if passes else "answered_with_caveat"
    return "answered" if answer.states_fact and not answer.unstated else "answered_with_caveat"


def reader_verdict(answer: Answer, outcome: str) -> str:
    """Why the reader's verdict decided ``outcome`` (empty when the answer carries none)."""
    if answer.states_fact is None:
        return ""
    if outcome == "answered":
        return "the answer quotes a sentence stating what is asked"
    unstated = "; ".join(answer.unstated) or "what is asked"
    return f"no quoted sentence states: {unstated}"


def _align_decision(r: QueryRecord, final: int, outcome: str, verdict: str) -> None:
    """One story on every surface: the final iteration marked ``accept`` beside ``not_answerable``
    (or the grader's ``abstain``/``exhausted`` beside ``answered``) shows the decision the answer's
    reading made, and the grade's reasoning says why. Only the final one: the earlier iterations'
    ``refine`` is what the loop did (an ``accept`` there would have ended it), so rewriting them
    too read "iteration 1: accept" above an iteration 2."""
    want = {"not_answerable": "abstain", "answered": "accept"}.get(outcome)
    for entry in r.iterations:
        if entry.iteration != final or entry.decision is None or want is None:
            continue
        if entry.decision == want or (want == "abstain" and entry.decision == "refine"):
            continue
        entry.decision = want
        if entry.grade is not None:
            entry.grade = dataclasses.replace(entry.grade, reasoning=f"{entry.grade.reasoning} The reader: {verdict}.")


def _extract(query: str, contexts: list[GradingContext], language: str, embed: Embed | None,
             passage_similarity: PassageSimilarity | None = None) -> Answer:
    names = question_names(query) if language == "en" else ()
    prior: dict[int, float] = {}
    if passage_similarity is not None:
        try:
            prior = passage_similarity(query, contexts)
        except Exception as exc:  # noqa: BLE001 - embedding the sentences still works
            log.warning("stored passage vectors unavailable, embedding sentences: %s", exc)
    if prior:
        return extractive_answer(query, contexts, language=language, context_similarity=prior, names=names,
                                 value_check=states_value)
    try:
        return extractive_answer(query, contexts, language=language, embed=embed, names=names,
                                 value_check=states_value)
    except Exception as exc:  # noqa: BLE001 - without the embedder, term overlap still works
        log.warning("extractive synthesis with embeddings failed, using term overlap only: %s", exc)
        return extractive_answer(query, contexts, language=language, embed=None, names=names,
                                 value_check=states_value)
