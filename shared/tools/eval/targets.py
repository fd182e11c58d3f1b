"""The answer-quality targets of issue 11 and the verdict on each, per provider.

A provider's figures come from one full-pipeline run on the reported split (held-out
by default); each target row carries the figure, a 95% interval and whether the
target is met. A verdict is taken on the point estimate, as the issue states its
targets; the interval says how firm it is (a figure 0.02 over its bound on 100
cases is within noise). ``met`` is None when the figure could not be measured on
the sample (e.g. no answered case with required elements): never counted as met.

Which providers can run is decided from the environment by the provider registry
(shared/contract/providers.py): ``local`` always; ``openai`` when ``RAGBUS_OPENAI_BASE_URL`` is
set; ``gemini`` with an API key (``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``) or a Vertex AI project.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.contract.config import provider_missing
from shared.contract.errors import ConfigError
from shared.contract.providers import PROVIDER_NAMES

PROVIDERS = PROVIDER_NAMES


@dataclass(frozen=True)
class Target:
    """One target: ``figure`` (a key of the provider's figures) compared with ``bound``."""

    figure: str
    what: str
    op: str  # ">=" or "<="
    bound: float

    @property
    def goal(self) -> str:
        return f"{self.op} {self.bound:g}"

    def met(self, value: float | None) -> bool | None:
        if value is None:
            return None
        compare = operator.ge if self.op == ">=" else operator.le
        return bool(compare(value, self.bound))


TARGETS: tuple[Target, ...] = (
    Target("abstention_accuracy", "abstention accuracy (must-abstain cases)", ">=", 0.6),
    Target("false_abstention_rate", "false abstention (answerable cases)", "<=", 0.05),
    Target("grader_auc", "grader ROC AUC", ">=", 0.8),
    Target("element_coverage", "element coverage (answered cases with required elements)", ">=", 0.4),
    Target("citation_precision", "citation precision", ">=", 0.6),
    Target("ndcg_gain_over_retrieval",
           "pipeline nDCG@10 minus default retrieval's (hybrid 0.7) on the same queries", ">=", 0.0),
)


def verdicts(figures: Mapping[str, float | None], intervals: Mapping[str, Sequence[float] | None]) -> list[dict]:
    """One row per target: figure, its 95% interval, the goal and whether it is met."""
    rows = []
    for target in TARGETS:
        value = figures.get(target.figure)
        ci = intervals.get(target.figure)
        rows.append({"figure": target.figure, "what": target.what, "goal": target.goal,
                     "value": None if value is None else round(float(value), 4),
                     "ci95": None if ci is None else [round(float(ci[0]), 4), round(float(ci[1]), 4)],
                     "met": target.met(value)})
    return rows


def all_met(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Every target met (a figure that could not be measured is not met)."""
    return all(row["met"] is True for row in rows)


def provider_configured(name: str, env: Mapping[str, str]) -> str | None:
    """None when ``name`` can be run from ``env``; otherwise what is missing (the "not configured" reason)."""
    if name not in PROVIDERS:
        raise ConfigError(f"unknown provider {name!r}: choose from {', '.join(PROVIDERS)}")
    return provider_missing(name, env)


def parse_providers(spec: str | None) -> list[str] | None:
    """``"local,openai"`` -> ["local", "openai"]; None or "auto" -> None (every configured provider)."""
    if spec is None or spec.strip().lower() in {"", "auto"}:
        return None
    names = [n.strip().lower() for n in spec.split(",") if n.strip()]
    for name in names:
        if name not in PROVIDERS:
            raise ConfigError(f"--providers {spec!r}: unknown provider {name!r}; choose from {', '.join(PROVIDERS)} "
                              "(or auto: every configured one)")
    return list(dict.fromkeys(names))


def select_providers(requested: Sequence[str] | None, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The providers to run and, for the others, why not.

    ``local`` always runs (the reference the others are compared with). ``requested``
    None: every configured provider runs too, and the rest are listed as not configured.
    Named providers: each must be configured (a named provider that cannot run is an
    error, not a silent skip); the unnamed ones are listed as not requested.
    """
    skipped: dict[str, str] = {}
    run: list[str] = []
    for name in PROVIDERS:
        missing = provider_configured(name, env)
        if name == "local":
            run.append(name)
        elif requested is None:
            if missing is None:
                run.append(name)
            else:
                skipped[name] = f"not configured ({missing})"
        elif name in requested:
            if missing is not None:
                raise ConfigError(f"provider {name} was asked for but cannot run: {missing}")
            run.append(name)
        else:
            skipped[name] = "not requested" if missing is None else f"not configured ({missing})"
    return run, skipped


def parse_provider_samples(specs: Sequence[str]) -> dict[str, tuple[int, int | None]]:
    """``["openai=40/20", "gemini=100"]`` -> {"openai": (40, 20), "gemini": (100, None)} (None: in proportion)."""
    out: dict[str, tuple[int, int | None]] = {}
    for spec in specs:
        name, sep, sizes = spec.partition("=")
        name = name.strip().lower()
        try:
            if not sep or name not in PROVIDERS:
                raise ValueError
            answerable, _, abstain = sizes.partition("/")
            a = int(answerable)
            b = int(abstain) if abstain.strip() else None
            if a < 1 or (b is not None and b < 0):
                raise ValueError
        except ValueError:
            raise ConfigError(f"--provider-sample {spec!r}: write PROVIDER=ANSWERABLE[/ABSTAIN], e.g. openai=40/20, "
                              f"with PROVIDER one of {', '.join(PROVIDERS)}") from None
        out[name] = (a, b)
    return out
