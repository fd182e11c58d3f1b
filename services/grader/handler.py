"""The grader stage: grades one iteration's contexts and decides what happens next.

The language model scores the contexts (relevance, completeness, grounded,
answerable); this stage, not the model, applies the thresholds and decides:

- ``accept``: the grade passes every threshold;
- ``abstain``: the grade says the corpus evidently cannot answer, and no
  earlier iteration found anything either: stop now instead of spending
  iterations;
- ``refine``: below a threshold, iterations left and enough model calls left
  in the query's budget for another round (refine + grade) and the answer;
- ``exhausted``: below a threshold with no iteration or budget left, or the
  refined query retrieved exactly the contexts of an earlier iteration (another
  round would grade the same evidence again), or a refinement graded no better
  than the best iteration before it (by less than ``MIN_REFINE_GAIN``): the
  question's own ranking leads every iteration, so a refinement that moved
  nothing has shown what refining finds here, and another round only adds
  latency and model calls.

The best-graded iteration so far is kept in ``best_iteration``; a later,
worse iteration never replaces it.
"""

from __future__ import annotations

import logging

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.contract.messages import ContextsRetrieved, Message, QueryGraded
from shared.contract.ports import Clock, Grade, GradingContext, LanguageModel, Publisher, StateStore
from shared.observability import metrics
from shared.observability.tracing import annotate
from shared.query.grading import failed_thresholds, fallback_grade
from shared.query.model_health import model_answered, model_unusable, note_fallback
from shared.query.reading.extractive import body_lines
from shared.query.record import Context, QueryRecord
from shared.query.state import GRADE, RETRIEVE, apply_stage, live_record

log = logging.getLogger("ragbus.grader")

# Model calls one more round needs (refine + grade) plus the final answer.
CALLS_PER_REFINEMENT = 3

# A refinement must raise the best grade so far by at least this much for another round.
MIN_REFINE_GAIN = 0.01


def handle(message: Message, deps: Deps) -> None:
    """Dispatch ``ContextsRetrieved`` to :func:`grade_iteration`."""
    if not isinstance(message, ContextsRetrieved):
        log.warning("grader ignores %s", type(message).__name__)
        return
    grade_iteration(
        message, state=deps.state, publisher=deps.publisher, clock=deps.clock, llm=deps.llm, settings=deps.settings
    )


def grading_contexts(contexts: list[Context], *, limit: int, chars: int) -> list[GradingContext]:
    """The first ``limit`` contexts, each its title and the first ``chars`` of its body (and, when that
    cut it, the chunk's whole text as ``whole``, for a reader checking whether a sentence states the answer).

    The metadata header is replaced by the bare title so the character budget
    goes to content, not to dates and URLs.
    """
    out = []
    for n, ctx in enumerate(contexts[:limit], start=1):
        # line by line: a list item, a table row or a definition is a line, which the reader quotes whole
        body = "\n".join(line for line in (" ".join(raw.split()) for raw in body_lines(ctx.get("text") or "").splitlines())
                         if line)
        title = (ctx.get("title") or "").strip()
        text = f"{title}\n{body}" if title else body
        out.append(GradingContext(number=n, source=ctx.get("url") or title or ctx.get("document_id", ""),
                                  text=text[:chars], chunk_id=ctx.get("chunk_id"),
                                  whole=ctx.get("text") if len(text) > chars else None))
    return out


def decide(
    grade: Grade,
    *,
    iteration: int,
    max_iterations: int,
    model_calls: int,
    max_model_calls: int,
    earlier_answerable: bool,
    settings: Settings,
    repeats_iteration: int | None = None,
    best_earlier: tuple[int, float] | None = None,
) -> tuple[bool, str, str]:
    """(should_refine, decision, why) for ``grade`` under the thresholds and budgets."""
    failed = failed_thresholds(grade, settings.thresholds)
    if not failed:
        return False, "accept", "every threshold passed"
    why = ", ".join(failed)
    if not grade.answerable and not earlier_answerable:
        return True, "abstain", f"{why}; the corpus evidently cannot answer this"
    if iteration >= max_iterations:
        return True, "exhausted", f"{why}; no refinement left ({iteration}/{max_iterations})"
    if model_calls + CALLS_PER_REFINEMENT > max_model_calls:
        return True, "exhausted", f"{why}; model-call budget spent ({model_calls}/{max_model_calls})"
    if repeats_iteration is not None:
        # numbered from 1, as people read iterations (page, CLI, trace)
        return True, "exhausted", f"{why}; the same contexts as iteration {repeats_iteration + 1}: refining cannot help"
    if best_earlier is not None and grade.score < best_earlier[1] + MIN_REFINE_GAIN:
        return True, "exhausted", (f"{why}; the refinement graded {grade.score:.2f}, no better than iteration "
                                   f"{best_earlier[0] + 1}'s {best_earlier[1]:.2f}: refining again is not worth a round")
    return True, "refine", why


