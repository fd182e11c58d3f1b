"""The transformer stage: turns a question into the query each iteration retrieves with.

On ``QuerySubmitted`` it asks the language model to rewrite the question
(expanding abbreviations, adding month/year to temporal questions) and to
decompose it into at most ``max_sub_queries`` sub-queries when the question
warrants it; that is iteration 0. On ``QueryGraded`` with decision
``"refine"`` it writes iteration n+1 from the original question, the previous
query and the grader's feedback. Every other decision belongs to the
synthesizer and is ignored here (the Pub/Sub emulator does not apply
subscription filters, so the check must be in code).

The model is optional at every step: a failed, empty or date-only rewrite falls
back to the original question, and a refinement without a model appends the
grade's missing aspects to it, so the loop always moves on.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from shared.contract.deps import Deps
from shared.contract.filters import FilterError, Filters
from shared.contract.messages import Message, QueryGraded, QuerySubmitted, QueryTransformed
from shared.contract.ports import ConversationTurn, RefineRequest, Transformation
from shared.contract.text import in_quotes, query_apart, searched_as
from shared.query.conversation import read_history
from shared.query.model_health import note_fallback
from shared.query.plain_answer import plain_answer_text
from shared.query.reading.extractive import TEMPORAL_WORDS, content_terms, stem, term_set
from shared.query.reading.followup import (
    TRAILING_BRACKET,
    UNMARKED,
    answer_paragraphs,
    as_shown,
    leans_on,
    same_words,
    standalone_question,
)
from shared.query.reading.followup_languages import NEW_TOPIC
from shared.query.record import QueryRecord
from shared.query.runner import Change, ask_model, handle_query_message
from shared.query.temporal import TimeReading, read_time
from shared.query.vectors import query_vectors
from shared.runtime.query_steps import registered_step

log = logging.getLogger("ragbus.transformer")

MIN_QUERY_CHARS = 3  # the reference transformer's floor for a usable rewrite


# ----------------------------------------------------------- plain logic


def question_time_filter(
    record: QueryRecord, now: datetime, proposed: Transformation | None = None
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The query's filters with the date range its question's time words name, and the reading for
    the record; None when the question names no time or the caller set a date range already (theirs wins).

    The words are read by rule (shared.query.temporal); a question they do not cover takes the range
    a model provider's rewrite gave (``published_since``/``published_until``), widened only to any date.
    """
    caller = record.search_filters() or Filters()
    if caller.has_dates:
        return None
    reading = read_time(record.question, now)
    if reading is None and proposed is not None and (proposed.published_since or proposed.published_until):
        try:
            model = Filters.parse(now=now, since=proposed.published_since, until=proposed.published_until)
        except FilterError:
            model = None  # an empty or inverted range: no filter rather than a wrong one
        if model is not None:
            reading = TimeReading("the model's reading", since=model.since, until=model.until)
    if reading is None:
        return None
    filters = caller.replace(since=reading.since, until=reading.until)
    return filters.to_dict(), time_filter_doc(reading)


def time_filter_doc(reading: TimeReading, widened: list[str] | None = None) -> dict[str, Any]:
    return {
        "phrase": reading.phrase,
        "since": reading.since.isoformat() if reading.since else None,
        "until": reading.until.isoformat() if reading.until else None,
        "newest": reading.newest,
        "window_days": reading.window_days,
        "widened": list(widened or []),
    }


def describe_range(doc: dict[str, Any]) -> str:
    since, until = doc.get("since"), doc.get("until")
    if since and until:
        return f"from {since[:10]} to before {until[:10]}"
    if since:
        return f"since {since[:10]}"
    return f"before {until[:10]}" if until else "at any time"


def without_month_year(rewritten: str, original: str, now: datetime) -> str:
    """The rewrite without the month and year a provider added for a temporal question: with a date
    filter they are no longer a proxy for the date, only words that match posts mentioning them."""
    month_year = now.strftime("%B %Y")
    if month_year.lower() in original.lower():
        return rewritten
    kept = re.sub(rf"\s*\b{re.escape(month_year)}\b", "", rewritten, flags=re.IGNORECASE).strip()
    return kept or rewritten


