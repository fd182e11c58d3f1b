"""The full query loop over the evaluation set, through the embedded runtime.

Each configuration gets its own runtime (SQLite bus and state in a fresh home) over
one shared :class:`~shared.adapters.local.index.HybridIndex` holding every passage,
and asks its queries with :func:`shared.query.api.submit_query` /
:func:`~shared.query.api.wait_for_query`, exactly as the CLI and gateway do: the
transformer, retriever, grader and synthesizer handlers run unmodified.

The enhancements are switched off without touching the stages:

- ``transform=False``: the rewrite is the question itself (no acronym expansion,
  temporal context or feedback terms); decomposition still applies;
- ``decompose=False``: the rewrite, without sub-queries;
- ``dense_weight=1.0``: the index's hybrid score is the normalised cosine alone,
  which ranks exactly as dense search (BM25 candidates cannot outrank the dense top);
- ``max_iterations=0``: no refinement (the grade still decides answer or abstain).

``provider`` picks the language model as ``RAGBUS_LLM`` does, built by the runtime's one
wiring place (:func:`~shared.runtime.bootstrap.build_local`) over the evaluation's index
and embedder; a provider other than ``local`` reads its own variables (base URL, model,
key, project) from the process environment, every other setting keeps its default.

A query's ranking is the contexts of the record's best iteration, in order (the
ones the answer is written from); its first-iteration grade feeds the calibration.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from shared.adapters.local.decomposition import decompose
from shared.adapters.local.index import HybridIndex
from shared.contract.config import Settings, load_settings
from shared.contract.errors import ConfigError
from shared.contract.ports import Embedder, Grade, LanguageModel, Transformation
from shared.contract.providers import PROVIDERS
from shared.query.api import submit_query, wait_for_query
from shared.query.record import QueryRecord
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import CONSUMERS, QUERY_STAGES
from shared.tools.eval.dataset import EvalQuery

log = logging.getLogger("ragbus.eval")


@dataclass(frozen=True)
class PipelineConfig:
    """One row of the A/B table: which enhancements are on."""

    name: str
    transform: bool = True
    decompose: bool = True
    dense_weight: float = 0.7
    max_iterations: int | None = None  # None: the setting's default (RAGBUS_MAX_ITERATIONS, 2)
    provider: str = "local"  # RAGBUS_LLM for this row


FULL = PipelineConfig("full pipeline")
ABLATIONS = (
    PipelineConfig("without rewrite (transform off)", transform=False),
    PipelineConfig("without decomposition", decompose=False),
    PipelineConfig("without hybrid (dense only)", dense_weight=1.0),
    PipelineConfig("without grading-driven refinement (max_iterations=0)", max_iterations=0),
)


# The variables a provider other than local reads (its endpoint, model, key, project).
PROVIDER_VARIABLE_PREFIXES = tuple(dict.fromkeys(x for p in PROVIDERS for x in p.variable_prefixes))


def provider_environment(provider: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """``RAGBUS_LLM=provider`` and, for a remote provider, its own variables from ``environ``."""
    if provider == "local":
        return {}
    environ = dict(os.environ if environ is None else environ)
    return {"RAGBUS_LLM": provider,
            **{k: v for k, v in environ.items() if k.startswith(PROVIDER_VARIABLE_PREFIXES)}}


class SwitchedLanguageModel:
    """A :class:`~shared.contract.ports.LanguageModel` with the rewrite and/or decomposition switched off."""

    def __init__(self, inner: LanguageModel, *, rewrite: bool, decomposition: bool) -> None:
        self.inner = inner
        self.rewrite = rewrite
        self.decomposition = decomposition
        self.provider = getattr(inner, "provider", "local")
        self.model = getattr(inner, "model", "")

    def transform(self, query: str, *, today: date) -> Transformation:
        if self.rewrite:
            base = self.inner.transform(query, today=today)
            return Transformation(base.rewritten, base.sub_queries if self.decomposition else [], base.reasoning)
        subs = decompose(query) if self.decomposition else []
        return Transformation(query, subs, "eval: rewrite switched off")

    def __getattr__(self, name: str) -> Any:  # refine, grade, synthesize unchanged
        return getattr(self.inner, name)


@dataclass
class QueryResult:
    """What one query's record says, reduced to what the measurements need."""

    query_id: str
    status: str
    outcome: str | None
    ranking: list[str]  # passage ids of the best iteration's contexts, in order
    first_ranking: list[str]  # iteration 0's
    first_grade: Grade | None
    iterations: int
    answer: str
    cited: list[str]  # passage ids of the citations, in citation order
    timings_ms: dict[str, float]  # summed per stage over iterations
    total_ms: float
    fallbacks: list[str] = field(default_factory=list)  # stages that answered without the model (one per time)


