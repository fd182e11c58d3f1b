"""The segmented index at scale, on the embedded runtime, while a writer adds a document a second.

The corpus: the bundled sample corpus ingested through the pipeline (so the benchmark's
questions have answers), plus scale chunks cut from the real-text documents of the eval set
(shared/tools/eval/datasets/realdocs) repeated with variation (a few words swapped, a
variant tag) and given clustered synthetic vectors (passages cut from the same place share
a centre, as near-duplicate text does under a real embedder). Built once per size under
``--cache`` (default .ragbus-bench/), each run works on a copy.

Measured in a fresh process per size: index open (the runtime's build and the first view:
segments opened, memory-mapped), resident memory, query p50/p95 end to end with no
refinement while the writer commits a 3-chunk document every second (and the stage
times of the slowest tenth), freshness end to end (a new item published in a feed served
on 127.0.0.1 -> poll -> fetch, clean, chunk, embed, index -> an answer citing it), the cost
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
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import freshness as fr  # noqa: E402
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
    settings = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"})
    filled = home / "filled.json"  # the rows are in chunks.db: an interrupted build resumes at the segment
    if not filled.exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        system = build_local(settings.with_(allow_loopback=True))
        deps = system.deps
        with LocalRuntime(deps, system.bus) as runtime, serve_corpus(port=0) as base:
            submit_sample_corpus(deps, base)
            runtime.wait_idle(600)
        t0 = time.perf_counter()
        add_scale_chunks(deps.index, max(0, n - deps.index.count_chunks()), deps.embedder.dimension)
        filled.write_text(json.dumps({"fill_s": time.perf_counter() - t0}))
    deps = build_local(settings.with_(allow_loopback=True)).deps
    report = deps.index.maintain(flush=True)
    (home / "built.json").write_text(json.dumps({"chunks": deps.index.count_chunks(),
                                                 "fill_s": json.loads(filled.read_text())["fill_s"],
                                                 "base_build_s": report["seconds"]}))
    return home


def measure(n: int, cache: Path, rounds: int, freshness_rounds: int, out) -> None:
    """In a fresh process: every figure of one size (see the module docstring)."""
    from shared.contract.config import load_settings
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
        result = {"chunks": deps.index.count_chunks(), "open_s": open_s, "rss_open_mb": _rss_mb(),
                  "rss_before_open_mb": rss_before, "segments": len(view.segments),
                  "dense": view.dense.kind, "base_build_s": built["base_build_s"], "fill_s": built["fill_s"]}
        feed = fr.Feed()
        with LocalRuntime(deps, system.bus) as runtime, fr.serve_feed(feed) as feed_url:
            _subscribe(deps, runtime, feed, feed_url)
            with _Writer(deps) as writer:
                result.update(_latency(deps, rounds))
                result.update(_freshness(deps, feed, feed_url, freshness_rounds))
                result["writer_documents"] = writer.documents
            result["rss_serving_mb"] = _rss_mb()
            result["rss_peak_mb"] = _rss_mb("VmHWM")
            result["merge"] = deps.index.maintain(flush=True)
            result["recall_at_10"] = _recall(deps.index, deps.embedder.dimension)
        out.put(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Writer:
    """A thread that indexes a new 3-chunk document every second (embedded like any other)."""

    def __init__(self, deps) -> None:
        self.deps = deps
        self.documents = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            k = self.documents
            doc = f"writer-{k}"
            texts = [f"Writer note {k} part {i}: the harbor pilot logged tide {k * 3 + i}." for i in range(3)]
            chunks = [Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, text=t, title=f"Note {k}",
                            url=f"https://writer.invalid/{k}") for i, t in enumerate(texts)]
            self.deps.index.upsert(doc, chunks, self.deps.embedder.embed(texts))
            self.documents += 1
            self.stop.wait(1.0)

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)


def _subscribe(deps, runtime, feed: fr.Feed, feed_url: str) -> None:
    """The freshness feed (served on 127.0.0.1) added and polled once with one old article, so a
    new item is the feed's second, as in ``bench/freshness.py``."""
    from datetime import UTC, datetime, timedelta

    from shared.contract.messages import FeedPollRequested
    from shared.ingest.listings import add_listing
    from shared.query.api import submit_query, wait_for_query

    thing, place, fact = fr.FACTS[-1]
    feed.add("old-0", f"Notes on the {thing}", fr._article(thing, place, fact), datetime.now(UTC) - timedelta(days=1))
    since = deps.clock.now()
    add_listing(deps.state, feed_url, allow_loopback=True, now=since)
    deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed_url], requested_at=since))
    if not runtime.wait_idle(600):
        raise SystemExit("the freshness feed's first poll did not finish in 10 minutes")
    wait_for_query(deps, submit_query(deps, "warm up the caches").id, 300)


