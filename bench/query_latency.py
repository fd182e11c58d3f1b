"""Query latency on the embedded runtime with the local provider (a benchmark, not a test).

Builds a fresh RAGBUS_HOME with the bundled corpus plus synthetic distractor
chunks up to --chunks (default 10,000; distractors have random unit vectors and
random-word texts, so they compete in BM25 and the dense search without ever
being the answer), then asks the same questions three ways in one run:

1. one query per question, no refinement (max_iterations=0): p50/p95 latency,
   end to end as the pipeline records it (created_at -> answered) and as a
   client polling the record sees it;
2. the same questions with the transform forced to emit 5 sub-queries
   (definition, method, results, comparison, applications) against 1: the ratio;
3. the pipeline's own overhead: end-to-end time minus the time spent inside the
   stage handlers (which the record keeps per stage), as a share of the total:
   that is bus hops, state transactions, dispatch and tracing.

    python bench/query_latency.py            # about two minutes
    python bench/query_latency.py --chunks 2000 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.contract.config import load_settings  # noqa: E402
from shared.contract.ports import Chunk, Transformation  # noqa: E402
from shared.query.api import submit_query, wait_for_query  # noqa: E402
from shared.query.vectors import forget_passage_vectors, forget_query_vectors  # noqa: E402
from shared.runtime.bootstrap import build_local  # noqa: E402
from shared.runtime.local import LocalRuntime  # noqa: E402
from shared.tools.demo import serve_corpus, submit_sample_corpus  # noqa: E402

QUESTIONS = [
    "How does BM25 saturate term frequency?", "What is efSearch?", "Why do consumers need idempotency keys?",
    "How does the traceparent header work?", "What does a 304 response mean for feed polling?",
    "What is a poison message?", "Which private address ranges must a fetcher refuse?", "What is RRF?",
    "How should chunks overlap?", "What happens when a consumer crashes?",
]
ASPECTS = ("What is {s}?", "How does {s} work?", "What results does {s} give?",
           "How does {s} compare with alternatives?", "Where is {s} applied?")


class FiveSubQueries:
    """Wraps a LanguageModel so every transform decomposes into the seeds' five aspects."""

    def __init__(self, inner):
        self.inner = inner
        self.provider, self.model = inner.provider, inner.model

    def transform(self, query, *, today):
        base = self.inner.transform(query, today=today)
        subject = query.rstrip("?").split(" ", 2)[-1]
        return Transformation(base.rewritten, [a.format(s=subject) for a in ASPECTS], base.reasoning)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def add_distractors(index, count: int, dimension: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    words = np.array("lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod tempor incididunt "
                     "labore dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris "
                     "nisi aliquip commodo consequat duis aute irure reprehenderit voluptate velit esse".split())
    per_doc = 50
    for d in range(0, count, per_doc):
        n = min(per_doc, count - d)
        vectors = rng.normal(size=(n, dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        doc = f"distractor-{d // per_doc}"
        chunks = [Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, title=f"Filler {d + i}",
                        text=" ".join(rng.choice(words, 120)), url=f"https://filler.invalid/{d + i}")
                  for i in range(n)]
        index.upsert(doc, chunks, vectors)


def forget_chunk_caches() -> None:
    """Empty every cache the query path keeps per chunk text (quotable sentences, directive
    stripping, term sets, the name check's words, feedback words, vectors of cleaned
    passages), as if no chunk had been read by this process before. A new per-text cache
    on the query path belongs here too."""
    from shared.adapters.local import llm
    from shared.query import grading
    from shared.query.reading import extractive

    extractive.quotable_sentences.cache_clear()
    extractive._term_set.cache_clear()
    extractive.sentence_term_sets.cache_clear()
    extractive._named_words.cache_clear()
    grading.strip_model_directives.cache_clear()
    llm._feedback_words.cache_clear()
    forget_passage_vectors()


def ask_all(deps, questions, *, max_iterations, cold_chunks=False):
    """Ask each question in turn; each pays its own embedding, as a new question does (the
    process's query-vector cache is emptied first, since the same questions come round again).
    The caches kept per chunk text stay warm, as they are for a new question retrieving chunks
    earlier questions read; with ``cold_chunks`` they are emptied too (every chunk read afresh)."""
    pipeline, client, overhead = [], [], []
    for question in questions:
        forget_query_vectors()
        if cold_chunks:
            forget_chunk_caches()
        started = time.perf_counter()
        record = wait_for_query(deps, submit_query(deps, question, max_iterations=max_iterations).id, 60)
        client.append((time.perf_counter() - started) * 1000)
        if record.status != "answered":
            raise SystemExit(f"{question!r} ended {record.status}: {record.error}")
        end = datetime.fromisoformat(record.updated_at)
        total = (end - datetime.fromisoformat(record.created_at)).total_seconds() * 1000
        inside = sum(sum(it.timings.values()) for it in record.iterations)
        pipeline.append(total)
        overhead.append(max(0.0, total - inside) / total if total else 0.0)
    return pipeline, client, overhead


def pct(values, q):
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000, help="index size (real corpus + distractors)")
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked per variant")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="ragbus-bench-"))
    settings = load_settings({"RAGBUS_HOME": str(home)}).with_(allow_loopback=True)
    system = build_local(settings)
    deps = system.deps
    with LocalRuntime(deps, system.bus) as runtime, serve_corpus(port=0) as base:
        submit_sample_corpus(deps, base)
        runtime.wait_idle(600)
        real = deps.index.count_chunks()
        add_distractors(deps.index, max(0, args.chunks - real), deps.embedder.dimension)
        print(f"index: {deps.index.count_chunks()} chunks ({real} real, the rest distractors)")
        wait_for_query(deps, submit_query(deps, "warm up the caches").id, 120)

        questions = QUESTIONS * args.rounds
        one_p, one_c, one_o = ask_all(deps, questions, max_iterations=0)
        plain_llm = deps.llm
        deps.override("llm", FiveSubQueries(plain_llm))
        five_p, five_c, five_o = ask_all(deps, questions, max_iterations=0)
        deps.override("llm", plain_llm)

    rows = [
        ("1 query, no refinement", one_p, one_c, one_o),
        ("5 sub-queries, no refinement", five_p, five_c, five_o),
    ]
    print(f"\n{len(questions)} queries per variant, local provider, {settings.top_k} contexts, 2 cores\n")
    print("| variant | pipeline p50 ms | pipeline p95 ms | client p50 ms | client p95 ms | overhead share |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, p, c, o in rows:
        print(f"| {name} | {pct(p, 50):.1f} | {pct(p, 95):.1f} | {pct(c, 50):.1f} | {pct(c, 95):.1f} "
              f"| {statistics.mean(o):.0%} |")
    print(f"\n5 sub-queries / 1 query, pipeline p50: {pct(five_p, 50) / pct(one_p, 50):.2f}x (target <= 1.5x)")
    print("pipeline = created_at -> answered in the record; client = submit -> answer seen by a poller; "
          "overhead = pipeline time outside the stage handlers (bus, state, dispatch, tracing)")


if __name__ == "__main__":
    main()
