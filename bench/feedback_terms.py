"""Does the offline rewrite's pseudo-relevance feedback help retrieval? (issue 36.5)

The local model's transform appends up to two corpus words to every question ("How does BM25
saturate term frequency? speed less"). Issue 36 asks to keep such expansion only where it measurably
helps retrieval on the development part. This asks every answerable question of a part twice through
the retriever's own search and fusion (the question, its rewrite, its sub-queries, as
``services.retriever.handler.search_iteration`` does), once with the feedback terms and once without,
and counts how often the document that answers is retrieved (first, in the top 3, in the top k).

    python bench/feedback_terms.py --part dev [--home DIR] [--sample N]

Only the development part: the sealed test part is not read while the rewrite is designed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.retriever.handler import fuse, leading_queries, search_all  # noqa: E402
from shared.adapters.local.llm import LocalLanguageModel  # noqa: E402
from shared.contract.config import load_settings  # noqa: E402
from shared.query.reading.language import in_english  # noqa: E402
from shared.runtime.bootstrap import build_local  # noqa: E402
from shared.tools.eval import realtext  # noqa: E402
from shared.tools.eval.realdocs_run import RealDocsOptions, ingest_into  # noqa: E402


def _rank_of(contexts: list[dict], doc_ids: set[str]) -> int | None:
    return next((n for n, c in enumerate(contexts, start=1) if c["document_id"] in doc_ids), None)


def measure(home: Path, part_name: str, sample: int | None, seed: int) -> dict:
    settings = load_settings({"RAGBUS_HOME": str(home)})
    system = build_local(settings)
    part = realtext.load_part(part_name)
    started = time.perf_counter()
    held = system.deps.index.count_chunks()
    files = ingest_into(system, settings, part.document_folders, RealDocsOptions(ingest_timeout_s=3600), home)
    ingest_s = time.perf_counter() - started
    by_file: dict[str, set[str]] = {}
    for doc_id, name in files.items():
        by_file.setdefault(name, set()).add(doc_id)
    questions = [q for q in part.answerable if q.file in by_file]
    if sample is not None:
        questions = random.Random(seed).sample(questions, min(sample, len(questions)))
    deps, k = system.deps, settings.top_k
    models = {n: LocalLanguageModel(index=deps.index, embedder=deps.embedder, feedback_terms=n) for n in (0, 2)}
    ranks: dict[int, list[int | None]] = {0: [], 2: []}
    changed = 0
    today = deps.clock.now().date()
    for q in questions:
        question = in_english(q.question)[1]
        rewrites = {}
        for n, model in models.items():
            t = model.transform(q.question, today=today)
            rewrites[n] = t.rewritten
            queries, meanings = leading_queries(question, t.rewritten)
            lead = len(queries)
            for i, sub in enumerate(t.sub_queries[: settings.max_sub_queries], start=1):
                queries.append((f"sub_query_{i}", sub))
                meanings.append(meanings[lead - 1])
            results = search_all(queries, embedder=deps.embedder, index=deps.index, k=k, meanings=meanings)
            subs = [r for r in results[lead:] if r.succeeded]
            used = results[:lead] + subs if len(subs) >= settings.min_sub_queries_for_synthesis else results[:lead]
            ranks[n].append(_rank_of(fuse(used, k), by_file[q.file]))
        changed += rewrites[0] != rewrites[2]
    chunks = deps.index.count_chunks()
    deps.index.close()

    def figures(found: list[int | None]) -> dict:
        n = len(found)
        return {"hit@1": round(sum(r == 1 for r in found) / n, 3),
                "hit@3": round(sum(r is not None and r <= 3 for r in found) / n, 3),
                f"hit@{k}": round(sum(r is not None for r in found) / n, 3),
                "mrr": round(sum(1 / r for r in found if r) / n, 3)}

    better = sum((b or 99) < (a or 99) for a, b in zip(ranks[0], ranks[2], strict=True))
    worse = sum((b or 99) > (a or 99) for a, b in zip(ranks[0], ranks[2], strict=True))
    return {"part": part_name, "questions": len(questions), "chunks": chunks,
            "ingest_s": round(ingest_s, 1), "reused_chunks": held, "rewrites_changed_by_feedback": changed,
            "without_feedback": figures(ranks[0]), "with_two_feedback_terms": figures(ranks[2]),
            "questions_ranked_better_with_feedback": better, "questions_ranked_worse_with_feedback": worse}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="dev", choices=["dev"], help="the part asked (dev only: the test is sealed)")
    parser.add_argument("--home", type=Path, default=Path(".ragbus-bench/feedback-terms"),
                        help="where the part is ingested (kept and reused)")
    parser.add_argument("--sample", type=int, default=None, help="a random sample of N questions (default: all)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(measure(args.home, args.part, args.sample, args.seed), indent=1))


if __name__ == "__main__":
    main()
