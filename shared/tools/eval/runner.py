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
import platform
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.tools.eval.dataset import HELDOUT, SPLIT_RULE, SPLITS, EvalSet, build_fitz_gov, split_of
from shared.tools.eval.metrics import ranking_metrics
from shared.tools.eval.pipeline import ABLATIONS, FULL, PipelineConfig, PipelineRun, run_pipeline
from shared.tools.eval.quality import answer_quality, calibration, stage_latency
from shared.tools.eval.retrieval import (
    embed_cached,
    fill_index,
    open_index,
    retrieval_rows,
    short_passages,
    texts_key,
)

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
    slice_queries: int | None = None  # a fixed small slice (the smoke test's) instead of the whole set
    split: str = HELDOUT  # the cases the pipeline samples come from: heldout, calibration or all
    weights: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    configs: list[PipelineConfig] = field(default_factory=list)


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


def run_eval(options: EvalOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Every measurement of the issue's items 1-3; the results as one JSON-ready dict."""
    say = progress or (lambda _msg: None)
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    started = time.perf_counter()
    full = build_fitz_gov()
    evalset: EvalSet = full.slice(options.slice_queries) if options.slice_queries else full
    evalset.split(options.split)  # an unknown split name fails here, before any work
    say(f"set {evalset.key}: {len(evalset.passages)} passages, {len(evalset.queries)} queries, "
        f"{len(evalset.abstain)} abstain cases")
    embedder = OnnxMiniLMEmbedder()
    cache = options.cache_dir
    timings: dict[str, float] = {}

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

    t = time.perf_counter()
    runs = retrieval_rows(index_path, evalset, query_vectors, dimension=embedder.dimension,
                          weights=options.weights, progress=say)
    timings["retrieval_rows_s"] = time.perf_counter() - t
    retrieval = [_row(r.name, r.metrics, seconds=round(r.seconds, 2)) for r in runs]

    results: dict[str, Any] = {
        "dataset": {
            "name": "fitz-gov", "version": evalset.version, "tier": "tier1_core (core)", "synthetic": True,
            "passages": len(evalset.passages), "queries": len(evalset.queries), "abstain_cases": len(evalset.abstain),
            "passages_under_100_chars": len(short_passages(evalset)),
            "queries_with_required_elements": sum(1 for q in evalset.queries if q.required_elements),
        },
        "embedder": f"{embedder.model_name} (int8 ONNX)",
        "machine": machine(),
        "retrieval": retrieval,
        "split": {
            "rule": SPLIT_RULE,
            "pipeline_reported_on": options.split,
            **{name: {"answerable": len(part.queries), "abstain": len(part.abstain)}
               for name in SPLITS for part in [evalset.split(name)]},
        },
    }

    def in_split(q) -> bool:
        return options.split == "all" or split_of(q.query_id) == options.split

    # Positions in evalset.queries (so the retrieval rows' rankings can be re-scored on the sample).
    eligible = [i for i, q in enumerate(evalset.queries) if in_split(q)]
    eligible_abstain = [i for i, q in enumerate(evalset.abstain) if in_split(q)]
    sample_n = min(options.sample, len(eligible))
    if sample_n:
        rng = random.Random(options.seed)
        sample = sorted(rng.sample(eligible, sample_n)) if sample_n < len(eligible) else eligible
        abstain_n = min(options.abstain_sample, len(eligible_abstain))
        abstain_idx = sorted(random.Random(options.seed + 1).sample(eligible_abstain, abstain_n))
        queries = [evalset.queries[i] for i in sample]
        abstain = [evalset.abstain[i] for i in abstain_idx]
        # The fast rows again on exactly the sample, so pipeline rows compare like with like.
        for r in runs:
            if r.name == "dense" or r.name.startswith(("bm25 ", "rrf k=60 (dense + H")) or "[default]" in r.name:
                ranks = [r.rankings[i] for i in sample]
                retrieval.append(_row(f"{r.name} (pipeline sample)",
                                      ranking_metrics(ranks, [q.relevant for q in queries])))
        configs = options.configs or ([FULL, *ABLATIONS] if options.ablations else [FULL])
        pipeline_rows: list[dict[str, Any]] = []
        full_run: tuple[PipelineRun, PipelineRun] | None = None
        for config in configs:
            home = Path(tempfile.mkdtemp(prefix="ragbus-eval-", dir=cache))
            try:
                t = time.perf_counter()
                say(f"pipeline: {config.name} ({len(queries)} + {len(abstain)} abstain queries)")
                ran = run_pipeline(queries, config, home=home, index_path=index_path, embedder=embedder,
                                   dimension=embedder.dimension, concurrency=options.concurrency,
                                   progress=lambda d, n: say(f"  {d}/{n}"))
                ran_abstain = run_pipeline(abstain, config, home=home / "abstain", index_path=index_path,
                                           embedder=embedder, dimension=embedder.dimension,
                                           concurrency=options.concurrency) if abstain else None
                seconds = time.perf_counter() - t
            finally:
                shutil.rmtree(home, ignore_errors=True)
            metrics = ranking_metrics([r.ranking for r in ran.results], [q.relevant for q in queries])
            quality = answer_quality(ran.results, ran_abstain.results if ran_abstain else [], queries)
            latency = stage_latency(ran.results)
            row = _row(config.name, metrics, config=asdict(config), seconds=round(seconds, 1),
                       per_query_ms=round(ran.seconds / max(1, len(queries)) * 1000, 1),
                       errors=ran.errors[:10] + (ran_abstain.errors[:10] if ran_abstain else []),
                       answer_quality=quality, stage_latency_ms=latency)
            pipeline_rows.append(row)
            say(f"  nDCG@10 {metrics['ndcg@10']:.3f}, abstention {quality['abstention_accuracy']}, "
                f"{seconds:.0f}s")
            if config == FULL:
                full_run = (ran, ran_abstain)
        results["pipeline"] = {
            "sample": {"answerable": len(queries), "abstain": len(abstain), "seed": options.seed,
                       "split": options.split,
                       "how": f"random.Random(seed).sample of the {options.split} split's answerable query "
                              "positions; its abstain cases with seed+1"},
            "rows": pipeline_rows,
        }
        if full_run is not None:
            ran, ran_abstain = full_run
            results["calibration"] = calibration(ran.results, ran_abstain.results if ran_abstain else [],
                                                 [*queries, *abstain])
    timings["total_s"] = time.perf_counter() - started
    results["timings_s"] = {k: round(v, 1) for k, v in timings.items()}
    return results
