"""``ragbus eval --dataset conversations``: ingest the realdocs documents and the sample corpus, ask
every dialogue's turns in one conversation through the embedded pipeline, ask its last turn's
standalone form (and, for follow-ups, the last turn as typed) alone, and score them
(:mod:`shared.tools.eval.conversations`).

Each run ingests into a scratch home under the cache directory (removed afterwards), or with
``reuse_ingest`` into ``<cache>/conversations-home``, kept for the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.runtime.readiness import require_ready
from shared.runtime.stages import CONSUMERS, QUERY_STAGES
from shared.tools.eval import conversations, realdocs
from shared.tools.eval.pipeline import FULL, ask_each, model_name, pipeline_settings
from shared.tools.eval.realdocs_run import ingest_into

Progress = Callable[[str], None]
KEPT_HOME = "conversations-home"


@dataclass
class ConversationOptions:
    cache_dir: Path = Path(".ragbus-eval")
    concurrency: int = 2  # dialogues at once (the turns of one are asked in order)
    query_timeout_s: float = 120.0
    ingest_timeout_s: float = 900.0  # seconds with no document finished before the ingestion is an error
    reuse_ingest: bool = False


def ask_dialogues(system: Any, dialogues: Sequence[conversations.Dialogue], files: dict[str, str], *,
                  concurrency: int, query_timeout_s: float,
                  say: Progress) -> tuple[list[conversations.DialogueResult], int]:
    """Ask each dialogue's turns in one conversation, its standalone form alone and (a follow-up) its
    last turn as typed alone, through the embedded pipeline's query stages; the scored results and how
    many queries were asked (``files``: the set's file name of each document id)."""
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.local import LocalRuntime
    from shared.tools.eval.pipeline import reduce_record

    deps = system.deps
    timeout = min(600.0, query_timeout_s)
    asked = [0]

    def ask(text: str, conversation_id: str | None = None) -> Any:
        record = submit_query(deps, text, timeout_s=timeout, conversation_id=conversation_id)
        asked[0] += 1
        return wait_for_query(deps, record.id, query_timeout_s + 5)

    def scored(dialogue: conversations.Dialogue, text: str, record: Any) -> realdocs.Scored:
        reduced = reduce_record(record)
        kept = record.entry(record.best_iteration) if record.best_iteration is not None else None
        kept = kept or (record.iterations[-1] if record.iterations else None)  # the iteration answered from
        return realdocs.score(dialogue.as_question(text), status=reduced.status, outcome=reduced.outcome,
                              answer=reduced.answer, cited_files=[files.get(d, "?") for d in reduced.cited],
                              contexts=[c.get("text") or "" for c in kept.contexts] if kept else [])

    results: list[conversations.DialogueResult | None] = [None] * len(dialogues)

    def one(i: int) -> None:
        dialogue = dialogues[i]
        conversation = None
        for turn in dialogue.turns:
            record = ask(turn, conversation)
            conversation = record.conversation_id
        last = record
        alone = ask(dialogue.standalone)
        typed = ask(dialogue.last) if dialogue.kind == conversations.FOLLOW_UP else None
        results[i] = conversations.DialogueResult(
            id=dialogue.id, kind=dialogue.kind, corpus=dialogue.corpus, turns=list(dialogue.turns),
            standalone=dialogue.standalone, asked_as=last.question, shown_as=last.standalone_question,
            in_conversation=scored(dialogue, dialogue.last, last),
            standalone_alone=scored(dialogue, dialogue.standalone, alone),
            typed_alone=None if typed is None else scored(dialogue, dialogue.last, typed),
        )

    runtime = LocalRuntime(deps, system.bus, [c for c in CONSUMERS if c.stage in QUERY_STAGES]).start()
    try:
        ask_each(len(dialogues), one, concurrency, every=10, progress=lambda d, n: say(f"  {d}/{n}"))
    finally:
        runtime.stop()
    return [r for r in results if r is not None], asked[0]


def run_conversations(options: ConversationOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Ingest, ask, score; the results as one JSON-ready dict (see :func:`conversations.markdown`)."""
    from shared.runtime.bootstrap import build_local
    from shared.tools.eval.runner import kept_or_scratch_home, machine

    say = progress or (lambda _msg: None)
    dialogues = conversations.load()
    folders = [realdocs.ROOT / "documents", *conversations.SAMPLE_FOLDERS]
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    with kept_or_scratch_home(options.cache_dir, KEPT_HOME, options.reuse_ingest) as home:
        settings = pipeline_settings(home, FULL)
        require_ready(settings, QUERY_STAGES)
        system = build_local(settings)
        deps = system.deps
        say(f"ingesting the realdocs documents and the sample corpus into {home}")
        started = time.perf_counter()
        files = ingest_into(system, settings, folders, options, home)
        ingest_s = time.perf_counter() - started
        chunks = deps.index.count_chunks()
        say(f"  {len(files)} documents, {chunks} chunks in {ingest_s:.1f}s; asking {len(dialogues)} dialogues")
        t = time.perf_counter()
        try:
            model = model_name(deps.llm)
            done_results, queries = ask_dialogues(system, dialogues, files, concurrency=options.concurrency,
                                                  query_timeout_s=options.query_timeout_s, say=say)
        finally:
            deps.index.close()
        questions_s = time.perf_counter() - t
    if not done_results:
        raise ConfigError("no dialogue was asked")
    figs = conversations.figures(done_results)
    return {
        "dataset": {"name": conversations.NAME, "dialogues": len(dialogues), "documents": len(files),
                    "chunks": chunks},
        "model": model,
        "machine": machine(),
        "figures": figs,
        "verdicts": conversations.verdicts(figs),
        "dialogues": [{**asdict(r), "rewritten": r.rewritten} for r in done_results],
        "timings_s": {"ingest_s": round(ingest_s, 1), "questions_s": round(questions_s, 1), "queries": queries},
    }
