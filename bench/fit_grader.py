"""Fit the local grader's model on fitz-gov's calibration split and write grade_model.json.

    .venv/bin/python bench/fit_grader.py                 # fit, report, write shared/adapters/local/grade_model.json
    .venv/bin/python bench/fit_grader.py --dry-run       # fit and report only

The local grader's score is a logistic regression over the evidence it measures
(:mod:`shared.adapters.local.grade_model`). This script fits it on the **calibration**
split only (:mod:`shared.tools.eval.dataset`); ``ragbus eval`` reports the held-out split,
which nothing here reads. Two kinds of example, as the grader meets them:

- **open corpus**: each calibration question asked through the real pipeline over the
  index of all 5,899 passages; the contexts of its first iteration (retrieved before any
  grade, so the grade model in use while collecting them does not matter) are positive
  when they hold one of the case's own passages, negative for abstain cases and misses;
- **own contexts** (fitz-gov's protocol): each case's own passages, clipped as the
  grader stage clips them; positive for answerable cases, negative for abstain cases.

The L2 penalty is chosen by 5-fold cross-validated ROC AUC on the calibration examples.
The abstention threshold (``answerable_from``) is the highest probability at which at
most ``--false-abstention`` of the calibration's answerable questions (open corpus,
first iteration) would be refused. Collected contexts are cached under ``--cache`` in
``fit-grader-first-contexts-{dataset key}-{split}-{digest}.json``; the digest covers what the
contexts depend on besides the questions and the passages (:func:`contexts_key`: the settings
and pipeline switches that shape retrieval, the embedder, and a fingerprint of the code that
turns a question into contexts), so a retrieval change is never fit on stale contexts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.grader.handler import grading_contexts  # noqa: E402
from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.adapters.local.grade_model import (  # noqa: E402
    FEATURE_VERSION,
    FEATURES,
    MODEL_FILE,
    GradeModel,
    fit_logistic,
    shipped_model,
)
from shared.adapters.local.llm import LocalLanguageModel  # noqa: E402
from shared.contract.config import Settings, load_settings  # noqa: E402
from shared.contract.errors import ConfigError  # noqa: E402
from shared.tools.eval.dataset import CALIBRATION, EvalQuery, build_fitz_gov  # noqa: E402
from shared.tools.eval.metrics import roc_curve  # noqa: E402
from shared.tools.eval.own_contexts import own_contexts  # noqa: E402
from shared.tools.eval.pipeline import PipelineConfig, PipelineRunner, pipeline_settings  # noqa: E402
from shared.tools.eval.retrieval import embed_cached, fill_index, open_index  # noqa: E402

log = logging.getLogger("ragbus.fit_grader")
PENALTIES = (0.1, 1.0, 10.0, 100.0)

#: How the first iteration's contexts are collected: the real query stages, no refinement.
FIRST_ITERATION = PipelineConfig(name="fit: first iteration", max_iterations=0)

#: The settings the transformer and retriever read (how many contexts, sub-queries, query length, the
#: model-call budget the rewrite spends). grade_contexts and grade_context_chars are not among them: they
#: clip the cached contexts when the features are measured, read afresh on every run.
CONTEXT_SETTINGS = ("top_k", "max_iterations", "max_model_calls", "max_sub_queries",
                    "min_sub_queries_for_synthesis", "max_query_chars")

#: The code that turns a question into its first contexts: the rewrite and decomposition (the local model's
#: transform, its acronyms, the query helpers and lexicon it reads), the retriever's searches and fusion, the
#: index's hybrid scoring, the embedder, and the eval's index filling and pipeline wiring.
CONTEXT_SOURCES = (
    "services/transformer", "services/retriever", "shared/query",
    "shared/adapters/local/index.py", "shared/adapters/local/llm.py", "shared/adapters/local/acronyms.py",
    "shared/adapters/local/decomposition.py", "shared/adapters/local/embedder.py",
    "shared/tools/eval/pipeline.py", "shared/tools/eval/retrieval.py",
)


def code_fingerprint(root: Path = ROOT, sources: tuple[str, ...] = CONTEXT_SOURCES) -> str:
    """A hash of every file under ``sources`` (paths and bytes, compiled caches left out)."""
    digest = hashlib.sha256()
    for source in sources:
        path = root / source
        if not path.exists():
            raise FileNotFoundError(f"{path} is listed in CONTEXT_SOURCES but does not exist; update the list")
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for file in files:
            digest.update(file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def contexts_key(dataset: str, split: str, *, settings: Settings, config: PipelineConfig, embedder: str,
                 code: str) -> dict[str, Any]:
    """What the first iteration's contexts depend on besides the questions: the cache's key."""
    return {
        "dataset": dataset,
        "split": split,
        "settings": {name: getattr(settings, name) for name in CONTEXT_SETTINGS},
        "pipeline": {k: v for k, v in asdict(config).items() if k != "name"},  # hybrid weight, rewrite, ...
        "embedder": embedder,
        "code": code,
    }


def contexts_cache_path(cache: Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return cache / f"fit-grader-first-contexts-{key['dataset']}-{key['split']}-{digest}.json"


def cached_contexts(cache: Path, key: dict[str, Any], query_ids: set[str]) -> dict | None:
    """The contexts collected under ``key`` for at least ``query_ids``, else None (a miss)."""
    path = contexts_cache_path(cache, key)
    if not path.exists():
        return None
    stored = json.loads(path.read_text())
    if not isinstance(stored, dict) or stored.get("key") != key:  # another format, or a digest collision
        return None
    contexts = stored.get("contexts")
    return contexts if isinstance(contexts, dict) and set(contexts) >= query_ids else None


def store_contexts(cache: Path, key: dict[str, Any], contexts: dict) -> Path:
    path = contexts_cache_path(cache, key)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "contexts": contexts}))
    tmp.replace(path)  # an interrupted run leaves no half file to be read as a cache
    return path


def collecting_model() -> GradeModel:
    """The model to grade with while collecting: the shipped one, or, when it is missing or was fit on
    other features (the reason to refit), an uninformative one (p = 0.5). Nothing collected depends on
    it: the first iteration's contexts are retrieved before they are graded, and the features are
    measured before any model weighs them."""
    try:
        return shipped_model()
    except ConfigError as exc:
        log.info("no usable shipped model (%s); collecting with an uninformative one", str(exc)[:120])
        zeros = np.zeros(len(FEATURES))
        return GradeModel(FEATURES, zeros, np.ones(len(FEATURES)), zeros, 0.0, 0.5)


def collect_open_corpus(queries: list[EvalQuery], *, index_path: Path, embedder, cache: Path,
                        key: dict[str, Any]) -> dict:
    """query id -> the contexts of its first iteration through the pipeline (cached under ``key``)."""
    path = contexts_cache_path(cache, key)
    log.info("first-iteration contexts keyed on %s", json.dumps(key, sort_keys=True))
    stored = cached_contexts(cache, key, {q.query_id for q in queries})
    if stored is not None:
        log.info("  reusing %s", path.name)
        return stored
    log.info("  not cached: collecting into %s", path.name)
    model = collecting_model()
    out: dict[str, list[dict]] = {}
    config = FIRST_ITERATION
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragbus-fit-", dir=cache) as home, \
            PipelineRunner(Path(home), index_path, config, embedder=embedder, dimension=embedder.dimension) as runner:
        runner.deps.override("llm", LocalLanguageModel(runner.index, embedder, grade_model=model))

        def one(q: EvalQuery) -> None:
            record = runner.ask(q.text)
            first = record.entry(0)
            out[q.query_id] = [dict(c) for c in first.contexts] if first else []

        with ThreadPoolExecutor(max_workers=2) as pool:
            for n, _ in enumerate(pool.map(one, queries), start=1):
                if n % 200 == 0:
                    log.info("  %d/%d questions asked", n, len(queries))
    log.info("asked %d questions in %.0fs", len(queries), time.perf_counter() - started)
    store_contexts(cache, key, out)
    return out


def refusing_at_most(answerable: np.ndarray, share: float) -> float:
    """The highest threshold that refuses at most ``share`` of the answerable questions' probabilities."""
    ordered = np.sort(answerable)
    allowed = int(np.floor(share * len(ordered)))
    return float(ordered[allowed]) if allowed < len(ordered) else float(ordered[-1])