@dataclass
class PipelineRun:
    config: PipelineConfig
    results: list[QueryResult]
    seconds: float
    errors: list[str] = field(default_factory=list)
    model: str = ""  # provider/model that answered, e.g. "local/extractive" or "openai/gemma3"


def ask_each(count: int, one: Callable[[int], None], concurrency: int, *, every: int,
             progress: Callable[[int, int], None] | None = None) -> None:
    """``one(i)`` for every i below ``count``, ``concurrency`` at once; ``progress(done, count)``
    every ``every`` done and at the end. The first exception from ``one`` ends the run."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for done, _ in enumerate(pool.map(one, range(count)), 1):
            if progress and (done % every == 0 or done == count):
                progress(done, count)


def reduce_record(record: QueryRecord) -> QueryResult:
    from datetime import datetime

    iterations = sorted(record.iterations, key=lambda e: e.iteration)
    best = record.best_entry()
    first = record.entry(0)
    timings: dict[str, float] = {}
    for entry in iterations:
        for stage, ms in entry.timings.items():
            timings[stage] = timings.get(stage, 0.0) + float(ms)
    total = 0.0
    if record.created_at and record.updated_at:
        total = (datetime.fromisoformat(record.updated_at)
                 - datetime.fromisoformat(record.created_at)).total_seconds() * 1000
    return QueryResult(
        query_id=record.id,
        status=record.status or "",
        outcome=record.outcome,
        ranking=[c.get("document_id", "") for c in best.contexts] if best else [],
        first_ranking=[c.get("document_id", "") for c in first.contexts] if first else [],
        first_grade=first.grade if first else None,
        iterations=len(iterations),
        answer=record.answer or "",
        cited=[c.get("document_id", "") for c in record.citations],
        timings_ms=timings,
        total_ms=total,
        fallbacks=[str(f.get("stage", "?")) for f in record.fallbacks],
    )


def pipeline_settings(home: Path, config: PipelineConfig) -> Settings:
    """The settings a :class:`PipelineRunner` for ``config`` runs with: the defaults (no ``RAGBUS_*``
    variable of the caller's shell leaks into a measurement), the provider's own variables, and
    ``config.max_iterations``."""
    env = {"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0", **provider_environment(config.provider)}
    settings = load_settings(env)
    if config.max_iterations is not None:
        settings = settings.with_(max_iterations=config.max_iterations)
    return settings


class PipelineRunner:
    """An embedded runtime for one configuration, over an index already holding the passages."""

    def __init__(self, home: Path, index_path: Path, config: PipelineConfig, *, embedder: Embedder,
                 dimension: int, query_timeout_s: float = 120.0) -> None:
        self.query_timeout_s = query_timeout_s
        settings = pipeline_settings(home, config)
        self.config = config
        self.index = HybridIndex(index_path, dimension, dense_weight=config.dense_weight)
        self.system = build_local(settings, index=self.index, embedder=embedder)
        self.deps = self.system.deps
        llm: LanguageModel = self.deps.llm  # built now: a misconfigured provider fails before any query
        if not (config.transform and config.decompose):
            self.deps.override("llm", SwitchedLanguageModel(llm, rewrite=config.transform,
                                                            decomposition=config.decompose))
        self.runtime = LocalRuntime(self.deps, self.system.bus, [c for c in CONSUMERS if c.stage in QUERY_STAGES])

    def __enter__(self) -> PipelineRunner:
        self.index.snapshot()
        self.runtime.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.runtime.stop()
        self.index.close()

    def ask(self, text: str, timeout_s: float | None = None) -> QueryRecord:
        timeout_s = timeout_s or self.query_timeout_s
        record = submit_query(self.deps, text, timeout_s=min(600.0, timeout_s))
        return wait_for_query(self.deps, record.id, timeout_s)


def model_name(llm: LanguageModel) -> str:
    inner = getattr(llm, "inner", llm)  # through SwitchedLanguageModel / tracing wrappers
    return f"{getattr(inner, 'provider', '?')}/{getattr(inner, 'model', '') or 'default'}"


#: The stages that call the language model; each falls back to local work when a call fails.
MODEL_STAGES = frozenset({"transformer", "grader", "synthesizer"})


def warm_up(runner: PipelineRunner) -> None:
    """Ask one question; raise :class:`ConfigError` when it fails (every query would), or when a
    provider other than local gave no usable reply at all (every model stage fell back)."""
    warm = runner.ask("warm up the runtime")
    if warm.status in ("failed", "timed_out") or not warm.ended:
        # The first question already fails (a 404 model, a refused key, a server not
        # listening): every query would, so say it once, loudly, instead of N times.
        raise ConfigError(f"{runner.config.name}: the {runner.config.provider} provider could not answer a first "
                          f"question ({warm.status}: {warm.error or 'no error recorded'}); check its configuration")
    fell_back = {str(f.get("stage")) for f in warm.fallbacks}
    if runner.config.provider != "local" and fell_back >= MODEL_STAGES:
        # Answered, but only by the stages' own fallbacks: figures of this run would be the
        # local fallbacks' under the provider's name.
        reasons = "; ".join(sorted({f"{f.get('stage')}: {f.get('reason')}" for f in warm.fallbacks}))[:600]
        raise ConfigError(f"{runner.config.name}: every model call of the {runner.config.provider} provider failed "
                          f"on a first question, so its stages fell back ({reasons}); check the server")


def check_provider(config: PipelineConfig, *, home: Path, index_path: Path, embedder: Embedder,
                   dimension: int, query_timeout_s: float = 120.0) -> str:
    """Build ``config``'s runtime and answer one question (a preflight before a long run); its model's name."""
    with PipelineRunner(home, index_path, config, embedder=embedder, dimension=dimension,
                        query_timeout_s=query_timeout_s) as runner:
        warm_up(runner)
        return model_name(runner.deps.llm)


def run_pipeline(
    queries: Sequence[EvalQuery],
    config: PipelineConfig,
    *,
    home: Path,
    index_path: Path,
    embedder: Embedder,
    dimension: int,
    concurrency: int = 2,
    progress: Callable[[int, int], None] | None = None,
    query_timeout_s: float = 120.0,
) -> PipelineRun:
    """Ask every query through the runtime (``concurrency`` in flight); results in query order."""
    results: list[QueryResult | None] = [None] * len(queries)
    errors: list[str] = []
    started = time.perf_counter()
    with PipelineRunner(home, index_path, config, embedder=embedder, dimension=dimension,
                        query_timeout_s=query_timeout_s) as runner:
        warm_up(runner)
        model = model_name(runner.deps.llm)

        def one(i: int) -> None:
            record = runner.ask(queries[i].text)
            result = reduce_record(record)
            result.query_id = queries[i].query_id
            results[i] = result
            if record.status != "answered":
                errors.append(f"{queries[i].query_id}: {record.status} {record.error or ''}".strip())

        ask_each(len(queries), one, concurrency, every=50, progress=progress)
    return PipelineRun(config, [r for r in results if r is not None], time.perf_counter() - started, errors,
                       model=model)
