"""Sitemap reading bounds (not a test): one poll of a hostile sitemap, its wall time and peak RSS.

Cases, each served on 127.0.0.1 and polled once in a fresh process (so the peak RSS is that
poll's alone, imports included):

- ``index``: a sitemap index of 50 children, each 50,000 URLs (the protocol's most per file):
  2.5 M pages in all, which the poller refuses; how much it reads before it does;
- ``gzip``: one 50,000-URL sitemap as ``sitemap.xml.gz`` (read whole: pages announced);
- ``bomb``: a gzip file of 200 MB of XML in about 200 KB (refused while decompressing).

    .venv/bin/python bench/sitemap_bounds.py [--repo DIR] [--cases index gzip bomb]

``--repo`` measures another checkout's poller (e.g. an older main) on the same server.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from tests.hostile.servers import hostile_server  # noqa: E402

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from services.feed_poller.handler import poll_listing
from shared.adapters.http_fetch import SafeFetcher
from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.state import SqliteStateStore
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.ingest.listings import add_listing
from tests.fakes import FakeClock, RecordingPublisher

home, url = sys.argv[2], sys.argv[3]
state = SqliteStateStore(home + "/state.db")
clock = FakeClock()
add_listing(state, url, allow_loopback=True, now=clock.now(), kind="sitemap")
fetcher = SafeFetcher(allow_loopback=True, timeout_s=30.0, retries=0, host_rate=1000.0, host_concurrency=8)
publisher = RecordingPublisher()
started = time.perf_counter()
report = poll_listing(url, Deps(Settings(home=home, allow_loopback=True, max_items_per_poll=10), state=state,
                                blobs=FolderBlobStore(home + "/blobs"), publisher=publisher, fetcher=fetcher,
                                clock=clock))
print(json.dumps({"seconds": round(time.perf_counter() - started, 2),
                  # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so it would report this
                  # bench's own peak (building the bomb) as the child's
                  "peak_rss_mb": round(int(next(line.split()[1] for line in open("/proc/self/status")
                                                 if line.startswith("VmHWM:"))) / 1024),
                  "outcome": report.outcome, "entries": report.entries,
                  "error": (report.error or "")[:160]}))
"""


def urlset(base: str, n: int) -> bytes:
    rows = "".join(f"<url><loc>{base}/page-{i}.html</loc><lastmod>2026-10-01</lastmod></url>" for i in range(n))
    return f"<?xml version='1.0' encoding='UTF-8'?><urlset xmlns='{NS}'>{rows}</urlset>".encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="checkout whose poller is measured")
    parser.add_argument("--cases", nargs="+", default=["index", "gzip", "bomb"])
    args = parser.parse_args()
    with hostile_server() as site, tempfile.TemporaryDirectory() as work:
        full = urlset(site.base, 50_000)
        for n in range(50):  # each child lists its own 50,000 pages: 2.5 million in all
            site.put(f"/s{n}.xml", full.replace(b"/page-", f"/s{n}-page-".encode()), "application/xml")
        site.put("/index.xml", f"<?xml version='1.0'?><sitemapindex xmlns='{NS}'>"
                 + "".join(f"<sitemap><loc>{site.base}/s{n}.xml</loc></sitemap>" for n in range(50))
                 + "</sitemapindex>", "application/xml")
        site.put("/sitemap.xml.gz", gzip.compress(full), "application/x-gzip")
        bomb = gzip.compress(f"<urlset xmlns='{NS}'><!-- ".encode() + b" " * (200 * 1024 * 1024), compresslevel=9)
        site.put("/bomb.xml.gz", bomb, "application/x-gzip")
        paths = {"index": "/index.xml", "gzip": "/sitemap.xml.gz", "bomb": "/bomb.xml.gz"}
        print(f"poller of {args.repo}; one child of the index: {len(full):,} bytes; the bomb: {len(bomb):,} bytes")
        for case in args.cases:
            home = Path(work) / case
            home.mkdir()
            site.hits.clear()
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-c", _CHILD, str(args.repo), str(home), site.base + paths[case]],
                                  capture_output=True, text=True, cwd=args.repo, timeout=1800)
            figures = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {
                "failed": proc.stderr.strip().splitlines()[-1:]}
            children = sum(site.hits.get(f"/s{n}.xml", 0) for n in range(50))
            print(f"{case:6} {json.dumps(figures)} children fetched: {children}, "
                  f"wall {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
