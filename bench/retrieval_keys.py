"""Where the key facts are lost before the reader: retrieval on the real-text development part (issue 36).

Ingests a part as ``ragbus eval --dataset realtext --part dev`` does (the real cleaner, chunker and
indexer, the offline default, a fresh scratch home), then asks every answerable question through the
query path's own transform and retrieval (``services.transformer.handler.transform`` and
``services.retriever.handler.retrieve`` on a query record, as the runtime calls them: the same rewrite,
searches, fusion and ``top_k``), and stops there: no grader, no reader. Per writer (the folder that
holds the question's document) it reports the share of answerable questions whose keys all appear in
the first 1, 3, 5 and 10 passages (matched as the eval does, :func:`shared.tools.eval.realdocs.key_in`:
case folded, whitespace runs one space, alternatives allowed), the share with every key in one
passage, and the share whose answering file is among the retrieved documents.

Chunk embeddings are kept in ``--cache`` (:class:`shared.tools.eval.retrieval.CachedEmbedder`, keyed by
model and text), so a rerun re-cleans, re-chunks and re-indexes but embeds only chunks it has not seen:
a change to chunking or the index shows, in a few minutes instead of a quarter of an hour.

    RAGBUS_LLM=local python bench/retrieval_keys.py --part dev [--out FILE] [--misses]

``--misses`` lists the questions whose keys were not retrieved, with the rank of the first chunk
holding every key in the question's own dense, BM25 and hybrid searches 100 deep, except those of
writer ``d``: it is held out (its figures may be read, never its records), so its rows are not printed.
The sealed test part is not a choice.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from shared.tools.eval import realdocs, realtext  # noqa: E402

HELD_OUT = frozenset({"d"})  # writers whose records are never printed (their figures are)
CUTS = (1, 3, 5, 10)
DIAGNOSTIC_DEPTH = 100


@dataclass
class Retrieved:
    """One answerable question's contexts as the retriever recorded them, in order."""

    id: str
    writer: str
    question: str
    file: str
    keys: tuple[realdocs.Key, ...]
    query: str  # what the transform made of the question (iteration 0's query)
    files: list[str]  # each context's document, as the set's file name ("?" for none of the set)
    texts: list[str]
    ranks: dict[str, int | None] = field(default_factory=dict)  # diagnostics (--misses): mode -> rank

    def keys_within(self, k: int) -> bool:
        """Every key in the first ``k`` passages together (what a reader reading them could quote)."""
        return realdocs.keys_in(self.keys, "\n".join(self.texts[:k]))

    def keys_in_one(self, k: int) -> bool:
        return any(realdocs.keys_in(self.keys, text) for text in self.texts[:k])

    def file_within(self, k: int) -> bool:
        return self.file in self.files[:k]


def retrieve_contexts(deps: Any, question: str) -> tuple[str, list[dict[str, Any]]]:
    """The query path's iteration 0 for ``question``: the transformer's rewrite, then the retriever's
    contexts, each stage's change applied to a fresh record as the runtime applies it."""
    from services.retriever.handler import retrieve
    from services.transformer.handler import transform
    from shared.contract.messages import QuerySubmitted, QueryTransformed
    from shared.query.record import QueryRecord

    settings = deps.settings
    record = QueryRecord.new(uuid.uuid4().hex, question, top_k=settings.top_k, max_iterations=settings.max_iterations,
                             max_model_calls=settings.max_model_calls, now=deps.clock.now(),
                             timeout_s=settings.query_timeout_s)
    record.standalone_question = question  # a first turn stands alone as typed (shared.query.api)
    transform(record, QuerySubmitted(query_id=record.id), deps).apply(record)
    retrieve(record, QueryTransformed(query_id=record.id, iteration=0), deps).apply(record)
    entry = record.entry(0)
    return entry.query or "", list(entry.contexts)


def first_rank(deps: Any, text: str, keys: Sequence[realdocs.Key], mode: str, depth: int) -> int | None:
    """Rank of the first chunk holding every key in the index's own ``mode`` search of ``text``."""
    from shared.query.vectors import query_vectors

    vector = np.asarray(query_vectors(deps.embedder, [text])[0])
    hits = deps.index.search(text, vector, depth, mode=mode)
    return next((n for n, h in enumerate(hits, 1) if realdocs.keys_in(keys, h.chunk.text)), None)


def figures(rows: Sequence[Retrieved]) -> dict[str, Any]:
    n = len(rows)

    def share(count: int) -> float | None:
        return None if n == 0 else round(count / n, 4)

    out: dict[str, Any] = {"answerable": n}
    for k in CUTS:
        out[f"keys@{k}"] = share(sum(r.keys_within(k) for r in rows))
    out["keys_in_one_passage@10"] = share(sum(r.keys_in_one(10) for r in rows))
    for k in CUTS:
        out[f"file@{k}"] = share(sum(r.file_within(k) for r in rows))
    out["keys_lost@10"] = sum(not r.keys_within(10) for r in rows)
    return out


