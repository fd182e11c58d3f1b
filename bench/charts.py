"""Charts of the published results (matplotlib, PNG under docs/).

    .venv/bin/python bench/charts.py      # reads docs/eval_results.json and docs/perf_results.json

- docs/latency_by_stage.png: p50 and p95 ms per stage of the full pipeline (eval sample);
- docs/quality_by_config.png: nDCG@10 of every retrieval and pipeline configuration;
- docs/grader_roc.png: the grader's ROC curve with the Youden and configured thresholds;
- docs/ann_recall_latency.png: HNSW recall@10 against p50 latency per efSearch and size.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shared.runtime.stages import QUERY_STAGES  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs"


def latency_by_stage(results: dict, out: Path) -> None:
    full = results["pipeline"]["rows"][0]
    stages = [s for s in (*QUERY_STAGES, "total") if s in full["stage_latency_ms"]]  # the registry's order
    stages += [s for s in full["stage_latency_ms"] if s not in stages]
    p50 = [full["stage_latency_ms"][s]["p50"] for s in stages]
    p95 = [full["stage_latency_ms"][s]["p95"] for s in stages]
    fig, ax = plt.subplots(figsize=(7, 4))
    x = range(len(stages))
    ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50")
    ax.bar([i + 0.2 for i in x], p95, width=0.4, label="p95")
    ax.set_xticks(list(x), stages)
    ax.set_ylabel("ms per query (iterations summed)")
    ax.set_title(f"Query latency by stage, full pipeline ({results['pipeline']['sample']['answerable']} fitz-gov queries)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def quality_by_config(results: dict, out: Path) -> None:
    panels = [("all 2,235 queries, retrieval only",
               [(r["name"], r["ndcg@10"], "tab:blue") for r in results["retrieval"] if "sample" not in r["name"]])]
    if results.get("pipeline"):
        sample = results["pipeline"]["sample"]["answerable"]
        panels.append((f"the {sample}-query pipeline sample",
                       [(r["name"].replace(" (pipeline sample)", ""), r["ndcg@10"], "tab:blue")
                        for r in results["retrieval"] if "sample" in r["name"]]
                       + [(r["name"], r["ndcg@10"], "tab:orange") for r in results["pipeline"]["rows"]]))
    heights = [len(rows) for _, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.32 * sum(heights) + 1.8),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (title, rows) in zip(axes[:, 0], panels, strict=True):
        ax.barh(range(len(rows)), [v for _, v, _ in rows], color=[c for _, _, c in rows])
        ax.set_yticks(range(len(rows)), [n for n, _, _ in rows], fontsize=8)
        ax.invert_yaxis()
        for i, (_, v, _) in enumerate(rows):
            ax.text(v + 0.005, i, f"{v:.3f}", va="center", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_title(title, fontsize=9)
    axes[-1, 0].set_xlabel("nDCG@10 (blue: retrieval only; orange: full query loop)")
    fig.suptitle("fitz-gov (synthetic) retrieval quality by configuration")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def grader_roc(results: dict, out: Path) -> None:
    cal = results["calibration"]
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot(cal["curve"]["fpr"], cal["curve"]["tpr"], label=f"grade score (AUC {cal['auc']:.3f})")
    ax.plot([0, 1], [0, 1], linestyle=":", color="grey")
    y, c = cal["youden"], cal["configured_overall"]
    ax.scatter([y["fpr"]], [y["tpr"]], color="tab:green", zorder=3, label=f"Youden optimum {y['threshold']:.3f}")
    ax.scatter([c["fpr"]], [c["tpr"]], color="tab:red", zorder=3, label=f"configured {c['threshold']:.2f}")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title("Grader score vs relevant passage retrieved\n(first iteration, fitz-gov sample)", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def ann_tradeoff(perf: dict, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for a in perf["ann"]:
        ax.plot([h["p50_ms"] for h in a["hnsw"]], [h["recall@10"] for h in a["hnsw"]], marker="o",
                label=f"{a.get('distribution', 'random')} {a['chunks']:,}, M={a['hnsw_m']} "
                      f"(exact p50 {a['exact_p50_ms']:.0f} ms)")
        for h in a["hnsw"]:
            ax.annotate(str(h["ef_search"]), (h["p50_ms"], h["recall@10"]), fontsize=7)
    ax.axhline(0.95, linestyle=":", color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("p50 ms per query (log)")
    ax.set_ylabel("recall@10 vs exact")
    ax.set_title("faiss HNSW on synthetic vectors, recall vs exact (labels: efSearch)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main() -> None:
    eval_path, perf_path = DOCS / "eval_results.json", DOCS / "perf_results.json"
    made = []
    if eval_path.exists():
        results = json.loads(eval_path.read_text())
        quality_by_config(results, DOCS / "quality_by_config.png")
        made.append("quality_by_config.png")
        if results.get("pipeline"):
            latency_by_stage(results, DOCS / "latency_by_stage.png")
            made.append("latency_by_stage.png")
        if results.get("calibration"):
            grader_roc(results, DOCS / "grader_roc.png")
            made.append("grader_roc.png")
    if perf_path.exists():
        ann_tradeoff(json.loads(perf_path.read_text()), DOCS / "ann_recall_latency.png")
        made.append("ann_recall_latency.png")
    print("wrote " + (", ".join(f"docs/{m}" for m in made) if made else "nothing (run the benchmarks first)"),
          file=sys.stderr)


if __name__ == "__main__":
    main()
