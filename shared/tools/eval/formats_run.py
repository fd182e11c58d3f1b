"""``ragbus eval --dataset formats``: the format set's documents ingested as ``ragbus ingest`` does
(PDFs, scanned pages by OCR, Office files, sheets, e-books), every question asked through the embedded
pipeline and scored with its citation's page (:mod:`shared.tools.eval.formats`); then the same
questions over the plain-text renderings of the same documents, ingested into a home of their own, as
the ceiling.

As :mod:`shared.tools.eval.realdocs_run`: scratch homes under the cache directory, removed afterwards,
or with ``reuse_ingest`` ``<cache>/formats-home`` and ``<cache>/formats-plain-home``, kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.runtime.readiness import require_ready
from shared.runtime.stages import QUERY_STAGES
from shared.tools.eval import formats, realdocs
from shared.tools.eval.pipeline import FULL, model_name, pipeline_settings
from shared.tools.eval.realdocs_run import RealDocsOptions, ask_questions, ingest_into, select

Progress = Callable[[str], None]


@dataclass
class FormatsOptions(RealDocsOptions):
    plain: bool = True  # also ask the questions over the plain-text renderings (the ceiling)


@dataclass
class _Asked:
    scored: list[realdocs.Scored]
    citations: dict[str, list[tuple[str, str]]]  # question id -> (file, position label) of each citation
    failed: list[str]  # documents that failed to ingest (their questions count as wrong)
    ingest_s: float
    questions_s: float
    chunks: int
    model: str


def _select(dataset: formats.FormatSet, options: FormatsOptions) -> tuple[list[formats.Question], str]:
    """``--sample N``: N questions drawn in proportion to where the answers lie (seeded); else all of them."""
    if options.kinds:
        raise ConfigError("--kind does not apply to --dataset formats (it reports every kind and where the answer lies)")
    if options.sample is None:
        return list(dataset.questions), ""
    if options.sample < 1:
        raise ConfigError(f"--sample {options.sample}: ask at least one question")
    stand_ins = [realdocs.Question(q.id, q.question, q.where, q.file, q.keys) for q in dataset.questions]
    chosen, _ = select(stand_ins, RealDocsOptions(sample=options.sample, seed=options.seed))
    ids = {q.id for q in chosen}
    return [q for q in dataset.questions if q.id in ids], \
        f"a random {len(ids)} in proportion to where the answers lie (seed {options.seed})"


def _ask(folder: Path, asked: Sequence[realdocs.Question], options: FormatsOptions, kept: str,
         say: Progress) -> _Asked:
    """Ingest ``folder`` into a home of its own and ask ``asked``, keeping each answer's citations."""
    from shared.runtime.bootstrap import build_local
    from shared.tools.eval.runner import kept_or_scratch_home

    citations: dict[str, list[tuple[str, str]]] = {}
    failed: list[str] = []
    started = time.perf_counter()
    with kept_or_scratch_home(options.cache_dir, kept, options.reuse_ingest) as home:
        settings = pipeline_settings(home, FULL)
        require_ready(settings, QUERY_STAGES)
        system = build_local(settings)
        say(f"ingesting {folder.name}/ into " + (str(home) if options.reuse_ingest else "a scratch home"))
        files = ingest_into(system, settings, [folder], options, home, failed)
        ingest_s = time.perf_counter() - started
        chunks = system.deps.index.count_chunks()
        say(f"  {chunks} chunks in {ingest_s:.1f}s" + (f" ({len(failed)} failed: {', '.join(failed)})" if failed else "")
            + f"; asking {len(asked)} questions")

        def keep(question: realdocs.Question, record: Any, _deps: Any) -> None:
            citations[question.id] = [(files.get(c.get("document_id", ""), "?"), c.get("position") or "")
                                      for c in record.citations]

        t = time.perf_counter()
        try:
            model = model_name(system.deps.llm)
            scored = ask_questions(system, asked, files, concurrency=options.concurrency,
                                   query_timeout_s=options.query_timeout_s, say=say, on_record=keep)
        finally:
            system.deps.index.close()
    return _Asked(scored, citations, failed, ingest_s, time.perf_counter() - t, chunks, model)


def run_formats(options: FormatsOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Ingest, ask, score, over the documents and over their plain text; one JSON-ready dict
    (see :func:`formats.markdown`)."""
    from dataclasses import asdict

    from shared.tools.eval.runner import machine

    say = progress or (lambda _msg: None)
    dataset = formats.load(formats.ROOT)
    asked, selection = _select(dataset, options)
    options.cache_dir.mkdir(parents=True, exist_ok=True)
    docs = _ask(dataset.documents_dir, [q.as_realdocs() for q in asked], options, "formats-home", say)
    plain = None
    if options.plain:
        plain = _ask(dataset.plain_dir, [q.as_realdocs(dataset.plain_of(q.file)) for q in asked], options,
                     "formats-plain-home", say)
    over_docs = {s.id: s for s in docs.scored}
    over_plain = {s.id: s for s in plain.scored} if plain else {}
    scored = [formats.score(q, over_docs[q.id], docs.citations.get(q.id, []), over_plain.get(q.id))
              for q in asked if q.id in over_docs]
    count = {f: sum(d.format == f for d in dataset.documents) for f in formats.FORMATS}
    return {
        "dataset": {"name": formats.NAME, "documents": len(dataset.documents),
                    "formats": ", ".join(f"{f} {n}" for f, n in count.items() if n),
                    "scanned": sum(d.layout == "scanned" for d in dataset.documents),
                    "questions": len(dataset.questions), "asked": len(asked), "selection": selection,
                    "chunks": docs.chunks, "plain_chunks": plain.chunks if plain else None,
                    "failed_to_ingest": docs.failed, "plain_failed_to_ingest": plain.failed if plain else [],
                    "ceiling": "the same questions over plain/ (poppler's pdftotext of each PDF: -layout for one "
                               "column, reading order for two or three, running lines out, hyphenation joined, "
                               "a table's rows apart; for a scan the text of the pages it was "
                               "rasterised from; the text each rendered file was made from; the XHTML text of each "
                               "EPUB; a table's rows as 'header: value' lines), ingested into an index of its own"
                    if plain else "not asked"},
        "model": docs.model,
        "machine": machine(),
        "figures": formats.figures(scored),
        "questions": [{**asdict(s), "keys": [realdocs.key_label(k) for k in q.keys]}
                      for s, q in zip(scored, [q for q in asked if q.id in over_docs], strict=True)],
        "timings_s": {"ingest_s": round(docs.ingest_s, 1), "questions_s": round(docs.questions_s, 1),
                      "plain_ingest_s": round(plain.ingest_s, 1) if plain else None,
                      "plain_questions_s": round(plain.questions_s, 1) if plain else None},
    }


def missed(results: dict[str, Any]) -> list[str]:
    """"what ratio (goal)" for each target not met (not measured is not met)."""
    return [f"{v['what']} {'not measured' if v['ratio'] is None else format(v['ratio'], '.3f')} ({v['goal']})"
            for v in results["figures"]["verdicts"] if v["met"] is not True]
