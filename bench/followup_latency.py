"""A conversation's follow-up turn against a single question, at 10k chunks (a benchmark, not a test).

A question asked after an earlier turn does more than a single question: the transformer reads the
conversation's stored turns, rewrites the question (the offline rule), and finds the earlier turn's
document (one embedding of the earlier answer, one search); the retriever searches that document with the
question and the earlier question (one more embedding, one search ``EARLIER_DEPTH`` times deeper). This
times both in one run on the embedded runtime (bundled corpus + distractors up to ``--chunks``, as
``bench/perf_suite.py``'s query path): for each question, the question alone (a new conversation), one
query-embedding call right after it, then a follow-up in the same conversation; no refinement
(``max_iterations=0``), the process's query-vector cache emptied before each ask. Prints p50/p95 of each,
their ratio to one embedding call (the issue's bound: query p50 <= 5x one embedding call), and the
follow-up's extra time per stage.

    RAGBUS_LLM=local python bench/followup_latency.py              # about 3 minutes on 2 cores
    RAGBUS_LLM=local python bench/followup_latency.py --chunks 2000 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_suite  # noqa: E402
import query_latency as ql  # noqa: E402

from shared.query.api import submit_query, wait_for_query  # noqa: E402
from shared.query.vectors import forget_query_vectors  # noqa: E402

# Follow-ups of the shapes people type after an answer: few words of their own, yes/no, "what about".
FOLLOW_UPS = ("And what is its default?", "Why?", "Is that configurable?", "What about the maximum?",
              "How does it compare with the alternative?")


def ask(deps, question: str, conversation_id: str | None = None):
    forget_query_vectors()
    started = time.perf_counter()
    record = wait_for_query(deps, submit_query(deps, question, max_iterations=0, conversation_id=conversation_id).id, 60)
    client = (time.perf_counter() - started) * 1000
    if record.status != "answered":
        raise SystemExit(f"{question!r} ended {record.status}: {record.error}")
    pipeline = (datetime.fromisoformat(record.updated_at) - datetime.fromisoformat(record.created_at)).total_seconds()
    stages: dict[str, float] = {}
    for iteration in record.iterations:
        for stage, ms in iteration.timings.items():
            stages[stage] = stages.get(stage, 0.0) + ms
    return record, pipeline * 1000, client, stages


def run(chunks: int, rounds: int) -> dict:
    with perf_suite._warm_home(chunks) as deps:
        single, follow, embed_ms = [], [], []
        single_stages: dict[str, list[float]] = {}
        follow_stages: dict[str, list[float]] = {}
        for n, question in enumerate(ql.QUESTIONS * rounds):
            first, ms, _, stages = ask(deps, question)
            single.append(ms)
            for stage, value in stages.items():
                single_stages.setdefault(stage, []).append(value)
            t0 = time.perf_counter()
            deps.embedder.embed([f"{question} (variant {n})"])
            embed_ms.append((time.perf_counter() - t0) * 1000)
            _, ms, _, stages = ask(deps, FOLLOW_UPS[n % len(FOLLOW_UPS)], first.conversation_id)
            follow.append(ms)
            for stage, value in stages.items():
                follow_stages.setdefault(stage, []).append(value)
        embed = statistics.median(embed_ms)
        return {
            "chunks": deps.index.count_chunks(), "pairs": len(single),
            "embed_p50_ms": round(embed, 1),
            "single_p50_ms": round(ql.pct(single, 50), 1), "single_p95_ms": round(ql.pct(single, 95), 1),
            "follow_up_p50_ms": round(ql.pct(follow, 50), 1), "follow_up_p95_ms": round(ql.pct(follow, 95), 1),
            "single_x_embed": round(ql.pct(single, 50) / embed, 2),
            "follow_up_x_embed": round(ql.pct(follow, 50) / embed, 2),
            "stage_p50_ms": {stage: {"single": round(statistics.median(single_stages.get(stage, [0.0])), 1),
                                     "follow_up": round(statistics.median(values), 1)}
                             for stage, values in sorted(follow_stages.items())},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000, help="index size (real corpus + distractors)")
    parser.add_argument("--rounds", type=int, default=2, help="times each question (and its follow-up) is asked")
    args = parser.parse_args()
    print(json.dumps(run(args.chunks, args.rounds), indent=1))


if __name__ == "__main__":
    main()
