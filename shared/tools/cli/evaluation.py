"""``ragbus eval``: retrieval and answer quality on fitz-gov or the real-text set."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from shared.contract import state_collections
from shared.contract.errors import RagbusError
from shared.contract.providers import PROVIDER_NAMES
from shared.observability.terminal_text import markup, plain
from shared.tools.cli.root import fail
from shared.tools.console import console, err

commands = typer.Typer()  # `ragbus` composes it (shared/tools/cli/__init__.py)


CheckOption = Annotated[bool, typer.Option(
    "--check", help="Exit 1 when a provider that ran misses one of issue 11's targets (realdocs: issue 20's; a "
    "feedback dataset: when an up-rated answer changed) (default: report only, exit 0).")]
OutOption = Annotated[Path | None, typer.Option(
    help="Where the JSON results go (default: docs/eval_results.json for the full run with every option at "
    "its default, as `make eval` makes it; <cache>/eval_results.json for any other run, so a sample does not "
    "overwrite the committed figures; realdocs: docs/eval_realdocs.json and <cache>/eval_realdocs.json; a "
    "feedback dataset: <cache>/eval_feedback.json; with --from-feedback, the dataset written).")]
DatasetOption = Annotated[str, typer.Option(
    help="fitz-gov (synthetic cases), realdocs (real package documentation in the repo, issue 20's targets; "
    "--sample N asks N of its questions), conversations (follow-up dialogues, issue 24), realtext (real text "
    "of five genres, issue 36's targets; --part dev or test), formats (PDF, scanned, Office, sheet and e-book files, "
    "issue 31's targets: each answer's page, against the same questions over plain text; --sample N asks N of them), "
    "the path of a folder laid out as a realtext "
    "part, or a file --from-feedback wrote (or a folder holding feedback.jsonl): its rated questions asked again, "
    "counting the down-rated answers that change and the up-rated ones that stay the same.")]
ShowFailuresOption = Annotated[bool, typer.Option(
    "--show-failures", help="realdocs and conversations: print every failed question with its answer and the expected keys "
    "(a feedback dataset: every case, then and now).")]
ReuseIngestOption = Annotated[bool, typer.Option(
    "--reuse-ingest", help="realdocs, realtext and conversations: keep the ingested documents under <cache>/<dataset>-home "
    "and reuse them "
    "(fast runs while changing the query side; drop it after changing cleaning, chunking or indexing).")]
FromFeedbackOption = Annotated[bool, typer.Option(
    "--from-feedback", help="Export the rated queries of the data directory as a dataset (JSON Lines: question, "
    "answer, outcome, citations, rating, comment, expected) to --out (default: <cache>/feedback.jsonl); "
    "`--dataset FILE` (or a folder holding feedback.jsonl) asks them again.")]


@commands.command("eval")
def eval_command(
    sample: Annotated[int, typer.Option(help="Answerable queries asked through the full pipeline (0: retrieval only).")] = 500,
    abstain_sample: Annotated[int, typer.Option(help="Abstain cases asked through the pipeline.")] = 200,
    ablations: Annotated[bool, typer.Option(help="Also run the A/B rows (each enhancement off in turn).")] = True,
    slice_queries: Annotated[int | None, typer.Option("--slice", help="Only the first N queries (smoke slice; default: all of them).")] = None,
    split: Annotated[str, typer.Option(
        help="Cases the pipeline samples come from: heldout (report), calibration (fit thresholds) or all; "
        "a case's split is decided by a hash of its id.")] = "heldout",
    providers: Annotated[str, typer.Option(
        help=f"Language-model providers whose full pipeline runs, comma-separated ({', '.join(PROVIDER_NAMES)}); "
        "auto: local and every configured one. A named provider that cannot run is an error.")] = "auto",
    provider_sample: Annotated[list[str] | None, typer.Option(
        help="A smaller sample for a slow provider: PROVIDER=ANSWERABLE\\[/ABSTAIN], e.g. openai=40/20 "
        "(a subset of local's sample; repeatable; default: local's sample).")] = None,
    query_timeout: Annotated[float, typer.Option(
        help="Seconds one question may take, from 1 to 600 (a small model on a slow CPU may need more).")] = 120.0,
    check: CheckOption = False,
    out: OutOption = None,
    cache: Annotated[Path, typer.Option(help="Embedding and index cache.")] = Path(".ragbus-eval"),
    dataset: DatasetOption = "fitz-gov",
    part: Annotated[str | None, typer.Option(
        help="realtext: the part asked, dev (the writers' dev folders and the realdocs set) or test (sealed); "
        "no default: --dataset realtext needs one.")] = None,
    kind: Annotated[list[str] | None, typer.Option(
        help="realdocs: only questions of this kind (repeatable), e.g. table_row, near_miss (default: every kind).")] = None,
    show_failures: ShowFailuresOption = False,
    reuse_ingest: ReuseIngestOption = False,
    from_feedback: FromFeedbackOption = False,
) -> None:
    r"""Retrieval and answer quality on fitz-gov (synthetic cases; the dev extra installs it: pip install -e '.\[dev]'),
    or on real text (--dataset realdocs, realtext --part dev, conversations, formats: see --dataset).

    Ends with each dataset's targets (fitz-gov: issue 11's, on the held-out split) and whether each is met.
    """
    from shared.query.api import TIMEOUT_RANGE_S, validate_seconds

    try:  # refused before anything is ingested: each question would otherwise end `failed`, with no reason
        validate_seconds(query_timeout, "--query-timeout", TIMEOUT_RANGE_S)
    except RagbusError as exc:
        raise fail(str(exc)) from None
    if from_feedback or _is_feedback_path(dataset):
        _eval_feedback_dataset(dataset, from_feedback=from_feedback, check=check, show_failures=show_failures,
                               providers=providers, query_timeout=query_timeout, out=out, cache=cache, chosen={
                                   "sample": sample, "abstain_sample": abstain_sample, "ablations": ablations,
                                   "slice_queries": slice_queries, "split": split, "kind": kind or None, "part": part,
                                   "reuse_ingest": reuse_ingest, "provider_sample": provider_sample or None})
        return
    if dataset == "formats":  # issue 31's format set: shared/tools/cli/evaluation_formats.py
        _eval_formats_hook(locals())
        return
    if part is not None and dataset != "realtext":
        raise fail(f"--part applies to --dataset realtext only, not {dataset!r}")
    if dataset in ("realtext", "realdocs") or (dataset not in ("conversations", "fitz-gov") and Path(dataset).is_dir()):
        if dataset == "realtext" and part not in ("dev", "test"):
            raise fail("--dataset realtext needs --part dev or --part test")
        _eval_realdocs(sample=None if sample == _default("sample") else sample, kinds=tuple(kind or ()),
                       show_failures=show_failures, providers=providers, reuse_ingest=reuse_ingest,
                       query_timeout=query_timeout, check=check, out=out, cache=cache,
                       fitz_gov_only={"abstain_sample": abstain_sample, "ablations": ablations,
                                      "slice_queries": slice_queries, "split": split,
                                      "provider_sample": provider_sample or None},
                       part={"realdocs": None, "realtext": part}.get(dataset, dataset))
        return
    if dataset == "conversations":
        _eval_conversations(show_failures=show_failures, reuse_ingest=reuse_ingest, query_timeout=query_timeout,
                            check=check, out=out, cache=cache, providers=providers, fitz_gov_only={
                                "sample": sample, "abstain_sample": abstain_sample, "ablations": ablations,
                                "slice_queries": slice_queries, "split": split, "kind": kind or None,
                                "provider_sample": provider_sample or None})
        return
    if dataset != "fitz-gov":
        raise fail(f"--dataset {dataset!r}: choose fitz-gov, realdocs, conversations, realtext, formats or a folder (or a file "
                   "--from-feedback wrote)")
    if kind or show_failures or reuse_ingest:
        raise fail("--kind, --show-failures and --reuse-ingest apply to --dataset realdocs only (the last two also to "
                    "conversations)")
    _eval_fitz_gov(sample=sample, abstain_sample=abstain_sample, ablations=ablations, slice_queries=slice_queries,
                   split=split, providers=providers, provider_sample=provider_sample, query_timeout=query_timeout,
                   check=check, out=out, cache=cache)


def _default(option: str) -> Any:
    """The default of one of ``ragbus eval``'s options."""
    return inspect.signature(eval_command).parameters[option].default


