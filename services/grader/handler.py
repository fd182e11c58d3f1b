"""The grader stage: grades one iteration's contexts and decides what happens next.

The model scores the contexts; this stage, not the model, applies the thresholds and decides:
``accept`` when the grade passes every threshold; ``abstain`` when it says the corpus cannot answer
and no earlier iteration found anything; ``refine`` while iterations and model calls (refine, grade,
answer) are left; else ``exhausted``, also when the refined query found an earlier iteration's
contexts again or graded less than ``MIN_REFINE_GAIN`` above the best before it (the question's own
ranking leads every iteration, so another round would only add latency). The best-graded iteration
is kept in ``best_iteration``; a worse one never replaces it.
"""

from __future__ import annotations

import logging

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import Message, QueryGraded, QueryHop
from shared.contract.ports import Grade, NumberedContext
from shared.observability import metrics
from shared.query.grading import failed_thresholds, fallback_grade, shown_scores
from shared.query.model_health import note_fallback
from shared.query.reading.extractive import body_lines
from shared.query.record import Context, QueryRecord
from shared.query.runner import Change, ask_model, handle_query_message
from shared.runtime.query_steps import registered_step

log = logging.getLogger("ragbus.grader")

# Model calls one more round needs (refine + grade) plus the final answer.
CALLS_PER_REFINEMENT = 3

# A refinement must raise the best grade so far by at least this much for another round.
MIN_REFINE_GAIN = 0.01


def grading_contexts(contexts: list[Context], *, limit: int, chars: int) -> list[NumberedContext]:
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
        out.append(NumberedContext(number=n, source=ctx.get("url") or title or ctx.get("document_id", ""),
                                  text=text[:chars], chunk_id=ctx.get("chunk_id"),
                                  whole=ctx.get("text") if len(text) > chars else None, heading=ctx.get("heading") or ""))
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
    """(below_thresholds, decision, why) for ``grade`` under the thresholds and budgets: ``below_thresholds`` is
    True for every decision but ``accept``."""
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


def grade_contexts(record: QueryRecord, contexts: list[Context], ports: Deps) -> tuple[Grade, str, int]:
    """The grade of ``contexts``, where it came from (``model``, ``fallback``, ``none``) and the model calls
    spent: none without contexts; the conservative fallback grade when the model cannot be asked or fails."""
    settings = ports.settings
    if not contexts:
        return Grade(score=0.0, relevance=0.0, completeness=0.0, grounded=False, answerable=False,
                     reasoning="no contexts were retrieved for this query"), "none", 0
    numbered = grading_contexts(contexts, limit=settings.grade_contexts, chars=settings.grade_context_chars)
    reply = ask_model(ports, record, GRADE, lambda: ports.llm.grade(record.question, numbered),
                      instead="using the fallback grade")
    if reply.value is not None:
        return reply.value, "fallback" if reply.value.fallback else "model", reply.calls
    if reply.spent:
        return fallback_grade("model-call budget spent"), "fallback", 0
    return fallback_grade(f"the model call failed ({reply.error})"), "fallback", reply.calls


def grade(record: QueryRecord, message: QueryHop, ports: Deps) -> Change:
    """Grade the iteration's contexts, decide what happens next, keep the best iteration."""
    iteration, settings = message.iteration, ports.settings
    entry = record.entry(iteration)
    contexts = list(entry.contexts) if entry else []
    given, source, calls = grade_contexts(record, contexts, ports)
    earlier = [e for e in record.iterations if e.iteration != iteration]
    chunk_ids = {c.get("chunk_id") for c in contexts}
    repeats = next((e.iteration for e in earlier if e.iteration < iteration and e.chunk_ids() == chunk_ids), None)
    best = record.best_graded_iteration()  # this iteration is not graded yet: the best of the earlier ones
    best_entry = record.entry(best) if best is not None else None
    best_earlier = (best, best_entry.grade.score) if best_entry is not None and best_entry.grade else None
    short, decision, why = decide(
        given, iteration=iteration, max_iterations=record.max_iterations, model_calls=record.model_calls + calls,
        max_model_calls=record.max_model_calls, settings=settings,
        earlier_answerable=any(e.grade is not None and e.grade.answerable for e in earlier),
        repeats_iteration=repeats if contexts else None, best_earlier=best_earlier,
    )

    shown = shown_scores(given, settings.thresholds)  # as every surface shows them beside the decision

    def change(r: QueryRecord) -> None:
        e = r.ensure_entry(iteration)
        e.grade, e.grade_source, e.below_thresholds, e.decision = given, source, short, decision
        e.failed_thresholds = failed_thresholds(given, settings.thresholds)
        e.shown_scores = shown
        r.best_iteration = r.best_graded_iteration()
        if given.fallback:
            r.model_fallbacks += 1
        if source == "fallback":
            note_fallback(r, stage=GRADE, iteration=iteration, reason=given.reasoning)

    detail = f"score {shown['score']} (relevance {shown['relevance']}, completeness {shown['completeness']}, " \
             f"{'grounded' if given.grounded else 'not grounded'}) -> {decision}: {why}"
    annotations = {"grade.score": given.score, "grade.relevance": given.relevance,
                   "grade.completeness": given.completeness, "grade.grounded": given.grounded,
                   "grade.answerable": given.answerable, "grade.source": source,
                   "decision": decision, "context_count": len(contexts), "should_refine": short}
    return Change(change, "graded", detail, model_calls=calls, annotations=annotations,
                  recorded=lambda _: metrics.query_graded(given.score, decision))


def graded(record: QueryRecord, iteration: int) -> QueryGraded | None:
    """The message that routes ``iteration`` on by its decision (the grade stays in the record)."""
    entry = record.entry(iteration)
    if entry is None or entry.grade is None or entry.decision is None:
        return None
    return QueryGraded(query_id=record.id, iteration=iteration, decision=entry.decision)


STEP = registered_step(__name__, run=grade, publishes=graded)
GRADE = STEP.stage


def handle(message: Message, deps: Deps) -> None:
    """Grade the contexts of a retrieved iteration once the stage before has recorded them."""
    handle_query_message((STEP,), message, deps)
