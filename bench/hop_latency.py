"""Bus hop and query latency: the emulator topology against the embedded runtime (a benchmark, not a test).

In one run:

1. one hop, publish -> handler start, measured by the handler itself:
   - embedded: ``SqliteBus.publish`` -> a worker thread pulling as the local
     runtime does (pull, else wait for a publish) sees the message;
   - emulator: ``PublisherClient.publish`` (the ragbus batch settings) -> the
     Pub/Sub emulator pushes -> a functions-framework probe server
     (``tests/probes/pubsub_probe.py:arrival``) records its arrival.
   Messages are sent one at a time (each waits for the previous arrival), so a
   figure is one hop's latency, not queueing.
2. end-to-end query latency for the same questions on both runtimes (the
   bundled corpus ingested in each): as the pipeline records it (created_at ->
   last update of the answered record) and as a client polling the record sees
   it. On the topology every hop is a Pub/Sub push into another OS process and
   every state read/write a Firestore emulator call.

    python bench/hop_latency.py              # about three minutes
    python bench/hop_latency.py --hops 50 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.contract import state_collections
from shared.contract.config import load_settings  # noqa: E402
from shared.contract.messages import FeedPollRequested  # noqa: E402
from shared.ingest.files import ingest_path  # noqa: E402
from shared.ingest.listings import add_listing  # noqa: E402
from shared.query.api import submit_query, wait_for_query  # noqa: E402
from shared.tools import emulators, topology  # noqa: E402
from shared.tools.demo import CORPUS, serve_corpus  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "tests" / "probes" / "pubsub_probe.py"
PROJECT = "ragbus-bench"
QUESTIONS = [
    "How does BM25 saturate term frequency?", "What is efSearch?", "Why do consumers need idempotency keys?",
    "How does the traceparent header work?", "What does a 304 response mean for feed polling?",
    "What is a poison message?", "Which private address ranges must a fetcher refuse?", "What is RRF?",
    "How should chunks overlap?", "What happens when a consumer crashes?",
]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


# ------------------------------------------------------------------- hops


def embedded_hops(n: int, workdir: Path) -> list[float]:
    from shared.adapters.local.bus import SqliteBus

    bus = SqliteBus(workdir / "bus.db", {"probe.probe-hop": "probe-hop"})
    arrived: dict[str, float] = {}
    seen_event = threading.Event()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            seen = bus.publish_count()
            deliveries = bus.pull("probe.probe-hop", 1)
            if not deliveries:
                bus.wait_for_messages(0.05, seen)
                continue
            for delivery in deliveries:
                arrived[delivery.attributes["seq"]] = time.time() - float(delivery.attributes["sent_at"])
                bus.ack(delivery)
                seen_event.set()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    try:
        for seq in range(n):
            seen_event.clear()
            bus.publish_raw("probe-hop", b"x", {"seq": str(seq), "sent_at": repr(time.time())})
            if not seen_event.wait(10):
                raise SystemExit(f"embedded hop {seq} never arrived")
    finally:
        stop.set()
        thread.join(2)
        bus.close()
    return [arrived[str(s)] * 1000 for s in range(n)]


def emulator_hops(n: int, workdir: Path) -> tuple[list[float], list[float]]:
    """(publish -> handler start, publish call -> server's message id) in ms."""
    from google.cloud import pubsub_v1
    from google.cloud.pubsub_v1.types import PublisherOptions

    from shared.adapters.gcp.pubsub import (
        DEFAULT_BATCH_SETTINGS,
        ensure_push_subscription,
        ensure_topics,
    )
    from tests.probes.pubsub_probe import read_log

    pubsub = emulators.start_pubsub_emulator(workdir / "logs")
    probe_log = workdir / "probe.jsonl"
    server = None
    saved = os.environ.get("PUBSUB_EMULATOR_HOST")
    os.environ.update(pubsub.env)
    try:
        port = emulators.free_port()
        server = topology.start_server(
            "probe", topology.stage_command("arrival", port, source=PROBE), port,
            {**os.environ, "PROBE_LOG": str(probe_log)}, workdir / "logs")
        topology.wait_until_answering([server], 120)
        ensure_topics(PROJECT, ["probe-hop", "probe-hop-dead-letter"])
        ensure_push_subscription(PROJECT, "probe.probe-hop", "probe-hop", server.url + "/",
                                 dead_letter_topic="probe-hop-dead-letter", ack_deadline_s=10,
                                 min_backoff_s=0.1, max_backoff_s=1)
        client = pubsub_v1.PublisherClient(batch_settings=DEFAULT_BATCH_SETTINGS,
                                           publisher_options=PublisherOptions())
        topic = f"projects/{PROJECT}/topics/probe-hop"
        client.publish(topic, b"warm-up", seq="warm", sent_at=repr(time.time())).result(30)
        _wait_lines(probe_log, 1, read_log)
        publish_ms = []
        for seq in range(n):
            t0 = time.time()
            client.publish(topic, b"x", seq=str(seq), sent_at=repr(t0)).result(30)
            publish_ms.append((time.time() - t0) * 1000)
            _wait_lines(probe_log, seq + 2, read_log)
        client.stop()
        lines = [r for r in read_log(probe_log) if r["attributes"].get("seq") != "warm"]
        hops = {r["attributes"]["seq"]: (r["arrived"] - float(r["attributes"]["sent_at"])) * 1000 for r in lines}
        return [hops[str(s)] for s in range(n)], publish_ms
    finally:
        if server is not None:
            emulators.stop_process_group(server.pid)
            server.popen.wait(10)
        pubsub.stop()
        if saved is None:
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)
        else:
            os.environ["PUBSUB_EMULATOR_HOST"] = saved


