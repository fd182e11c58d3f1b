"""Retrieval and answer quality on fitz-gov (synthetic RAG cases), and grader calibration.

    .venv/bin/python bench/eval_quality.py                     # full: every query + 500-query pipeline sample
    .venv/bin/python bench/eval_quality.py --sample 0          # retrieval rows only (fast once embedded)
    .venv/bin/python bench/eval_quality.py --slice 60 --sample 60 --abstain-sample 30   # the smoke slice
    .venv/bin/python bench/eval_quality.py --sample 150 --abstain-sample 100 --no-ablations \
        --providers local,openai --provider-sample openai=30/20 --check  # issue 11's targets, exit 1 on a miss

The pipeline figures are on the held-out half of the cases (--split; a hash of the case id
decides) and end with issue 11's targets and each provider's verdict (see `ragbus eval --help`).

Needs fitz-gov 4.1.0, which the dev extra installs (`pip install -e '.[dev]'`). Passage embeddings are cached under
.ragbus-eval/ (keyed by model and dataset), so only the first run embeds. Writes
docs/eval_results.json and docs/grader_roc.json and prints the Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.contract.errors import ConfigError  # noqa: E402
from shared.tools.eval.report import eval_markdown  # noqa: E402
from shared.tools.eval.runner import EvalOptions, run_eval, targets_missed  # noqa: E402
from shared.tools.eval.targets import parse_provider_samples, parse_providers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=500, help="answerable queries through the full pipeline")
    parser.add_argument("--abstain-sample", type=int, default=200, help="abstain cases through the pipeline")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-ablations", action="store_true", help="full pipeline only, no A/B rows")
    parser.add_argument("--slice", type=int, default=None, help="the first N queries only (smoke slice)")
    parser.add_argument("--split", default="heldout", choices=("heldout", "calibration", "all"),
                        help="cases the pipeline samples come from (a hash of the case id decides; default heldout)")
    parser.add_argument("--providers", default="auto",
                        help="providers whose full pipeline runs, comma-separated (local, openai, gemini); "
                             "auto: local and every configured one; a named one that cannot run is an error")
    parser.add_argument("--provider-sample", action="append", default=[], metavar="PROVIDER=N[/M]",
                        help="a smaller sample for a slow provider, e.g. openai=30/20 (repeatable)")
    parser.add_argument("--query-timeout", type=float, default=120.0,
                        help="seconds one question may take (a slow provider may need more; at most 600)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a provider that ran misses a target")
    parser.add_argument("--concurrency", type=int, default=2, help="queries in flight through the runtime")
    parser.add_argument("--cache", type=Path, default=ROOT / ".ragbus-eval")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "eval_results.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("ragbus.eval").setLevel(logging.INFO)

    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    try:
        results = run_eval(
            EvalOptions(cache_dir=args.cache, sample=args.sample, abstain_sample=args.abstain_sample, seed=args.seed,
                        ablations=not args.no_ablations, concurrency=args.concurrency, slice_queries=args.slice,
                        split=args.split, providers=parse_providers(args.providers),
                        provider_samples=parse_provider_samples(args.provider_sample),
                        query_timeout_s=args.query_timeout),
            progress=say,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    if "calibration" in results:
        roc = {k: results["calibration"][k] for k in ("auc", "youden", "configured_overall", "accept_rule", "cases",
                                                      "positives", "negatives")}
        roc["points"] = results["calibration"]["curve"]
        (args.out.parent / "grader_roc.json").write_text(json.dumps(roc, indent=1) + "\n")
    print(eval_markdown(results))
    say(f"wrote {args.out}")
    missed = targets_missed(results)
    if args.check and missed:
        print("targets not met: " + "; ".join(missed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
