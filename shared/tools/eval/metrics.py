"""Ranking, answer and calibration metrics (binary relevance, plain Python + numpy).

Definitions, so figures can be compared with other tools:

- nDCG@k: DCG = sum over ranks r <= k of rel_r / log2(r + 1); the ideal DCG puts
  every relevant passage first (min(|relevant|, k) of them); 0 when nothing is relevant.
- recall@k: relevant passages in the top k / all relevant passages.
- MRR: 1 / rank of the first relevant passage (0 when none is retrieved), no cut-off
  beyond the ranking given (rankings here are 10 long, so it is MRR@10).
- element coverage: the share of a case's required elements found in the answer,
  case-insensitively, as a substring (fitz-gov's own rule) or, failing that, with every
  one of the element's word tokens present among the answer's tokens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np


def ndcg_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    """Binary-relevance nDCG of ``ranking`` cut at ``k``."""
    rel = set(relevant)
    if not rel:
        return 0.0
    dcg = sum(1.0 / math.log2(r + 2) for r, item in enumerate(ranking[:k]) if item in rel)
    ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(rel), k)))
    return dcg / ideal


def recall_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(rel & set(ranking[:k])) / len(rel)


def reciprocal_rank(ranking: Sequence[str], relevant: Iterable[str]) -> float:
    rel = set(relevant)
    for r, item in enumerate(ranking, start=1):
        if item in rel:
            return 1.0 / r
    return 0.0


def ranking_metrics(
    rankings: Sequence[Sequence[str]], relevants: Sequence[Iterable[str]], k: int = 10
) -> dict[str, float]:
    """Mean nDCG@k, recall@k and MRR over queries (one ranking per query)."""
    if len(rankings) != len(relevants):
        raise ValueError(f"{len(rankings)} rankings for {len(relevants)} relevance sets")
    if not rankings:
        return {f"ndcg@{k}": 0.0, f"recall@{k}": 0.0, "mrr": 0.0, "queries": 0}
    rels = [set(r) for r in relevants]
    return {
        f"ndcg@{k}": float(np.mean([ndcg_at_k(a, b, k) for a, b in zip(rankings, rels, strict=True)])),
        f"recall@{k}": float(np.mean([recall_at_k(a, b, k) for a, b in zip(rankings, rels, strict=True)])),
        "mrr": float(np.mean([reciprocal_rank(a[:k], b) for a, b in zip(rankings, rels, strict=True)])),
        "queries": len(rankings),
    }


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = 60, depth: int = 10) -> list[str]:
    """Naive RRF: sum of 1 / (k + rank) over the rankings; ties broken by id for determinism."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for r, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + r)
    return [item for item, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


_TOKEN = re.compile(r"\w+", re.UNICODE)


def element_found(element: str, answer: str) -> bool:
    """Case-insensitive substring, or every word token of ``element`` among the answer's."""
    text = answer.lower()
    if element.lower() in text:
        return True
    wanted = set(_TOKEN.findall(element.lower()))
    return bool(wanted) and wanted <= set(_TOKEN.findall(text))


def element_coverage(elements: Sequence[str], answer: str) -> float:
    if not elements:
        return 0.0
    return sum(element_found(e, answer) for e in elements) / len(elements)


def roc_curve(scores: Sequence[float], labels: Sequence[bool]) -> dict[str, list[float] | float]:
    """ROC points (false/true positive rates at each distinct threshold, best first) and AUC.

    AUC is the Mann-Whitney statistic (ties count one half), equal to the trapezoid
    area under these points. Raises when one class is missing (no curve exists).
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    positives, negatives = int(y.sum()), int((~y).sum())
    if positives == 0 or negatives == 0:
        raise ValueError(f"ROC needs both classes: {positives} positives, {negatives} negatives")
    thresholds = np.unique(s)[::-1]
    tpr = [0.0]
    fpr = [0.0]
    cut = [float("inf")]
    for t in thresholds:
        predicted = s >= t
        tpr.append(float((predicted & y).sum() / positives))
        fpr.append(float((predicted & ~y).sum() / negatives))
        cut.append(float(t))
    order = np.argsort(s, kind="stable")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    # average ranks for ties
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    auc = (ranks[y].sum() - positives * (positives + 1) / 2.0) / (positives * negatives)
    return {"fpr": fpr, "tpr": tpr, "thresholds": cut, "auc": float(auc),
            "positives": positives, "negatives": negatives}


def youden_threshold(curve: dict) -> dict[str, float]:
    """The threshold maximising Youden's J = TPR - FPR (the lowest such threshold on ties)."""
    best = max(range(1, len(curve["thresholds"])),
               key=lambda i: (curve["tpr"][i] - curve["fpr"][i], -curve["thresholds"][i]))
    return {"threshold": curve["thresholds"][best], "tpr": curve["tpr"][best], "fpr": curve["fpr"][best],
            "j": curve["tpr"][best] - curve["fpr"][best]}


def operating_point(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> dict[str, float]:
    """TPR, FPR and accuracy of the rule ``score >= threshold``."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    predicted = s >= threshold
    return {
        "threshold": float(threshold),
        "tpr": float((predicted & y).sum() / max(1, y.sum())),
        "fpr": float((predicted & ~y).sum() / max(1, (~y).sum())),
        "accuracy": float((predicted == y).mean()) if len(y) else 0.0,
    }


# ------------------------------------------------------------ confidence intervals
#
# Percentile bootstrap over cases (the cases are the sampling unit: a figure on 150
# queries moves by several points when other 150 are drawn). Seeded, so a report
# is reproducible; 2,000 resamples put the interval's ends within about 0.005 of
# their limit for the sample sizes used here.

BOOTSTRAP_RESAMPLES = 2000


def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one value per case)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("a confidence interval needs at least one value")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(resamples, v.size))].mean(axis=1)
    return _interval(means, confidence)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> dict[str, float]:
    """Means of two per-case figures measured on the same cases, and of their difference ``a - b``,
    each with a percentile bootstrap interval; the cases are resampled together, so the
    difference's interval reflects the pairing (narrower than two independent intervals)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired figures need the same cases: {x.size} against {y.size}")
    if x.size == 0:
        raise ValueError("a confidence interval needs at least one case")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    mx, my = x[idx].mean(axis=1), y[idx].mean(axis=1)
    (a_lo, a_hi), (b_lo, b_hi), (d_lo, d_hi) = (_interval(s, confidence) for s in (mx, my, mx - my))
    return {"a": float(x.mean()), "a_low": a_lo, "a_high": a_hi,
            "b": float(y.mean()), "b_low": b_lo, "b_high": b_hi,
            "diff": float(x.mean() - y.mean()), "diff_low": d_lo, "diff_high": d_hi,
            "cases": int(x.size), "confidence": confidence}


def bootstrap_ratio_ci(
    numerators: Sequence[float], denominators: Sequence[float], *, confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
) -> tuple[float, float]:
    """Interval of ``sum(numerators) / sum(denominators)`` resampling the cases (pairs) together:
    a micro-averaged rate whose units (citations) cluster in cases (answers)."""
    n = np.asarray(numerators, dtype=np.float64)
    d = np.asarray(denominators, dtype=np.float64)
    if n.shape != d.shape or n.size == 0:
        raise ValueError(f"a ratio interval needs as many numerators as denominators, at least one: {n.size}, {d.size}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n.size, size=(resamples, n.size))
    totals = d[idx].sum(axis=1)
    return _interval(n[idx].sum(axis=1) / np.where(totals > 0, totals, 1.0), confidence)


def auc_bootstrap_ci(
    scores: Sequence[float], labels: Sequence[bool], *, confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
) -> tuple[float, float]:
    """Interval of the ROC AUC, resampling positives and negatives separately (stratified,
    so every resample has both classes and the class balance of the sample)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"ROC needs both classes: {pos.size} positives, {neg.size} negatives")
    # wins[i, j]: positive i outranks negative j (1), ties one half: AUC is its mean.
    wins = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for r in range(resamples):
        pi = rng.integers(0, pos.size, size=pos.size)
        ni = rng.integers(0, neg.size, size=neg.size)
        stats[r] = wins[np.ix_(pi, ni)].mean()
    return _interval(stats, confidence)


def wilson_interval(successes: int, trials: int, *, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% for the default ``z``); sound at 0 and 1 successes,
    where the bootstrap collapses to a point."""
    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)