def is_date_only(query: str) -> bool:
    """True when ``query`` names a time and nothing else to search for."""
    terms = content_terms(query, keep_temporal=False)
    return not [t for t in terms if not t.isdigit()]


def shown_query(query: str) -> str:
    """``query`` as it is searched and shown (the page, the CLI, REST, the events): the markup a question
    carries (``<b>``, an image, a link) made plain as an answer's is
    (:func:`~shared.query.plain_answer.plain_answer_text`), whitespace collapsed; a query of markup only
    stays as it was, for there is nothing else to search for, and so does one the sanitiser only set in code spans
    or spaced ("a Vcs-<type> field": a placeholder is text, searched as typed)."""
    plain, typed = " ".join(plain_answer_text(query).split()), " ".join(query.split())
    added_only = re.sub(r"[`\s]", "", plain) == re.sub(r"[`\s]", "", typed)
    return plain if len(plain) >= MIN_QUERY_CHARS and not added_only else typed


def shown_search(record: QueryRecord, query: str) -> tuple[str, str]:
    """The question and ``query`` as a person is shown them (the record's ``current_query``, the transformer's events):
    for a follow-up no well-formed rewrite was found for, the question the loop reads with the earlier one in brackets
    (``follows.question``) is shown as typed, as ``standalone_question`` shows it, and so is that bracket in a query
    made from it ("Why (which option does X use)? term" is shown "Why? term"); any other query is shown as it is.
    Display only: the loop searches, grades and answers ``query`` and ``record.question`` themselves."""
    read, shown = record.question, record.standalone_question
    if not shown or " ".join(read.split()) == " ".join(shown.split()):
        return read, query
    asked, added = query_apart(read, query)
    lean, mine = TRAILING_BRACKET.search(read), TRAILING_BRACKET.search(asked)
    if asked == " ".join(read.split()):
        asked = shown
    elif lean and mine and same_words(lean.group(), mine.group()):
        asked = asked[: mine.start()] + mine.group().rpartition(")")[2].strip()  # a rewrite keeping the brackets
    else:
        return read, query  # a rewording: no bracket to hide
    return shown, f"{asked} {added}" if added else asked


def settle_transformation(
    original: str, proposed: Transformation | None, *, max_sub_queries: int, max_chars: int
) -> tuple[str, list[str], str]:
    """The query and sub-queries to use, and where they came from (``model`` / ``fallback: why``)."""
    if proposed is None:
        return shown_query(original), [], "fallback: no model reply"
    rewritten = shown_query(proposed.rewritten)[:max_chars]
    source = "model"
    if len(rewritten) < MIN_QUERY_CHARS:
        rewritten, source = shown_query(original), "fallback: empty or too short rewrite"
    elif is_date_only(rewritten) and not is_date_only(original):
        # A date-only query matches metadata headers, not articles.
        rewritten, source = shown_query(original), "fallback: date-only rewrite"
    return rewritten, clean_sub_queries(proposed.sub_queries, rewritten, max_sub_queries), source


def clean_sub_queries(sub_queries: list[str], rewritten: str, limit: int) -> list[str]:
    """Distinct, non-trivial sub-queries, none equal to the rewritten query, at most ``limit``."""
    seen = {rewritten.strip().lower()}
    out: list[str] = []
    for sub in sub_queries:
        text = shown_query(str(sub))
        key = text.lower()
        if len(text) < MIN_QUERY_CHARS or key in seen or is_date_only(text):
            continue
        seen.add(key)
        out.append(text)
        if len(out) >= limit:
            break
    return out


def refinement_without_model(request: RefineRequest) -> str:
    """The original query plus the aspects the grader found missing (the reference fallback)."""
    present = term_set(request.original_query)
    extra: list[str] = []
    for aspect in request.missing_aspects:
        for term in content_terms(aspect):
            if stem(term) not in present and term.lower() not in TEMPORAL_WORDS:
                present.add(stem(term))
                extra.append(term)
    if not extra:
        # Nothing named as missing: borrow the previous query's extra terms instead.
        for term in content_terms(request.previous_query):
            if stem(term) not in present:
                present.add(stem(term))
                extra.append(term)
    return " ".join([request.original_query.strip(), *extra[:8]]).strip()


