"""A CLI command's cold start with and without the embedder's optimised-graph cache (a benchmark, not a test).

Every ``ragbus`` process that embeds builds the packaged MiniLM's ONNX Runtime session; with every
graph optimisation that folds the model's int8 weights back to float32, most of the session's cost.
The cache (shared/adapters/local/graph_cache.py) saves that graph once under the data home and later
starts load it. This starts fresh processes of one command on a tiny scratch home, alternating
``RAGBUS_MODEL_CACHE=off`` (optimise at every start: the behaviour before the cache) and the default
cache, and prints the median wall time of each, their ratio in the same run, the first start (which
builds the cache) and the load average.

    python bench/cli_start.py                         # `ragbus search x`, 5 starts each way
    python bench/cli_start.py --runs 9 -- ask "what is ragbus?"
    python bench/cli_start.py --baseline /path/to/main   # also that checkout's code, alternating

Bytecode is cached in a temporary folder (PYTHONPYCACHEPREFIX) warmed by one start, as an installed
ragbus has its .pyc files; nothing is written to ./.ragbus or ~/.ragbus.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCUMENT = "Basalt is a fine-grained volcanic rock formed from the rapid cooling of lava rich in magnesium and iron.\n"


def start(env: dict[str, str], command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one process of ``ragbus command``."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "shared.tools.cli", *command], cwd=env["PYTHONPATH"], env=env,
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"ragbus {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime


EMBEDDER_PROBE = """
import json, sys, time
from pathlib import Path
from shared.adapters.local.embedder import OnnxMiniLMEmbedder
embedder = OnnxMiniLMEmbedder(cache_dir=None if sys.argv[1] == "off" else Path(sys.argv[1]))
wall, cpu = time.perf_counter(), time.process_time()
embedder.embed(["x"])
print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]))
"""


def embedder_starts(env: dict[str, str], cache: Path, runs: int) -> dict[str, object]:
    """The embedder's own first embedding (tokenizers, session, one run) in fresh processes, alternating."""
    seconds: dict[str, list[list[float]]] = {"off": [], "cached": []}
    for _ in range(runs):
        for way, where in (("off", "off"), ("cached", str(cache))):
            done = subprocess.run([sys.executable, "-c", EMBEDDER_PROBE, where], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=600, check=True)
            seconds[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    wall = {way: statistics.median(w for w, _ in s) for way, s in seconds.items()}
    cpu = {way: statistics.median(c for _, c in s) for way, s in seconds.items()}
    return {"median_wall_s": {k: round(v, 3) for k, v in wall.items()},
            "median_cpu_s": {k: round(v, 3) for k, v in cpu.items()},
            "ratio_wall_off_to_cached": round(wall["off"] / wall["cached"], 2),
            "ratio_cpu_off_to_cached": round(cpu["off"] / cpu["cached"], 2)}


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(scratch: Path, command: list[str], runs: int, baseline: Path | None) -> dict[str, object]:
    env = {**os.environ, "RAGBUS_HOME": str(scratch / "home"), "PYTHONPATH": str(REPO),
           "PYTHONPYCACHEPREFIX": str(scratch / "pycache"), "RAGBUS_TRACING": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cached = {**env, "RAGBUS_MODEL_CACHE": str(scratch / "cache")}
    uncached = {**env, "RAGBUS_MODEL_CACHE": "off"}
    (scratch / "basalt.txt").write_text(DOCUMENT, encoding="utf-8")
    start(uncached, ["ingest", str(scratch / "basalt.txt")])  # also warms the bytecode cache
    loads = [load_average()]
    first = start(cached, command)  # builds the cache
    ways = {"off": uncached, "cached": cached}
    if baseline is not None:  # another checkout's code (say, main's before the cache) on the same home
        ways["baseline"] = {**env, "PYTHONPATH": str(baseline), "PYTHONPYCACHEPREFIX": str(scratch / "pycache-baseline")}
        start(ways["baseline"], command)  # its bytecode
    seconds: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for _ in range(runs):
        for way, way_env in ways.items():
            seconds[way].append(start(way_env, command))
    embedder = embedder_starts(env, scratch / "cache", runs)
    loads.append(load_average())
    wall = {way: statistics.median(w for w, _ in s) for way, s in seconds.items()}
    cpu = {way: statistics.median(c for _, c in s) for way, s in seconds.items()}
    return {"command": ["ragbus", *command], "runs": runs,
            "median_wall_s": {way: round(s, 3) for way, s in wall.items()},
            "median_cpu_s": {way: round(s, 3) for way, s in cpu.items()},
            "ratio_wall_off_to_cached": round(wall["off"] / wall["cached"], 2),
            "ratio_cpu_off_to_cached": round(cpu["off"] / cpu["cached"], 2),
            **({"ratio_wall_baseline_to_cached": round(wall["baseline"] / wall["cached"], 2)} if baseline else {}),
            "first_start_building_cache_wall_cpu_s": [round(x, 3) for x in first],
            "wall_cpu_s": {way: [[round(w, 3), round(c, 3)] for w, c in s] for way, s in seconds.items()},
            "embedder_first_embedding": embedder,
            "load_average_1_5_15_before_after": loads, "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="starts each way (default 5)")
    parser.add_argument("--baseline", type=Path, help="also start this checkout's code (e.g. main before the cache)")
    parser.add_argument("command", nargs="*", default=["search", "x"], help="the ragbus command (default: search x)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ragbus-cli-start-"))
    try:
        print(json.dumps(measure(scratch, args.command, max(1, args.runs), args.baseline), indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
