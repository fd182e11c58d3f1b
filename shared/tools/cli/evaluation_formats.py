"""``ragbus eval --dataset formats`` (issue 31): the format set, its report and its JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from shared.contract.errors import RagbusError
from shared.observability.terminal_text import markup, plain
from shared.tools.cli.root import fail
from shared.tools.console import console, err

COMMITTED = Path("docs/eval_formats.json")


def eval_formats(*, sample: int | None, show_failures: bool, reuse_ingest: bool, query_timeout: float, check: bool,
                 out: Path | None, cache: Path, providers: str, not_for_formats: dict[str, Any]) -> None:
    """Run the format set. ``not_for_formats``: the options of other datasets the user changed
    (``--kind`` ...), refused by name."""
    from shared.tools.eval import formats
    from shared.tools.eval.formats_run import FormatsOptions, missed, run_formats

    if not_for_formats or providers.strip().lower() not in ("auto", "local"):
        raise fail(f"{', '.join(not_for_formats) or '--providers ' + providers} do not apply to --dataset formats "
                   "(it runs the offline reader, RAGBUS_LLM=local, over every question or --sample N of them)")
    try:
        results = run_formats(FormatsOptions(cache_dir=cache, sample=sample, query_timeout_s=query_timeout,
                                             reuse_ingest=reuse_ingest), progress=lambda msg: err.print(msg))
    except RagbusError as exc:
        raise fail(str(exc)) from None
    full_run = sample is None and not reuse_ingest  # the committed figures come from a fresh ingest of every file
    out = out or (COMMITTED if full_run else cache / COMMITTED.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    console.print(formats.markdown(results, show_failures=show_failures), markup=False, highlight=False,
                  soft_wrap=True)
    err.print(f"wrote {markup(out)}")
    misses = missed(results)
    if check and misses:
        err.print(Text.assemble(("targets not met: ", "bold red"), plain("; ".join(misses))), soft_wrap=True)
        raise typer.Exit(1)