def _latency(deps, rounds: int) -> dict:
    """Query p50/p95 end to end, no refinement, two ways (as the query-path section): warm, each
    question asked once before (its chunks read by this process, its own vector not), and cold,
    every per-chunk-text cache emptied before each question (none of its chunks read before).
    With each, the stage times of the slowest tenth (where a p95 goes) and the load average."""
    for question in ql.QUESTIONS:
        _ask(deps, question)
    searched = _SearchClock(deps.index)
    out: dict = {}
    for name, cold, n in (("", False, rounds), ("cold_", True, 1)):
        load = os.getloadavg()[0]
        rows = []
        for question in ql.QUESTIONS * n:
            searched.ms = 0.0
            ms, client_ms, stages = _ask(deps, question, cold=cold)
            rows.append((ms, client_ms, stages | {"index.search_many": round(searched.ms, 1)}))
        index_ms = [stages["index.search_many"] for _, _, stages in rows]
        out.update({f"{name}index_p50_ms": float(np.percentile(index_ms, 50)),
                    f"{name}index_p95_ms": float(np.percentile(index_ms, 95))})
        latencies = [ms for ms, _, _ in rows]
        client = [ms for _, ms, _ in rows]
        slow = sorted(rows, key=lambda r: -r[0])[: max(1, len(rows) // 10)]
        out.update({f"{name}p50_ms": float(np.percentile(latencies, 50)),
                    f"{name}p95_ms": float(np.percentile(latencies, 95)), f"{name}max_ms": max(latencies),
                    f"{name}client_p50_ms": float(np.percentile(client, 50)),
                    f"{name}client_p95_ms": float(np.percentile(client, 95)), f"{name}queries": len(latencies),
                    f"{name}slowest": [{"ms": round(ms, 1), "stages_ms": stages} for ms, _, stages in slow],
                    f"{name}load_latency": [round(load, 2), round(os.getloadavg()[0], 2)]})
    return out


class _SearchClock:
    """Adds up the time the index's ``search_many`` takes (every stage's searches of a question
    end before the next question is asked; the writer only writes)."""

    def __init__(self, index) -> None:
        self.ms = 0.0
        real = index.search_many

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.ms += (time.perf_counter() - t0) * 1000

        index.search_many = timed


def _ask(deps, question: str, *, cold: bool = False) -> tuple[float, float, dict[str, float]]:
    """One question's pipeline time (the record's creation to its answer, ms; the figure of the
    query-path section), its client time (submit -> the answer read, with ``ask``'s polling of
    the record every 20-50 ms) and its stages' times; its vector is never cached."""
    from datetime import datetime

    from shared.query.api import submit_query, wait_for_query

    ql.forget_query_vectors()
    deps.index.forget_dense_tops()  # a new question's vector is searched afresh in every segment
    if cold:
        ql.forget_chunk_caches()
    started = time.perf_counter()
    record = wait_for_query(deps, submit_query(deps, question, max_iterations=0).id, 60)
    client_ms = (time.perf_counter() - started) * 1000
    if record.status != "answered":
        raise SystemExit(f"{question!r} ended {record.status}: {record.error}")
    pipeline = datetime.fromisoformat(record.updated_at) - datetime.fromisoformat(record.created_at)
    stages: dict[str, float] = {}
    for it in record.iterations:
        for stage, value in it.timings.items():
            stages[stage] = round(stages.get(stage, 0.0) + float(value), 1)
    return pipeline.total_seconds() * 1000, client_ms, stages


def _freshness(deps, feed: fr.Feed, feed_url: str, rounds: int) -> dict:
    """A new item published in the feed -> polled -> fetched, cleaned, chunked, embedded,
    indexed -> an answer citing it (the poll is requested at once, as ``ragbus poll`` does)."""
    from datetime import UTC, datetime

    from shared.contract.messages import FeedPollRequested
    from shared.query.api import submit_query, wait_for_query

    load = os.getloadavg()[0]
    cited_s = []
    for r in range(rounds):
        thing, place, fact = fr.FACTS[r % (len(fr.FACTS) - 1)]
        published = time.perf_counter()
        url = feed.add(f"new-{r}-{uuid.uuid4().hex[:6]}", f"The {thing} in {place}", fr._article(thing, place, fact),
                       datetime.now(UTC))
        deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed_url],
                                                 requested_at=deps.clock.now()))
        while True:
            record = wait_for_query(deps, submit_query(deps, f"What does the {thing} in {place} do?",
                                                       max_iterations=0).id, 60)
            if fr._cites(record, url):
                break
            if time.perf_counter() - published > 60:
                raise SystemExit(f"round {r}: no answer cited {url} within 60 s")
            time.sleep(0.1)
        cited_s.append(time.perf_counter() - published)
    return {"freshness_p50_s": statistics.median(cited_s), "freshness_max_s": max(cited_s),
            "freshness_s": [round(s, 2) for s in cited_s], "load_freshness": [round(load, 2), round(os.getloadavg()[0], 2)]}


