"""The whole evaluation as one call: ``ragbus eval`` and ``bench/eval_quality.py`` run this.

Fast retrieval rows run on every query; the full pipeline and its A/B rows run on a
fixed random sample of answerable queries (and of abstain cases), stated in the
results, because each query crosses the embedded runtime (about 0.1-0.3 s each on
two cores).

The pipeline samples are drawn from one split of the cases (see
:mod:`shared.tools.eval.dataset`): the held-out split by default, so the abstention,
false-abstention, answer and grader-AUC figures are reported on cases no threshold was
fit on; ``split="calibration"`` gives the figures to fit thresholds on. The retrieval
rows (nothing in them is fit on the grader) run on every query of the set.
"""

from __future__ import annotations

import logging
import os
import platform
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.runtime.readiness import require_ready
from shared.runtime.stages import QUERY_STAGES
from shared.tools.eval.dataset import (
    HELDOUT,
    SPLIT_RULE,
    SPLITS,
    EvalQuery,
    EvalSet,
    build_fitz_gov,
    split_of,
)
from shared.tools.eval.metrics import ndcg_at_k, paired_bootstrap, ranking_metrics
from shared.tools.eval.own_contexts import abstained_by_subcategory, grade_on_own_contexts
from shared.tools.eval.pipeline import (
    ABLATIONS,
    FULL,
    PipelineConfig,
    PipelineRun,
    QueryResult,
    check_provider,
    pipeline_settings,
    run_pipeline,
)
from shared.tools.eval.quality import answer_quality, calibration, stage_latency
from shared.tools.eval.retrieval import (
    RetrievalRun,
    embed_cached,
    fill_index,
    open_index,
    retrieval_rows,
    short_passages,
    texts_key,
)
from shared.tools.eval.targets import PROVIDERS, TARGETS, all_met, select_providers, verdicts

log = logging.getLogger("ragbus.eval")

Progress = Callable[[str], None]


@dataclass
class EvalOptions:
    cache_dir: Path = Path(".ragbus-eval")
    sample: int = 500  # answerable queries through the pipeline (0: none; >= all: every query)
    abstain_sample: int = 200
    seed: int = 7
    ablations: bool = True
    concurrency: int = 2
    query_timeout_s: float = 120.0  # per question; a small model on a slow CPU may need more
    slice_queries: int | None = None  # a fixed small slice (the smoke test's) instead of the whole set
    split: str = HELDOUT  # the cases the pipeline samples come from: heldout, calibration or all
    weights: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    configs: list[PipelineConfig] = field(default_factory=list)
    # Providers whose full pipeline runs beside local (None: every configured one; local always runs).
    providers: list[str] | None = None
    # Per provider (not local): (answerable, abstain or None for local's proportion), a prefix of local's sample.
    provider_samples: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    environ: Mapping[str, str] | None = None  # where provider configuration is read (None: os.environ)


def machine() -> dict[str, Any]:
    import os

    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            mem_gib = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    load = None
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    commit = None
    try:
        import subprocess

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=5, cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass  # not a git checkout: the date identifies the run
    return {"cpus": os.cpu_count(), "memory_gib": mem_gib, "python": platform.python_version(),
            "platform": platform.platform(), "load_average": load, "git_commit": commit,
            "date": datetime.now(UTC).isoformat(timespec="seconds")}


def _row(name: str, metrics: dict[str, float], **extra: Any) -> dict[str, Any]:
    return {"name": name, **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()}, **extra}


@contextmanager
def scratch_home(cache: Path) -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="ragbus-eval-", dir=cache))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def kept_or_scratch_home(cache: Path, kept: str, reuse_ingest: bool) -> Iterator[Path]:
    """``cache/kept``, left in place so the next ``--reuse-ingest`` run skips the ingest, when
    reusing; otherwise a scratch home removed at the end."""
    if not reuse_ingest:
        with scratch_home(cache) as home:
            yield home
        return
    home = cache / kept
    home.mkdir(parents=True, exist_ok=True)
    yield home