def transformed(record: QueryRecord, iteration: int) -> QueryTransformed | None:
    """The message that sends ``iteration``'s recorded query to the retriever."""
    entry = record.entry(iteration)
    if entry is None or not entry.query:
        return None
    return QueryTransformed(query_id=record.id, iteration=iteration)


@dataclass(frozen=True)
class FollowUp:
    """The question iteration 0 works on, and how it came to stand on its own."""

    question: str  # what the loop reads: a follow-up no well-formed rewrite was found for, with the earlier question after it
    source: str | None = None  # None: no earlier turn to read; "model"; "fallback: offline rule (...)"
    turns: int = 0  # earlier turns read
    calls: int = 0  # model calls spent
    note: str | None = None  # what could not be read (a conversation or a turn no longer stored)
    follows: dict[str, str] | None = None  # the earlier turn's document the question leans on, and why it leans
    leaning: str | None = None  # the same, and how the document was found, in words

    shown: str | None = None  # the standalone question shown and recorded (None: ``question``; else the question as typed)

    @property
    def fallback(self) -> bool:
        return bool(self.source and self.source.startswith("fallback"))

    @property
    def standalone(self) -> str:
        return self.shown or self.question

    def recorded_follows(self) -> dict[str, str] | None:
        """``follows`` as the record keeps it: with the question the loop reads when that is not the one shown."""
        return {**(self.follows or {}), "question": self.question} if self.shown else self.follows

    def detail(self) -> str:
        if self.source is None:
            return f"standalone: as typed ({self.note})" if self.note else ""
        text = f"standalone: {in_quotes(self.standalone)} (from {self.turns} earlier turn(s); {self.source})"
        read = "read with the earlier question after it: no well-formed rewrite found" if self.shown else None
        return text + "".join(f"; {part}" for part in (read, self.leaning, self.note) if part)


def stand_alone(record: QueryRecord, ports: Deps) -> FollowUp:
    """The typed question made to stand on its own before anything else (issue 24): with earlier turns
    (its conversation's, or the history sent with it) one model call rewrites it, and the offline rule
    (shared.query.reading.followup) does when the reply is unusable or the budget is spent; with none,
    the question as typed. The earlier turns are read from state, as every runtime stores them."""
    typed = record.original_query
    if record.standalone_question:
        return FollowUp(record.standalone_question)  # a first turn stands alone as typed
    settings = ports.settings
    history = read_history(ports.state, record, max_turns=settings.conversation_max_turns,
                           max_chars=settings.conversation_max_chars)
    if not history.turns:
        return FollowUp(typed, note=history.note)
    today = ports.clock.now().date()
    reply = ask_model(ports, record, TRANSFORM, lambda: ports.llm.standalone(typed, history.turns, today=today),
                      instead="making it stand alone by the offline rule")
    text = " ".join((reply.value or "").split())[: settings.max_query_chars]
    if len(text) >= MIN_QUERY_CHARS:
        follow = FollowUp(text, "model", len(history.turns), reply.calls, history.note, shown=_shown(typed, text, history.turns[-1].question))
        return follow_earlier_document(follow, typed, history.turns, ports)
    why = ("model-call budget spent" if reply.spent else
           f"model call failed ({reply.error})" if reply.error else "empty standalone reply")
    rule = standalone_question(typed, history.turns)
    follow = FollowUp(rule.question, f"fallback: offline rule ({rule.rule}); {why}", len(history.turns), reply.calls,
                      history.note, shown=_shown(typed, rule.question, history.turns[-1].question))
    return follow_earlier_document(follow, typed, history.turns, ports)


def _shown(typed: str, question: str, earlier: str) -> str | None:
    """The question shown for a standalone one that is not well-formed (:func:`as_shown`); None: the same."""
    shown = as_shown(" ".join(typed.split()), question, earlier)
    return shown if shown != question else None


_CITATION_MARK = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")


