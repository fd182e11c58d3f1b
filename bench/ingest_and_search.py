"""Ingestion and search benchmark of the embedded runtime (prints Markdown; no network).

(a) end-to-end ingest throughput (files -> cleaner -> indexer through the real
    local runtime: SQLite bus, state, blobs, MiniLM, hybrid index) against the
    embedder alone on the very same chunks, in the same run -> ratio (target >= 0.85);
(b) local bus hop latency: publish -> the consumer's handler starts (SqliteBus,
    a pulling thread), p50/p99;
(c) search latency p50/p95 at 10k and 100k chunks, query embedding excluded.
    The chunks there are synthetic: Zipf-distributed pseudo-words and random unit
    vectors (search cost depends on sizes, not on meaning). Exact vs HNSW.

    python bench/ingest_and_search.py --quick     # small, about a minute
    python bench/ingest_and_search.py             # full: 100k chunks too
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.indexer.handler import EMBED_BATCH
from shared.adapters.local.bus import SqliteBus
from shared.adapters.local.index import HybridIndex
from shared.contract import state_collections
from shared.contract.config import load_settings
from shared.contract.messages import DocumentDeleted
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import CONSUMERS

WORDS = ["volcano", "glacier", "harbor", "lantern", "meadow", "copper", "quartz", "falcon", "ember", "signal", "archive", "river", "mountain", "satellite", "orbit", "processor", "memory", "cache", "kernel", "thread", "latency", "network", "packet", "router", "switch", "protein", "enzyme", "cell", "membrane", "genome", "climate", "rainfall", "drought", "harvest", "market", "price", "inflation", "orchestra", "symphony", "violin", "rehearsal", "museum", "gallery", "painting", "sculpture", "bridge", "tunnel", "railway"]


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _article(rng: np.random.Generator, n: int, paragraphs: int) -> str:
    out = [f"Field report {n}"]
    for _ in range(paragraphs):
        sentences = []
        for _ in range(5):
            words = rng.choice(WORDS, size=int(rng.integers(10, 20)))
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return "\n\n".join(out)


# ------------------------------------------------------------------ (a)


def bench_ingest(docs: int, paragraphs: int) -> dict[str, float]:
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="ragbus-bench-") as tmp:
        home, folder = Path(tmp) / "home", Path(tmp) / "docs"
        folder.mkdir()
        for n in range(docs):
            (folder / f"report-{n:04d}.txt").write_text(_article(rng, n, paragraphs))
        return measure_ingest(folder, home, docs)


def measure_ingest(folder: Path, home: Path, docs: int) -> dict[str, float]:
    """Ingest ``folder`` (``docs`` files) through the real embedded runtime, then embed the very
    same chunks with the embedder alone: both timings, in the same run."""
    settings = load_settings({**os.environ, "RAGBUS_HOME": str(home)})
    system = build_local(settings)
    deps = system.deps
    deps.embedder.embed(["warm up the model before the clock starts"])
    consumers = [c for c in CONSUMERS if c.stage in ("cleaner", "indexer")]
    runtime = LocalRuntime(deps, system.bus, consumers).start()
    try:
        started = time.perf_counter()
        try:
            from shared.ingest.files import ingest_path

            ingest_path(folder, state=deps.state, blobs=deps.blobs, publisher=deps.publisher,
                        clock=deps.clock)
        except ImportError:  # file ingestion not available: publish the events ourselves
            _publish_files(folder, deps)
        if not runtime.wait_idle(3600):
            raise RuntimeError("ingestion did not finish within an hour")
        pipeline_s = time.perf_counter() - started
        ingest_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the embedder alone
    finally:
        runtime.stop()
    records = deps.state.list(state_collections.DOCUMENTS)
    chunk_ids = [i for r in records for i in r["chunk_ids"]]
    if len(records) != docs:
        raise RuntimeError(f"{docs} files ingested but {len(records)} documents indexed")
    texts = [c.text for c in deps.index.get_chunks(chunk_ids)]
    # Best of two: the machine is shared, and the ratio should not flatter the pipeline.
    embed_s = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        for i in range(0, len(texts), EMBED_BATCH):
            deps.embedder.embed(texts[i : i + EMBED_BATCH])
        embed_s = min(embed_s, time.perf_counter() - started)
    return {
        "documents": docs,
        "chunks": len(texts),
        "pipeline_s": pipeline_s,
        "embed_s": embed_s,
        "pipeline_cps": len(texts) / pipeline_s,
        "embed_cps": len(texts) / embed_s,
        "ingest_rss_mb": ingest_rss_mb,
    }


def _publish_files(folder: Path, deps) -> None:
    from shared.contract.ids import content_hash, file_document_id
    from shared.contract.messages import DocumentFetched

    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        doc_id, digest = file_document_id(str(path)), content_hash(data)
        ref = deps.blobs.put(f"raw/{doc_id}/{digest}", data, "text/plain")
        deps.publisher.publish(DocumentFetched(
            document_id=doc_id, source="file", origin=str(folder), guid=str(path), url=path.as_uri(),
            title=path.stem, raw_ref=ref, content_type="text/plain", content_hash=digest,
            fetched_at=datetime.now(UTC),
        ))


# ------------------------------------------------------------------ (b)


def bench_bus(messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ragbus-bus-") as tmp:
        bus = SqliteBus(Path(tmp) / "bus.db", {"bench.document-deleted": DocumentDeleted.TOPIC})
        latencies: list[float] = []
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set() or bus.outstanding(["bench.document-deleted"]):
                deliveries = bus.pull("bench.document-deleted", 1)
                if not deliveries:
                    bus.wait_for_messages(0.05)
                    continue
                for delivery in deliveries:
                    latencies.append(time.perf_counter() - float(delivery.attributes["sent_at"]))
                    bus.ack(delivery)

        worker = threading.Thread(target=consume, daemon=True)
        worker.start()
        for n in range(messages):
            message = DocumentDeleted(document_id=f"d{n}", reason="bench", requested_at=datetime.now(UTC))
            bus.publish(message, {"sent_at": repr(time.perf_counter())})
            time.sleep(0.002)  # latency, not a queue under saturation
        stop.set()
        worker.join(60)
    ms = [x * 1000 for x in latencies]
    return {"messages": len(ms), "p50_ms": _pct(ms, 50), "p99_ms": _pct(ms, 99)}


# ------------------------------------------------------------------ (c)


def _fill_index(path: Path, chunks: int, dim: int, rng: np.random.Generator) -> float:
    vocab = np.array([f"w{n}" for n in range(20_000)])
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    index = HybridIndex(path, dim, ann_threshold=10**12)
    per_doc = 20
    started = time.perf_counter()
    from shared.contract.ports import Chunk

    for d in range(chunks // per_doc):
        words = rng.choice(vocab, size=(per_doc, 120), p=weights)
        batch = [Chunk(f"b{d}:x:{i}", f"b{d}", i, " ".join(words[i]), title=f"doc {d}") for i in range(per_doc)]
        vectors = rng.normal(size=(per_doc, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.upsert(f"b{d}", batch, vectors)
    return time.perf_counter() - started


def bench_search(sizes: list[int], queries: int, ann_sizes: set[int]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    dim = 384
    for size in sizes:
        rng = np.random.default_rng(size)
        with tempfile.TemporaryDirectory(prefix="ragbus-index-") as tmp:
            path = Path(tmp)
            fill_s = _fill_index(path, size, dim, rng)
            q_text = [" ".join(f"w{int(x)}" for x in rng.zipf(1.3, size=4) if x < 20_000) or "w1"
                      for _ in range(queries)]
            q_vec = rng.normal(size=(queries, dim)).astype(np.float32)
            q_vec /= np.linalg.norm(q_vec, axis=1, keepdims=True)
            kinds = [("exact", 10**12)] + ([("hnsw", 0)] if size in ann_sizes else [])
            for kind, threshold in kinds:
                index = HybridIndex(path, dim, ann_threshold=threshold)
                started = time.perf_counter()
                index.snapshot()
                build_s = time.perf_counter() - started
                reopened = HybridIndex(path, dim, ann_threshold=threshold)
                started = time.perf_counter()
                reopened.snapshot()
                load_s = time.perf_counter() - started
                for mode in ("hybrid", "dense", "bm25"):
                    if kind == "hnsw" and mode == "bm25":
                        continue
                    times = []
                    for text, vec in zip(q_text, q_vec, strict=True):
                        t0 = time.perf_counter()
                        index.search(text, vec, 10, mode=mode)
                        times.append((time.perf_counter() - t0) * 1000)
                    rows.append({"chunks": size, "dense": kind, "mode": mode, "p50": _pct(times, 50),
                                 "p95": _pct(times, 95), "build_s": build_s, "load_s": load_s,
                                 "fill_s": fill_s})
                index.close()
                reopened.close()
    return rows


# --------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small run (no 100k index)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    quick = args.quick

    ingest = bench_ingest(docs=20 if quick else 80, paragraphs=6)
    bus = bench_bus(200 if quick else 1000)
    sizes = [10_000] if quick else [10_000, 100_000]
    search = bench_search(sizes, queries=50 if quick else 200, ann_sizes={10_000} if quick else {10_000, 100_000})

    cpus = os.cpu_count()
    print(f"## ragbus ingestion and search benchmark ({'quick' if quick else 'full'}, {cpus} CPUs)\n")
    print("### (a) ingest throughput (MiniLM int8 ONNX; chunks of at most 254 tokens)\n")
    print("| documents | chunks | pipeline s | pipeline chunks/s | embedder-only s | embedder chunks/s | ratio (target >= 0.85) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {ingest['documents']} | {ingest['chunks']} | {ingest['pipeline_s']:.1f} | "
          f"{ingest['pipeline_cps']:.1f} | {ingest['embed_s']:.1f} | {ingest['embed_cps']:.1f} | "
          f"{ingest['pipeline_cps'] / ingest['embed_cps']:.2f} |")
    print("\n### (b) local bus hop latency (publish -> handler start)\n")
    print("| messages | p50 ms | p99 ms |")
    print("|---:|---:|---:|")
    print(f"| {bus['messages']} | {bus['p50_ms']:.2f} | {bus['p99_ms']:.2f} |")
    print("\n### (c) search latency, k=10, query embedding excluded (synthetic texts, random unit vectors)\n")
    print("| chunks | dense search | mode | p50 ms | p95 ms | snapshot build s | cached load s |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for row in search:
        print(f"| {row['chunks']:,} | {row['dense']} | {row['mode']} | {row['p50']:.1f} | {row['p95']:.1f} | "
              f"{row['build_s']:.1f} | {row['load_s']:.1f} |")
    fills = {row["chunks"]: row["fill_s"] for row in search}
    print("\nindex fill (upserts of 20-chunk documents): "
          + ", ".join(f"{n:,} chunks in {s:.1f}s" for n, s in fills.items()))


if __name__ == "__main__":
    main()
