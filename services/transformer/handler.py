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
from datetime import datetime
from typing import Any

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.filters import FilterError, Filters
from shared.contract.messages import Message, QueryGraded, QuerySubmitted, QueryTransformed
from shared.contract.ports import (
    Clock,
    LanguageModel,
    Publisher,
    RefineRequest,
    StateStore,
    Transformation,
)
from shared.observability.tracing import annotate
from shared.query.model_health import model_answered, model_unusable, note_fallback
from shared.query.reading.extractive import TEMPORAL_WORDS, content_terms, stem, term_set
from shared.query.record import QueryRecord
from shared.query.state import TRANSFORM, apply_stage, live_record
from shared.query.temporal import TimeReading, read_time

log = logging.getLogger("ragbus.transformer")

MIN_QUERY_CHARS = 3  # the reference transformer's floor for a usable rewrite


def handle(message: Message, deps: Deps) -> None:
    """Dispatch a delivery to :func:`transform_query` or :func:`refine_query`."""
    if isinstance(message, QuerySubmitted):
        transform_query(
            message.query_id,
            state=deps.state,
            publisher=deps.publisher,
            clock=deps.clock,
            llm=deps.llm,
            settings=deps.settings,
        )
    elif isinstance(message, QueryGraded):
        if message.decision != "refine":
            return  # accept / abstain / exhausted are the synthesizer's
        refine_query(
            message,
            state=deps.state,
            publisher=deps.publisher,
            clock=deps.clock,
            llm=deps.llm,
            settings=deps.settings,
        )
    else:
        log.warning("transformer ignores %s", type(message).__name__)


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
    reading = read_time(record.original_query, now)
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


def settle_transformation(
    original: str, proposed: Transformation | None, *, max_sub_queries: int, max_chars: int
) -> tuple[str, list[str], str]:
    """The query and sub-queries to use, and where they came from (``model`` / ``fallback: why``)."""
    if proposed is None:
        return original, [], "fallback: no model reply"
    rewritten = " ".join(proposed.rewritten.split())[:max_chars]
    source = "model"
    if len(rewritten) < MIN_QUERY_CHARS:
        rewritten, source = original, "fallback: empty or too short rewrite"
    elif is_date_only(rewritten) and not is_date_only(original):
        # A date-only query matches metadata headers, not articles.
        rewritten, source = original, "fallback: date-only rewrite"
    return rewritten, clean_sub_queries(proposed.sub_queries, rewritten, max_sub_queries), source


def clean_sub_queries(sub_queries: list[str], rewritten: str, limit: int) -> list[str]:
    """Distinct, non-trivial sub-queries, none equal to the rewritten query, at most ``limit``."""
    seen = {rewritten.strip().lower()}
    out: list[str] = []
    for sub in sub_queries:
        text = " ".join(str(sub).split())
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


def _elapsed_ms(clock: Clock, start: float) -> float:
    return (clock.monotonic() - start) * 1000.0


def _publish_transformed(publisher: Publisher, record: QueryRecord, iteration: int) -> None:
    entry = record.entry(iteration)
    if entry is None or not entry.query:
        return
    publisher.publish(
        QueryTransformed(
            query_id=record.id,
            iteration=iteration,
            query=entry.query,
            sub_queries=list(entry.sub_queries),
        )
    )


def transform_query(
    query_id: str,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    llm: LanguageModel,
    settings: Settings,
) -> None:
    """Iteration 0: rewrite and decompose the question, record it, publish ``QueryTransformed``."""
    now = clock.now()
    record = live_record(state, query_id, now)
    if record is None:
        log.info("query %s is gone, ended or overdue; not transforming", query_id)
        return
    if record.stage_done(0, TRANSFORM):
        _publish_transformed(publisher, record, 0)  # the first publish may have been lost
        return

    original = record.original_query
    start = clock.monotonic()
    calls = 0
    proposed: Transformation | None = None
    failure = "no model call: model-call budget spent"
    if record.model_calls_left > 0:
        calls = 1
        try:
            proposed = llm.transform(original, today=now.date())
            model_answered(state, getattr(llm, "model", None))
        except ModelUnusable as exc:
            model_unusable(state, query_id=query_id, stage=TRANSFORM, error=exc, now=clock.now())
            return
        except Exception as exc:  # noqa: BLE001 - any other model failure falls back to the original
            log.warning("query %s: transform failed, keeping the original query: %s", query_id, exc)
            failure = f"model call failed ({type(exc).__name__}: {exc})"
    rewritten, sub_queries, source = settle_transformation(
        original, proposed, max_sub_queries=settings.max_sub_queries, max_chars=settings.max_query_chars
    )
    fallback = source != "model"
    why = failure if proposed is None else source.removeprefix("fallback: ")
    time_filter = question_time_filter(record, now, proposed) if settings.time_filter else None
    if time_filter is not None:
        rewritten = without_month_year(rewritten, original, now)

    def change(r: QueryRecord) -> None:
        if time_filter is not None and not r.time_filter:
            r.filters, r.time_filter = time_filter
        entry = r.ensure_entry(0)
        entry.query = rewritten
        entry.sub_queries = sub_queries
        entry.transform_source = source
        r.current_query = rewritten
        r.iteration = 0
        if fallback and proposed is not None:
            r.model_fallbacks += 1
        if fallback:
            note_fallback(r, stage=TRANSFORM, iteration=0, reason=why)

    annotate(query=None if settings.redact_query_text else rewritten, sub_query_count=len(sub_queries),
             transform_source=source)
    detail = f"query: {rewritten!r}" + (f"; {len(sub_queries)} sub-queries" if sub_queries else "")
    if fallback:
        detail += f" ({source})"
    if time_filter is not None:
        detail += f"; time: {time_filter[1]['phrase']!r} read as published {describe_range(time_filter[1])}"
        annotate(time_filter=time_filter[1]["phrase"])
    result = apply_stage(
        state, query_id, iteration=0, stage=TRANSFORM, event_type="transformed", detail=detail,
        now=clock.now(), change=change, model_calls=calls, elapsed_ms=_elapsed_ms(clock, start),
    )
    if result.publish:
        _publish_transformed(publisher, result.record, 0)


