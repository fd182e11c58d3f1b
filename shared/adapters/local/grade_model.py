"""The local grader's calibrated model: a logistic regression over the grade's evidence.

The local grader (:mod:`shared.adapters.local.llm`) measures evidence about a
question and its contexts (similarities, key-term coverage, whether any sentence
holds the asked fact, names the corpus lacks: :data:`FEATURES`). How much each
piece counts is not chosen by hand: ``bench/fit_grader.py`` fits the weights on
fitz-gov's *calibration* split (:mod:`shared.tools.eval.dataset`) and writes them,
with the probability below which the contexts count as unable to answer, to the
shipped ``grade_model.json`` beside this module. The grade's score is the model's
probability that the contexts answer the question.

The file names the features it was fit on and :data:`FEATURE_VERSION`; a file fit
on another feature list is refused with an error saying how to refit, never used
with weights that belong to other features.

Logistic regression because it is small, needs nothing but numpy, and its
probability is calibrated on the data it was fit on (the figures a threshold is
chosen from); the features are standardised (mean and scale stored with the
weights) so the L2 penalty treats them alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shared.contract.errors import ConfigError

# Bump with any change to a feature's meaning, not only to the list: the weights belong to both.
# 2: a term is absent only when no context holds its stem either, and a word a foreign question kept untranslated
# never counts as absent.
# 3: a number measured in a unit the question does not count in ("12-ounce") no longer holds a count (near_miss).
# 4: a short model number ("X1", "Q1") is one of the question's names (names_missing).
FEATURE_VERSION = 4

#: The evidence the local grader measures, in the order of the model's weights.
FEATURES: tuple[str, ...] = (
    "sim_max",  # cosine of the question and its most similar context
    "sim_top3",  # mean cosine of the three most similar contexts
    "sim_gap",  # best minus second-best cosine: one clear passage, or many alike
    "strong_contexts",  # log(1 + contexts with cosine >= 0.5)
    "coverage_union",  # weighted share of the question's key terms found in any context
    "coverage_best",  # ... in the best-covering single context
    "coverage_most_similar",  # ... in the most similar context
    "coverage_sentence",  # ... in the best-covering single sentence
    "absent_share",  # weighted share of key terms the corpus never uses (in any inflection the contexts show)
    "names_missing",  # share of the question's names (Kafka, Model Y) no context states
    "year_missing",  # 1 when the question states a year no context states
    "asks_current",  # 1 when the question asks for the current or latest state ("current", "latest", "now")
    "fact_checked",  # 1 when the question's shape says what an answer must hold
    "near_miss",  # 1 when no sentence holds the asked value (price, count, date, name)
    "aspect_miss",  # 1 when no passage names the asked aspect, cause or mechanism
    "support_sentences",  # log(1 + sentences holding the asked fact)
    "key_terms",  # log(1 + the question's key terms)
)

# How a feature that pulls the probability down reads in a grade's reasoning: (when below the calibration
# average, when above it; "than usual" is that average). None where that direction is not a reason a person would recognise (a weight
# that only corrects for a correlated feature, such as "strong_contexts" beside "sim_top3").
CONCERNS: dict[str, tuple[str | None, str | None]] = {
    "sim_max": ("the closest passage is less similar than usual", None),
    "sim_top3": ("the top passages are less similar than usual", None),
    "sim_gap": ("no passage stands out", None),
    "coverage_union": ("key terms missing from every context", None),
    "coverage_best": ("no one passage covers the key terms", None),
    "coverage_most_similar": ("the closest passage lacks key terms", None),
    "coverage_sentence": ("no sentence holds the key terms together", None),
    "absent_share": (None, "terms the corpus never uses"),
    "names_missing": (None, "names no context states"),
    "year_missing": (None, "a year no context states"),
    "asks_current": (None, "asks for the current state"),
    "fact_checked": (None, "asks for a specific fact"),
    "near_miss": (None, "no sentence holds the asked value"),
    "aspect_miss": (None, "no passage names the asked aspect"),
    "support_sentences": ("few sentences hold the asked fact", None),
}

MODEL_FILE = Path(__file__).with_name("grade_model.json")
REFIT = "refit it with `python bench/fit_grader.py` (fits on fitz-gov's calibration split)"


@dataclass(frozen=True, eq=False)  # numpy arrays: compared by identity, never element-wise by accident
class GradeModel:
    """Standardised logistic regression: ``p = sigmoid(intercept + weights . (x - mean) / scale)``.

    ``answerable_from`` is the probability below which the contexts evidently cannot
    answer (chosen on the calibration split for a bounded false-abstention rate);
    ``fitted`` records how and on what the model was fit.
    """

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float
    answerable_from: float
    fitted: dict[str, Any] = field(default_factory=dict)

    def probability(self, values: Mapping[str, float]) -> float:
        """The probability that contexts with these feature ``values`` answer the question."""
        missing = [f for f in self.features if f not in values]
        if missing:
            raise ValueError(f"grade model: no value for the features {', '.join(missing)}")
        x = np.array([float(values[f]) for f in self.features])
        with np.errstate(over="ignore", invalid="ignore"):
            z = self.intercept + float(((x - self.mean) / self.scale) @ self.weights)
        if not np.isfinite(z):
            # weights (or means, scales) so large that the log-odds overflow: a NaN or 0/1 "probability" would
            # pass or refuse every question silently
            raise ConfigError(f"the grade model's log-odds are not finite for these features (weights of "
                              f"{float(np.max(np.abs(self.weights))):.3g} or scales of "
                              f"{float(np.min(self.scale)):.3g}): {REFIT}")
        return float(1.0 / (1.0 + np.exp(-z)))

    def contributions(self, values: Mapping[str, float]) -> dict[str, float]:
        """Each feature's share of the log-odds (relative to an average case): what drove a grade."""
        x = np.array([float(values[f]) for f in self.features])
        parts = (x - self.mean) / self.scale * self.weights
        return {f: float(v) for f, v in zip(self.features, parts, strict=True)}

    def concerns(self, values: Mapping[str, float], *, limit: int = 3, floor: float = 0.25) -> list[str]:
        """What pulled the probability down most (at least ``floor`` log-odds each), in words."""
        out = []
        for _, name in sorted((v, f) for f, v in self.contributions(values).items() if v <= -floor):
            index = self.features.index(name)
            below, above = CONCERNS.get(name, (None, None))
            phrase = below if float(values[name]) < self.mean[index] else above
            if phrase:
                out.append(phrase)
        return out[:limit]

    def to_json(self) -> dict[str, Any]:
        return {
            "feature_version": FEATURE_VERSION,
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "intercept": round(float(self.intercept), 6),
            "answerable_from": round(float(self.answerable_from), 4),
            "fitted": self.fitted,
        }

    @classmethod
    def from_json(cls, data: Any, *, source: str = "the grade model") -> GradeModel:
        """The model ``data`` describes; :class:`ConfigError` when it was fit on other features or any value
        is not what :meth:`to_json` writes (a JSON number where a number belongs, finite, arrays one value per
        feature): a hand-edited or damaged file is refused, never read as other numbers."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} holds a JSON {type(data).__name__}, not the model's object: {REFIT}")
        version, features = data.get("feature_version"), data.get("features")
        if version != FEATURE_VERSION or not isinstance(features, list) or tuple(features) != FEATURES:
            raise ConfigError(
                f"{source} was fit on feature version {_shown(version)} ({_listed(features)}), but the "
                f"local grader measures version {FEATURE_VERSION} ({', '.join(FEATURES)}): {REFIT}")
        try:
            mean, scale, weights = (_numbers(data, k) for k in ("mean", "scale", "weights"))
            intercept, threshold = _number(data, "intercept"), _number(data, "answerable_from")
        except KeyError as exc:
            raise ConfigError(f"{source} is incomplete (no {exc}): {REFIT}") from exc
        except ValueError as exc:
            raise ConfigError(f"{source} is malformed: {exc}: {REFIT}") from exc
        # fit_logistic gives a constant column scale 1, so a fitted scale is never below 1e-9; a smaller one
        # (or 0) would blow the standardised features up
        if np.any(scale < 1e-9) or not 0.0 < threshold < 1.0:
            raise ConfigError(f"{source} has a scale below 1e-9 or a threshold outside (0, 1): {REFIT}")
        fitted = data.get("fitted") or {}
        if not isinstance(fitted, Mapping):
            raise ConfigError(f"{source}'s 'fitted' is a JSON {type(fitted).__name__}, not an object: {REFIT}")
        return cls(FEATURES, mean, scale, weights, intercept, threshold, dict(fitted))

    def save(self, path: Path = MODEL_FILE) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")


def _number(data: Mapping[str, Any], key: str) -> float:
    """``data[key]`` when it is a finite JSON number (not a bool, not a string holding one)."""
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ValueError(f"{key!r} is {_shown(value)}, not a finite number")
    return float(value)


def _numbers(data: Mapping[str, Any], key: str) -> np.ndarray:
    """``data[key]`` as an array when it is a list of one finite JSON number per feature."""
    values = data[key]
    if not isinstance(values, list) or len(values) != len(FEATURES):
        length = f"{len(values)} values" if isinstance(values, list) else f"a JSON {type(values).__name__}"
        raise ValueError(f"{key!r} holds {length}, not one number per feature ({len(FEATURES)}): wrong length")
    for n, value in enumerate(values):
        _number({f"{key}[{n}]": value}, f"{key}[{n}]")
    return np.array(values, dtype=float)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _listed(features: Any) -> str:
    """The features a file names, for an error message: at most twenty of them."""
    if not isinstance(features, list) or not features:
        return "no features" if not features else f"features {_shown(features)}"
    shown = ", ".join(_shown(f) if not isinstance(f, str) else _shown(f).strip("'") for f in features[:20])
    return shown if len(features) <= 20 else f"{shown}, ... ({len(features)} in all)"


@functools.cache
def shipped_model() -> GradeModel:
    """The model shipped beside this module (read once per process)."""
    try:
        data = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: JSON syntax and undecodable bytes alike
        raise ConfigError(f"the local grader's model {MODEL_FILE} cannot be read ({exc}): {REFIT}") from exc
    return GradeModel.from_json(data, source=str(MODEL_FILE))


def fit_logistic(
    x: np.ndarray, y: Sequence[bool] | np.ndarray, *, l2: float = 1.0, sample_weight: np.ndarray | None = None,
    iterations: int = 50,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, scale, weights, intercept) of an L2-penalised logistic regression, by Newton's method.

    Columns are standardised first (a constant column gets scale 1 and, through the
    penalty, weight 0); the intercept is not penalised.
    """
    x = np.asarray(x, dtype=float)
    target = np.asarray(y, dtype=float)
    if x.ndim != 2 or x.shape[0] != target.shape[0] or x.shape[0] == 0:
        raise ValueError(f"fit_logistic needs an (n, d) matrix and n labels, got {x.shape} and {target.shape}")
    if target.min() == target.max():
        raise ValueError("fit_logistic needs both classes among the labels")
    weight = np.ones(len(target)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    design = np.hstack([np.ones((x.shape[0], 1)), (x - mean) / scale])
    beta = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], float(l2))
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (weight * (p - target)) + penalty * beta
        hessian = (design * (weight * p * (1 - p))[:, None]).T @ design + np.diag(penalty) + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return mean, scale, beta[1:], float(beta[0])


__all__ = ["CONCERNS", "FEATURES", "FEATURE_VERSION", "MODEL_FILE", "GradeModel", "fit_logistic", "shipped_model"]
