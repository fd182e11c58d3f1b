"""The segmented index at scale, on the embedded runtime, while a writer adds a document a second.

The corpus: the bundled sample corpus ingested through the pipeline (so the benchmark's
questions have answers), plus scale chunks cut from the real-text documents of the eval set
(shared/tools/eval/datasets/realdocs) repeated with variation (a few words swapped, a
variant tag) and given clustered synthetic vectors (passages cut from the same place share
a centre, as near-duplicate text does under a real embedder). Built once per size under
``--cache`` (default .ragbus-bench/), each run works on a copy.

Measured in a fresh process per size: index open (the runtime's build and the first view:
segments opened, memory-mapped), resident memory, query p50/p95 end to end with no
refinement while the writer commits a 3-chunk document every second, freshness (a
document committed to the index -> an answer citing it; the fetch/chunk/embed stages
before it do not depend on the corpus and are measured by bench/freshness.py), the cost
of the merge that folds the writer's documents into a segment, the full build of the base
segment (the worst merge: every row, and the HNSW graph above 100k), and ANN recall@10 of
the index's dense search against exact search over the same vectors.

    .venv/bin/python bench/index_scale.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import query_latency as ql  # noqa: E402

from shared.contract.ports import Chunk  # noqa: E402

REALDOCS = ROOT / "shared" / "tools" / "eval" / "datasets" / "realdocs" / "documents"
PASSAGE = 900  # characters, about the chunker's size
CENTRES = 5_000


def _passages() -> list[str]:
    out = []
    for path in sorted(REALDOCS.iterdir()):
        text = re.sub(r"\s+", " ", path.read_text(errors="replace"))
        out += [text[i : i + PASSAGE] for i in range(0, len(text) - PASSAGE // 2, PASSAGE)]
    return out


def _rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def add_scale_chunks(index, count: int, dimension: int, seed: int = 11) -> None:
    """``count`` chunks of real text with variation and clustered vectors, 50 to a document."""
    rng = np.random.default_rng(seed)
    passages = _passages()
    centres = rng.standard_normal(size=(CENTRES, dimension), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    swap = np.array("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split())
    per_doc = 50
    for d in range(0, count, per_doc):
        n = min(per_doc, count - d)
        picks = rng.integers(0, len(passages), n)
        doc = f"scale-{d // per_doc}"
        chunks = []
        for i, p in enumerate(picks):
            words = passages[p].split()
            for j in rng.integers(0, max(1, len(words)), 3):
                words[j] = str(rng.choice(swap))
            chunks.append(Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, title=f"Variant {d + i}",
                                text=" ".join(words) + f" v{d + i}", url=f"https://scale.invalid/{d + i}"))
        vectors = centres[(picks * 7 + rng.integers(0, 7, n)) % CENTRES] + 0.6 * rng.standard_normal(
            size=(n, dimension), dtype=np.float32) / np.sqrt(dimension)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.upsert(doc, chunks, vectors.astype(np.float32))


def build_base(n: int, cache: Path) -> Path:
    """The cached home of ``n`` chunks (built once): sample corpus + scale chunks, one segment."""
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from shared.tools.demo import serve_corpus, submit_sample_corpus

    home = cache / f"index-scale-{n}"
    if (home / "built.json").exists():
        return home
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    settings = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"})
    system = build_local(settings.with_(allow_loopback=True))
    deps = system.deps
    with LocalRuntime(deps, system.bus) as runtime, serve_corpus(port=0) as base:
        submit_sample_corpus(deps, base)
        runtime.wait_idle(600)
    t0 = time.perf_counter()
    add_scale_chunks(deps.index, max(0, n - deps.index.count_chunks()), deps.embedder.dimension)
    fill_s = time.perf_counter() - t0
    report = deps.index.maintain(flush=True)
    (home / "built.json").write_text(json.dumps({"chunks": deps.index.count_chunks(), "fill_s": fill_s,
                                                 "base_build_s": report["seconds"]}))
    return home


def measure(n: int, cache: Path, rounds: int, freshness_rounds: int, out) -> None:
    """In a fresh process: every figure of one size (see the module docstring)."""
    from shared.contract.config import load_settings
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    logging.basicConfig(level=logging.WARNING)
    base = build_base(n, cache)
    built = json.loads((base / "built.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="ragbus-scale-"))
    home = work / "home"
    shutil.copytree(base, home)
    rss_before = _rss_mb()
    try:
        t0 = time.perf_counter()
        settings = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"})
        system = build_local(settings.with_(allow_loopback=True))
        deps = system.deps
        view = deps.index.snapshot()
        open_s = time.perf_counter() - t0
        rss_open = _rss_mb()
        result = {"chunks": deps.index.count_chunks(), "open_s": open_s, "rss_open_mb": rss_open,
                  "rss_before_open_mb": rss_before, "segments": len(view.segments),
                  "dense": view.dense.kind, "base_build_s": built["base_build_s"]}
        stop = threading.Event()
        commits: list[float] = []

        def writer() -> None:
            k = 0
            while not stop.is_set():
                doc = f"writer-{k}"
                texts = [f"Writer note {k} part {i}: the harbor pilot logged tide {k * 3 + i}." for i in range(3)]
                chunks = [Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, text=t, title=f"Note {k}",
                                url=f"https://writer.invalid/{k}") for i, t in enumerate(texts)]
                deps.index.upsert(doc, chunks, deps.embedder.embed(texts))
                commits.append(time.perf_counter())
                k += 1
                stop.wait(1.0)

        with LocalRuntime(deps, system.bus):
            wait_for_query(deps, submit_query(deps, "warm up the caches").id, 300)
            thread = threading.Thread(target=writer, daemon=True)
            thread.start()
            try:
                latencies, _, _ = ql.ask_all(deps, ql.QUESTIONS * rounds, max_iterations=0)
                result.update(p50_ms=float(np.percentile(latencies, 50)), p95_ms=float(np.percentile(latencies, 95)),
                              queries=len(latencies))
                fresh_s = []
                for r in range(freshness_rounds):
                    doc = f"fresh-{r}"
                    word = f"quillfeather{r}x"
                    text = f"The {word} observatory opened its northern dome to visitors in round {r}."
                    url = f"https://fresh.invalid/{r}"
                    committed = time.perf_counter()
                    deps.index.upsert(doc, [Chunk(chunk_id=f"{doc}:0", document_id=doc, ordinal=0, text=text,
                                                  title=f"The {word} observatory", url=url)],
                                      deps.embedder.embed([text]))
                    while True:
                        record = wait_for_query(deps, submit_query(
                            deps, f"What did the {word} observatory open?", max_iterations=0).id, 60)
                        if record.status == "answered" and any(c.get("url") == url for c in record.citations):
                            break
                        if time.perf_counter() - committed > 60:
                            raise SystemExit(f"{doc} was not cited within 60 s")
                    fresh_s.append(time.perf_counter() - committed)
                result.update(freshness_p50_s=statistics.median(fresh_s), freshness_max_s=max(fresh_s))
            finally:
                stop.set()
                thread.join(5)
            result["writer_documents"] = len(commits)
            result["rss_serving_mb"] = _rss_mb()
            result["rss_peak_mb"] = _rss_mb("VmHWM")
            report = deps.index.maintain(flush=True)
            result["merge"] = report
            result["recall_at_10"] = _recall(deps.index, deps.embedder.dimension)
        out.put(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _recall(index, dimension: int, queries: int = 50) -> float:
    """The index's dense top 10 against exact inner products over every live vector."""
    view = index.snapshot()
    ids = view.live_chunk_ids()
    vectors = index.get_vectors(ids)
    matrix = np.stack([vectors[i] for i in ids])
    rng = np.random.default_rng(5)
    picks = matrix[rng.integers(0, len(matrix), queries)]
    probes = picks + 0.3 * rng.standard_normal(size=picks.shape, dtype=np.float32) / np.sqrt(dimension)
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    hits = []
    for q in probes:
        exact = {ids[i] for i in np.argsort(-(matrix @ q))[:10]}
        got = {h.chunk.chunk_id for h in index.search("", q, 10, mode="dense")}
        hits.append(len(exact & got) / 10)
    return float(np.mean(hits))


def run(sizes: list[int], cache: Path, rounds: int, freshness_rounds: int) -> list[dict]:
    import multiprocessing as mp

    rows = []
    for n in sizes:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        proc = ctx.Process(target=measure, args=(n, cache, rounds, freshness_rounds, queue))
        load = os.getloadavg()[0]
        proc.start()
        result = queue.get(timeout=7200)
        proc.join(60)
        result["load_before"] = round(load, 2)
        result["load_after"] = round(os.getloadavg()[0], 2)
        rows.append(result)
        print(json.dumps(result), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--cache", type=Path, default=ROOT / ".ragbus-bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--freshness-rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(run(args.sizes, args.cache, args.rounds, args.freshness_rounds), indent=1))


if __name__ == "__main__":
    main()