def _wait_lines(path: Path, count: int, read_log) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if len(read_log(path)) >= count:
            return
        time.sleep(0.001)
    raise SystemExit(f"the probe saw fewer than {count} deliveries in 30 s; log {path}")


# ---------------------------------------------------------------- queries


def ask_all(deps, questions: list[str]) -> tuple[list[float], list[float]]:
    pipeline, client = [], []
    for question in questions:
        started = time.perf_counter()
        record = wait_for_query(deps, submit_query(deps, question).id, 90)
        client.append((time.perf_counter() - started) * 1000)
        if record.status != "answered":
            raise SystemExit(f"{question!r} ended {record.status}: {record.error}")
        end = datetime.fromisoformat(record.updated_at)
        pipeline.append((end - datetime.fromisoformat(record.created_at)).total_seconds() * 1000)
    return pipeline, client


def _ingest_corpus(deps, publish_poll) -> None:
    with serve_corpus(port=0) as base:
        add_listing(deps.state, f"{base}/feed.xml", allow_loopback=True, now=deps.clock.now())
        publish_poll()
        ingest_path(CORPUS / "docs", state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
        deadline = time.monotonic() + 600
        while deps.state.count(state_collections.DOCUMENTS) < 12:
            if time.monotonic() > deadline:
                raise SystemExit("the corpus was not indexed within 10 minutes")
            time.sleep(0.5)


def embedded_queries(home: Path, questions: list[str]) -> tuple[list[float], list[float]]:
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    system = build_local(load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"}).with_(allow_loopback=True))
    deps = system.deps
    with LocalRuntime(deps, system.bus) as runtime:
        _ingest_corpus(deps, lambda: deps.publisher.publish(
            FeedPollRequested(request_id=uuid.uuid4().hex, requested_at=deps.clock.now())))
        runtime.wait_idle(300)
        ask_all(deps, questions[:2])  # warm the models
        return ask_all(deps, questions)


def topology_queries(home: Path, questions: list[str]) -> tuple[list[float], list[float], float]:
    from shared.runtime.bootstrap import build_gcp

    started = time.perf_counter()
    state = topology.up(home, project=PROJECT, allow_loopback=True, stage_env={"RAGBUS_TRACING": "0"})
    up_s = time.perf_counter() - started
    saved = {k: os.environ.get(k) for k in state["env"]}
    os.environ.update(state["env"])
    try:
        deps = build_gcp(load_settings(dict(os.environ, RAGBUS_TRACING="0")))
        _ingest_corpus(deps, lambda: deps.publisher.publish(
            FeedPollRequested(request_id=uuid.uuid4().hex, requested_at=deps.clock.now())))
        ask_all(deps, questions[:2])  # every stage process loads its models on first use
        pipeline, client = ask_all(deps, questions)
        return pipeline, client, up_s
    finally:
        topology.down(home)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hops", type=int, default=100, help="messages per bus (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="times each question is asked (default 2)")
    parser.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    args = parser.parse_args()
    missing = {k: v for k, v in emulators.emulators_available().items() if v}
    if missing:
        raise SystemExit(f"emulators not installed: {missing}")
    questions = QUESTIONS * args.rounds

    with tempfile.TemporaryDirectory(prefix="ragbus-hop-") as tmp:
        work = Path(tmp)
        (work / "embedded").mkdir()
        (work / "emulator").mkdir()
        local_hop = embedded_hops(args.hops, work / "embedded")
        pubsub_hop, publish_call = emulator_hops(args.hops, work / "emulator")
        local_pipe, local_client = embedded_queries(work / "home-embedded", questions)
        topo_pipe, topo_client, up_s = topology_queries(work / "home-topology", questions)

    rows = [
        ("hop: publish -> handler start", local_hop, pubsub_hop),
        ("query end to end (pipeline record)", local_pipe, topo_pipe),
        ("query end to end (client polling)", local_client, topo_client),
    ]
    print(f"\n{args.hops} hops per bus, {len(questions)} queries per runtime "
          f"({len(QUESTIONS)} questions x {args.rounds}); `ragbus up --emulators`-style start took {up_s:.1f} s\n")
    print("| measure | embedded p50 ms | embedded p95 ms | emulator topology p50 ms | emulator topology p95 ms "
          "| ratio p50 | ratio p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, local, topo in rows:
        print(f"| {name} | {pct(local, 50):.1f} | {pct(local, 95):.1f} | {pct(topo, 50):.1f} | {pct(topo, 95):.1f} "
              f"| {pct(topo, 50) / pct(local, 50):.1f}x | {pct(topo, 95) / pct(local, 95):.1f}x |")
    print(f"\nemulator publish call (publish -> server message id): p50 {pct(publish_call, 50):.1f} ms, "
          f"p95 {pct(publish_call, 95):.1f} ms (part of the emulator hop)")
    if args.json:
        print(json.dumps({name: {"embedded": local, "emulator": topo} for name, local, topo in rows}))


if __name__ == "__main__":
    main()
