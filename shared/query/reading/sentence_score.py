"""The reader's sentence score (issue 36): how strongly :class:`~shared.query.reading.extractive.Reader` weighs
what it scores a sentence on (:data:`SCORED_ON`), a ranking model fit by ``bench/fit_scorer.py`` on the realtext set's
development part (a softmax over each question's scored sentences toward those holding its key strings from its file,
judged leaving one writer out), shipped in ``sentence_score.json`` with how it was fit; a file fit on other columns is
refused with the way to refit.
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
from shared.query.reading.verdict import finite_numbers, read_model_file

#: What a sentence is scored on, in the order of the weights (bump SCORE_VERSION with any change of meaning).
SCORED_ON: tuple[str, ...] = (
    "cosine",  # MiniLM cosine of the question and the sentence, read under its section's heading
    "subject",  # the share of the question's terms it holds (with what it leans on, or its section's heading),
    # each weighed by how few retrieved sentences hold it: the asked subject's terms, not the corpus's
    "states",  # 1 when it states a value of the type the question asks for
    "rank",  # 1 / its passage's retrieval rank
    "word_order",  # share of the question's word pairs it holds in the same order
    "definition",  # 1 when a definition's subject ("What is X?") opens it ("X is ...")
    "before",  # the asked subject's share (as "subject") the sentence before it adds: it names what this one states
)
# 1 hand-chosen; 2 fitted, over the asked subject's share; 3 "before" (a sentence stating the value after one restating
# the subject), without "lacks" (the asked value), which the fit weighed 0
SCORE_VERSION = 3

SCORE_FILE = Path(__file__).with_name("sentence_score.json")
REFIT = "refit it with `python bench/fit_scorer.py` (fits on the realtext set's development part)"


@dataclass(frozen=True)
class SentenceScore:
    """The weights of :data:`SCORED_ON` (a sentence's score is its columns' dot product with them); ``fitted``
    records how and on what."""

    weights: tuple[float, ...]
    fitted: dict[str, Any] = field(default_factory=dict, compare=False)

    def vector(self) -> np.ndarray:
        return np.array(self.weights, dtype=np.float32)

    def to_json(self) -> dict[str, Any]:
        return {"score_version": SCORE_VERSION, "columns": list(SCORED_ON),
                "weights": [round(float(w), 6) for w in self.weights], "fitted": self.fitted}

    @classmethod
    def from_json(cls, data: Any, *, source: str = "the reader's sentence score") -> SentenceScore:
        """The score ``data`` describes; :class:`ConfigError` when it was fit on other columns or a weight is not a
        finite number (a damaged or hand-edited file is refused, never misread)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} holds a JSON {type(data).__name__}, not the score's object: {REFIT}")
        if data.get("score_version") != SCORE_VERSION or data.get("columns") != list(SCORED_ON):
            raise ConfigError(f"{source} was fit on columns {data.get('columns')!r} (version "
                              f"{data.get('score_version')!r}), but the reader scores {list(SCORED_ON)} (version "
                              f"{SCORE_VERSION}): {REFIT}")
        weights = finite_numbers(data.get("weights"), f"{source}: weights", len(SCORED_ON), REFIT)
        fitted = data.get("fitted") or {}
        if not isinstance(fitted, Mapping):
            raise ConfigError(f"{source}: 'fitted' is not an object: {REFIT}")
        return cls(tuple(float(w) for w in weights), dict(fitted))

    def save(self, path: Path = SCORE_FILE) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")


@functools.cache
def shipped_sentence_score() -> SentenceScore:
    """The score shipped beside this module (read once per process)."""
    return SentenceScore.from_json(read_model_file(SCORE_FILE, "the reader's sentence score", REFIT),
                                   source=str(SCORE_FILE))


__all__ = ["SCORED_ON", "SCORE_FILE", "SCORE_VERSION", "SentenceScore", "shipped_sentence_score"]