def grade_iteration(
    message: ContextsRetrieved,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    llm: LanguageModel,
    settings: Settings,
) -> None:
    """Grade, decide, keep the best iteration, publish ``QueryGraded``."""
    query_id, iteration = message.query_id, message.iteration
    record = live_record(state, query_id, clock.now())
    if record is None:
        log.info("query %s is gone, ended or overdue; not grading", query_id)
        return
    if record.stage_done(iteration, GRADE):
        _publish_graded(publisher, record, iteration)
        return
    if not record.stage_done(iteration, RETRIEVE):
        raise RetryableError(
            f"query {query_id}: contexts of iteration {iteration} are not recorded yet; retry once they are"
        )

    entry = record.entry(iteration)
    contexts = list(entry.contexts) if entry else []
    model_calls = record.model_calls
    max_calls = record.max_model_calls
    start = clock.monotonic()
    calls = 0
    if not contexts:
        grade = Grade(score=0.0, relevance=0.0, completeness=0.0, grounded=False, answerable=False,
                      reasoning="no contexts were retrieved for this query")
        source = "none"
    elif model_calls >= max_calls:
        grade, source = fallback_grade("model-call budget spent"), "fallback"
    else:
        calls = 1
        try:
            grade = llm.grade(
                record.question,
                grading_contexts(contexts, limit=settings.grade_contexts, chars=settings.grade_context_chars),
            )
            source = "fallback" if grade.fallback else "model"
            model_answered(state, getattr(llm, "model", None))
        except ModelUnusable as exc:
            model_unusable(state, query_id=query_id, stage=GRADE, error=exc, now=clock.now())
            return
        except ConfigError:
            # misconfigured (the local grader's model file is missing or stale): no grade would be honest, so
            # the query fails with the way to fix it (a permanent error) instead of a fallback grade
            raise
        except Exception as exc:  # noqa: BLE001 - any other model failure becomes the conservative grade
            log.warning("query %s: grading failed, using the fallback grade: %s", query_id, exc)
            grade, source = fallback_grade(f"the model call failed ({type(exc).__name__}: {exc})"), "fallback"

    earlier = [e for e in record.iterations if e.iteration != iteration]
    earlier_answerable = any(e.grade is not None and e.grade.answerable for e in earlier)
    chunk_ids = {c.get("chunk_id") for c in contexts}
    repeats = next(
        (e.iteration for e in earlier if e.iteration < iteration and e.chunk_ids() == chunk_ids),
        None,
    )
    best = record.best_graded()  # this iteration is not graded yet: the best of the earlier ones
    best_entry = record.entry(best) if best is not None else None
    best_earlier = (best, best_entry.grade.score) if best_entry is not None and best_entry.grade else None
    refine, decision, why = decide(
        grade,
        iteration=iteration,
        max_iterations=record.max_iterations,
        model_calls=model_calls + calls,
        max_model_calls=max_calls,
        earlier_answerable=earlier_answerable,
        settings=settings,
        repeats_iteration=repeats if contexts else None,
        best_earlier=best_earlier,
    )
    elapsed_ms = (clock.monotonic() - start) * 1000.0
    annotate(**{"grade.score": grade.score, "grade.relevance": grade.relevance,
                "grade.completeness": grade.completeness, "grade.grounded": grade.grounded,
                "grade.answerable": grade.answerable, "grade.source": source},
             decision=decision, context_count=len(contexts), should_refine=refine)

    def change(r: QueryRecord) -> None:
        e = r.ensure_entry(iteration)
        e.grade = grade
        e.grade_source = source
        e.should_refine = refine
        e.failed_thresholds = failed_thresholds(grade, settings.thresholds)
        e.decision = decision
        r.best_iteration = r.best_graded()
        if grade.fallback:
            r.model_fallbacks += 1
        if source == "fallback":
            note_fallback(r, stage=GRADE, iteration=iteration, reason=grade.reasoning)

    detail = f"score {grade.score:.2f} (relevance {grade.relevance:.2f}, completeness {grade.completeness:.2f}, " \
             f"grounded {grade.grounded}) -> {decision}: {why}"
    result = apply_stage(
        state, query_id, iteration=iteration, stage=GRADE, event_type="graded", detail=detail,
        now=clock.now(), change=change, model_calls=calls, elapsed_ms=elapsed_ms,
    )
    if result.applied:
        metrics.query_graded(grade.score, decision)
    if result.publish:
        _publish_graded(publisher, result.record, iteration)


def _publish_graded(publisher: Publisher, record: QueryRecord, iteration: int) -> None:
    entry = record.entry(iteration)
    if entry is None or entry.grade is None or entry.decision is None:
        return
    # The grade itself stays in the record: the transformer and synthesizer read it from there.
    publisher.publish(QueryGraded(query_id=record.id, iteration=iteration, decision=entry.decision))