def measure(part_name: str, *, cache: Path | None, home: Path | None, misses: bool,
            say: Any = print) -> tuple[dict[str, Any], list[Retrieved]]:
    from shared.runtime.bootstrap import build_local
    from shared.tools.eval.pipeline import FULL, pipeline_settings
    from shared.tools.eval.realdocs_run import RealDocsOptions, ingest_into
    from shared.tools.eval.retrieval import CachedEmbedder

    part = realtext.load_part(part_name)
    scratch = None
    if home is None:
        scratch = tempfile.TemporaryDirectory(prefix="retrieval-keys-")
        home = Path(scratch.name)
    try:
        settings = pipeline_settings(home, FULL)
        system = build_local(settings)
        deps = system.deps
        cached = CachedEmbedder(deps.embedder, cache)
        deps.override("embedder", cached)
        started = time.perf_counter()
        files = ingest_into(system, settings, part.document_folders, RealDocsOptions(ingest_timeout_s=3600), home)
        ingest_s = time.perf_counter() - started
        cached.save()
        say(f"ingested {len(part.documents)} documents, {deps.index.count_chunks()} chunks in {ingest_s:.0f} s "
            f"({cached.hits} chunk vectors from the cache, {cached.misses} embedded)")
        writers = part.writers
        rows: list[Retrieved] = []
        started = time.perf_counter()
        try:
            for n, q in enumerate(part.answerable, 1):
                query, contexts = retrieve_contexts(deps, q.question)
                row = Retrieved(q.id, writers.get(q.id, "?"), q.question, q.file, q.keys, query,
                                [files.get(c["document_id"], "?") for c in contexts],
                                [c.get("text") or "" for c in contexts])
                if misses and not row.keys_within(10) and row.writer not in HELD_OUT:
                    searched = row.query or q.question
                    row.ranks = {mode: first_rank(deps, searched, q.keys, mode, DIAGNOSTIC_DEPTH)
                                 for mode in ("hybrid", "dense", "bm25")}
                rows.append(row)
                if n % 100 == 0:
                    say(f"  {n}/{len(part.answerable)}")
            query_s = time.perf_counter() - started
            chunks = deps.index.count_chunks()
        finally:
            deps.index.close()
    finally:
        if scratch is not None:
            scratch.cleanup()
    groups: dict[str, list[Retrieved]] = {}
    for row in rows:
        groups.setdefault(row.writer, []).append(row)
    results = {"part": part_name, "documents": len(part.documents), "chunks": chunks, "top_k": settings.top_k,
               "all": figures(rows), "by_writer": {w: figures(g) for w, g in sorted(groups.items())},
               "timings_s": {"ingest": round(ingest_s, 1), "questions": round(query_s, 1)},
               "note": "keys@k: every key in the first k passages together; file@k: the answering file among "
                       "their documents; keys_lost@10: questions none of whose 10 passages hold every key"}
    return results, rows


def markdown(results: dict[str, Any]) -> str:
    cols = [f"keys@{k}" for k in CUTS] + ["keys_in_one_passage@10"] + [f"file@{k}" for k in CUTS] + ["keys_lost@10"]
    out = [f"Part {results['part']}: {results['documents']} documents, {results['chunks']} chunks, top_k "
           f"{results['top_k']}.", "", "| writer | answerable | " + " | ".join(cols) + " |",
           "|---|---:|" + "---:|" * len(cols)]
    for name, f in [*results["by_writer"].items(), ("all", results["all"])]:
        out.append(f"| {name} | {f['answerable']} | " + " | ".join(str(f[c]) for c in cols) + " |")
    return "\n".join(out)


def missed_rows(rows: Sequence[Retrieved]) -> str:
    """The questions (held-out writers left out) whose keys none of the 10 passages hold."""
    out = []
    for r in rows:
        if r.writer in HELD_OUT or r.keys_within(10):
            continue
        keys = [realdocs.key_label(k) for k in r.keys]
        out.append(f"- [{r.writer}] {r.id}: {r.question}\n  keys {keys} in {r.file}; query {r.query!r}; "
                   f"file among the 10: {r.file_within(10)}; first chunk with every key at rank (100 deep): "
                   f"{r.ranks}; retrieved {sorted(set(r.files))}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="dev", choices=["dev"], help="the part asked (dev only: the test is sealed)")
    parser.add_argument("--cache", type=Path, default=Path(".ragbus-bench/retrieval-keys"),
                        help="where chunk embeddings are kept between runs ('' for none)")
    parser.add_argument("--home", type=Path, default=None,
                        help="ingest into this folder (default: a fresh scratch home, removed afterwards)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    parser.add_argument("--misses", action="store_true",
                        help="list the questions whose keys were not retrieved (held-out writers left out)")
    args = parser.parse_args(argv)
    cache = args.cache if str(args.cache) not in ("", ".") else None
    results, rows = measure(args.part, cache=cache, home=args.home, misses=args.misses)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(markdown(results))
    if args.misses:
        print("\n" + missed_rows(rows))


if __name__ == "__main__":
    main()