def earlier_document(turn: ConversationTurn, ports: Deps) -> tuple[str, str] | None:
    """The document the earlier turn was answered from, and what found it: the best match of its answer's
    words (sentences quoted word for word from that document, so BM25 alone finds the chunk they came from,
    with no embedding: embedding a 500-character answer cost 5-8 query embeddings, bench/followup_latency.py),
    else, when it gave none or its words match nothing, the best hybrid match of its question. The same on
    every surface: a client sends the answer it was given, not the documents it cited. None when nothing
    matches."""
    answer = "\n\n".join(answer_paragraphs(turn.answer))
    answer = " ".join(_CITATION_MARK.sub(" ", answer).split())[: ports.settings.max_query_chars]
    if answer:
        hits = ports.index.search(answer, np.zeros(ports.embedder.dimension, dtype=np.float32), 1, mode="bm25")
        if hits:
            return hits[0].chunk.document_id, "its answer"
    text = " ".join(turn.question.split())[: ports.settings.max_query_chars]
    if not text:
        return None
    hits = ports.index.search(text, np.asarray(query_vectors(ports.embedder, [text])[0]), 1, mode="hybrid")
    return (hits[0].chunk.document_id, "its question") if hits else None


def follow_earlier_document(follow: FollowUp, typed: str, turns: Sequence[ConversationTurn], ports: Deps) -> FollowUp:
    """Every question after an earlier turn names that turn's document, for its retrieval to weigh. One
    that leans on the earlier turn (:func:`shared.query.reading.followup.leans_on`: the rule rewrote it,
    it opens with "and", or a word in it points back) is read from that document ("Which calling
    convention makes that possible?"); one whose form does not lean ("Which systems were affected?"
    after "Which gzip release fixed CVE-2010-0001?") is ``unmarked``: whether it continues the earlier
    turn is the retriever's to tell by evidence, not by more rules on its wording. A question that
    announces a new topic ("Something else: ...") names none."""
    if NEW_TOPIC.match(" ".join(typed.split())):
        return follow
    why = leans_on(typed, turns) or UNMARKED
    found = earlier_document(turns[-1], ports)
    if found is None:
        return follow
    document, found_by = found
    how = "nothing in its form leans on the earlier turn: weighs" if why == UNMARKED else \
        f"leans on the earlier turn ({why}): prefers"
    return replace(follow, follows={"document_id": document, "leans": why, "earlier_question": turns[-1].question},
                   leaning=f"{how} its document {document} (found by {found_by})")


def transform(record: QueryRecord, message: QuerySubmitted, ports: Deps) -> Change:
    """Iteration 0: a follow-up made to stand alone, then rewritten and decomposed (or kept, when the model
    gives nothing usable)."""
    follow = stand_alone(record, ports)
    # What follows reads the standalone question (record.question) and the budget left after its call.
    record = replace(record, standalone_question=follow.standalone, model_calls=record.model_calls + follow.calls,
                     follows=follow.recorded_follows())
    now, settings, original = ports.clock.now(), ports.settings, record.question
    reply = ask_model(ports, record, TRANSFORM, lambda: ports.llm.transform(original, today=now.date()),
                      instead="keeping the original query")
    proposed = reply.value
    rewritten, sub_queries, source = settle_transformation(
        original, proposed, max_sub_queries=settings.max_sub_queries, max_chars=settings.max_query_chars
    )
    fallback = source != "model"
    if proposed is not None:
        why = source.removeprefix("fallback: ")
    else:
        why = "no model call: model-call budget spent" if reply.error is None else f"model call failed ({reply.error})"
    time_filter = question_time_filter(record, now, proposed) if settings.time_filter else None
    if time_filter is not None:
        rewritten = without_month_year(rewritten, original, now)

    def change(r: QueryRecord) -> None:
        r.standalone_question = follow.standalone
        r.follows = follow.recorded_follows()
        if follow.fallback:
            r.model_fallbacks += 1 if follow.calls else 0
            note_fallback(r, stage=TRANSFORM, iteration=0, reason=str(follow.source).removeprefix("fallback: "))
        if time_filter is not None and not r.time_filter:
            r.filters, r.time_filter = time_filter
        entry = r.ensure_entry(0)
        entry.query, entry.sub_queries, entry.transform_source = rewritten, sub_queries, source
        entry.added_terms = query_apart(follow.question, rewritten)[1]
        r.current_query, r.iteration = shown_search(record, rewritten)[1], 0  # as shown; entry.query is searched
        if fallback and proposed is not None:
            r.model_fallbacks += 1
        if fallback:
            note_fallback(r, stage=TRANSFORM, iteration=0, reason=why)

    annotations: dict[str, Any] = {"query": None if settings.redact_query_text else rewritten,
                                   "sub_query_count": len(sub_queries), "transform_source": source}
    if record.conversation_id:
        annotations.update(conversation_id=record.conversation_id, history_turns=follow.turns,
                           standalone_source=follow.source,
                           standalone_question=None if settings.redact_query_text else follow.standalone,
                           follows_document=(follow.follows or {}).get("document_id"))
    detail = "; ".join(p for p in (follow.detail(), f"query: {searched_as(*shown_search(record, rewritten))}") if p)
    detail += f"; {len(sub_queries)} sub-queries" if sub_queries else ""
    if fallback:
        detail += f" ({source})"
    if time_filter is not None:
        detail += f"; time: {in_quotes(time_filter[1]['phrase'])} read as published {describe_range(time_filter[1])}"
        annotations["time_filter"] = time_filter[1]["phrase"]
    return Change(change, "transformed", detail, model_calls=follow.calls + reply.calls, annotations=annotations)