def auc(scores, labels) -> float:
    return float(roc_curve(list(map(float, scores)), list(map(bool, labels)))["auc"])


def cross_validated_auc(x: np.ndarray, y: np.ndarray, groups: np.ndarray, l2: float, folds: int = 5) -> float:
    """Mean held-out-fold AUC; folds split by question (a case's two examples stay together)."""
    unique = sorted(set(groups))
    random.Random(0).shuffle(unique)
    fold_of = {g: i % folds for i, g in enumerate(unique)}
    fold = np.array([fold_of[g] for g in groups])
    aucs = []
    for k in range(folds):
        train, test = fold != k, fold == k
        mean, scale, w, b = fit_logistic(x[train], y[train], l2=l2)
        p = 1 / (1 + np.exp(-(b + ((x[test] - mean) / scale) @ w)))
        aucs.append(auc(p, y[test]))
    return float(np.mean(aucs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=ROOT / ".ragbus-eval")
    parser.add_argument("--false-abstention", type=float, default=0.03,
                        help="share of calibration answerable questions the threshold may refuse (default 0.03, "
                             "a margin under issue 11's 0.05)")
    parser.add_argument("--out", type=Path, default=MODEL_FILE)
    parser.add_argument("--dry-run", action="store_true", help="report only; do not write the model")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("ragbus").setLevel(logging.WARNING)
    log.setLevel(logging.INFO)

    full = build_fitz_gov()
    cal = full.split(CALIBRATION)
    log.info("calibration split: %d answerable + %d abstain cases", len(cal.queries), len(cal.abstain))
    embedder = OnnxMiniLMEmbedder()
    args.cache.mkdir(parents=True, exist_ok=True)
    vectors = embed_cached([p.text for p in full.passages], embedder, args.cache, full.key)
    index_path = args.cache / f"index-{full.key}"
    index = open_index(index_path, embedder.dimension)
    fill_index(index, full, vectors)
    index.close()

    cases = [*cal.queries, *cal.abstain]
    key = contexts_key(full.key, CALIBRATION, settings=pipeline_settings(args.cache, FIRST_ITERATION),
                       config=FIRST_ITERATION, embedder=embedder.model_name, code=code_fingerprint())
    first = collect_open_corpus(cases, index_path=index_path, embedder=embedder, cache=args.cache, key=key)
    settings = load_settings({})
    passage_text = {p.passage_id: p.text for p in full.passages}
    index = open_index(index_path, embedder.dimension)
    llm = LocalLanguageModel(index, embedder, grade_model=collecting_model())
    rows, labels, groups, kinds = [], [], [], []
    started = time.perf_counter()
    for q in cases:
        answerable = q.expected_mode != "abstain"
        contexts = first.get(q.query_id) or []
        ev = llm.evidence(q.text, grading_contexts(contexts, limit=settings.grade_contexts,
                                                   chars=settings.grade_context_chars)) if contexts else None
        if ev is not None:
            rows.append([ev.features[f] for f in FEATURES])
            labels.append(answerable and bool(q.relevant & {c.get("document_id") for c in contexts}))
            groups.append(q.query_id)
            kinds.append("open" if answerable else "open-abstain")
        ev = llm.evidence(q.text, own_contexts(q, passage_text, settings))
        if ev is not None:
            rows.append([ev.features[f] for f in FEATURES])
            labels.append(answerable)
            groups.append(q.query_id)
            kinds.append("own" if answerable else "own-abstain")
    index.close()
    x, y, g, kind = np.array(rows), np.array(labels), np.array(groups), np.array(kinds)
    log.info("%d examples (%d positive) measured in %.0fs", len(y), int(y.sum()), time.perf_counter() - started)

    cv = {l2: cross_validated_auc(x, y, g, l2) for l2 in PENALTIES}
    for l2, value in cv.items():
        log.info("  L2 %-6g 5-fold AUC %.4f", l2, value)
    l2 = max(cv, key=lambda k: (round(cv[k], 3), k))  # the strongest penalty among the best
    mean, scale, weights, intercept = fit_logistic(x, y, l2=l2)
    p = 1 / (1 + np.exp(-(intercept + ((x - mean) / scale) @ weights)))

    open_mask = np.isin(kind, ["open", "open-abstain"])
    own_mask = ~open_mask
    answerable_open = p[kind == "open"]
    threshold = refusing_at_most(answerable_open, args.false_abstention)
    threshold = min(max(threshold, 1e-4), 1 - 1e-4)

    def refused(mask) -> float:
        return float(np.mean(p[mask] < threshold)) if mask.any() else float("nan")

    report = {
        "split": CALIBRATION,
        "examples": {k: int((kind == k).sum()) for k in ("open", "open-abstain", "own", "own-abstain")},
        "l2": l2,
        "cv_auc": {str(k): round(v, 4) for k, v in cv.items()},
        "auc_open_corpus": round(auc(p[open_mask], y[open_mask]), 4),
        "auc_own_contexts": round(auc(p[own_mask], y[own_mask]), 4),
        "threshold_rule": f"highest p refusing <= {args.false_abstention:g} of the calibration's answerable "
                          "questions (open corpus, first iteration)",
        "abstain_refused_open": round(refused(kind == "open-abstain"), 4),
        "answerable_refused_open": round(refused(kind == "open"), 4),
        "abstain_refused_own": round(refused(kind == "own-abstain"), 4),
        "answerable_refused_own": round(refused(kind == "own"), 4),
        "fitz_gov": full.version,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    model = GradeModel(FEATURES, mean, scale, weights, intercept, threshold, report)
    log.info("fitted (feature version %d, L2 %g): threshold %.3f", FEATURE_VERSION, l2, threshold)
    log.info(json.dumps(report, indent=1))
    for f, w in sorted(zip(FEATURES, weights, strict=True), key=lambda t: -abs(t[1])):
        log.info("  %-22s %+.3f", f, w)
    if not args.dry_run:
        model.save(args.out)
        log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
