"""The reader's verdict (issue 36): ``answered``, a caveat, or a refusal, decided by two logistic regressions over its
evidence (:data:`FEATURES`, measured by :class:`shared.query.reading.extractive.Reader`), not by a rule per question:
``right``, the probability that the answer holds the asked facts and cites the document that states them, and
``near_miss``, that no retrieved document states the asked fact at all.

:meth:`VerdictModel.decide` refuses (``not_answerable``) from ``refuse_from``; it answers when a quoted sentence states
what the question's shape asks (:func:`states_what_is_asked`) and ``right`` reaches that shape's threshold
(``answered_from`` for a value or a list asked, :func:`asks_checked`; ``open_answered_from`` for the rest, 1.0: never);
else a caveat, as when the quoted text lacks a name of the asked subject and names its sibling, or the stating sentences
give two values or state the value for another case than the asked one (``Reader._verdict``). Passages the local grader
refuses are read on unless the verdict refuses them (:meth:`VerdictModel.rescues`). ``bench/fit_reader.py`` fits both
models and thresholds on the real-text set's development part (writer d never: aggregate-only), judged for writers they
did not see, into ``verdict_model.json`` beside this module; one fitted on other features is refused.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shared.contract.errors import ConfigError

# Bump with any change to a feature's meaning, not only to the list: the weights belong to both.
FEATURE_VERSION = 9  # 9: limit_unstated, not overlap_heading_only (8: states_value needs the asked event)

#: The reader's evidence for the answer it would give, in the order of each model's weights.
FEATURES: tuple[str, ...] = (
    "asks_value",  # 1 when the question asks for a value of a type (a count, date, version, default, flag ...)
    "states_value",  # 1 when a quoted sentence states a value of the asked type, tied to the question's terms
    "cosine",  # MiniLM cosine of the question and the opening sentence (under its section's heading)
    "relevance_margin",  # the opening sentence's score minus the best of another document's sentence
    "relevance_gap",  # ... minus the mean of the next three's, any document's (low: many weak, alike candidates)
    "asks_list",  # 1 when the question asks for several items
    "list_unquoted",  # 1 when it does and what is quoted holds no list of short items (a lead-in without them)
    "names_unnamed",  # 1 when a name the question states is named by no source
    "asks_open",  # 1 for a how/why question (a method or a reason)
    "coverage_retrieved",  # share of the question's key terms in any retrieved passage
    # the asked subject's terms (a value's: not the words naming its type, "HTTP status code") weighed by how few
    # retrieved sentences hold them (one most hold names the corpus), the best share one sentence holds with what
    # it leans on and its heading:
    "subject_quoted",  # ... a quoted sentence
    "subject_stated",  # ... a sentence stating a value of the asked type (0: none does, or none is asked)
    "limit_unstated",  # 1 - subject_stated when a limit is asked ("the maximum ...": only a limit states it); else 0
)

MODEL_FILE = Path(__file__).with_name("verdict_model.json")
REFIT = "refit it with `python bench/fit_reader.py` (fits on the realtext set's development part)"

ANSWERED, CAVEAT, REFUSE = "answered", "caveat", "refuse"


@dataclass(frozen=True, eq=False)  # numpy arrays: compared by identity
class Logistic:
    """Standardised logistic regression: ``p = sigmoid(intercept + weights . (x - mean) / scale)``."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float

    def probability(self, values: Mapping[str, float]) -> float:
        if missing := [f for f in FEATURES if f not in values]:
            raise ValueError(f"the reader's verdict: no value for {', '.join(missing)}")
        x = np.array([float(values[f]) for f in FEATURES])
        z = self.intercept + float(((x - self.mean) / self.scale) @ self.weights)
        return float(1.0 / (1.0 + np.exp(-min(max(z, -30.0), 30.0))))  # below 1.0: a threshold of 1 is never

    def to_json(self) -> dict[str, Any]:
        return {k: [round(float(v), 6) for v in getattr(self, k)] for k in ("mean", "scale", "weights")} | {
            "intercept": round(float(self.intercept), 6)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Logistic:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} is not an object: {REFIT}")
        try:
            arrays = [finite_numbers(data[k], f"{where}.{k}") for k in ("mean", "scale", "weights")]
            intercept = finite_number(data["intercept"], f"{where}.intercept")
        except KeyError as exc:
            raise ConfigError(f"{where} is incomplete (no {exc}): {REFIT}") from None
        if np.any(arrays[1] < 1e-9):
            raise ConfigError(f"{where}.scale holds a value below 1e-9: {REFIT}")
        return cls(*arrays, intercept)


