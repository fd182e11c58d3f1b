"""Crash benchmark (not a test): N rounds of start, kill -9 at a random moment, rerun.

Each round starts ``ragbus ingest`` of F files (or ``ragbus poll`` of a feed of I items served
on 127.0.0.1), kills it with SIGKILL after a random delay, then reruns the same command to the
end. It prints, per round and in total, the documents expected and indexed, the duplicates
(expected: equal, 0) and each rerun's wall time.

    .venv/bin/python bench/crash_rounds.py --rounds 5 --mode ingest --files 300
    .venv/bin/python bench/crash_rounds.py --rounds 5 --mode poll --items 200
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.hostile.crash import census, kill_when, start, write_corpus  # noqa: E402
from tests.support import Site, article_html, rss, run_cli, serve_site, topic_paragraphs  # noqa: E402


def _round(mode: str, n: int, max_kill_s: float, rng: random.Random, work: Path, site: Site | None) -> dict:
    home = work / "home"
    if mode == "ingest":
        docs = work / "docs"
        write_corpus(docs, n)
        command = ["ingest", str(docs), "--timeout", "1800"]
    else:
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml")
        command = ["poll", "--timeout", "1800"]
    kill_at = rng.uniform(0.2, max_kill_s)
    killed_after = kill_when(start(home, *command), home, after_s=kill_at, limit_s=max_kill_s + 5)
    indexed_at_kill = census(home)["documents"]
    started = time.monotonic()
    rerun = run_cli(home, *command, check=False, timeout=3600)
    rerun_s = time.monotonic() - started
    counted = census(home)
    return {"expected": n, "kill_s": killed_after, "indexed_at_kill": indexed_at_kill,
            "indexed": counted["documents"], "duplicates": counted["duplicates"],
            "rerun_s": rerun_s, "rerun_exit": rerun.returncode}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", choices=("ingest", "poll"), default="ingest")
    parser.add_argument("--files", type=int, default=300, help="files per ingest round")
    parser.add_argument("--items", type=int, default=200, help="items of the feed per poll round")
    parser.add_argument("--max-kill-s", type=float, default=30.0, help="kill at a random moment up to this")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    n = args.files if args.mode == "ingest" else args.items
    rows = []
    site = Site()
    with serve_site(site):
        if args.mode == "poll":
            items = []
            for i in range(n):
                site.put(f"/p{i}.html", article_html(f"Post {i}", topic_paragraphs(f"item{i}", 3, seed=i)))
                items.append({"title": f"Post {i}", "path": f"/p{i}.html", "guid": f"g{i}"})
            site.put("/feed.xml", rss(site.base, items), "application/rss+xml")
        for r in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory(prefix="ragbus-crash-") as tmp:
                row = _round(args.mode, n, args.max_kill_s, rng, Path(tmp), site)
            rows.append(row)
            print(f"round {r}: killed after {row['kill_s']:.1f} s ({row['indexed_at_kill']} indexed then); "
                  f"rerun exit {row['rerun_exit']} in {row['rerun_s']:.1f} s; expected {row['expected']}, "
                  f"indexed {row['indexed']}, duplicates {row['duplicates']}", flush=True)
    expected = sum(r["expected"] for r in rows)
    indexed = sum(r["indexed"] for r in rows)
    duplicates = sum(r["duplicates"] for r in rows)
    print(f"\nmode {args.mode}: rounds {len(rows)}, documents expected {expected}, documents indexed {indexed}, "
          f"duplicates {duplicates}")
    print("rerun wall times (s): " + ", ".join(f"{r['rerun_s']:.1f}" for r in rows))
    ok = expected == indexed and duplicates == 0 and all(r["rerun_exit"] == 0 for r in rows)
    print("OK: every document indexed exactly once" if ok else "NOT OK")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
