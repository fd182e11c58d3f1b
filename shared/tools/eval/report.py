"""Markdown tables of the evaluation and performance results (the JSON is the record)."""

from __future__ import annotations

from typing import Any


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1%}"


def eval_markdown(results: dict[str, Any]) -> str:
    ds = results["dataset"]
    m = results["machine"]
    out = [
        f"Dataset: {ds['name']} {ds['version']}, {ds['tier']} — **synthetic** RAG cases written by a language "
        f"model; {ds['passages']:,} passages (every unique context), {ds['queries']:,} queries (every non-abstain "
        f"case; its own contexts are relevant), {ds['abstain_cases']:,} abstain cases. Embedder: {results['embedder']}. "
        f"Measured {m['date']} on {m['cpus']} CPUs / {m['memory_gib']} GiB, Python {m['python']}, "
        f"load average {m['load_average']}.",
        "",
        "### Retrieval (all queries unless marked)",
        "",
        "| configuration | nDCG@10 | recall@10 | MRR | queries |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in results["retrieval"]:
        out.append(f"| {row['name']} | {_f(row['ndcg@10'])} | {_f(row['recall@10'])} | {_f(row['mrr'])} | "
                   f"{row['queries']:,} |")
    if results.get("pipeline"):
        out += _pipeline_markdown(results["pipeline"])
    split = results.get("split")
    if split:
        out += ["", f"Splits ({split['rule']}): calibration {split['calibration']['answerable']} answerable + "
                f"{split['calibration']['abstain']} abstain cases, held-out {split['heldout']['answerable']} + "
                f"{split['heldout']['abstain']}; the pipeline figures are on the "
                f"**{split['pipeline_reported_on']}** split."]
    if results.get("calibration"):
        out += _calibration_markdown(results["calibration"])
    if results.get("own_contexts"):
        out += _own_contexts_markdown(results["own_contexts"], results)
    tg = results.get("targets")
    if tg:
        out += ["", *targets_markdown(tg)]
    return "\n".join(out) + "\n"


def _pipeline_markdown(pipe: dict[str, Any]) -> list[str]:
    """The full pipeline's A/B table, its stage latency and its outcomes."""
    s = pipe["sample"]
    out = [
        "",
        f"### Full pipeline and A/B (sample: {s['answerable']} answerable queries + {s['abstain']} abstain cases "
        f"of the {s.get('split', 'all')} split, seed {s['seed']})",
        "",
        "| configuration | nDCG@10 | recall@10 | MRR | abstention acc. | false abstention | element coverage "
        "| element pass | citation precision | refinement rate | mean iterations | ms/query |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in pipe["rows"]:
        q = row["answer_quality"]
        out.append(
            f"| {row['name']} | {_f(row['ndcg@10'])} | {_f(row['recall@10'])} | {_f(row['mrr'])} | "
            f"{_pct(q['abstention_accuracy'])} | {_pct(q['false_abstention_rate'])} | {_f(q['element_coverage'])} | "
            f"{_pct(q['element_pass_rate'])} | {_f(q['citation_precision'])} | {_pct(q['refinement_rate'])} | "
            f"{_f(q['mean_iterations'], 2)} | {_f(row['per_query_ms'], 0)} |"
        )
    full = pipe["rows"][0]
    out += ["", f"Stage latency of the {full['name']} (ms per query, iterations summed):", "",
            "| stage | p50 | p95 | mean |", "|---|---:|---:|---:|"]
    for stage, v in full["stage_latency_ms"].items():
        out.append(f"| {stage} | {v['p50']:.1f} | {v['p95']:.1f} | {v['mean']:.1f} |")
    q = full["answer_quality"]
    out += ["", f"Outcomes, answerable: {q['outcomes_answerable']}; abstain cases: {q['outcomes_abstain']}; "
            f"iterations: {q['iterations_histogram']}; relevance cases with required elements: "
            f"{q['element_cases']} ({q['element_cases_answered']} answered)."]
    return out


def _calibration_markdown(cal: dict[str, Any]) -> list[str]:
    """The grader's ROC operating points and the local grade model it used."""
    y, c, a = cal["youden"], cal["configured_overall"], cal["accept_rule"]
    out = [
        "",
        "### Grader calibration (first iteration's overall score vs. its contexts holding a relevant passage)",
        "",
        f"{cal['cases']} graded queries ({cal['positives']} positive, {cal['negatives']} negative); "
        f"ROC AUC **{cal['auc']:.3f}**.",
        "",
        "| operating point | threshold | TPR | FPR |",
        "|---|---:|---:|---:|",
        f"| Youden's J optimum (J={y['j']:.3f}) | {y['threshold']:.3f} | {y['tpr']:.3f} | {y['fpr']:.3f} |",
        f"| configured overall threshold | {c['threshold']:.2f} | {c['tpr']:.3f} | {c['fpr']:.3f} |",
        f"| the stage's whole accept rule (all thresholds + grounded) | – | {a['tpr']:.3f} | {a['fpr']:.3f} |",
    ]
    model = cal.get("local_grade_model")
    if model:
        out += ["", f"The local grader's score is the probability of `{model['file']}` (feature version "
                    f"{model['feature_version']}, {model['features']} features, fit on the {model['split']} "
                    f"split of fitz-gov {model['fitz_gov']} on {model['date']}); it abstains below "
                    f"{model['answerable_from']:.2f}. Refit: `python bench/fit_grader.py`."]
    return out


def _own_contexts_markdown(own: dict[str, Any], results: dict[str, Any]) -> list[str]:
    """The grader on each case's own contexts (fitz-gov's protocol), by abstained subcategory."""
    out = [
        "",
        "### The grader on each case's own contexts (fitz-gov's protocol; beside the targets, not one of them)",
        "",
        f"The same {own['answerable']} answerable + {own['abstain']} abstain cases, each graded on only the "
        f"passages fitz-gov wrote for it ({own['provider']} model, the grader stage's own decision rule): "
        "no other case's passage can answer an abstain question here, as it can in the pipeline's "
        "shared index.",
        "",
        "| figure | value | 95% interval |",
        "|---|---:|---|",
        f"| abstention accuracy | {own['abstention_accuracy']:.3f} | {_ci(own['abstention_accuracy_ci95'])} |",
        f"| false abstention | {own['false_abstention']:.3f} | {_ci(own['false_abstention_ci95'])} |",
        f"| grader ROC AUC (score: answerable vs. abstain) | {own['grader_auc']:.3f} | "
        f"{_ci(own['grader_auc_ci95'])} |",
        "",
        f"Decisions: answerable {own['decisions']['answerable']}; abstain {own['decisions']['abstain']}.",
    ]
    pipeline = results.get("targets", {}).get("providers", {}).get("local", {}).get("abstained_by_subcategory")
    return out + subcategory_markdown(own.get("abstained_by_subcategory") or {}, pipeline or {})


def _ci(interval: list[float]) -> str:
    return f"{interval[0]:.3f}–{interval[1]:.3f}"


def _verdict(row: dict[str, Any]) -> str:
    if row["value"] is None:
        return "not measured"
    ci = f" [{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]" if row.get("ci95") else ""
    word = "met" if row["met"] else "**NOT MET**"
    return f"{row['value']:.3f}{ci} {word}"


def subcategory_markdown(own: dict[str, list[int]], pipeline: dict[str, list[int]]) -> list[str]:
    """Abstention per fitz-gov kind of unanswerable case: in the pipeline's shared index (local provider)
    and on each case's own contexts."""
    if not own and not pipeline:
        return []

    def share(counts: dict[str, list[int]], name: str) -> str:
        refused, cases = counts.get(name, (0, 0))
        return f"{refused / cases:.2f} ({refused}/{cases})" if cases else "–"

    names = list(dict.fromkeys([*own, *pipeline]))
    return ["", "Abstention by kind of case (fitz-gov's subcategory; the pipeline column is the local provider's):",
            "", "| kind of case | pipeline, shared index | own contexts |", "|---|---:|---:|",
            *(f"| {name} | {share(pipeline, name)} | {share(own, name)} |" for name in names)]


def targets_markdown(tg: dict[str, Any]) -> list[str]:
    """The issue's targets, one column per provider that ran: figure [95% interval] met / NOT MET."""
    ran = {name: p for name, p in tg["providers"].items() if p.get("status") == "ran"}
    out = [f"### Targets (issue 11), on the {tg['reported_on']} split", ""]
    if not ran:
        out.append("No provider's full pipeline ran: no target could be judged.")
    else:
        out += ["| target | goal | " + " | ".join(f"{n} ({p['model']}; {p['answerable']} + {p['abstain']} abstain)"
                                                  for n, p in ran.items()) + " |",
                "|---|---|" + "---|" * len(ran)]
        for i, target in enumerate(tg["targets"]):
            out.append(f"| {target['what']} | {target['goal']} | "
                       + " | ".join(_verdict(p["verdicts"][i]) for p in ran.values()) + " |")
        out.append("| **all targets met** | | " + " | ".join("yes" if p["all_met"] else "**no**" for p in ran.values())
                   + " |")
        out.append("")
        for name, p in ran.items():
            n = p.get("ndcg@10")
            if n:
                out.append(f"- {name}: pipeline nDCG@10 {n['pipeline']:.3f} [{n['pipeline_ci95'][0]:.3f}, "
                           f"{n['pipeline_ci95'][1]:.3f}] against {n['retrieval_row']} {n['retrieval']:.3f} "
                           f"[{n['retrieval_ci95'][0]:.3f}, {n['retrieval_ci95'][1]:.3f}] on the same {n['queries']} "
                           "queries.")
            fb = p.get("model_fallbacks")
            if fb and name != "local":
                out.append(f"- {name}: {fb['questions_with_a_fallback']} of {fb['questions']} questions had a stage "
                           f"answer without the model (a failed or unusable call: {fb['by_stage'] or 'none'}).")
            same = p.get("local_on_the_same_queries")
            if same:
                out.append(f"- local on exactly {name}'s queries: " + ", ".join(
                    f"{k} {'–' if v is None else f'{v:.3f}'}" for k, v in same.items()) + ".")
    for name, p in tg["providers"].items():
        if p.get("status") != "ran":
            out.append(f"- {name}: {p['status']}")
    out += ["", f"Verdicts: {tg['verdict_rule']}."]
    return out


def perf_markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    out = [f"Measured {m['date']} on {m['cpus']} CPUs / {m['memory_gib']} GiB, Python {m['python']}, "
           f"git commit {m.get('git_commit') or 'unknown'}, load average at start {m['load_average']}, at end "
           f"{results.get('load_average_end')}.", "",
           "| measurement | value | target |", "|---|---:|---|"]
    for row in results["table"]:
        target = row.get("target", "")
        if target and row.get("met") is not None:
            target += ": met" if row["met"] else ": **not met**"
        out.append(f"| {row['what']} | {row['value']} | {target} |")
    return "\n".join(out) + "\n"
