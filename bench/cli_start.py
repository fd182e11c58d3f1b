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

Bytecode is cached in a temporary folder (PYTHONPYCACHEPREFIX) warmed by one start, as an installed
ragbus has its .pyc files; nothing is written to ./.ragbus or ~/.ragbus.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCUMENT = "Basalt is a fine-grained volcanic rock formed from the rapid cooling of lava rich in magnesium and iron.\n"


def start(env: dict[str, str], command: list[str]) -> float:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "shared.tools.cli", *command], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"ragbus {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return seconds


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(scratch: Path, command: list[str], runs: int) -> dict[str, object]:
    env = {**os.environ, "RAGBUS_HOME": str(scratch / "home"), "PYTHONPATH": str(REPO),
           "PYTHONPYCACHEPREFIX": str(scratch / "pycache"), "RAGBUS_TRACING": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cached = {**env, "RAGBUS_MODEL_CACHE": str(scratch / "cache")}
    uncached = {**env, "RAGBUS_MODEL_CACHE": "off"}
    (scratch / "basalt.txt").write_text(DOCUMENT, encoding="utf-8")
    start(uncached, ["ingest", str(scratch / "basalt.txt")])  # also warms the bytecode cache
    loads = [load_average()]
    first = start(cached, command)  # builds the cache
    seconds: dict[str, list[float]] = {"off": [], "cached": []}
    for _ in range(runs):
        seconds["off"].append(start(uncached, command))
        seconds["cached"].append(start(cached, command))
    loads.append(load_average())
    before, after = statistics.median(seconds["off"]), statistics.median(seconds["cached"])
    return {"command": ["ragbus", *command], "runs": runs, "median_s_without_cache": round(before, 3),
            "median_s_with_cache": round(after, 3), "ratio": round(before / after, 2),
            "first_start_building_cache_s": round(first, 3),
            "seconds": {k: [round(s, 3) for s in v] for k, v in seconds.items()},
            "load_average_1_5_15_before_after": loads, "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="starts each way (default 5)")
    parser.add_argument("command", nargs="*", default=["search", "x"], help="the ragbus command (default: search x)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ragbus-cli-start-"))
    try:
        print(json.dumps(measure(scratch, args.command, max(1, args.runs)), indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