def refine(record: QueryRecord, message: QueryGraded, ports: Deps) -> Change | None:
    """Iteration n+1 from the grade of iteration n (None when n was not sent to refinement)."""
    previous, settings = message.iteration, ports.settings
    iteration = previous + 1
    entry = record.entry(previous)
    if entry is None or entry.decision != "refine" or iteration > record.max_iterations:
        log.info("query %s: iteration %d was not sent to refinement; ignoring", record.id, previous)
        return None
    request = RefineRequest(
        original_query=record.question,
        previous_query=entry.query or record.question,
        reasoning=entry.grade.reasoning if entry.grade else "",
        missing_aspects=list(entry.grade.missing_aspects) if entry.grade else [],
        earlier_queries=record.queries_tried(),
    )
    today = ports.clock.now().date()
    reply = ask_model(ports, record, TRANSFORM, lambda: ports.llm.refine(request, today=today),
                      instead="appending the missing aspects instead")
    if reply.spent:
        source = "fallback: model-call budget spent"
    else:
        source = "model" if reply.error is None else "fallback: model call failed"
    refined, source = settle_refinement(request, reply.value, source, max_chars=settings.max_query_chars)
    # The question's decomposition does not change between iterations; keep it.
    sub_queries = clean_sub_queries(list(entry.sub_queries), refined, settings.max_sub_queries)
    model_fallback = reply.calls == 1 and source != "model"
    searched = searched_before(record, refined, sub_queries)
    if searched is not None:
        return nothing_new(record, previous, refined, searched, source, reply.calls, model_fallback)

    def change(r: QueryRecord) -> None:
        new = r.ensure_entry(iteration)
        new.query, new.sub_queries, new.transform_source, new.refined_from = refined, sub_queries, source, previous
        new.added_terms = query_apart(record.question, refined)[1]
        r.current_query, r.iteration = shown_search(record, refined)[1], iteration  # as shown; new.query is searched
        if model_fallback:
            r.model_fallbacks += 1
        if source != "model":
            why = source.removeprefix("fallback: ") + (f" ({reply.error})" if reply.error else "")
            note_fallback(r, stage=TRANSFORM, iteration=iteration, reason=why)

    detail = f"refined query: {searched_as(*shown_search(record, refined))}" + ("" if source == "model" else f" ({source})")
    return Change(change, "refined", detail, model_calls=reply.calls, annotations={
        "query": None if settings.redact_query_text else refined, "sub_query_count": len(sub_queries),
        "transform_source": source, "refined_from": previous})


