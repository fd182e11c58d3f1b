"""What finding tables costs PDF extraction (issue 31 item 2 against item 7): each PDF of the corpus
read in-process by ``read_pdf`` with table detection and with it switched off, interleaved, several
rounds; prints the pages per second of each and their ratio (the same run, the same machine load).

The corpus: the Debian manuals bench/pdf_ingest.py reads (those present), and the format set's PDFs.

    python bench/pdf_tables.py --rounds 3
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pdf_ingest import DEBIAN_PDFS  # noqa: E402
from shared.formats import pdf  # noqa: E402
from shared.formats.registry import Limits  # noqa: E402

DATASET = ROOT / "shared" / "tools" / "eval" / "datasets" / "formats" / "documents"


def corpus() -> list[bytes]:
    out = [gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
           for p in map(Path, DEBIAN_PDFS) if p.exists()]
    return out + [p.read_bytes() for p in sorted(DATASET.glob("*.pdf")) if "scan" not in p.name]


def timed(raws: list[bytes]) -> tuple[int, float]:
    pages, started = 0, time.perf_counter()
    for raw in raws:
        reading = pdf.read_pdf(raw, "application/pdf", "", Limits(ocr=False))
        pages += len({p.position["page"] for p in reading.passages})
    return pages, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    raws = corpus()
    find_tables = pdf.find_tables
    timed(raws)  # warm: fonts and code paths loaded once
    with_s = without_s = 0.0
    pages = 0
    for _ in range(args.rounds):
        pdf.find_tables = lambda *_args: []
        pages, seconds = timed(raws)
        without_s += seconds
        pdf.find_tables = find_tables
        _, seconds = timed(raws)
        with_s += seconds
    print(f"{len(raws)} PDFs, {pages} pages, {args.rounds} rounds")
    print(f"| extraction without table detection | {pages * args.rounds / without_s:.0f} pages/s |")
    print(f"| extraction with table detection | {pages * args.rounds / with_s:.0f} pages/s |")
    print(f"| time with / without | {with_s / without_s:.2f} |")


if __name__ == "__main__":
    main()