def _changed(chosen: dict[str, Any]) -> list[str]:
    """The flags, of the options in ``chosen``, given a value other than their default."""
    return [f"--{name.replace('_queries', '').replace('_', '-')}" for name, value in chosen.items()
            if value != _default(name) and value is not None]


def _eval_feedback_dataset(dataset: str, *, from_feedback: bool, check: bool, show_failures: bool, providers: str,
                           query_timeout: float, out: Path | None, cache: Path, chosen: dict[str, Any]) -> None:
    """--from-feedback (the rated queries exported), or a dataset it wrote asked again; no fitz-gov option applies."""
    changed = _changed(chosen)
    if from_feedback and dataset != _default("dataset"):
        changed.append("--dataset")
    if from_feedback and (check or show_failures):
        changed += ["--check"] * check + ["--show-failures"] * show_failures
    if changed or providers.strip().lower() not in ("auto", "local"):
        what = "--from-feedback" if from_feedback else "a feedback dataset"
        raise fail(f"{', '.join(changed) or '--providers ' + providers} do not apply to {what} (it "
                   + ("exports the rated queries)" if from_feedback else "asks its rated questions again in the "
                      "data directory's own documents)"))
    if from_feedback:
        _export_feedback(out or cache / "feedback.jsonl")
    else:
        _eval_feedback(Path(dataset), show_failures=show_failures, query_timeout=query_timeout, check=check,
                       out=out or cache / "eval_feedback.json")


