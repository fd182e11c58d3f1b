"""The synthesizer stage: writes the answer once the grader has stopped the loop.

It answers from the best-graded iteration's contexts only (those still indexed: a document deleted
since it was retrieved is neither read nor cited, :func:`deleted_contexts`), in the question's language where the
provider can: ``answered``, ``answered_with_caveat`` (opening with a caveat) or ``not_answerable``
(the grader abstained, nothing was retrieved, or nothing supports an answer: nothing invented), as
:func:`answer_outcome` decides. Citations are numbered in order of first use, one number per source
(document id or URL), each resolving to title, URL, document id and chunk ids. A model call that
fails falls back to an extractive answer, so the query always ends.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.contract.deps import Deps
from shared.contract.messages import AnswerReady, Message, QueryGraded
from shared.contract.ports import (
    Answer,
    AnswerSentence,
    Embedder,
    Index,
    NumberedContext,
    StoredVectors,
)
from shared.formats.passages import first_page, page_link
from shared.observability import metrics
from shared.query.grading import failed_thresholds, strip_model_directives
from shared.query.model_health import note_fallback
from shared.query.plain_answer import plain_answer_text
from shared.query.prompts import CITATION_MARKER, cited_numbers
from shared.query.reading.answer_types import reading_arguments
from shared.query.reading.caveat import caveat_note
from shared.query.reading.extractive import extractive_answer
from shared.query.reading.language import detect_language, phrase
from shared.query.record import Citation, Context, Iteration, QueryRecord
from shared.query.runner import Change, ask_model, handle_query_message
from shared.query.vectors import query_vector
from shared.runtime.query_steps import registered_step

log = logging.getLogger("ragbus.synthesizer")

FINAL_DECISIONS = ("accept", "abstain", "exhausted")

Embed = Callable[[Sequence[str]], np.ndarray]
PassageSimilarity = Callable[[str, Sequence[NumberedContext]], dict[int, float]]


def stored_passage_similarity(
    query: str, contexts: Sequence[NumberedContext], *, embedder: Embedder, index: Index
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
    citation list never disagree; a sentence given twice is said once, with the citations of both.
    Each sentence's text is made plain
    (:func:`~shared.query.plain_answer.plain_answer_text`): no markup, image or link other
    than to a cited source is stored, whichever provider wrote it.
    """
    sentences = list(answer.sentences)
    if not sentences and answer.text.strip():
        sentences = [AnswerSentence(text=answer.text, citations=[])]
    sources = _SourceNumbers(contexts)
    cites = [[*s.citations, *cited_numbers(s.text)] for s in sentences]
    # the one place an answer's text is made plain before it is stored: every surface shows this
    linkable = {contexts[n - 1].get("url") or "" for cited in cites for n in cited if 1 <= n <= len(contexts)}
    out_sentences: list[dict[str, Any]] = []
    said: dict[str, dict[str, Any]] = {}  # a sentence's text -> where the answer says it
    for sentence, cited in zip(sentences, cites, strict=True):
        text = plain_answer_text(CITATION_MARKER.sub("", sentence.text), linkable).strip()
        if not text:
            continue  # nothing but markup or markers: its sources are not cited by anything shown
        numbers: list[int] = []
        for n in cited:
            if 1 <= n <= len(contexts):
                citation_id = sources.cite(n)
                if citation_id not in numbers:
                    numbers.append(citation_id)
        if text in said:  # quoted again (from an overlapping chunk, say): said once, with both citations
            said[text]["citations"] = sorted({*said[text]["citations"], *numbers})
            continue
        said[text] = {"text": text, "citations": sorted(numbers)}
        out_sentences.append(said[text])
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
            position = cited_position([self.contexts[n - 1].get("position", "") for n in numbers])
            citation: Citation = {
                "id": citation_id,
                "title": ctx.get("title", ""),
                # a PDF's link opens at the cited page
                "url": page_link(ctx.get("url", ""), position),
                "document_id": ctx.get("document_id", ""),
                "chunk_id": ctx.get("chunk_id", ""),
                "chunk_ids": list(dict.fromkeys(c for c in chunk_ids if c)),
            }
            if position:
                citation["position"] = position
            out.append(citation)
        return out


def cited_position(labels: list[str]) -> str:
    """One citation's position from its chunks' labels: the pages they start on ("p. 12" and
    "p. 15" -> "pp. 12, 15"), or, for slides and rows, the labels side by side."""
    labels = [label for label in dict.fromkeys(labels) if label]
    if len(labels) <= 1:
        return labels[0] if labels else ""
    pages = [first_page(label) for label in labels]
    if all(p is not None for p in pages):
        ordered = sorted(set(pages))
        return f"p. {ordered[0]}" if len(ordered) == 1 else "pp. " + ", ".join(str(p) for p in ordered)
    return "; ".join(labels)


