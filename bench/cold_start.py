"""A function's cold-start import cost, per target (a benchmark, not a test).

Cloud Functions loads the one root ``main.py`` for every function and looks its
target up there; whatever that import pulls in is paid on every cold start. For
each target this starts fresh processes that do what functions-framework does
before serving (``import functions_framework; create_app(target, source=main.py)``),
times that, and lists which of the gateway's modules (Starlette, MCP, uvicorn)
ended up imported.

    python bench/cold_start.py                       # every target, 5 processes each
    python bench/cold_start.py --targets grader gateway --runs 9
    python bench/cold_start.py --repo /path/to/other/checkout   # the same figures for another tree
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GATEWAY_STACK = ("starlette", "mcp", "uvicorn", "sse_starlette")
PROBE = f"""
import json, sys, time
started = time.perf_counter()
import functions_framework
functions_framework.create_app(target=sys.argv[1], source="main.py")
print(json.dumps({{"seconds": time.perf_counter() - started,
                  "gateway_stack": [m for m in {GATEWAY_STACK!r} if m in sys.modules]}}))
"""


def measure(repo: Path, target: str, runs: int, home: str) -> dict[str, object]:
    env = {**os.environ, "RAGBUS_HOME": home, "FUNCTION_TARGET": target, "PYTHONPATH": str(repo),
           "RAGBUS_TRACING": "0"}
    seconds: list[float] = []
    stack: list[str] = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", PROBE, target], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"{target}: the probe failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        seconds.append(result["seconds"])
        stack = result["gateway_stack"]
    return {"target": target, "median_s": statistics.median(seconds), "min_s": min(seconds),
            "max_s": max(seconds), "gateway_stack": stack}


def main() -> None:
    from shared.runtime.stages import ENTRY_POINTS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose main.py is timed")
    parser.add_argument("--targets", nargs="*", default=list(ENTRY_POINTS))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragbus-cold-start-") as home:
        print(f"{'target':<16}{'median s':>10}{'min s':>8}{'max s':>8}  gateway stack imported")
        for target in args.targets:
            row = measure(args.repo.resolve(), target, args.runs, home)
            print(f"{row['target']:<16}{row['median_s']:>10.3f}{row['min_s']:>8.3f}{row['max_s']:>8.3f}  "
                  f"{', '.join(row['gateway_stack']) or '-'}")


if __name__ == "__main__":
    main()
