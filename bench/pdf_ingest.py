"""PDF ingestion (issue 31): extraction speed, ingest ratio against the embedder alone, and peak
memory while a 1,000-page PDF is ingested. Prints Markdown.

(a) extraction alone: each PDF of the corpus through the cleaner's reading (a bounded child
    process per file, as ingestion does), pages per second; and PDFium's reader in-process;
(b) the corpus through `ingest_path` and the real embedded runtime (cleaner, indexer, MiniLM,
    hybrid index), against the embedder alone on the very same chunks, in the same run;
(c) peak RSS of the ingesting process while a 1,000-page PDF is ingested, against the same text
    ingested as a .txt in the same run; and the reading child's own peak (VmHWM of its image: the
    kernel's ru_maxrss of a child counts the RSS of the process it was forked from before exec,
    which is the ingesting process's, not the reader's).

The corpus: the PDFs Debian ships under /usr/share/doc (gzip-compressed ones decompressed into a
temporary folder), the first --files of them by name; tests/data/formats' PDF when there are none.

    python bench/pdf_ingest.py --files 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ingest_and_search import measure_ingest  # noqa: E402
from services.cleaner.handler import clean_content, format_limits  # noqa: E402
from shared.contract.config import load_settings  # noqa: E402
from shared.formats.passages import lay_out  # noqa: E402
from shared.formats.pdf import read_pdf  # noqa: E402
from shared.formats.registry import Limits, by_media_type  # noqa: E402
from shared.formats.sandbox import Bounds, request_payload  # noqa: E402
from tests.hostile.bad_files import many_pages  # noqa: E402

DEBIAN_PDFS = ["/usr/share/doc/fontconfig/fontconfig-user.pdf.gz", "/usr/share/doc/zlib1g-dev/crc-doc.1.0.pdf.gz",
               "/usr/share/doc/libtasn1-doc/libtasn1.pdf", "/usr/share/doc/debian-policy/fhs/fhs-3.0.pdf.gz",
               "/usr/share/doc/maint-guide/maint-guide.en.pdf", "/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz",
               "/usr/share/doc/nettle-dev/nettle.pdf.gz", "/usr/share/doc/debian-policy/policy.pdf.gz"]


def corpus(folder: Path, files: int) -> list[Path]:
    out = []
    for source in map(Path, DEBIAN_PDFS):
        if len(out) >= files or not source.exists():
            continue
        target = folder / source.name.removesuffix(".gz")
        target.write_bytes(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
        out.append(target)
    if not out:
        target = folder / "fontconfig-user.pdf"
        target.write_bytes((ROOT / "tests" / "data" / "formats" / "fontconfig-user.pdf").read_bytes())
        out.append(target)
    return out


def extraction(pdfs: list[Path]) -> dict[str, float]:
    pages, isolated_s, inline_s = 0, 0.0, 0.0
    for pdf in pdfs:
        raw = pdf.read_bytes()
        started = time.perf_counter()
        reading = read_pdf(raw, "application/pdf", "", Limits())
        inline_s += time.perf_counter() - started
        pages += len({p.position["page"] for p in reading.passages})
        started = time.perf_counter()
        clean_content(raw, "application/pdf", pdf.as_uri())
        isolated_s += time.perf_counter() - started
    return {"pages": pages, "inline_pps": pages / inline_s, "isolated_pps": pages / isolated_s}


PEAK = '''
import json, resource, sys, threading, time
sys.path.insert(0, sys.argv[3])
from bench.ingest_and_search import measure_ingest
from pathlib import Path
samples, done = [], threading.Event()
def sample():  # the process's RSS over time: tracemalloc sees nothing of ONNX Runtime's arena
    while not done.wait(0.2):
        samples.append(int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1024)
threading.Thread(target=sample, daemon=True).start()
result = measure_ingest(Path(sys.argv[1]), Path(sys.argv[2]), 1)
done.set()
result["self_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result["rss_mb"] = [samples[min(len(samples) - 1, len(samples) * i // 8)] for i in range(9)] if samples else []
print(json.dumps(result))
'''


def peak_rss(folder: Path, pages: int, suffix: str) -> dict[str, float]:
    """The big PDF (``suffix`` ".pdf"), or the text PDFium reads from it (".txt"), ingested by a
    fresh process: its peak RSS at the end of the ingest and after re-embedding for the ratio."""
    big = folder / f"big{suffix}"
    big.mkdir()
    raw = many_pages(pages)
    if suffix == ".txt":
        body, _ = lay_out(read_pdf(raw, "application/pdf", "", Limits(max_pages=pages)).passages)
        (big / f"register-{pages}.txt").write_text(body, encoding="utf-8")
    else:
        (big / f"register-{pages}.pdf").write_bytes(raw)
    done = subprocess.run([sys.executable, "-c", PEAK, str(big), str(folder / f"home{suffix}"), str(ROOT)],
                          capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "RAGBUS_MAX_PAGES": str(pages)})
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


CHILD = '''
import runpy, sys
try:
    runpy.run_module("shared.formats.sandbox", run_name="__main__")
finally:
    sys.stderr.write(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")))
'''


def reading_child_mb(pages: int) -> float:
    """The reading child's own peak on the big PDF, with the cleaner's request and bounds."""
    settings = load_settings({**os.environ, "RAGBUS_MAX_PAGES": str(pages)})
    payload = request_payload(by_media_type("application/pdf"), many_pages(pages), "application/pdf", "",
                              format_limits(settings), Bounds(memory_bytes=settings.parse_memory_mb * 1024 * 1024))
    done = subprocess.run([sys.executable, "-c", CHILD], input=payload, capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    status, value = json.loads(done.stdout)
    if status != "ok":
        raise RuntimeError(f"the reading child answered {status}: {value}")
    return int(done.stderr.decode().split("VmHWM:")[1].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=3, help="PDFs of the corpus (default 3)")
    parser.add_argument("--pages", type=int, default=1000, help="pages of the big PDF (default 1000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragbus-pdf-bench-") as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        pdfs = corpus(folder, args.files)
        speed = extraction(pdfs)
        ingest = measure_ingest(folder, Path(tmp) / "home", len(pdfs))
        peak = peak_rss(Path(tmp), args.pages, ".pdf")
        same_text = peak_rss(Path(tmp), args.pages, ".txt")
        child_mb = reading_child_mb(args.pages)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"PDF corpus: {', '.join(p.name for p in pdfs)} ({speed['pages']} pages with text); load {' '.join(load)}\n")
    print("| figure | value |\n|---|---|")
    print(f"| extraction, PDFium in-process | {speed['inline_pps']:.0f} pages/s |")
    print(f"| extraction, as ingestion reads (a bounded child per file) | {speed['isolated_pps']:.0f} pages/s |")
    print(f"| ingest, files -> indexed | {ingest['pipeline_s']:.1f} s ({ingest['chunks']} chunks, "
          f"{ingest['pipeline_cps']:.1f} chunks/s) |")
    print(f"| embedder alone, same chunks | {ingest['embed_s']:.1f} s ({ingest['embed_cps']:.1f} chunks/s) |")
    print(f"| ingest ratio (embedder alone / ingest) | {ingest['embed_s'] / ingest['pipeline_s']:.2f} |")
    print(f"| {args.pages}-page PDF: ingest | {peak['pipeline_s']:.1f} s, {peak['chunks']} chunks |")
    for label, key in (("at the end of the ingest", "ingest_rss_mb"), ("after re-embedding for the ratio", "self_mb")):
        print(f"| {args.pages}-page PDF: peak RSS, ingesting process, {label} | {peak[key]:.0f} MB "
              f"(the same text as .txt: {same_text[key]:.0f} MB) |")
    print(f"| {args.pages}-page PDF: peak RSS, reading child (its own VmHWM) | {child_mb:.0f} MB |")
    for label, run in (("PDF", peak), (".txt", same_text)):
        print(f"| RSS of the ingesting process at each eighth of its run (the ingest, then the embedder alone), {label} | "
              f"{' → '.join(f'{mb:.0f}' for mb in run['rss_mb'])} MB |")


if __name__ == "__main__":
    main()