def _eval_formats_hook(chosen: dict[str, Any]) -> None:
    """``--dataset formats``, with the options that do not apply to it named."""
    from shared.tools.cli.evaluation_formats import eval_formats

    others = ("abstain_sample", "ablations", "slice_queries", "split", "provider_sample", "part", "kind")
    eval_formats(sample=None if chosen["sample"] == _default("sample") else chosen["sample"],
                 show_failures=chosen["show_failures"], reuse_ingest=chosen["reuse_ingest"],
                 query_timeout=chosen["query_timeout"], check=chosen["check"], out=chosen["out"],
                 cache=chosen["cache"], providers=chosen["providers"],
                 not_for_formats=dict.fromkeys(_changed({k: chosen[k] for k in others})))


def _is_feedback_path(dataset: str) -> bool:
    """A file (what --from-feedback wrote), or a folder holding feedback.jsonl: not a named dataset."""
    from shared.tools.eval.feedback import is_feedback_dataset

    return dataset not in ("fitz-gov", "realdocs", "conversations", "realtext", "formats") and is_feedback_dataset(Path(dataset))


def _export_feedback(out: Path) -> None:
    from shared.tools.cli.session import open_session
    from shared.tools.eval.feedback import export_cases, write_cases

    session = open_session()
    cases = export_cases(session.deps.state.list(state_collections.QUERIES))
    write_cases(cases, out)
    down = sum(c["rating"] == "down" for c in cases)
    err.print(f"wrote {len(cases)} rated queries ({len(cases) - down} up, {down} down) to {markup(out)}; "
              f"`ragbus eval --dataset {markup(out)}` asks them again")
    if not cases:
        err.print(Text("no query is rated yet: rate answers with `ragbus feedback ID up|down`, /up and /down in "
                       "`ragbus chat`, the page or POST /v1/queries/{id}/feedback", style="yellow"), soft_wrap=True)


