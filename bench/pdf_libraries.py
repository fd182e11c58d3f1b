"""Compare PDF text extractors on the same real PDFs (issue 31): text fidelity, two-column
reading order, speed, peak memory, install size.

Fidelity: word recall and precision (multiset) of each extractor's text against the plain-text
edition Debian ships beside the same PDF (maint-guide.en.txt.gz, policy.txt.gz). Reading order:
a two-column page built from real text (the first paragraphs of the Debian Policy), where the
extractor must give the left column before the right; scored as the share of consecutive word
pairs of the source that stay consecutive. Each extractor runs in its own process (peak RSS).

    python bench/pdf_libraries.py PDF_DIR [--libs pypdfium2,pypdf,pdfplumber]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.hostile.bad_files import pdf, text_page

WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")

EXTRACT = {
    "pypdfium2": """
import pypdfium2 as pdfium
doc = pdfium.PdfDocument(path)
pages = []
for i in range(len(doc)):
    page = doc[i]
    tp = page.get_textpage()
    pages.append(tp.get_text_bounded())
    tp.close(); page.close()
""",
    "pypdf": """
from pypdf import PdfReader
pages = [p.extract_text() or "" for p in PdfReader(path).pages]
""",
    "pdfplumber": """
import pdfplumber
with pdfplumber.open(path) as pdf:
    pages = [p.extract_text() or "" for p in pdf.pages]
""",
}

CHILD = """
import json, resource, sys, time
path = sys.argv[1]
start = time.perf_counter()
{code}
elapsed = time.perf_counter() - start
print(json.dumps({{"pages": len(pages), "seconds": elapsed,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "text": "\\n".join(pages)}}))
"""


def run(lib: str, path: Path, python: str) -> dict:
    out = subprocess.run([python, "-c", CHILD.format(code=EXTRACT[lib]), str(path)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout)


def words(text: str) -> Counter:
    return Counter(w.lower() for w in WORD.findall(text.replace("-\n", "")))


def fidelity(text: str, truth: str) -> tuple[float, float]:
    got, want = words(text), words(truth)
    common = sum((got & want).values())
    return common / max(1, sum(want.values())), common / max(1, sum(got.values()))


def pair_order(text: str, truth: str) -> float:
    want = [w.lower() for w in WORD.findall(truth)]
    got = [w.lower() for w in WORD.findall(text)]
    following = {}
    for a, b in zip(got, got[1:], strict=False):
        following.setdefault(a, set()).add(b)
    pairs = list(zip(want, want[1:], strict=False))
    return sum(1 for a, b in pairs if b in following.get(a, ())) / max(1, len(pairs))


def two_column_pdf(text: str) -> bytes:
    """A one-page PDF (Helvetica 9 pt) setting ``text`` in two columns: left column first."""
    lines, line = [], ""
    for word in text.split():
        if len(line) + len(word) + 1 > 48:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines = [*lines, line][:140]
    half = (len(lines) + 1) // 2
    left, right = (text_page(*column).replace(b"/F1 11 Tf 14 TL 50 780", b"/F1 9 Tf 11 TL %d 780" % x)
                   for x, column in ((50, lines[:half]), (320, lines[half:])))
    return pdf([left + b" " + right])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pdf_dir", type=Path)
    parser.add_argument("--libs", default="pypdfium2,pypdf,pdfplumber")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    libs = args.libs.split(",")
    truths = {"maint-guide.en.pdf": "/usr/share/doc/maint-guide/maint-guide.en.txt.gz",
              "policy.pdf": "/usr/share/doc/debian-policy/policy.txt.gz"}
    policy = gzip.open(truths["policy.pdf"], "rt").read()
    column_text = " ".join(policy.split()[400:1100])
    two_column = args.pdf_dir / "two-column-policy.pdf"
    two_column.write_bytes(two_column_pdf(column_text))
    totals = {lib: {"pages": 0, "seconds": 0.0, "rss_mb": 0.0} for lib in libs}
    for path in sorted(args.pdf_dir.glob("*.pdf")):
        row = {"file": path.name}
        for lib in libs:
            result = run(lib, path, args.python)
            if "error" in result:
                row[lib] = result["error"][:80]
                continue
            t = totals[lib]
            t["pages"] += result["pages"]
            t["seconds"] += result["seconds"]
            t["rss_mb"] = max(t["rss_mb"], result["rss_mb"])
            cell = {"pages/s": round(result["pages"] / max(result["seconds"], 1e-9), 1),
                    "rss_mb": round(result["rss_mb"])}
            if path.name in truths:
                recall, precision = fidelity(result["text"], gzip.open(truths[path.name], "rt").read())
                cell.update(recall=round(recall, 3), precision=round(precision, 3))
            if path.name == two_column.name:
                cell["order"] = round(pair_order(result["text"], column_text), 3)
            row[lib] = cell
        print(json.dumps(row), flush=True)
    for lib, t in totals.items():
        print(json.dumps({"total": lib, "pages": t["pages"],
                          "pages/s": round(t["pages"] / max(t["seconds"], 1e-9), 1),
                          "peak_rss_mb": round(t["rss_mb"])}), flush=True)


if __name__ == "__main__":
    main()