def refine_query(
    message: QueryGraded,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    llm: LanguageModel,
    settings: Settings,
) -> None:
    """Iteration n+1 from the grade of iteration n; record it, publish ``QueryTransformed``."""
    query_id, previous = message.query_id, message.iteration
    iteration = previous + 1
    now = clock.now()
    record = live_record(state, query_id, now)
    if record is None:
        log.info("query %s is gone, ended or overdue; not refining", query_id)
        return
    if record.stage_done(iteration, TRANSFORM):
        _publish_transformed(publisher, record, iteration)
        return
    entry = record.entry(previous)
    if entry is None or entry.decision is None:
        raise RetryableError(
            f"query {query_id}: iteration {previous} has no recorded grade yet; retry once the grader's write is visible"
        )
    if entry.decision != "refine" or iteration > record.max_iterations:
        log.info("query %s: iteration %d was not sent to refinement; ignoring", query_id, previous)
        return

    request = RefineRequest(
        original_query=record.original_query,
        previous_query=entry.query or record.original_query,
        reasoning=entry.grade.reasoning if entry.grade else "",
        missing_aspects=list(entry.grade.missing_aspects) if entry.grade else [],
        earlier_queries=record.queries_tried(),
    )
    start = clock.monotonic()
    calls = 0
    refined: str | None = None
    source = "model"
    failure = ""
    if record.model_calls_left > 0:
        calls = 1
        try:
            refined = llm.refine(request, today=now.date())
            model_answered(state, getattr(llm, "model", None))
        except ModelUnusable as exc:
            model_unusable(state, query_id=query_id, stage=TRANSFORM, error=exc, now=clock.now())
            return
        except Exception as exc:  # noqa: BLE001 - any other model failure falls back to the rule
            log.warning("query %s: refine failed, appending missing aspects instead: %s", query_id, exc)
            source = "fallback: model call failed"
            failure = f"{type(exc).__name__}: {exc}"
    else:
        source = "fallback: model-call budget spent"
    refined = " ".join((refined or "").split())[: settings.max_query_chars]
    if len(refined) < MIN_QUERY_CHARS or (is_date_only(refined) and not is_date_only(request.original_query)):
        if source == "model":
            source = "fallback: empty or date-only refinement"
        refined = refinement_without_model(request)
    if refined.lower() == str(request.previous_query).strip().lower():
        # The same query again would retrieve the same contexts: spend the iteration on feedback terms.
        fallback_query = refinement_without_model(request)
        if fallback_query.lower() != refined.lower():
            refined, source = fallback_query, f"{source}; unchanged refinement replaced by missing aspects"
    # The question's decomposition does not change between iterations; keep it.
    sub_queries = clean_sub_queries(list(entry.sub_queries), refined, settings.max_sub_queries)
    model_fallback = calls == 1 and source != "model"

    def change(r: QueryRecord) -> None:
        new = r.ensure_entry(iteration)
        new.query = refined
        new.sub_queries = sub_queries
        new.transform_source = source
        new.refined_from = previous
        r.current_query = refined
        r.iteration = iteration
        if model_fallback:
            r.model_fallbacks += 1
        if source != "model":
            why = source.removeprefix("fallback: ") + (f" ({failure})" if failure else "")
            note_fallback(r, stage=TRANSFORM, iteration=iteration, reason=why)

    annotate(query=None if settings.redact_query_text else refined, sub_query_count=len(sub_queries),
             transform_source=source, refined_from=previous)
    detail = f"refined query: {refined!r}" + ("" if source == "model" else f" ({source})")
    result = apply_stage(
        state, query_id, iteration=iteration, stage=TRANSFORM, event_type="refined", detail=detail,
        now=clock.now(), change=change, model_calls=calls, elapsed_ms=_elapsed_ms(clock, start),
    )
    if result.publish:
        _publish_transformed(publisher, result.record, iteration)