def searched_before(record: QueryRecord, query: str, sub_queries: Sequence[str]) -> int | None:
    """The earlier iteration that searched ``query`` with ``sub_queries`` already, or None: the same content words
    (stems, whatever their order, case, spacing and stopwords: "BM25 (Best Matching 25)" is "BM25 Best Matching
    25") search again what that iteration did."""
    def key(text: str) -> frozenset[str]:
        return frozenset(stem(t) for t in content_terms(text)) or frozenset(term_set(text))

    wanted = (key(query), sorted(sorted(key(s)) for s in sub_queries))
    return next((e.iteration for e in record.iterations
                 if e.query and (key(e.query), sorted(sorted(key(s)) for s in e.sub_queries)) == wanted), None)


def nothing_new(record: QueryRecord, previous: int, refined: str, searched: int, source: str, calls: int,
                model_fallback: bool) -> Change:
    """The loop's end when a refinement brings nothing new: the refined query (and its sub-queries) is one an
    earlier iteration searched, so no iteration is added and nothing is searched again. The iteration sent to
    refinement ends the loop as a refinement that found nothing new at the grader does (``exhausted``), and the
    synthesizer answers from the best-graded iteration: the grader's bounded loop, ended one search sooner."""
    why = (f"the refinement {in_quotes(shown_search(record, refined)[1])} is the query iteration {searched + 1} searched: "
           "refining cannot help")

    def change(r: QueryRecord) -> None:
        entry = r.ensure_entry(previous)
        entry.decision = "exhausted"
        if model_fallback:
            r.model_fallbacks += 1

    best = record.best_graded_iteration()
    detail = f"refined query: nothing new ({why}) -> exhausted; answering from iteration " \
             f"{(previous if best is None else best) + 1}" + ("" if source == "model" else f" ({source})")
    return Change(change, "refined", detail, model_calls=calls, annotations={
        "transform_source": source, "refined_from": previous, "decision": "exhausted", "repeats_iteration": searched})


def refined_next(record: QueryRecord, iteration: int) -> Message | None:
    """What the refinement of ``iteration - 1`` sends on: the new iteration's query to the retriever, or, when
    the refinement brought nothing new (:func:`nothing_new`), the ended iteration to the synthesizer. A new
    iteration is one with a query: an entry without one (a timing written by a writer that created entries to time
    them) was never searched, and sent on it left the query running until its deadline."""
    new = record.entry(iteration)
    if new is not None and new.query:
        return transformed(record, iteration)
    ended = record.entry(iteration - 1)
    if ended is None or ended.decision != "exhausted":
        return None
    return QueryGraded(query_id=record.id, iteration=ended.iteration, decision=ended.decision)


def settle_refinement(request: RefineRequest, proposed: str | None, source: str, *, max_chars: int) -> tuple[str, str]:
    """The refined query to use and where it came from: the model's, unless it is empty, date-only or
    the previous query again (which would retrieve the same contexts): then the missing aspects."""
    refined = shown_query(proposed or "")[:max_chars]
    if len(refined) < MIN_QUERY_CHARS or (is_date_only(refined) and not is_date_only(request.original_query)):
        if source == "model":
            source = "fallback: empty or date-only refinement"
        refined = shown_query(refinement_without_model(request))
    if refined.lower() == str(request.previous_query).strip().lower():
        fallback_query = shown_query(refinement_without_model(request))
        if fallback_query.lower() != refined.lower():
            refined, source = fallback_query, f"{source}; unchanged refinement replaced by missing aspects"
    return refined, source


def _refines(message: QueryGraded) -> bool:
    return message.decision == "refine"  # accept / abstain / exhausted are the synthesizer's


def _iteration_after(message: QueryGraded) -> int:
    return message.iteration + 1


STEPS = (
    registered_step(__name__, consumes=QuerySubmitted, run=transform, publishes=transformed,
                    iteration=lambda message: 0),
    registered_step(__name__, consumes=QueryGraded, run=refine, publishes=refined_next,
                    accepts=_refines, iteration=_iteration_after, after="grader"),
)
TRANSFORM = STEPS[0].stage


def handle(message: Message, deps: Deps) -> None:
    """Rewrite a submitted question (iteration 0) or refine a graded one sent back for refinement."""
    handle_query_message(STEPS, message, deps)