def _recall(index, dimension: int, queries: int = 200) -> float:
    """The index's dense top 10 against exact inner products over every live vector (each
    segment's memory-mapped rows read once for all probes; dead rows left out)."""
    view = index.snapshot()
    rng = np.random.default_rng(5)
    starts = rng.integers(0, view.size, queries)
    live = view.live_chunk_ids()
    picks = np.stack([index.get_vectors([live[i]])[live[i]] for i in starts])
    probes = picks + 0.3 * rng.standard_normal(size=picks.shape, dtype=np.float32) / np.sqrt(dimension)
    probes = (probes / np.linalg.norm(probes, axis=1, keepdims=True)).astype(np.float32)
    best: list[list[tuple[float, str]]] = [[] for _ in range(queries)]
    for seg, dead in zip(view.segments, view.dead, strict=True):
        for start in range(0, len(seg), 200_000):
            block = np.asarray(seg.vectors[start : start + 200_000], dtype=np.float32) @ probes.T
            if dead is not None:
                block[dead[start : start + 200_000]] = -np.inf
            for q in range(queries):
                top = np.argpartition(-block[:, q], min(10, len(block) - 1))[:10]
                best[q] += [(float(block[r, q]), seg.chunk_ids[start + r]) for r in top if np.isfinite(block[r, q])]
    hits = []
    for q, probe in enumerate(probes):
        exact = {chunk_id for _, chunk_id in sorted(best[q], reverse=True)[:10]}
        got = {h.chunk.chunk_id for h in index.search("", probe, 10, mode="dense")}
        hits.append(len(exact & got) / 10)
    return float(np.mean(hits))


def trickle(n: int, cache: Path, writes: int) -> dict:
    """A search right after each of ``writes`` 3-chunk writes (the refresh it pays: the new rows,
    and now and then a fold of in-memory segments), on a copy of the cached ``n``-chunk index,
    maintenance off so the in-memory rows grow as they do between two background flushes."""
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder
    from shared.adapters.local.index import HybridIndex

    base = build_base(n, cache)
    work = Path(tempfile.mkdtemp(prefix="ragbus-trickle-"))
    try:
        shutil.copytree(base / "index", work / "index")
        index = HybridIndex(work / "index", 384, background_merges=False, flush_rows=10**9)
        embedder = OnnxMiniLMEmbedder()
        question = embedder.embed(["what did the harbor pilot log?"])[0]
        index.search("harbor pilot", question, 10)
        load = os.getloadavg()[0]
        ms = []
        for k in range(writes):
            doc = f"trickle-{k}"
            texts = [f"Writer note {k} part {i}: the harbor pilot logged tide {k * 3 + i}." for i in range(3)]
            index.upsert(doc, [Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, text=t, title=f"Note {k}")
                               for i, t in enumerate(texts)], embedder.embed(texts))
            t0 = time.perf_counter()
            index.search("harbor pilot tide", question, 10)
            ms.append((time.perf_counter() - t0) * 1000)
        return {"chunks": n, "writes": writes, "memory_rows": index.snapshot().memory_rows,
                "segments": len(index.snapshot().segments), "p50_ms": float(np.percentile(ms, 50)),
                "p95_ms": float(np.percentile(ms, 95)), "p99_ms": float(np.percentile(ms, 99)), "max_ms": max(ms),
                "load": [round(load, 2), round(os.getloadavg()[0], 2)]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
    parser.add_argument("--trickle", type=int, default=0, metavar="WRITES",
                        help="instead: a search after each of WRITES writes, on the first size (see trickle())")
    args = parser.parse_args()
    if args.trickle:
        print(json.dumps(trickle(args.sizes[0], args.cache, args.trickle), indent=1))
        return
    print(json.dumps(run(args.sizes, args.cache, args.rounds, args.freshness_rounds), indent=1))


if __name__ == "__main__":
    main()