@dataclass(frozen=True, eq=False)
class VerdictModel:
    """The two models and their thresholds (see the module docstring); ``fitted`` records how and on what."""

    right: Logistic
    near_miss: Logistic
    answered_from: float
    refuse_from: float
    fitted: dict[str, Any] = field(default_factory=dict)
    open_answered_from: float | None = None  # None: answered_from (a model made by hand, as in tests)

    @property
    def open_from(self) -> float:  # the threshold for a question asking neither a value nor a list
        return self.answered_from if self.open_answered_from is None else self.open_answered_from

    def decide(self, values: Mapping[str, float]) -> tuple[str, float, float]:
        """(``answered``, ``caveat`` or ``refuse``; the probability right; the probability of a near miss)."""
        p_right, p_near = self.right.probability(values), self.near_miss.probability(values)
        if p_near >= self.refuse_from:
            return REFUSE, p_right, p_near
        answered = p_right >= (self.answered_from if asks_checked(values) else self.open_from)
        return (ANSWERED if answered and states_what_is_asked(values) else CAVEAT), p_right, p_near

    def rescues(self, values: Mapping[str, float]) -> bool:
        """Whether passages the grader's fitted probability refuses are read on: the verdict does not refuse them."""
        return self.decide(values)[0] != REFUSE

    def to_json(self) -> dict[str, Any]:
        return {"feature_version": FEATURE_VERSION, "features": list(FEATURES), "right": self.right.to_json(),
                "near_miss": self.near_miss.to_json(), "answered_from": round(self.answered_from, 4),
                "open_answered_from": round(self.open_from, 4), "refuse_from": round(self.refuse_from, 4),
                "fitted": self.fitted}

    @classmethod
    def from_json(cls, data: Any, *, source: str = "the reader's verdict model") -> VerdictModel:
        """The model ``data`` describes; :class:`ConfigError` when it was fit on other features or a value is
        not a finite number of the right shape (a damaged or hand-edited file is refused, never misread)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} holds a JSON {type(data).__name__}, not the model's object: {REFIT}")
        if data.get("feature_version") != FEATURE_VERSION or data.get("features") != list(FEATURES):
            raise ConfigError(f"{source} was fit on feature version {data.get('feature_version')!r}, but the reader "
                              f"measures version {FEATURE_VERSION} ({len(FEATURES)} features): {REFIT}")
        try:
            answered, refuse, open_answered = (finite_number(data[k], f"{source}: {k}") for k in (
                "answered_from", "refuse_from", "open_answered_from"))
        except KeyError as exc:
            raise ConfigError(f"{source} is incomplete (no {exc}): {REFIT}") from None
        if not all(0.0 < t <= 1.0 for t in (answered, refuse, open_answered)):
            raise ConfigError(f"{source}: a threshold outside (0, 1]: {REFIT}")
        if not isinstance(fitted := data.get("fitted") or {}, Mapping):
            raise ConfigError(f"{source}: 'fitted' is not an object: {REFIT}")
        return cls(Logistic.from_json(data.get("right"), f"{source}: right"),
                   Logistic.from_json(data.get("near_miss"), f"{source}: near_miss"), answered, refuse, dict(fitted),
                   open_answered)

    def save(self, path: Path = MODEL_FILE) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")


def states_what_is_asked(values: Mapping[str, float]) -> bool:
    """Whether the quoted sentences state what the question asks (``answered`` only then): a value, a list's items."""
    return not (values["asks_value"] and not values["states_value"]) and not values["list_unquoted"]


def asks_checked(values: Mapping[str, float]) -> bool:
    """Whether the question asks a value or a list, what :func:`states_what_is_asked` checks (not how, why, yes/no)."""
    return bool(values["asks_value"] or values["asks_list"])


@functools.cache
def shipped_verdict_model() -> VerdictModel:
    """The model shipped beside this module (read once per process)."""
    return VerdictModel.from_json(read_model_file(MODEL_FILE, "the reader's verdict model", REFIT), source=str(MODEL_FILE))


def read_model_file(path: Path, what: str, refit: str) -> Any:
    """The JSON a shipped model file holds; :class:`ConfigError` naming ``what`` and ``refit`` when it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{what} {path} cannot be read ({exc}): {refit}") from exc


def finite_number(value: Any, where: str, refit: str = REFIT) -> float:
    """``value`` read from a model file, which must be a finite number (``where`` and ``refit`` say, if not)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ConfigError(f"{where} is {value!r:.60}, not a finite number: {refit}")
    return float(value)


def finite_numbers(values: Any, where: str, count: int = len(FEATURES), refit: str = REFIT) -> np.ndarray:
    """``values`` read from a model file, which must be a list of ``count`` finite numbers."""
    if not isinstance(values, list) or len(values) != count:
        raise ConfigError(f"{where} is not a list of one number per feature ({count}): {refit}")
    return np.array([finite_number(v, f"{where}[{n}]", refit) for n, v in enumerate(values)], dtype=float)


__all__ = ["ANSWERED", "CAVEAT", "FEATURES", "FEATURE_VERSION", "MODEL_FILE", "REFUSE", "Logistic", "VerdictModel", "asks_checked",
           "finite_number", "finite_numbers", "read_model_file", "shipped_verdict_model", "states_what_is_asked"]
