"""What reading a long PDF through Document AI's layout parser costs on this side (issue 31, item 3).
Prints Markdown.

A PDF of --copies x fontconfig's 15-page manual (tests/data/formats) is
(a) cut into pieces of 15 pages (shared/formats/pdf_pieces.py) in a child process: seconds,
    pieces, bytes sent, and the child's peak RSS (VmHWM);
(b) read whole by the cleaner's reading (the bounded child process) with RAGBUS_PDF_READER=documentai
    against the stand-in on 127.0.0.1 (tests/integration/fake_documentai.py, which answers each
    piece from the piece's own text in this process), and with the local reader, in the same run:
    seconds, passages, pages holding a passage. The stand-in's own work is inside (b)'s figure; a
    real service answers in its own time, which this does not measure.

    python bench/documentai_pieces.py --copies 67
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.cleaner.handler import read_content  # noqa: E402
from shared.contract.config import load_settings  # noqa: E402
from tests.integration.fake_documentai import PROCESSOR, FakeDocumentAI, pdf_of_pages  # noqa: E402

MANUAL = ROOT / "tests" / "data" / "formats" / "fontconfig-user.pdf"

_SPLIT = """
import sys, time
from shared.formats.passages import Reading
from shared.formats.pdf_pieces import PdfPieces
raw = open(sys.argv[1], "rb").read()
started = time.monotonic()
count = sent = 0
with PdfPieces(raw, pages=15, max_bytes=20 * 1024 * 1024, max_pages=100000, reading=Reading()) as pdf:
    for piece in pdf.pieces():
        count += 1
        sent += len(piece.data)
seconds = time.monotonic() - started
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(count, sent, seconds, peak)
"""


def long_pdf(copies: int) -> bytes:
    return pdf_of_pages(MANUAL.read_bytes(), list(range(15)) * copies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=67, help="copies of the 15-page manual (67: 1,005 pages)")
    args = parser.parse_args()
    raw = long_pdf(args.copies)
    pages = 15 * args.copies
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.pdf"
        path.write_bytes(raw)
        done = subprocess.run([sys.executable, "-c", _SPLIT, str(path)], capture_output=True, text=True, check=True,
                              cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        count, sent, seconds, peak_kb = done.stdout.split()
    print(f"PDF of {pages} pages, {len(raw) / 1e6:.1f} MB\n")
    print("| | seconds | result | peak RSS |")
    print("|---|---|---|---|")
    print(f"| cut into pieces of 15 pages | {float(seconds):.1f} | {count} pieces, {int(sent) / 1e6:.0f} MB sent "
          f"| {int(peak_kb) / 1024:.0f} MB |")
    common = {"RAGBUS_PARSE_SECONDS": "3600", "RAGBUS_MAX_PAGES": str(pages)}
    with FakeDocumentAI() as service:
        for name, env in (("read by the layout parser (stand-in)",
                           {"RAGBUS_PDF_READER": "documentai", "RAGBUS_DOCUMENTAI_PROCESSOR": PROCESSOR,
                            "RAGBUS_DOCUMENTAI_ENDPOINT": service.url}),
                          ("read by PDFium (local)", {})):
            settings = load_settings({**common, **env})
            started = time.monotonic()
            reading = read_content(raw, "application/pdf", "file:///long.pdf", settings)
            elapsed = time.monotonic() - started
            with_text = len({p.position["page"] for p in reading.passages})
            print(f"| {name} | {elapsed:.1f} | {len(reading.passages)} passages on {with_text} of {pages} pages "
                  "| (child process) |")


if __name__ == "__main__":
    main()
