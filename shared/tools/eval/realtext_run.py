"""``ragbus eval --dataset realtext --part dev|test`` (or ``--dataset PATH``): ingest a part's documents
as ``ragbus ingest`` does, ask every question and every dialogue through the embedded pipeline, score
them (:mod:`shared.tools.eval.realtext`).

As :mod:`shared.tools.eval.realdocs_run`: a scratch home under the cache directory, removed
afterwards, or with ``reuse_ingest`` ``<cache>/realtext-<part>-home``, kept for the next run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.runtime.readiness import require_ready
from shared.runtime.stages import QUERY_STAGES
from shared.tools.eval import conversations, realdocs, realtext
from shared.tools.eval.conversations_run import ask_dialogues
from shared.tools.eval.pipeline import FULL, model_name, pipeline_settings
from shared.tools.eval.realdocs_run import RealDocsOptions, ask_questions, ingest_into, select

Progress = Callable[[str], None]
OnRecord = Callable[[realdocs.Question, Any, Any], None]  # question, its record, the runtime's deps


@dataclass
class RealTextOptions(RealDocsOptions):
    part: str = "dev"  # dev, test, or a folder laid out as one part
    dialogues: bool = True  # also ask the part's dialogues


def run_realtext(options: RealTextOptions, progress: Progress | None = None,
                 on_record: OnRecord | None = None) -> dict[str, Any]:
    """Ingest, ask, score; the results as one JSON-ready dict (see :func:`realtext.markdown`).
    ``on_record`` sees each question with its finished query record (``bench/fit_reader.py`` reads
    the passages each answer was written from)."""
    from shared.runtime.bootstrap import build_local
    from shared.tools.eval.runner import kept_or_scratch_home, machine

    say = progress or (lambda _msg: None)
    part = realtext.load_part(options.part)
    asked, selection = select(part.questions, options) if not options.kinds else _select_kinds(part, options)
    if not asked:
        raise ConfigError(f"no question of kind {', '.join(options.kinds)} in the part")
    dialogues = list(part.dialogues) if options.dialogues and options.sample is None and not options.kinds else []
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    kept = "realtext-" + re.sub(r"[^A-Za-z0-9_-]+", "-", part.name).strip("-") + "-home"
    started = time.perf_counter()
    with kept_or_scratch_home(options.cache_dir, kept, options.reuse_ingest) as home:
        settings = pipeline_settings(home, FULL)
        require_ready(settings, QUERY_STAGES)
        system = build_local(settings)
        held = system.deps.index.count_chunks() if options.reuse_ingest else 0
        say(f"ingesting {len(part.documents)} documents into "
            + (f"{home} (kept; {held} chunks there already)" if options.reuse_ingest else "a scratch home"))
        files = ingest_into(system, settings, part.document_folders, options, home)
        ingest_s = time.perf_counter() - started
        chunks = system.deps.index.count_chunks()
        say(f"  {chunks} chunks in {ingest_s:.1f}s; asking {len(asked)} questions and {len(dialogues)} dialogues")
        t = time.perf_counter()
        try:
            model = model_name(system.deps.llm)
            scored = ask_questions(system, asked, files, concurrency=options.concurrency,
                                   query_timeout_s=options.query_timeout_s, say=say, on_record=on_record)
            questions_s = time.perf_counter() - t
            talked, queries = ask_dialogues(system, dialogues, files, concurrency=options.concurrency,
                                            query_timeout_s=options.query_timeout_s, say=say) if dialogues else ([], 0)
        finally:
            system.deps.index.close()
        dialogues_s = time.perf_counter() - t - questions_s
    figs = realdocs.figures(scored)
    figs.update({k: v for k, v in realtext.group_figures(scored).items() if k not in figs})
    conv = None
    if talked:
        conv_figs = conversations.figures(talked)
        figs["follow_up_right_in_conversation"] = conv_figs["follow_up_right_in_conversation"]
        figs["follow_up_right_in_conversation_ci95"] = conv_figs["follow_up_right_in_conversation_ci95"]
        conv = {"figures": conv_figs, "queries": queries,
                "dialogues": [{**asdict(r), "rewritten": r.rewritten} for r in talked]}
    by_question = {q.id: q for q in asked}
    kinds = {q.id: q.kind for q in asked}
    return {
        "dataset": {"name": realtext.NAME, "part": part.name, "folders": [str(f) for f in part.folders],
                    "documents": len(part.documents),
                    "genres": ", ".join(f"{g} {sum(d.genre == g for d in part.documents)}"
                                        for g in realtext.GENRES if any(d.genre == g for d in part.documents)),
                    "languages": sorted({d.language for d in part.documents}),
                    "questions": len(part.questions), "answerable": len(part.answerable),
                    "near_misses": len(part.near_misses), "dialogues": len(dialogues), "chunks": chunks,
                    "selection": selection,
                    "ingested": f"reused from {home} ({held} chunks ingested by an earlier run)"
                    if options.reuse_ingest and held else "freshly ingested"},
        "model": model,
        "machine": machine(),
        "figures": figs,
        "verdicts": realtext.verdicts(figs),
        "by_writer": realtext.grouped(scored, part.writers),
        "by_genre": realtext.grouped(scored, part.genres),
        "by_kind": realtext.grouped(scored, kinds),
        "conversations": conv,
        "questions": [{**asdict(s), "genre": part.genres.get(s.id),
                       "keys": [realdocs.key_label(k) for k in by_question[s.id].keys]} for s in scored],
        "timings_s": {"ingest_s": round(ingest_s, 1), "questions_s": round(questions_s, 1),
                      "dialogues_s": round(dialogues_s, 1),
                      "per_question_ms": round(questions_s / len(asked) * 1000, 1)},
    }


def _select_kinds(part: realtext.Part, options: RealTextOptions) -> tuple[list[realdocs.Question], str]:
    """``--kind`` over the part's kinds (realtext's and, in dev, realdocs')."""
    known = set(realtext.KINDS) | set(realdocs.KINDS)
    unknown = [k for k in options.kinds if k not in known]
    if unknown:
        raise ConfigError(f"--kind {', '.join(unknown)}: unknown; choose from {', '.join(sorted(known))}")
    chosen = [q for q in part.questions if q.kind in options.kinds]
    return chosen, f"kind {', '.join(options.kinds)}"


def default_out(part: str) -> Path:
    """Where a full run's JSON goes: docs/eval_realtext_<part>.json (a folder: its name)."""
    name = part if part in realtext.PARTS else Path(part).name or "folder"
    return Path(f"docs/eval_realtext_{re.sub(r'[^A-Za-z0-9_-]+', '-', name)}.json")