def _eval_feedback(path: Path, *, show_failures: bool, query_timeout: float, check: bool, out: Path) -> None:
    from shared.query.api import submit_query, wait_for_query
    from shared.tools.cli.session import open_session
    from shared.tools.eval import feedback

    try:
        cases = feedback.load_cases(path)
    except RagbusError as exc:
        raise fail(str(exc)) from None
    session = open_session(changes=True)

    def ask(case: dict[str, Any]):
        record = submit_query(session.deps, case["question"], field="question", filters=case.get("filters"),
                              timeout_s=query_timeout)
        return wait_for_query(session.deps, record.id, query_timeout + 5)

    with session.stages():
        results = feedback.run_cases(cases, ask, progress=lambda msg: err.print(plain(msg), markup=False))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    console.print(plain(feedback.markdown(results, show_failures=show_failures)), markup=False, highlight=False,
                  soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    changed = feedback.regressions(results)
    if check and changed:
        err.print(Text.assemble(("up-rated answers that changed: ", "bold red"), plain(", ".join(changed))),
                  soft_wrap=True)
        raise typer.Exit(1)


def _eval_fitz_gov(*, sample: int, abstain_sample: int, ablations: bool, slice_queries: int | None, split: str,
                   providers: str, provider_sample: list[str] | None, query_timeout: float, check: bool,
                   out: Path | None, cache: Path) -> None:
    from shared.tools.eval.report import eval_markdown
    from shared.tools.eval.runner import EvalOptions, run_eval, targets_missed
    from shared.tools.eval.targets import parse_provider_samples, parse_providers

    try:
        results = run_eval(
            EvalOptions(cache_dir=cache, sample=sample, abstain_sample=abstain_sample, ablations=ablations,
                        slice_queries=slice_queries, split=split, providers=parse_providers(providers),
                        provider_samples=parse_provider_samples(provider_sample or []),
                        query_timeout_s=query_timeout),
            progress=lambda msg: err.print(msg),
        )
    except RagbusError as exc:
        raise fail(str(exc)) from None
    chosen = {"sample": sample, "abstain_sample": abstain_sample, "ablations": ablations,
              "slice_queries": slice_queries, "split": split, "providers": providers,
              "provider_sample": provider_sample or None}
    full_run = all(value == _default(name) for name, value in chosen.items())
    out = out or (Path("docs/eval_results.json") if full_run else cache / "eval_results.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    # soft_wrap: Markdown table rows stay one line each in a narrow terminal or a file
    console.print(eval_markdown(results), markup=False, highlight=False, soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = targets_missed(results)
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)


def _eval_realdocs(*, sample: int | None, kinds: tuple[str, ...], show_failures: bool, providers: str,
                   reuse_ingest: bool, query_timeout: float, check: bool, out: Path | None, cache: Path,
                   fitz_gov_only: dict[str, Any], part: str | None = None) -> None:
    """realdocs, or with ``part`` a realtext part (its name or a folder)."""
    from shared.tools.eval import realdocs, realtext
    from shared.tools.eval.realdocs_run import RealDocsOptions, run_realdocs
    from shared.tools.eval.realtext_run import RealTextOptions, default_out, run_realtext

    changed = _changed(fitz_gov_only)
    if changed or providers.strip().lower() not in ("auto", "local"):
        raise fail(f"{', '.join(changed) or '--providers ' + providers} "
                   f"{'apply' if len(changed) > 1 else 'applies'} to fitz-gov only; "
                   f"{'realtext' if part else 'realdocs'} runs the offline reader (RAGBUS_LLM=local)")
    try:
        if part is None:
            results = run_realdocs(RealDocsOptions(cache_dir=cache, sample=sample, kinds=kinds,
                                                   query_timeout_s=query_timeout, reuse_ingest=reuse_ingest),
                                   progress=lambda msg: err.print(msg))
        else:
            results = run_realtext(RealTextOptions(cache_dir=cache, sample=sample, kinds=kinds,
                                                   query_timeout_s=query_timeout, reuse_ingest=reuse_ingest, part=part),
                                   progress=lambda msg: err.print(msg))
    except RagbusError as exc:
        raise fail(str(exc)) from None
    full_run = sample is None and not kinds and not reuse_ingest  # the committed figures come from a fresh ingest
    committed = Path("docs/eval_realdocs.json") if part is None else default_out(part)
    out = out or (committed if full_run else cache / committed.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    report = realdocs.markdown if part is None else realtext.markdown
    console.print(report(results, show_failures=show_failures), markup=False, highlight=False, soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = realdocs.missed(results)
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)


def _eval_conversations(*, show_failures: bool, reuse_ingest: bool, query_timeout: float, check: bool,
                        out: Path | None, cache: Path, providers: str, fitz_gov_only: dict[str, Any]) -> None:
    from shared.tools.eval import conversations
    from shared.tools.eval.conversations_run import ConversationOptions, run_conversations

    changed = _changed(fitz_gov_only)
    if changed:
        raise fail(f"{', '.join(changed)} do not apply to --dataset conversations (it asks every dialogue)")
    if providers.strip().lower() not in ("auto", "local"):
        raise fail(f"--providers {providers} applies to fitz-gov only; conversations runs the offline provider "
                    "(RAGBUS_LLM=local)")
    try:
        results = run_conversations(ConversationOptions(cache_dir=cache, query_timeout_s=query_timeout,
                                                        reuse_ingest=reuse_ingest), progress=lambda msg: err.print(msg))
    except RagbusError as exc:
        raise fail(str(exc)) from None
    out = out or (cache / "eval_conversations.json" if reuse_ingest else Path("docs/eval_conversations.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    console.print(conversations.markdown(results, show_failures=show_failures), markup=False, highlight=False,
                  soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    missed = [row["what"] for row in results["verdicts"] if row["met"] is not True]
    if check and missed:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(missed))), soft_wrap=True)
        raise typer.Exit(1)