@dataclass(frozen=True)
class Drafted:
    """The answer drafted from the best iteration, before its citations are numbered."""

    outcome: str
    answer: Answer | None = None
    provider: str = "none"
    fallback_why: str = ""  # why the answer was made without the model ("" when the model answered)
    calls: int = 0


def draft_answer(record: QueryRecord, final: Iteration, best: Iteration, language: str, ports: Deps) -> Drafted:
    """The model's answer from ``best``'s contexts, or an extractive one when the model cannot be asked
    or fails; ``not_answerable`` without asking when the grader abstained or nothing answerable was found."""
    contexts, best_grade = list(best.contexts), best.grade
    if final.decision == "abstain" or not contexts or best_grade is None or not best_grade.answerable:
        return Drafted("not_answerable")
    numbered = [
        NumberedContext(number=n, source=c.get("url") or c.get("title") or "", text=c.get("text") or "",
                        chunk_id=c.get("chunk_id"), heading=c.get("heading") or "")
        for n, c in enumerate(contexts, start=1)
    ]
    question = record.question  # a follow-up is answered as it stands on its own
    reply = ask_model(ports, record, SYNTHESIZE, lambda: ports.llm.synthesize(question, numbered, language=language),
                      instead="answering extractively")
    answer, provider, why = reply.value, getattr(ports.llm, "provider", "model"), ""
    if answer is None:
        why = ("no model call: model-call budget spent" if reply.spent
               else f"model call failed ({reply.error})") + "; answered extractively"
        answer, provider = _extract(question, numbered, language, *_vector_ports(ports)), "extractive-fallback"
    outcome = answer_outcome(answer, passes=not failed_thresholds(best_grade, ports.settings.thresholds))
    return Drafted(outcome, answer, provider, why, reply.calls)


def _vector_ports(ports: Deps) -> tuple[Embed | None, PassageSimilarity | None]:
    """How an extractive answer may rank sentences with this runtime's embedder and index."""
    if not ports.provided("embedder"):
        return None, None

    def embed(texts: Sequence[str]) -> np.ndarray:
        return ports.embedder.embed(texts)

    def passage_similarity(query: str, contexts: Sequence[NumberedContext]) -> dict[int, float]:
        return stored_passage_similarity(query, contexts, embedder=ports.embedder, index=ports.index)

    return embed, passage_similarity if ports.provided("index") else None


def synthesize(record: QueryRecord, message: QueryGraded, ports: Deps) -> Change | None:
    """Write the answer from the best iteration and end the query (None when the iteration was refined).

    Without a model answer the local reader answers (:func:`_extract`), its verdict deciding the outcome."""
    iteration = message.iteration
    final = record.entry(iteration)
    if final is None or final.decision not in FINAL_DECISIONS:
        log.info("query %s: iteration %d was sent to refinement; not answering", record.id, iteration)
        return None
    language = detect_language(record.original_query)  # the language the question was typed in
    best = record.entry(record.best_iteration) or final
    gone = deleted_contexts(record, ports)
    best = dataclasses.replace(best, contexts=[c for c in best.contexts if c.get("chunk_id") not in gone])
    drafted = draft_answer(record, final, best, language, ports)
    outcome, answer = drafted.outcome, drafted.answer
    if outcome == "not_answerable" or answer is None:
        text, sentences, citations = abstention(record, language), [], []
    else:
        text, sentences, citations = number_citations(answer, list(best.contexts))
        if not text:
            outcome, text, sentences, citations = "not_answerable", abstention(record, language), [], []
        elif outcome == "answered_with_caveat":
            text = caveat(record, drafted, language) + "\n\n" + text
    verdict = reader_verdict(answer, outcome) if answer is not None else ""

    def change(r: QueryRecord) -> None:
        for entry in r.iterations if gone else ():  # nor shown beside the answer: the page's sources, the record, search
            entry.contexts = [c for c in entry.contexts if c.get("chunk_id") not in gone]
        if verdict:
            _align_decision(r, iteration, outcome, verdict)
        r.status, r.outcome, r.answer, r.answer_sentences, r.citations = "answered", outcome, text, sentences, citations
        r.language, r.answer_provider, r.answered_from_iteration = language, drafted.provider, best.iteration
        if drafted.provider == "extractive-fallback":
            note_fallback(r, stage=SYNTHESIZE, iteration=iteration, reason=drafted.fallback_why)

    # iterations are numbered from 1 wherever a person reads them (page, CLI, trace)
    n = len(citations)
    detail = f"{outcome} from iteration {best.iteration + 1} with {n} citation{'' if n == 1 else 's'}"
    return Change(change, "answered", detail, model_calls=drafted.calls, annotations={
        "outcome": outcome, "citation_count": n, "answered_from_iteration": best.iteration,
        "answer_provider": drafted.provider},
        recorded=lambda stored: metrics.query_ended(outcome, len(stored.iterations)))