def provider_figures(
    answerable: Sequence[QueryResult], abstain: Sequence[QueryResult], queries: Sequence[EvalQuery],
    abstain_queries: Sequence[EvalQuery], positions: Sequence[int], default_run: RetrievalRun,
) -> dict[str, Any]:
    """The target figures of one provider's run, their 95% intervals and the verdicts.

    ``positions`` are the queries' positions in the set, so the default retrieval row's
    ranking of each is scored beside the pipeline's (a paired comparison).
    """
    quality = answer_quality(answerable, abstain, queries)
    by_id = {r.query_id: r for r in answerable}
    pipeline_ndcg = [ndcg_at_k(by_id[q.query_id].ranking, q.relevant) for q in queries]
    retrieval_ndcg = [ndcg_at_k(default_run.rankings[i], q.relevant) for i, q in zip(positions, queries, strict=True)]
    paired = paired_bootstrap(pipeline_ndcg, retrieval_ndcg) if queries else None
    auc = auc_ci = None
    try:
        cal = calibration(answerable, abstain, [*queries, *abstain_queries])
        auc, auc_ci = cal["auc"], cal["auc_ci95"]
    except ValueError:  # one class only (a tiny sample): no ROC exists
        pass
    figures = {
        "abstention_accuracy": quality["abstention_accuracy"],
        "false_abstention_rate": quality["false_abstention_rate"],
        "grader_auc": auc,
        "element_coverage": quality["element_coverage"],
        "citation_precision": quality["citation_precision"],
        "ndcg_gain_over_retrieval": paired["diff"] if paired else None,
    }
    intervals = {
        "abstention_accuracy": quality["abstention_accuracy_ci95"],
        "false_abstention_rate": quality["false_abstention_rate_ci95"],
        "grader_auc": auc_ci,
        "element_coverage": quality["element_coverage_ci95"],
        "citation_precision": quality["citation_precision_ci95"],
        "ndcg_gain_over_retrieval": [paired["diff_low"], paired["diff_high"]] if paired else None,
    }
    rows = verdicts(figures, intervals)
    ndcg = None if paired is None else {
        "pipeline": round(paired["a"], 4), "pipeline_ci95": [round(paired["a_low"], 4), round(paired["a_high"], 4)],
        "retrieval": round(paired["b"], 4), "retrieval_ci95": [round(paired["b_low"], 4), round(paired["b_high"], 4)],
        "retrieval_row": default_run.name, "queries": paired["cases"]}
    everything = [*answerable, *abstain]
    fallbacks = {
        "questions": len(everything),
        "questions_with_a_fallback": sum(bool(r.fallbacks) for r in everything),
        "by_stage": dict(sorted(Counter(stage for r in everything for stage in r.fallbacks).items())),
    }
    outcome = {r.query_id: r.outcome for r in abstain}
    ran_abstain = [q for q in abstain_queries if q.query_id in outcome]
    by_subcategory = abstained_by_subcategory(
        ran_abstain, [outcome[q.query_id] == "not_answerable" for q in ran_abstain])
    return {"figures": {k: None if v is None else round(float(v), 4) for k, v in figures.items()},
            "ndcg@10": ndcg, "verdicts": rows, "all_met": all_met(rows), "model_fallbacks": fallbacks,
            "abstained_by_subcategory": by_subcategory}


@dataclass
class _EvalContext:
    """What every step of one :func:`run_eval` reads: the options, the set, its embedded index."""

    options: EvalOptions
    say: Progress
    evalset: EvalSet
    embedder: Any
    index_path: Path


@dataclass
class _Sample:
    """The pipeline's sample: positions in the set's answerable queries and abstain cases, in
    draw order (a provider's smaller sample is a prefix of the draw) and sorted (local's)."""

    draw: list[int]
    abstain_draw: list[int]
    positions: list[int]
    queries: list[EvalQuery]
    abstain: list[EvalQuery]


