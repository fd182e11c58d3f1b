"""The performance suite: every figure of the measurement issue's item 4 in one run, one table.

    .venv/bin/python bench/perf_suite.py            # full (1M-chunk ANN included): ~30-40 min on 2 cores
    .venv/bin/python bench/perf_suite.py --quick    # small sizes, a few minutes

Rows (all measured in this run, on this machine, with its load noted):
- ingestion through the embedded runtime vs the embedder alone on the same chunks
  (bench/ingest_and_search.py: bench_ingest);
- bus hop latency publish -> handler (bench/ingest_and_search.py: bench_bus);
- query latency p50/p95 over 10k chunks (bundled corpus + distractors, as
  bench/query_latency.py builds it), with RAGBUS_TRACING=0 and =1, each in a fresh
  process (tracing is process-global), so the difference is the tracing overhead;
- HybridIndex search p50/p95 at 10k and 100k chunks, exact and HNSW
  (bench/ingest_and_search.py: bench_search);
- raw dense search at 10k, 100k and 1M random unit vectors (384-d float32): exact
  numpy inner product vs faiss HNSW (the index's M=32, efConstruction=80, efSearch=64,
  plus an efSearch sweep), with ANN recall@10 against exact, and build time;
- memory per 100k chunks: RSS growth of a fresh process loading a 100k-chunk
  HybridIndex snapshot (exact, then HNSW), next to the raw vector array size;
- the query path at the embedder's limit (section ``query-path``), in a fresh process per
  index size (10k and 100k chunks; ``--query-sizes``): query p50/p95 with no refinement,
  the ratio of that p50 to one query-embedding call timed in the same process, right after
  each question (target <= 5x), the same questions with every per-chunk-text cache emptied
  first (reported: the worst case, a question none of whose chunks the process has read),
  and five sub-queries against one (target <= 1.3x);
- freshness (section ``freshness``, bench/freshness.py): publish a new feed item, poll,
  seconds until ``ask`` cites it (target <= 5 s, embedded runtime), and the same on the
  emulator topology of ``ragbus up --emulators`` (reported; "not measured" with the reason
  when the emulators are not installed);
- the index at scale (section ``index-scale``, bench/index_scale.py): at 10k, 100k and 1M
  chunks (``--scale-sizes``), in a fresh process each, while a writer commits a document a
  second: query p50/p95, committed -> cited, open time, RSS, merge cost, dense recall@10.

Each row with a target says whether this run met it.

Writes docs/perf_results.json and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import freshness as fresh  # noqa: E402
import index_scale  # noqa: E402
import ingest_and_search as ias  # noqa: E402
import query_latency as ql  # noqa: E402

from shared.tools.eval.report import perf_markdown  # noqa: E402
from shared.tools.eval.runner import machine  # noqa: E402

DIM = 384
SECTIONS = ("ingest", "bus", "query", "search", "ann", "ann-real", "memory", "query-path", "freshness",
            "index-scale")
INGEST_TARGET = 0.9  # pipeline chunks/s against the embedder alone on the same chunks
EMBED_RATIO_TARGET = 5.0  # query p50 against one query-embedding call
FAN_OUT_TARGET = 1.3  # five sub-queries against one, pipeline p50


def _pct(values, q) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------ query latency


@contextmanager
def _warm_home(chunks: int, tracing: bool = True) -> Iterator:
    """A fresh embedded home with the bundled corpus and distractors up to ``chunks``,
    its runtime running and its caches warmed by one query; yields its deps."""
    from shared.contract.config import load_settings
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from shared.tools.demo import serve_corpus, submit_sample_corpus

    logging.basicConfig(level=logging.WARNING)
    home = Path(tempfile.mkdtemp(prefix="ragbus-perf-"))
    try:
        settings = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "1" if tracing else "0"})
        system = build_local(settings.with_(allow_loopback=True))
        deps = system.deps
        with LocalRuntime(deps, system.bus) as runtime, serve_corpus(port=0) as base:
            submit_sample_corpus(deps, base)
            runtime.wait_idle(600)
            real = deps.index.count_chunks()
            ql.add_distractors(deps.index, max(0, chunks - real), deps.embedder.dimension)
            wait_for_query(deps, submit_query(deps, "warm up the caches").id, 300)
            yield deps
    finally:
        shutil.rmtree(home, ignore_errors=True)  # 45 MB at 10k chunks, 430 MB at 100k


def _query_latency(tracing: bool, chunks: int, rounds: int, out) -> None:
    """In a fresh process: the bundled corpus + distractors up to ``chunks``; p50/p95 per variant."""
    with _warm_home(chunks, tracing) as deps:
        questions = ql.QUESTIONS * rounds
        result = {"tracing": tracing, "chunks": deps.index.count_chunks(), "queries": len(questions)}
        for label, iterations in (("no_refinement", 0), ("default", None)):
            pipeline, client, overhead = ql.ask_all(deps, questions, max_iterations=iterations)
            result[label] = {"pipeline_p50": _pct(pipeline, 50), "pipeline_p95": _pct(pipeline, 95),
                             "client_p50": _pct(client, 50), "client_p95": _pct(client, 95),
                             "overhead_share": statistics.mean(overhead)}
    out.put(result)


def query_latency(tracing: bool, chunks: int, rounds: int) -> dict:
    return _in_fresh_process(_query_latency, tracing, chunks, rounds)


def _query_path(chunks: int, rounds: int, out) -> None:
    """In a fresh process: p50/p95 of one query, of five sub-queries, and of one embedding call."""
    with _warm_home(chunks) as deps:
        questions = ql.QUESTIONS * rounds
        # One query-embedding call (same process, same model) on a text the process has not
        # embedded, as a new question's would be, timed right after each question: on a shared
        # machine the load swings within a run, and calls timed in a block of their own after
        # the questions met another load (6 runs at load 10-15: one embedding's p50 4.6-21 ms,
        # the ratio 1.3x-10.5x, while the query p50 stayed 22-63 ms).
        one, one_client, embed_ms = [], [], []
        for n, question in enumerate(questions):
            pipeline, client, _ = ql.ask_all(deps, [question], max_iterations=0)
            one += pipeline
            one_client += client
            t0 = time.perf_counter()
            deps.embedder.embed([f"{question} (variant {n})"])
            embed_ms.append((time.perf_counter() - t0) * 1000)
        plain = deps.llm
        deps.override("llm", ql.FiveSubQueries(plain))
        five, _, _ = ql.ask_all(deps, questions, max_iterations=0)
        deps.override("llm", plain)
        # Last (it leaves the caches cold for whatever follows): the same questions with every
        # per-chunk cache emptied first, what a question pays when none of its chunks was read
        # by this process before (the worst case).
        cold, _, _ = ql.ask_all(deps, questions, max_iterations=0, cold_chunks=True)
        out.put({"chunks": deps.index.count_chunks(), "queries": len(questions),
                 "p50": _pct(one, 50), "p95": _pct(one, 95), "client_p50": _pct(one_client, 50),
                 "five_p50": _pct(five, 50), "five_p95": _pct(five, 95),
                 "cold_chunks_p50": _pct(cold, 50), "cold_chunks_p95": _pct(cold, 95),
                 "embed_p50": _pct(embed_ms, 50), "embed_p95": _pct(embed_ms, 95),
                 "dense": deps.index.snapshot().dense.kind})


def query_path(chunks: int, rounds: int) -> dict:
    return _in_fresh_process(_query_path, chunks, rounds)


def _freshness(rounds: int, runtime: str, out) -> None:
    out.put(fresh.measure(rounds, runtime=runtime))


def freshness(rounds: int, runtime: str = "embedded") -> dict:
    if runtime == "emulators":
        from shared.tools.emulators import emulators_available

        missing = {name: why for name, why in emulators_available().items() if why}
        if missing:  # reported as not measured, with the reason, rather than failing the whole suite
            return {"runtime": runtime, "not_measured": "; ".join(f"{k}: {v}" for k, v in missing.items())}
    return _in_fresh_process(_freshness, rounds, runtime)


def _in_fresh_process(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get(timeout=3600)
    proc.join(60)
    return result


# ------------------------------------------------------------ raw ANN


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):  # bounded temporaries at 1M
        block = rng.standard_normal(size=(min(100_000, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


def _clustered(rng: np.random.Generator, n: int, centres: np.ndarray, noise: float) -> np.ndarray:
    """Points scattered around ``centres``: normalise(centre + noise * g / sqrt(d)), cos to the centre ~0.78."""
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        size = min(100_000, n - start)
        block = centres[rng.integers(0, len(centres), size)] + noise * rng.standard_normal(
            size=(size, DIM), dtype=np.float32) / np.sqrt(DIM)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + size] = block
    return out


def ann_bench(n: int, queries: int, ef_values: tuple[int, ...], *, m: int = 32, ef_construction: int = 80,
              distribution: str = "random") -> dict:
    """Exact vs HNSW on ``n`` vectors: ``random`` unit vectors (no structure: the worst case for any
    ANN), or ``clustered`` around 5,000 random centres (neighbourhoods like real embeddings have)."""
    import faiss

    rng = np.random.default_rng(n)
    if distribution == "clustered":
        centres = _unit(rng, 5_000)
        data = _clustered(rng, n, centres, 0.8)
        q = _clustered(rng, queries, centres, 0.8)
    else:
        data = _unit(rng, n)
        q = _unit(rng, queries)
    exact_ids, exact_ms = [], []
    for vec in q:
        t0 = time.perf_counter()
        scores = data @ vec
        top = np.argpartition(-scores, 9)[:10]
        top = top[np.argsort(-scores[top])]
        exact_ms.append((time.perf_counter() - t0) * 1000)
        exact_ids.append(set(top.tolist()))
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(DIM, m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = ef_construction
    hnsw.add(data)
    build_s = time.perf_counter() - t0
    rows = []
    for ef in ef_values:
        params = faiss.SearchParametersHNSW(efSearch=ef)
        ms, recall = [], []
        for vec, truth in zip(q, exact_ids, strict=True):
            t0 = time.perf_counter()
            _, idx = hnsw.search(vec.reshape(1, -1), 10, params=params)
            ms.append((time.perf_counter() - t0) * 1000)
            recall.append(len(truth & set(idx[0].tolist())) / 10)
        rows.append({"ef_search": ef, "p50_ms": _pct(ms, 50), "p95_ms": _pct(ms, 95), "recall@10": float(np.mean(recall))})
    result = {"chunks": n, "distribution": distribution, "queries": queries, "exact_p50_ms": _pct(exact_ms, 50), "exact_p95_ms": _pct(exact_ms, 95),
              "hnsw_build_s": build_s, "hnsw_m": m, "ef_construction": ef_construction, "hnsw": rows,
              "vectors_mb": data.nbytes / 1e6}
    del hnsw, data
    return result


def ann_real(cache: Path, ef_values: tuple[int, ...] = (64, 128, 256)) -> dict | None:
    """HNSW recall@10 on real MiniLM embeddings: the fitz-gov passages and queries cached by
    ``make eval`` (None when that cache is absent). Small (5,899 vectors), but real structure."""
    import faiss

    passages = sorted(cache.glob("all-MiniLM-L6-v2-fitz-gov-*.npy"))
    queries = sorted(cache.glob("all-MiniLM-L6-v2-queries-*.npy"))
    if not passages or not queries:
        return None
    data, q = np.load(passages[0]), np.load(queries[0])
    truth = [set(row.tolist()) for row in np.argsort(-(q @ data.T), axis=1)[:, :10]]
    t0 = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = 80
    hnsw.add(data)
    build_s = time.perf_counter() - t0
    rows = []
    for ef in ef_values:
        _, idx = hnsw.search(q, 10, params=faiss.SearchParametersHNSW(efSearch=ef))
        rows.append({"ef_search": ef, "recall@10": float(np.mean([len(t & set(i.tolist())) / 10
                                                                   for t, i in zip(truth, idx, strict=True)]))})
    return {"vectors": len(data), "queries": len(q), "hnsw_m": 32, "ef_construction": 80, "build_s": build_s,
            "hnsw": rows}


# ------------------------------------------------------------ memory


def _memory(path: str, kind: str, out) -> None:
    import faiss  # noqa: F401 - imported before the baseline, like bm25s below

    from shared.adapters.local.index import HybridIndex, import_bm25s

    import_bm25s()
    before = _rss_mb()
    index = HybridIndex(path, DIM, ann_threshold=0 if kind == "hnsw" else 10**12)
    index.snapshot()
    out.put({"kind": kind, "rss_before_mb": before, "rss_after_mb": _rss_mb(), "chunks": index.count_chunks()})


def memory_per_100k(quick: bool) -> dict:
    chunks = 20_000 if quick else 100_000
    with tempfile.TemporaryDirectory(prefix="ragbus-mem-") as tmp:
        fill_s = ias._fill_index(Path(tmp), chunks, DIM, np.random.default_rng(3))
        disk_mb = (Path(tmp) / "chunks.db").stat().st_size / 1e6
        rows = []
        ctx = mp.get_context("spawn")
        # The first open tokenises every chunk for BM25 and builds the caches: its RSS keeps the
        # allocator's high-water mark. The later opens load the cached BM25, as a restart does.
        for label, kind in (("first open, builds BM25 (peak)", "exact"), ("exact", "exact"), ("hnsw", "hnsw")):
            queue = ctx.Queue()
            proc = ctx.Process(target=_memory, args=(tmp, kind, queue))
            proc.start()
            rows.append({**queue.get(timeout=3600), "label": label})
            proc.join(60)
    scale = 100_000 / chunks
    return {"chunks": chunks, "fill_s": fill_s, "sqlite_mb": disk_mb,
            "per_100k": {r["label"]: (r["rss_after_mb"] - r["rss_before_mb"]) * scale for r in rows},
            "vector_array_mb_per_100k": 100_000 * DIM * 4 / 1e6, "raw": rows}


# ------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-1m", action="store_true", help="no 1M-chunk ANN run")
    parser.add_argument("--m-1m", type=int, default=32, help="HNSW M at 1M (the index's default is 32)")
    parser.add_argument("--efc-1m", type=int, default=80, help="HNSW efConstruction at 1M (index default 80)")
    parser.add_argument("--ann-sizes", type=int, nargs="*", default=None, help="override the ANN sizes")
    parser.add_argument("--ef", type=int, nargs="*", default=[64, 128, 256, 512], help="efSearch values to sweep")
    parser.add_argument("--distribution", choices=("random", "clustered"), default="random",
                        help="ANN vectors: random unit vectors (default) or clustered around 5,000 centres")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "perf_results.json")
    parser.add_argument("--query-sizes", type=int, nargs="*", default=None,
                        help="index sizes of the query-path section (default 10000 100000; --quick: 2000)")
    parser.add_argument("--query-rounds", type=int, default=None,
                        help="times each of the 10 questions is asked per variant in query-path (default 3; quick 1)")
    parser.add_argument("--scale-sizes", type=int, nargs="*", default=None,
                        help="index sizes of the index-scale section (default 10000 100000 1000000; quick: 2000)")
    parser.add_argument("--scale-cache", type=Path, default=ROOT / ".ragbus-bench",
                        help="where index-scale keeps the corpora it builds (once per size)")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=None,
                        help="run only these sections and merge them into --out (the rest are kept)")
    args = parser.parse_args()
    only = set(args.only or SECTIONS)
    logging.basicConfig(level=logging.WARNING)
    quick = args.quick
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {msg} (load {os.getloadavg()[0]:.2f})", file=sys.stderr,
              flush=True)

    results: dict = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    results.update({"machine": machine(), "quick": quick})
    results.setdefault("timings_s", {})
    results.setdefault("load_average", {})

    def timed(name: str, fn, *a, **kw):
        say(f"{name}...")
        t0 = time.perf_counter()
        load_before = os.getloadavg()[0]
        value = fn(*a, **kw)
        results["timings_s"][name] = round(time.perf_counter() - t0, 1)
        results["load_average"][name] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        return value

    if "ingest" in only:
        results["ingest"] = timed("ingest", ias.bench_ingest, docs=20 if quick else 80, paragraphs=6)
    if "bus" in only:
        results["bus"] = timed("bus", ias.bench_bus, 200 if quick else 1000)
    if "query" in only:
        chunks = 2_000 if quick else 10_000
        rounds = 1 if quick else 3
        results["query_tracing_off"] = timed("query latency, tracing off", query_latency, False, chunks, rounds)
        results["query_tracing_on"] = timed("query latency, tracing on", query_latency, True, chunks, rounds)
    if "search" in only:
        sizes = [10_000] if quick else [10_000, 100_000]
        results["search"] = timed("HybridIndex search", ias.bench_search, sizes, queries=50 if quick else 200,
                                  ann_sizes=set(sizes))
    if "ann" in only:
        ann_sizes = args.ann_sizes or (
            [10_000] if quick else [10_000, 100_000] + ([] if args.skip_1m else [1_000_000]))
        rows = [timed(f"ANN {n:,}", ann_bench, n, 100 if quick or n >= 1_000_000 else 200, tuple(args.ef),
                      distribution=args.distribution,
                      **({"m": args.m_1m, "ef_construction": args.efc_1m} if n >= 1_000_000 else {}))
                for n in ann_sizes]
        kept = [a for a in results.get("ann", [])
                if (a["chunks"], a.get("distribution", "random")) not in {(n, args.distribution) for n in ann_sizes}]
        results["ann"] = sorted(kept + rows, key=lambda a: (a.get("distribution", "random"), a["chunks"]))
    if "ann-real" in only:
        results["ann_real"] = timed("ANN on real embeddings", ann_real, ROOT / ".ragbus-eval")
    if "memory" in only:
        results["memory"] = timed("memory", memory_per_100k, quick)
    if "query-path" in only:
        sizes = args.query_sizes or ([2_000] if quick else [10_000, 100_000])
        rounds = args.query_rounds or (1 if quick else 3)
        results["query_path"] = [timed(f"query path {n:,} chunks", query_path, n, rounds) for n in sizes]
    if "freshness" in only:
        results["freshness"] = timed("freshness", freshness, 3 if quick else 5)
        results["freshness_emulators"] = timed("freshness on the emulators", freshness, 3, "emulators")
    if "index-scale" in only:
        sizes = args.scale_sizes or ([2_000] if quick else [10_000, 100_000, 1_000_000])
        results["index_scale"] = timed("index at scale", index_scale.run, sizes, args.scale_cache,
                                       1 if quick else 3, 2 if quick else 5)
    results["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    results["table"] = table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(perf_markdown(results))
    say(f"wrote {args.out}")


def table(r: dict) -> list[dict]:
    """One row per figure, from whichever sections ``r`` holds."""
    rows: list[dict] = []
    if "ingest" in r:
        _ingest_rows(r, rows)
    if "bus" in r:
        rows.append({"what": f"bus hop publish -> handler, p50 / p99 ({r['bus']['messages']} messages)",
                     "value": f"{r['bus']['p50_ms']:.2f} / {r['bus']['p99_ms']:.2f} ms"})
    if "query_tracing_on" in r:
        _query_rows(r, rows)
    for s in r.get("search", []):
        rows.append({"what": f"HybridIndex search {s['chunks']:,} chunks, {s['dense']}, {s['mode']}: p50 / p95",
                     "value": f"{s['p50']:.1f} / {s['p95']:.1f} ms"})
    for a in r.get("ann", []):
        _ann_rows(a, rows)
    for x in r.get("index_scale", []):
        _index_scale_rows(x, rows)
    real = r.get("ann_real")
    if real:
        rows.append({"what": f"faiss HNSW (M=32, efConstruction=80) on real MiniLM embeddings ({real['vectors']:,} "
                     f"fitz-gov passages, {real['queries']:,} queries): recall@10 at efSearch "
                     + " / ".join(str(h["ef_search"]) for h in real["hnsw"]),
                     "value": " / ".join(f"{h['recall@10']:.3f}" for h in real["hnsw"])})
    if "memory" in r:
        _memory_rows(r["memory"], rows)
    for q in r.get("query_path", []):
        _query_path_rows(q, rows)
    if "freshness" in r:
        f = r["freshness"]
        rows.append({"what": f"freshness, {f['runtime']} runtime: new feed item -> poll -> `ask` cites it, p50 / max "
                     f"over {f['rounds']} items ({f['chunks_before']:,} chunks; indexed after "
                     f"{f['indexed_p50_s']:.2f} s p50)",
                     "value": f"{f['p50_s']:.2f} / {f['max_s']:.2f} s", "target": f"p50 <= {f['target_s']:.0f} s",
                     "met": f["p50_s"] <= f["target_s"]})
    if "freshness_emulators" in r:
        f = r["freshness_emulators"]
        if "not_measured" in f:
            rows.append({"what": "freshness, emulator topology", "value": f"not measured ({f['not_measured']})"})
        else:
            rows.append({"what": f"freshness, emulator topology (`ragbus up --emulators`: Pub/Sub push into one "
                         f"process per stage, Firestore): new feed item -> poll -> `ask` cites it, p50 / max over "
                         f"{f['rounds']} items ({f['chunks_before']:,} chunks; indexed after {f['indexed_p50_s']:.2f} s "
                         "p50)", "value": f"{f['p50_s']:.2f} / {f['max_s']:.2f} s",
                         "target": "reported (issue 14's 5 s target is the embedded runtime's)", "met": None})
    return rows


def _query_path_rows(q: dict, rows: list[dict]) -> None:
    size = f"{q['chunks']:,} chunks ({q['dense']} dense search)"
    rows.append({"what": f"query path over {size}, no refinement: pipeline p50 / p95 ({q['queries']} queries)",
                 "value": f"{q['p50']:.0f} / {q['p95']:.0f} ms"})
    rows.append({"what": "one query-embedding call, same process and run: p50 / p95",
                 "value": f"{q['embed_p50']:.1f} / {q['embed_p95']:.1f} ms"})
    ratio = q["p50"] / q["embed_p50"]
    rows.append({"what": f"query p50 / one query-embedding call p50, {size}", "value": f"{ratio:.1f}x",
                 "target": f"<= {EMBED_RATIO_TARGET:.0f}x", "met": ratio <= EMBED_RATIO_TARGET})
    if "cold_chunks_p50" in q:
        cold = q["cold_chunks_p50"]
        rows.append({"what": f"the same, every per-chunk-text cache emptied before each question (none of its "
                     f"chunks read before): pipeline p50 / p95, and p50 / one embedding call, {size}",
                     "value": f"{cold:.0f} / {q['cold_chunks_p95']:.0f} ms, {cold / q['embed_p50']:.1f}x"})
    fan = q["five_p50"] / q["p50"]
    rows.append({"what": f"fan-out: 5 sub-queries / 1 query, pipeline p50 ({q['five_p50']:.0f} vs {q['p50']:.0f} ms), "
                 f"{size}", "value": f"{fan:.2f}x", "target": f"<= {FAN_OUT_TARGET}x", "met": fan <= FAN_OUT_TARGET})


def _ingest_rows(r: dict, rows: list[dict]) -> None:
    ing = r["ingest"]
    rows.append({"what": f"ingestion: pipeline vs embedder-only ({ing['documents']} docs, {ing['chunks']} chunks; "
                 f"{ing['pipeline_cps']:.1f} vs {ing['embed_cps']:.1f} chunks/s)",
                 "value": f"{ing['pipeline_cps'] / ing['embed_cps']:.2f}", "target": f">= {INGEST_TARGET}",
                 "met": ing["pipeline_cps"] / ing["embed_cps"] >= INGEST_TARGET})


def _query_rows(r: dict, rows: list[dict]) -> None:
    off, on = r["query_tracing_off"], r["query_tracing_on"]
    for label, name in (("no_refinement", "max_iterations=0"), ("default", "default settings (up to 2 refinements)")):
        for tr, res in (("tracing off", off), ("tracing on", on)):
            v = res[label]
            rows.append({"what": f"query latency over {res['chunks']:,} chunks, {name}, {tr}: pipeline p50 / p95 "
                         f"({res['queries']} queries)", "value": f"{v['pipeline_p50']:.0f} / {v['pipeline_p95']:.0f} ms",
                         "target": "p50 <= 150 ms" if label == "no_refinement" else ""})
        rows.append({"what": f"tracing overhead, {name} (p50 on / off)",
                     "value": f"{on[label]['pipeline_p50'] / off[label]['pipeline_p50']:.2f}x"})


def _ann_rows(a: dict, rows: list[dict]) -> None:
    kind = "random unit vectors" if a.get("distribution", "random") == "random" else "clustered vectors"
    rows.append({"what": f"dense search {a['chunks']:,} {kind}, exact numpy: p50 / p95",
                 "value": f"{a['exact_p50_ms']:.1f} / {a['exact_p95_ms']:.1f} ms",
                 "target": "1M: p50 <= 20 ms" if a["chunks"] == 1_000_000 else ""})
    for h in a["hnsw"]:
        rows.append({"what": f"dense search {a['chunks']:,} {kind}, faiss HNSW (M={a['hnsw_m']}, "
                     f"efConstruction={a['ef_construction']}, efSearch={h['ef_search']}, "
                     f"build {a['hnsw_build_s']:.0f}s): p50 / p95, recall@10",
                     "value": f"{h['p50_ms']:.2f} / {h['p95_ms']:.2f} ms, {h['recall@10']:.3f}",
                     "target": "1M: p50 <= 20 ms, recall >= 0.95" if a["chunks"] == 1_000_000 else ""})


def _memory_rows(mem: dict, rows: list[dict]) -> None:
    per = mem["per_100k"]
    rows.append({"what": f"memory per 100k chunks: RSS growth of a fresh process opening the index (measured at "
                 f"{mem['chunks']:,}; raw float32 vectors {mem['vector_array_mb_per_100k']:.0f} MB): cached exact / "
                 "cached + HNSW graph / first open building BM25 (peak)",
                 "value": f"{per['exact']:.0f} / {per['hnsw']:.0f} / {per['first open, builds BM25 (peak)']:.0f} MB"})
    rows.append({"what": "SQLite chunks.db per 100k chunks (on disk)",
                 "value": f"{mem['sqlite_mb'] * 100_000 / mem['chunks']:.0f} MB"})


def _index_scale_rows(x: dict, rows: list[dict]) -> None:
    at = f"{x['chunks']:,} chunks, {x['segments']} segments ({x['dense']})"
    load = x.get("load_latency", [x["load_before"]])[0]
    client = f"; client {x['client_p50_ms']:.0f} / {x['client_p95_ms']:.0f} ms" if "client_p50_ms" in x else ""
    client += f"; in the index {x['index_p50_ms']:.0f} / {x['index_p95_ms']:.0f} ms" if "index_p50_ms" in x else ""
    rows.append({"what": f"index at scale, {at}: query pipeline p50 / p95 while a writer adds a document a second "
                         f"(questions asked once before; client: submit -> answer read by polling; load {load:.1f})",
                 "value": f"{x['p50_ms']:.0f} / {x['p95_ms']:.0f} ms{client}", "target": "<= 60 / 150 ms at 1M"})
    if "cold_p50_ms" in x:
        rows.append({"what": f"index at scale, {at}: the same, every per-chunk-text cache emptied before each "
                             f"question (load {x['cold_load_latency'][0]:.1f})",
                     "value": f"{x['cold_p50_ms']:.0f} / {x['cold_p95_ms']:.0f} ms; client "
                              f"{x['cold_client_p50_ms']:.0f} / {x['cold_client_p95_ms']:.0f} ms"
                              + (f"; in the index {x['cold_index_p50_ms']:.0f} / {x['cold_index_p95_ms']:.0f} ms"
                                 if "cold_index_p50_ms" in x else ""), "target": ""})
    fresh_load = x.get("load_freshness", [x["load_before"]])[0]
    rows.append({"what": f"index at scale, {at}: new feed item -> poll -> cited, p50 (max) (load {fresh_load:.1f})",
                 "value": f"{x['freshness_p50_s']:.2f} s ({x['freshness_max_s']:.2f} s)", "target": "<= 5 s at 1M"})
    rows.append({"what": f"index at scale, {at}: open in a fresh process; RSS open / serving / peak "
                         f"(load {x['load_before']:.1f})",
                 "value": f"{x['open_s']:.1f} s; {x['rss_open_mb']:.0f} / {x['rss_serving_mb']:.0f} / "
                          f"{x['rss_peak_mb']:.0f} MB", "target": "<= 10 s; <= 4 GB at 1M"})
    merge = x["merge"]
    flushed = merge["flushed"][0] if merge["flushed"] else {"rows": 0, "seconds": 0.0}
    rows.append({"what": f"index at scale, {at}: merge cost (writer's rows flushed; full base build of every row)",
                 "value": f"{flushed['rows']} rows {flushed['seconds']:.2f} s; {x['base_build_s']:.0f} s"})
    rows.append({"what": f"index at scale, {at}: ANN recall@10 against exact", "value": f"{x['recall_at_10']:.3f}",
                 "target": ">= 0.95"})


if __name__ == "__main__":
    main()

