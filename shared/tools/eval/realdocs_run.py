"""``ragbus eval --dataset realdocs``: ingest the real documents as ``ragbus ingest`` does, ask
every question through the embedded pipeline, score the answers (:mod:`shared.tools.eval.realdocs`).

Each run starts from an empty scratch home under the cache directory (removed afterwards):
the documents go through the real cleaner and indexer, so a change to cleaning, chunking or
indexing shows in the figures, and nothing of an earlier run's index is reused.

``reuse_ingest`` is the fast path for work on the query side: the home is kept at
``<cache>/realdocs-home`` and a later run with the option asks straight away (ingestion
sends only files whose bytes changed). It is the caller's word that cleaning, chunking and
indexing did not change since; the results say which home and when it was filled.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from shared.contract.errors import ConfigError, RagbusError
from shared.contract.ids import file_document_id
from shared.runtime.readiness import require_ready
from shared.runtime.stages import CONSUMERS, INGESTION_STAGES, QUERY_STAGES
from shared.tools.eval import realdocs
from shared.tools.eval.pipeline import FULL, ask_each, model_name, pipeline_settings

Progress = Callable[[str], None]


@dataclass
class RealDocsOptions:
    cache_dir: Path = Path(".ragbus-eval")
    sample: int | None = None  # questions asked (None: every one), a seeded random draw
    kinds: tuple[str, ...] = ()  # only these kinds (empty: every kind)
    seed: int = 7
    concurrency: int = 2
    query_timeout_s: float = 120.0
    ingest_timeout_s: float = 900.0  # seconds with no document finished before the ingestion is an error
    reuse_ingest: bool = False  # keep <cache>/realdocs-home and reuse what it already holds


def select(questions: Sequence[realdocs.Question], options: RealDocsOptions) -> tuple[list[realdocs.Question], str]:
    """The questions to ask, in set order, and how they were chosen (empty: all of them)."""
    unknown = [k for k in options.kinds if k not in realdocs.KINDS]
    if unknown:
        raise ConfigError(f"--kind {', '.join(unknown)}: unknown; choose from {', '.join(realdocs.KINDS)}")
    chosen = [q for q in questions if not options.kinds or q.kind in options.kinds]
    how = [f"kind {', '.join(options.kinds)}"] if options.kinds else []
    if options.sample is not None:
        if options.sample < 1:
            raise ConfigError(f"--sample {options.sample}: ask at least one question")
        if options.sample < len(chosen):
            keep = _stratified(chosen, options.sample, random.Random(options.seed))
            chosen = [q for i, q in enumerate(chosen) if i in keep]
            how.append(f"a random {options.sample} in proportion to each kind (seed {options.seed})")
    return chosen, "; ".join(how)


def _stratified(questions: Sequence[realdocs.Question], n: int, rng: random.Random) -> set[int]:
    """``n`` indices drawn in proportion to each kind (largest remainders), at least one of every kind
    when ``n`` allows: a plain draw of 5 could hold no near miss, and its target read "not measured"."""
    by_kind: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_kind.setdefault(q.kind, []).append(i)
    shares = {k: n * len(ix) / len(questions) for k, ix in by_kind.items()}
    take = {k: int(share) for k, share in shares.items()}
    if n >= len(by_kind):
        take = {k: max(1, t) for k, t in take.items()}
    for k in sorted(shares, key=lambda k: (take[k] - shares[k], k)):  # largest remainder first
        if sum(take.values()) >= n:
            break
        if take[k] < len(by_kind[k]):
            take[k] += 1
    while sum(take.values()) > n:  # the minimum of one each overshot: trim the largest
        largest = max(take, key=lambda k: (take[k], k))
        take[largest] -= 1
    return {i for k, ix in by_kind.items() for i in rng.sample(ix, min(take[k], len(ix)))}


KEPT_HOME = "realdocs-home"


def ingest_documents(system: Any, settings: Any, root: Path, timeout_s: float,
                     failed: list[str] | None = None) -> dict[str, str]:
    """Every document through the cleaner and indexer; the set's file name of each document id. A
    document that fails is an error, or with ``failed`` its name is added there (the format set
    counts its questions wrong and says which files failed)."""
    from shared.ingest.files import ingest_path
    from shared.ingest.progress import status_of
    from shared.runtime.local import LocalRuntime

    deps = system.deps
    require_ready(settings, INGESTION_STAGES)
    runtime = LocalRuntime(deps, system.bus, [c for c in CONSUMERS if c.stage in INGESTION_STAGES]).start()
    try:
        sent = ingest_path(root, state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
        status = wait_indexed(lambda: status_of(deps.state, {m.document_id for m in sent}), timeout_s)
    finally:
        runtime.stop()
    files = {file_document_id(str(p.resolve())): p.name for p in root.iterdir() if p.is_file()}
    names = sorted(files.get(d, d) for d in status.failed)
    if names and failed is not None:
        failed.extend(names)
    elif names:
        raise RagbusError(f"realdocs: {len(names)} document(s) failed to ingest: {', '.join(names)}; "
                          "see `ragbus dead-letters` under the scratch home")
    return files


def wait_indexed(status: Callable[[], Any], stall_s: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Any:
    """``status()`` once nothing is pending; an error when ``stall_s`` pass with no document finished: a slow machine
    (a whole set takes 30 minutes at load 15) is waited for, a stuck ingestion is not."""
    last = status()
    since = clock()
    while last.pending:
        sleep(0.2)
        now = status()
        if len(now.pending) < len(last.pending):
            since = clock()
        elif clock() - since > stall_s:
            raise RagbusError(f"realdocs: {len(now.pending)} document(s) still not indexed, none finished in the "
                              f"last {stall_s:.0f} s")
        last = now
    return last


class IngestOptions(Protocol):
    """What :func:`ingest_into` reads of a run's options (realdocs', realtext's, conversations')."""

    ingest_timeout_s: float
    reuse_ingest: bool  # the home is kept for the next run


def ingest_into(system: Any, settings: Any, folders: Sequence[Path], options: IngestOptions,
                home: Path, failed: list[str] | None = None) -> dict[str, str]:
    """Every folder's documents (:func:`ingest_documents`, ``failed`` as there); a kept home left
    half-filled by a failure is removed, so it cannot pass for a filled one next time."""
    if options.reuse_ingest:
        refuse_foreign_documents(system.deps.state, folders, home)
    files: dict[str, str] = {}
    try:
        for folder in folders:
            files.update(ingest_documents(system, settings, folder, options.ingest_timeout_s, failed=failed))
    except BaseException:
        if options.reuse_ingest:
            system.deps.index.close()
            shutil.rmtree(home, ignore_errors=True)
        raise
    return files


def refuse_foreign_documents(state: Any, folders: Sequence[Path], home: Path) -> None:
    """An error when the kept ``home`` holds documents from folders other than ``folders``.

    Documents are keyed by their path, so a home copied from another checkout (or left by a set
    whose folders moved) would get this set's documents a second time beside the old ones, and
    every figure would count both copies: its citations of the old copies read as wrong files."""
    from shared.ingest.processed_items import records

    wanted = [f.resolve() for f in folders]

    def ours(record: dict) -> bool:  # under a set folder, or ingested from one (a symlink's target lies elsewhere)
        path, root = Path(str(record.get("path", ""))), record.get("root")
        return any(path.is_relative_to(f) or root and Path(root).is_relative_to(f) for f in wanted)

    foreign = sorted({str(r.get("root") or r.get("origin") or r.get("path") or "?")
                      for r in records(state, {"source": "file"}) if not ours(r)})
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ConfigError(f"the kept home {home} holds documents ingested from other folders ({shown}): a copy of "
                          "another checkout's --cache? They would be counted beside this set's. Remove the home, or "
                          f"delete them: RAGBUS_HOME={home} ragbus ingest --delete FOLDER --yes")


def ask_questions(system: Any, asked: Sequence[realdocs.Question], files: dict[str, str], *, concurrency: int,
                  query_timeout_s: float, say: Progress,
                  on_record: Callable[[realdocs.Question, Any, Any], None] | None = None) -> list[realdocs.Scored]:
    """Ask every question through the embedded pipeline's query stages and score its answer
    (``files``: the set's file name of each document id; ``on_record`` sees each question, its finished
    record and the runtime's deps)."""
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.local import LocalRuntime
    from shared.tools.eval.pipeline import reduce_record

    runtime = LocalRuntime(system.deps, system.bus, [c for c in CONSUMERS if c.stage in QUERY_STAGES]).start()
    scored: list[realdocs.Scored | None] = [None] * len(asked)
    try:
        def one(i: int) -> None:
            q = asked[i]
            record = submit_query(system.deps, q.question, timeout_s=min(600.0, query_timeout_s))
            record = wait_for_query(system.deps, record.id, query_timeout_s + 5)
            if on_record is not None:
                on_record(q, record, system.deps)
            reduced = reduce_record(record)
            kept = record.best_entry()
            scored[i] = realdocs.score(q, status=reduced.status, outcome=reduced.outcome, answer=reduced.answer,
                                       cited_files=[files.get(d, "?") for d in reduced.cited],
                                       contexts=[c.get("text") or "" for c in kept.contexts] if kept else [])

        ask_each(len(asked), one, concurrency, every=20, progress=lambda d, n: say(f"  {d}/{n}"))
    finally:
        runtime.stop()
    return [s for s in scored if s is not None]


def run_realdocs(options: RealDocsOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Ingest, ask, score; the results as one JSON-ready dict (see :func:`realdocs.markdown`)."""
    from shared.runtime.bootstrap import build_local
    from shared.tools.eval.runner import machine

    say = progress or (lambda _msg: None)
    dataset = realdocs.load()
    asked, selection = select(dataset.questions, options)  # a bad --kind/--sample fails before any work
    if not asked:
        raise ConfigError(f"no question of kind {', '.join(options.kinds)} in the set")
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    from shared.tools.eval.runner import kept_or_scratch_home

    with kept_or_scratch_home(options.cache_dir, KEPT_HOME, options.reuse_ingest) as home:
        settings = pipeline_settings(home, FULL)
        require_ready(settings, QUERY_STAGES)
        system = build_local(settings)
        held = system.deps.index.count_chunks() if options.reuse_ingest else 0
        say(f"ingesting {len(dataset.documents)} documents into "
            + (f"{home} (kept; {held} chunks there already)" if options.reuse_ingest else "a scratch home"))
        files = ingest_into(system, settings, [dataset.documents_dir], options, home)
        ingest_s = time.perf_counter() - started
        chunks = system.deps.index.count_chunks()
        say(f"  {chunks} chunks in {ingest_s:.1f}s; asking {len(asked)} questions")
        t = time.perf_counter()
        try:
            model = model_name(system.deps.llm)
            results_scored = ask_questions(system, asked, files, concurrency=options.concurrency,
                                           query_timeout_s=options.query_timeout_s, say=say)
        finally:
            system.deps.index.close()
        questions_s = time.perf_counter() - t
    figs = realdocs.figures(results_scored)
    by_question = {q.id: q for q in asked}
    formats = sorted({d.format for d in dataset.documents})
    return {
        "dataset": {"name": realdocs.NAME, "documents": len(dataset.documents), "formats": ", ".join(formats),
                    "questions": len(dataset.questions), "answerable": len(dataset.answerable),
                    "near_misses": len(dataset.near_misses), "chunks": chunks, "selection": selection,
                    "ingested": f"reused from {home} ({held} chunks ingested by an earlier run)"
                    if options.reuse_ingest and held else "freshly ingested"},
        "model": model,
        "machine": machine(),
        "figures": figs,
        "verdicts": realdocs.verdicts(figs),
        "by_kind": realdocs.by_kind(results_scored),
        "questions": [{**asdict(s), "keys": [realdocs.key_label(k) for k in by_question[s.id].keys]}
                      for s in results_scored],
        "timings_s": {"ingest_s": round(ingest_s, 1), "questions_s": round(questions_s, 1),
                      "per_question_ms": round(questions_s / len(asked) * 1000, 1)},
    }