def deleted_contexts(record: QueryRecord, ports: Deps) -> set[str]:
    """The chunk ids of the record's contexts (every iteration's) that the index no longer holds: a document deleted
    after its chunks were retrieved is neither read, cited nor shown (deletes win, on every surface: each shows the
    answer and the record written here).

    The index is the one the retriever searched, so "deleted" means what it means there: the delete
    carried out (its chunks gone, which is when ``ragbus ingest --delete`` returns). A chunk a changed
    revision replaced meanwhile is gone too (chunk ids name the content): its text is no longer the document's.
    One batched lookup (:meth:`Index.get_chunks`) per answer; a context with no chunk id, or a runtime without
    an index, is kept. With nothing left, the answer is refused as when nothing was found (:func:`draft_answer`)."""
    ids = list(dict.fromkeys(c["chunk_id"] for entry in record.iterations for c in entry.contexts if c.get("chunk_id")))
    if not ids or not ports.provided("index"):
        return set()
    gone = set(ids) - {chunk.chunk_id for chunk in ports.index.get_chunks(ids)}
    if gone:
        documents = {c.get("document_id") or c["chunk_id"] for entry in record.iterations for c in entry.contexts
                     if c.get("chunk_id") in gone}
        log.info("query %s: %d context(s) of %s deleted since retrieval; not read, cited or shown", record.id,
                 len(gone), ", ".join(sorted(documents)))
    return gone


def caveat(record: QueryRecord, drafted: Drafted, language: str) -> str:
    """The note a caveat opens with: what the reader found and did not (:func:`caveat_note`), or, when the model
    failed and the sources were quoted instead, that; plain text like the answer (it names the question's words)."""
    if drafted.fallback_why:
        return phrase("caveat_no_model", language)
    return plain_answer_text(caveat_note(record.question, drafted.answer, language), ())


def abstention(record: QueryRecord, language: str) -> str:
    """The refusal: when the query's filters let no document through (no iteration retrieved anything),
    it names them, as `ragbus search` does, rather than "could not find anything"."""
    filters = record.search_filters()
    if filters is not None and not any(entry.contexts for entry in record.iterations):
        # the filters are the caller's text: plain like any answer
        return plain_answer_text(phrase("abstain_filtered", language).format(filters=filters.describe()), ())
    return phrase("abstain", language)


def answered(record: QueryRecord, iteration: int) -> AnswerReady:
    """The message that tells the gateway and observers the query has its answer."""
    return AnswerReady(query_id=record.id, outcome=record.outcome or "")


def _has_answer(record: QueryRecord, iteration: int, stage: str) -> bool:
    # The answer ends the query, so a redelivery finds it ended: its AnswerReady may have been lost.
    return record.status == "answered" and record.stage_done_in_any_iteration(stage)


def _final(message: QueryGraded) -> bool:
    return message.decision in FINAL_DECISIONS  # the transformer refines


STEP = registered_step(__name__, run=synthesize, publishes=answered, accepts=_final, done=_has_answer, after="grader")
SYNTHESIZE = STEP.stage


def handle(message: Message, deps: Deps) -> None:
    """Answer a query whose final iteration the grader has decided."""
    handle_query_message((STEP,), message, deps)


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
    """Why the reader's verdict decided ``outcome`` (empty when the answer carries none). An answer that ends
    ``not_answerable`` quoted nothing, verdict or not: the decision shown must not stay ``accept`` beside it."""
    if answer.states_fact is None and outcome != "not_answerable":
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


def _extract(query: str, contexts: list[NumberedContext], language: str, embed: Embed | None,
             passage_similarity: PassageSimilarity | None = None) -> Answer:
    """The local reader's answer (:func:`extractive_answer`): with this runtime's embedder, passages ranked by the vectors
    stored at indexing where the index keeps them, else embedded; without it, or when embedding fails, by terms alone."""
    query, reading = reading_arguments(query)  # read as the local model reads it
    prior: dict[int, float] | None = None
    if passage_similarity is not None:
        try:
            prior = passage_similarity(query, contexts) or None
        except Exception as exc:  # noqa: BLE001 - embedding the passages still works
            log.warning("stored passage vectors unavailable, embedding passages: %s", exc)
    read = functools.partial(extractive_answer, query, contexts, language=language, context_similarity=prior, **reading)
    try:
        return read(embed=embed)
    except Exception as exc:  # noqa: BLE001 - without the embedder, the terms still read (the stored closeness too)
        log.warning("extractive synthesis with embeddings failed, reading by terms only: %s", exc)
        return read(embed=None)
