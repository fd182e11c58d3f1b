"""The grader on each case's own contexts: fitz-gov's own protocol, beside the open-corpus pipeline.

fitz-gov hands a system each case's contexts and asks which mode it chooses (answer,
hedge, dispute, abstain). The pipeline rows of ``ragbus eval`` ask a harder and
different question: every case's question is searched in one index holding all 5,899
passages, and a "must abstain" case counts as abstained only if the whole loop refuses.
fitz-gov writes several cases per topic, so another case's passage often states the
fact an abstain case asks for (its federal-funds-rate question is answered by a
passage of a neighbouring case): there, refusing is the wrong answer for the corpus
but is scored as right, and answering is scored as wrong.

This measurement removes that confound. For every sampled case the grader stage's
own code grades the case's own contexts (the passages fitz-gov wrote for it, numbered and clipped by
:func:`services.grader.handler.grading_contexts`) and
:func:`services.grader.handler.decide` decides as it would on the last allowed
iteration with no earlier answerable grade:

- abstention accuracy: share of abstain cases whose decision is ``abstain``;
- false abstention: share of answerable cases whose decision is ``abstain``;
- grader ROC AUC: the grade score separating answerable cases (positive) from abstain
  cases (negative), with a stratified bootstrap interval.

Nothing is retrieved and nothing is synthesized, so it runs in seconds, and it is
reported *beside* the pipeline's open-corpus figures, never instead of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from shared.contract.config import Settings
from shared.contract.ports import Grade, LanguageModel, NumberedContext
from shared.tools.eval.dataset import EvalQuery
from shared.tools.eval.metrics import auc_bootstrap_ci, roc_curve, wilson_interval

PROTOCOL = ("each sampled case's own contexts graded by the grader stage's code (no retrieval); "
            "the stage's decision on the last allowed iteration; abstain = decision 'abstain'")


def own_contexts(query: EvalQuery, passage_text: dict[str, str], settings: Settings) -> list[NumberedContext]:
    """The case's own passages (in passage-id order) numbered and clipped by the grader stage's own code."""
    from services.grader.handler import (
        grading_contexts,  # tools may import services (tests/unit/test_layers.py)
    )

    contexts = [{"chunk_id": pid, "document_id": pid, "title": "", "url": "", "text": passage_text[pid]}
                for pid in sorted(query.contexts)]
    return grading_contexts(contexts, limit=settings.grade_contexts, chars=settings.grade_context_chars)


def _decide(grade: Grade, settings: Settings) -> str:
    from services.grader.handler import decide

    iterations = settings.max_iterations
    _, decision, _ = decide(grade, iteration=iterations, max_iterations=iterations, model_calls=1,
                            max_model_calls=max(2, settings.max_model_calls), earlier_answerable=False,
                            settings=settings)
    return decision


def grade_on_own_contexts(
    answerable: Sequence[EvalQuery],
    abstain: Sequence[EvalQuery],
    passage_text: dict[str, str],
    llm: LanguageModel,
    settings: Settings,
) -> dict[str, Any]:
    """Abstention accuracy, false abstention and grader AUC on the cases' own contexts (module docstring)."""
    if not answerable or not abstain:
        raise ValueError(f"the own-contexts measurement needs both kinds of case: {len(answerable)} answerable, "
                         f"{len(abstain)} abstain")

    def run(cases: Sequence[EvalQuery]) -> list[tuple[Grade, str]]:
        out = []
        for q in cases:
            grade = llm.grade(q.text, own_contexts(q, passage_text, settings))
            out.append((grade, _decide(grade, settings)))
        return out

    ran_answerable, ran_abstain = run(answerable), run(abstain)
    refused = sum(d == "abstain" for _, d in ran_abstain)
    falsely = sum(d == "abstain" for _, d in ran_answerable)
    scores = [g.score for g, _ in ran_answerable] + [g.score for g, _ in ran_abstain]
    labels = [True] * len(ran_answerable) + [False] * len(ran_abstain)
    curve = roc_curve(scores, labels)
    auc_low, auc_high = auc_bootstrap_ci(scores, labels)
    acc_low, acc_high = wilson_interval(refused, len(ran_abstain))
    fa_low, fa_high = wilson_interval(falsely, len(ran_answerable))
    return {
        "protocol": PROTOCOL,
        "answerable": len(ran_answerable),
        "abstain": len(ran_abstain),
        "abstention_accuracy": refused / len(ran_abstain),
        "abstention_accuracy_ci95": [round(acc_low, 4), round(acc_high, 4)],
        "false_abstention": falsely / len(ran_answerable),
        "false_abstention_ci95": [round(fa_low, 4), round(fa_high, 4)],
        "grader_auc": curve["auc"],
        "grader_auc_ci95": [round(auc_low, 4), round(auc_high, 4)],
        "decisions": {
            "answerable": dict(Counter(d for _, d in ran_answerable)),
            "abstain": dict(Counter(d for _, d in ran_abstain)),
        },
        "abstained_by_subcategory": abstained_by_subcategory(
            abstain, [d == "abstain" for _, d in ran_abstain]),
    }


def abstained_by_subcategory(cases: Sequence[EvalQuery], abstained: Sequence[bool]) -> dict[str, list[int]]:
    """fitz-gov subcategory -> [cases abstained on, cases], largest subcategory first: which kinds of
    unanswerable question (wrong entity, temporal mismatch, ...) the grader catches."""
    counts: dict[str, list[int]] = {}
    for case, refused in zip(cases, abstained, strict=True):
        row = counts.setdefault(case.subcategory or "unknown", [0, 0])
        row[0] += bool(refused)
        row[1] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1][1], kv[0])))
