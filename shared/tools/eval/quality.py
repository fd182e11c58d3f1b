"""Answer quality and grader calibration from pipeline runs (see :mod:`shared.tools.eval.pipeline`).

- abstention accuracy: share of abstain cases that end ``not_answerable``; its
  counterpart, the false-abstention rate, is the share of answerable cases that do;
- element coverage (answered relevance cases with required elements): the mean share
  of elements found (:func:`shared.tools.eval.metrics.element_coverage`), and fitz-gov's own
  pass rule (at least ``min_required`` found);
- citation precision: share of citations whose chunk is one of the query's own
  contexts (micro over all citations, and the per-answer mean);
- refinement: share of queries that ran more than one iteration, and iterations spent;
- calibration: the first iteration's overall grade score against whether its
  contexts held a relevant passage (abstain cases: never, by construction): ROC, AUC,
  the threshold maximising Youden's J, and the configured threshold's operating point.

Every headline figure has a ``*_ci95`` companion: Wilson intervals for the two
abstention rates, bootstrap over cases for the rest (over answers for citation
precision, stratified by class for the AUC); see :mod:`shared.tools.eval.metrics`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from shared.contract.config import GradeThresholds
from shared.query.grading import failed_thresholds
from shared.tools.eval.dataset import EvalQuery
from shared.tools.eval.metrics import (
    auc_bootstrap_ci,
    bootstrap_ci,
    bootstrap_ratio_ci,
    element_coverage,
    element_found,
    operating_point,
    roc_curve,
    wilson_interval,
    youden_threshold,
)
from shared.tools.eval.pipeline import QueryResult

ANSWERED = ("answered", "answered_with_caveat")


def _by_id(queries: Sequence[EvalQuery]) -> dict[str, EvalQuery]:
    return {q.query_id: q for q in queries}


def _ci(interval: tuple[float, float]) -> list[float]:
    return [round(interval[0], 4), round(interval[1], 4)]


def answer_quality(
    answerable: Sequence[QueryResult], abstain: Sequence[QueryResult], queries: Sequence[EvalQuery]
) -> dict[str, Any]:
    """The answer-quality figures of one configuration (see the module docstring)."""
    known = _by_id(queries)
    out: dict[str, Any] = {}
    out["abstain_cases"] = len(abstain)
    out["abstention_accuracy"] = (
        sum(r.outcome == "not_answerable" for r in abstain) / len(abstain) if abstain else None
    )
    out["answerable_cases"] = len(answerable)
    out["false_abstention_rate"] = (
        sum(r.outcome == "not_answerable" for r in answerable) / len(answerable) if answerable else None
    )
    out["abstention_accuracy_ci95"] = (
        _ci(wilson_interval(sum(r.outcome == "not_answerable" for r in abstain), len(abstain))) if abstain else None)
    out["false_abstention_rate_ci95"] = (
        _ci(wilson_interval(sum(r.outcome == "not_answerable" for r in answerable), len(answerable)))
        if answerable else None)
    out["outcomes_answerable"] = dict(Counter(r.outcome or r.status for r in answerable))
    out["outcomes_abstain"] = dict(Counter(r.outcome or r.status for r in abstain))

    with_elements = [r for r in answerable if known[r.query_id].required_elements]
    answered_elements = [r for r in with_elements if r.outcome in ANSWERED]
    coverages = [element_coverage(known[r.query_id].required_elements, r.answer) for r in answered_elements]
    passes = [
        sum(element_found(e, r.answer) for e in known[r.query_id].required_elements) >= known[r.query_id].min_required
        for r in answered_elements
    ]
    out["element_cases"] = len(with_elements)
    out["element_cases_answered"] = len(answered_elements)
    out["element_coverage"] = float(np.mean(coverages)) if coverages else None
    out["element_pass_rate"] = float(np.mean(passes)) if passes else None
    out["element_coverage_ci95"] = _ci(bootstrap_ci(coverages)) if coverages else None

    answered = [r for r in answerable if r.outcome in ANSWERED]
    cited = [(r, known[r.query_id].relevant) for r in answered if r.cited]
    hits = sum(sum(c in rel for c in r.cited) for r, rel in cited)
    total = sum(len(r.cited) for r, _ in cited)
    out["citations"] = total
    out["citation_precision"] = hits / total if total else None
    out["citation_precision_ci95"] = (
        _ci(bootstrap_ratio_ci([sum(c in rel for c in r.cited) for r, rel in cited], [len(r.cited) for r, _ in cited]))
        if total else None)
    out["citation_precision_per_answer"] = (
        float(np.mean([sum(c in rel for c in r.cited) / len(r.cited) for r, rel in cited])) if cited else None
    )
    everything = [*answerable, *abstain]
    out["refinement_rate"] = (
        sum(r.iterations > 1 for r in everything) / len(everything) if everything else None
    )
    out["mean_iterations"] = float(np.mean([r.iterations for r in everything])) if everything else None
    out["iterations_histogram"] = {str(k): v for k, v in sorted(Counter(r.iterations for r in everything).items())}
    return out


def calibration(
    answerable: Sequence[QueryResult],
    abstain: Sequence[QueryResult],
    queries: Sequence[EvalQuery],
    thresholds: GradeThresholds | None = None,
) -> dict[str, Any]:
    """ROC of the first iteration's grade score against "its contexts held a relevant passage"."""
    thresholds = thresholds or GradeThresholds()
    known = _by_id(queries)
    scores: list[float] = []
    labels: list[bool] = []
    accepted: list[bool] = []
    for r in [*answerable, *abstain]:
        if not r.first_grade:
            continue
        q = known[r.query_id]
        scores.append(float(r.first_grade.score))
        labels.append(bool(q.relevant & set(r.first_ranking)))
        accepted.append(not failed_thresholds(r.first_grade, thresholds))
    curve = roc_curve(scores, labels)
    auc_ci = auc_bootstrap_ci(scores, labels)
    best = youden_threshold(curve)
    configured = operating_point(scores, labels, thresholds.overall)
    y = np.asarray(labels)
    a = np.asarray(accepted)
    return {
        "cases": len(scores),
        "positives": curve["positives"],
        "negatives": curve["negatives"],
        "auc": curve["auc"],
        "auc_ci95": _ci(auc_ci),
        "youden": best,
        "configured_overall": configured,
        "accept_rule": {  # the stage's whole rule: every threshold and grounded
            "tpr": float((a & y).sum() / max(1, y.sum())),
            "fpr": float((a & ~y).sum() / max(1, (~y).sum())),
            "accuracy": float((a == y).mean()),
        },
        "curve": {"fpr": curve["fpr"], "tpr": curve["tpr"], "thresholds": curve["thresholds"]},
    }


def stage_latency(results: Sequence[QueryResult]) -> dict[str, dict[str, float]]:
    """p50/p95/mean milliseconds spent in each stage per query (iterations summed), and end to end."""
    stages = sorted({s for r in results for s in r.timings_ms})
    out: dict[str, dict[str, float]] = {}
    for stage in [*stages, "total"]:
        values = [r.total_ms if stage == "total" else r.timings_ms.get(stage, 0.0) for r in results]
        if values:
            out[stage] = {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)),
                          "mean": float(np.mean(values))}
    return out