def run_eval(options: EvalOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Every measurement of the issue's items 1-3 and 6; the results as one JSON-ready dict.

    Raises :class:`ConfigError` before any work when a provider named in
    ``options.providers`` cannot run, and before the pipeline runs when a provider to
    run cannot answer a first question.
    """
    say = progress or (lambda _msg: None)
    providers, not_run = select_providers(options.providers, os.environ if options.environ is None
                                          else options.environ)
    # local always runs, and its grader needs its fitted model: a missing or stale grade_model.json
    # fails here with the way to refit, not after the set is embedded and indexed
    require_ready(pipeline_settings(options.cache_dir, FULL), QUERY_STAGES)

    started = time.perf_counter()
    timings: dict[str, float] = {}
    ctx, query_vectors = _embed_and_index(options, say, timings)
    remote = [p for p in providers if p != "local"] if options.sample else []
    _check_providers(ctx, remote)

    t = time.perf_counter()
    runs = retrieval_rows(ctx.index_path, ctx.evalset, query_vectors, dimension=ctx.embedder.dimension,
                          weights=options.weights, progress=say)
    timings["retrieval_rows_s"] = time.perf_counter() - t
    results = _retrieval_results(ctx, runs)
    sample = _draw_sample(ctx)
    if sample is not None:
        results["retrieval"] += _sample_retrieval_rows(runs, sample)
        _pipeline_results(ctx, results, sample, next(r for r in runs if "[default]" in r.name), remote, not_run)
    timings["total_s"] = time.perf_counter() - started
    results["timings_s"] = {k: round(v, 1) for k, v in timings.items()}
    return results


def _embed_and_index(options: EvalOptions, say: Progress,
                     timings: dict[str, float]) -> tuple[_EvalContext, Any]:
    """The set (an unknown split name fails here, before any work), its passages embedded into an
    index under the cache and its answerable queries' vectors."""
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    full = build_fitz_gov()
    evalset: EvalSet = full.slice(options.slice_queries) if options.slice_queries else full
    evalset.split(options.split)
    say(f"set {evalset.key}: {len(evalset.passages)} passages, {len(evalset.queries)} queries, "
        f"{len(evalset.abstain)} abstain cases")
    embedder = OnnxMiniLMEmbedder()
    cache = options.cache_dir

    t = time.perf_counter()
    passage_vectors = embed_cached([p.text for p in evalset.passages], embedder, cache, evalset.key)
    every = [*evalset.queries, *evalset.abstain]
    texts = [q.text for q in every]
    query_vectors_all = embed_cached(texts, embedder, cache, "queries-" + texts_key(texts))
    query_vectors = query_vectors_all[: len(evalset.queries)]
    timings["embed_s"] = time.perf_counter() - t

    t = time.perf_counter()
    index_path = cache / f"index-{evalset.key}"
    index = open_index(index_path, embedder.dimension)
    fill_index(index, evalset, passage_vectors)
    index.close()
    timings["index_s"] = time.perf_counter() - t
    say(f"embedded and indexed in {timings['embed_s'] + timings['index_s']:.1f}s")
    return _EvalContext(options, say, evalset, embedder, index_path), query_vectors


def _check_providers(ctx: _EvalContext, remote: list[str]) -> None:
    """One question to each remote provider before the long runs: one that cannot answer fails now."""
    for provider in remote:
        ctx.say(f"checking the {provider} provider with one question")
        with scratch_home(ctx.options.cache_dir) as home:
            model = check_provider(PipelineConfig(f"full pipeline ({provider})", provider=provider), home=home,
                                   index_path=ctx.index_path, embedder=ctx.embedder,
                                   dimension=ctx.embedder.dimension, query_timeout_s=ctx.options.query_timeout_s)
        ctx.say(f"  {provider}: {model} answers")


def _retrieval_results(ctx: _EvalContext, runs: list[RetrievalRun]) -> dict[str, Any]:
    """The results' head: the dataset, the embedder, the machine, the retrieval rows and the split."""
    evalset, options = ctx.evalset, ctx.options
    return {
        "dataset": {
            "name": "fitz-gov", "version": evalset.version, "tier": "tier1_core (core)", "synthetic": True,
            "passages": len(evalset.passages), "queries": len(evalset.queries), "abstain_cases": len(evalset.abstain),
            "passages_under_100_chars": len(short_passages(evalset)),
            "queries_with_required_elements": sum(1 for q in evalset.queries if q.required_elements),
        },
        "embedder": f"{ctx.embedder.model_name} (int8 ONNX)",
        "machine": machine(),
        "retrieval": [_row(r.name, r.metrics, seconds=round(r.seconds, 2)) for r in runs],
        "split": {
            "rule": SPLIT_RULE,
            "pipeline_reported_on": options.split,
            **{name: {"answerable": len(part.queries), "abstain": len(part.abstain)}
               for name in SPLITS for part in [evalset.split(name)]},
        },
    }


def _draw_sample(ctx: _EvalContext) -> _Sample | None:
    """The pipeline's sample from the options' split (None when it is empty: ``--sample 0``)."""
    options, evalset = ctx.options, ctx.evalset

    def in_split(q) -> bool:
        return options.split == "all" or split_of(q.query_id) == options.split

    # Positions in evalset.queries (so the retrieval rows' rankings can be re-scored on the sample).
    eligible = [i for i, q in enumerate(evalset.queries) if in_split(q)]
    eligible_abstain = [i for i, q in enumerate(evalset.abstain) if in_split(q)]
    sample_n = min(options.sample, len(eligible))
    if not sample_n:
        return None
    # Draw order is kept: a provider's smaller sample is a prefix of the draw, so it is a
    # subset of local's sample and local's figures on exactly those queries sit beside it.
    draw = random.Random(options.seed).sample(eligible, sample_n) if sample_n < len(eligible) else eligible
    abstain_n = min(options.abstain_sample, len(eligible_abstain))
    abstain_draw = random.Random(options.seed + 1).sample(eligible_abstain, abstain_n)
    positions, abstain_idx = sorted(draw), sorted(abstain_draw)
    return _Sample(draw, abstain_draw, positions, [evalset.queries[i] for i in positions],
                   [evalset.abstain[i] for i in abstain_idx])


def _sample_retrieval_rows(runs: list[RetrievalRun], sample: _Sample) -> list[dict[str, Any]]:
    """The fast rows again on exactly the sample, so pipeline rows compare like with like."""
    rows = []
    for r in runs:
        if r.name == "dense" or r.name.startswith(("bm25 ", "rrf k=60 (dense + H")) or "[default]" in r.name:
            ranks = [r.rankings[i] for i in sample.positions]
            rows.append(_row(f"{r.name} (pipeline sample)",
                             ranking_metrics(ranks, [q.relevant for q in sample.queries])))
    return rows


def _run_config(ctx: _EvalContext, config: PipelineConfig, qs: list[EvalQuery],
                abs_: list[EvalQuery]) -> tuple[dict[str, Any], PipelineRun, list[QueryResult]]:
    """One pipeline configuration over answerable ``qs`` and abstain cases ``abs_``: its row, its
    run and the abstain cases' results."""
    options, say, embedder = ctx.options, ctx.say, ctx.embedder
    with scratch_home(options.cache_dir) as home:
        t = time.perf_counter()
        say(f"pipeline: {config.name} ({len(qs)} + {len(abs_)} abstain queries)")
        ran = run_pipeline(qs, config, home=home, index_path=ctx.index_path, embedder=embedder,
                           dimension=embedder.dimension, concurrency=options.concurrency,
                           progress=lambda d, n: say(f"  {d}/{n}"), query_timeout_s=options.query_timeout_s)
        ran_abstain = run_pipeline(abs_, config, home=home / "abstain", index_path=ctx.index_path,
                                   embedder=embedder, dimension=embedder.dimension,
                                   concurrency=options.concurrency,
                                   query_timeout_s=options.query_timeout_s) if abs_ else None
        seconds = time.perf_counter() - t
    metrics = ranking_metrics([r.ranking for r in ran.results], [q.relevant for q in qs])
    quality = answer_quality(ran.results, ran_abstain.results if ran_abstain else [], qs)
    latency = stage_latency(ran.results)
    row = _row(config.name, metrics, config=asdict(config), model=ran.model, seconds=round(seconds, 1),
               per_query_ms=round(ran.seconds / max(1, len(qs)) * 1000, 1),
               errors=ran.errors[:10] + (ran_abstain.errors[:10] if ran_abstain else []),
               answer_quality=quality, stage_latency_ms=latency)
    say(f"  nDCG@10 {metrics['ndcg@10']:.3f}, abstention {quality['abstention_accuracy']}, "
        f"{seconds:.0f}s")
    return row, ran, ran_abstain.results if ran_abstain else []


def _pipeline_results(ctx: _EvalContext, results: dict[str, Any], sample: _Sample, default_run: RetrievalRun,
                      remote: list[str], not_run: dict[str, str]) -> None:
    """The pipeline rows (local's configurations, then each remote provider's full pipeline), the
    calibration, the grader on the sample's own contexts and the targets, added to ``results``."""
    options, queries, abstain = ctx.options, sample.queries, sample.abstain
    configs = options.configs or ([FULL, *ABLATIONS] if options.ablations else [FULL])
    pipeline_rows: list[dict[str, Any]] = []
    full_run: tuple[PipelineRun, list[QueryResult]] | None = None
    for config in configs:
        row, ran, abstain_results = _run_config(ctx, config, queries, abstain)
        pipeline_rows.append(row)
        if config == FULL:
            full_run = (ran, abstain_results)
    provider_reports: dict[str, Any] = {name: {"status": why} for name, why in not_run.items()}
    if full_run is not None:
        ran, abstain_results = full_run
        provider_reports["local"] = {
            "status": "ran", "model": ran.model, "answerable": len(queries), "abstain": len(abstain),
            **provider_figures(ran.results, abstain_results, queries, abstain, sample.positions, default_run)}
    for provider in remote:
        provider_reports[provider] = _remote_report(ctx, provider, sample, default_run, full_run, pipeline_rows)
    results["pipeline"] = {
        "sample": {"answerable": len(queries), "abstain": len(abstain), "seed": options.seed,
                   "split": options.split,
                   "how": f"random.Random(seed).sample of the {options.split} split's answerable query "
                          "positions; its abstain cases with seed+1"},
        "rows": pipeline_rows,
    }
    if full_run is not None:
        ran, abstain_results = full_run
        results["calibration"] = calibration(ran.results, abstain_results, [*queries, *abstain])
        results["calibration"]["local_grade_model"] = _grade_model_provenance()
    if queries and abstain:
        ctx.say(f"grader on the sample's own contexts (fitz-gov's protocol): {len(queries)} + {len(abstain)} cases")
        results["own_contexts"] = {"provider": "local", **_own_contexts_figures(
            queries, abstain, ctx.evalset, ctx.index_path, ctx.embedder)}
    results["targets"] = {
        "reported_on": options.split,
        "verdict_rule": "met on the point estimate; ci95 is a 95% interval (Wilson for the abstention rates, "
                        "bootstrap over cases otherwise); a figure that could not be measured is not met",
        "targets": [{"figure": t.figure, "what": t.what, "goal": t.goal} for t in TARGETS],
        "providers": {name: provider_reports[name] for name in PROVIDERS if name in provider_reports},
    }


def _remote_report(ctx: _EvalContext, provider: str, sample: _Sample, default_run: RetrievalRun,
                   full_run: tuple[PipelineRun, list[QueryResult]] | None,
                   pipeline_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A remote provider's full pipeline on a prefix of local's draw (its row appended to
    ``pipeline_rows``): its report, with local's figures on exactly those queries beside it."""
    sample_n, abstain_n = len(sample.draw), len(sample.abstain_draw)
    a, b = ctx.options.provider_samples.get(provider, (sample_n, None))
    a = min(a, sample_n)
    b = min(abstain_n, round(abstain_n * a / sample_n) if b is None else b)
    sub, sub_abstain = sorted(sample.draw[:a]), sorted(sample.abstain_draw[:b])
    qs = [ctx.evalset.queries[i] for i in sub]
    abs_ = [ctx.evalset.abstain[i] for i in sub_abstain]
    row, ran, abstain_results = _run_config(ctx, PipelineConfig(f"full pipeline ({provider})", provider=provider),
                                            qs, abs_)
    pipeline_rows.append(row)
    report = {"status": "ran", "model": ran.model, "answerable": len(qs), "abstain": len(abs_),
              **provider_figures(ran.results, abstain_results, qs, abs_, sub, default_run)}
    if full_run is not None:  # local on exactly these queries, for a side-by-side
        ids = {q.query_id for q in (*qs, *abs_)}
        local_ran, local_abstain = full_run
        report["local_on_the_same_queries"] = provider_figures(
            [r for r in local_ran.results if r.query_id in ids],
            [r for r in local_abstain if r.query_id in ids], qs, abs_, sub, default_run)["figures"]
    return report


def _grade_model_provenance() -> dict[str, Any]:
    """Which fitted model the local grader scored with (shared/adapters/local/grade_model.json)."""
    from shared.adapters.local.grade_model import FEATURE_VERSION, MODEL_FILE, shipped_model

    model = shipped_model()
    return {"file": MODEL_FILE.name, "feature_version": FEATURE_VERSION, "features": len(model.features),
            "answerable_from": round(model.answerable_from, 4),
            **{k: model.fitted.get(k) for k in ("split", "date", "l2", "fitz_gov")}}


def _own_contexts_figures(queries: list[EvalQuery], abstain: list[EvalQuery], evalset: EvalSet, index_path: Path,
                          embedder: Any) -> dict[str, Any]:
    """:func:`~shared.tools.eval.own_contexts.grade_on_own_contexts` with the local model over the eval index."""
    from shared.adapters.local.llm import LocalLanguageModel
    from shared.contract.config import load_settings

    index = open_index(index_path, embedder.dimension)
    try:
        llm = LocalLanguageModel(index, embedder)
        return grade_on_own_contexts(queries, abstain, {p.passage_id: p.text for p in evalset.passages}, llm,
                                     load_settings({}))
    finally:
        index.close()


def targets_missed(results: dict[str, Any]) -> list[str]:
    """``"provider: what value (goal)"`` for every target a provider that ran did not meet;
    a run in which no provider's pipeline ran (``--sample 0``) judged nothing, which is a miss too."""
    ran = {name: report for name, report in results.get("targets", {}).get("providers", {}).items()
           if report.get("status") == "ran"}
    if not ran:
        return ["no provider's full pipeline ran (--sample 0?): no target was judged"]
    missed = []
    for name, report in ran.items():
        for row in report["verdicts"]:
            if row["met"] is not True:
                value = "not measured" if row["value"] is None else f"{row['value']:.3f}"
                missed.append(f"{name}: {row['what']} {value} (goal {row['goal']})")
    return missed
