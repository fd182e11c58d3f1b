"""Temporal questions: hit@1 with the question's time read as a date filter, against words alone.

A set written for this benchmark: 48 dated release notes of four products over two years
(2025-01 .. 2026-11), each product's notes alike in wording and differing in version, date and
one feature, the date in each note's metadata header as the cleaner writes it; and 32 questions
with relative or absolute time ("most recently", "last month", "last week", "in March 2025",
"since September"), each with the note that answers it. The clock is fixed at 2026-11-26.

Three ways to search each question with the real local index and the packaged MiniLM embedder:

- ``words``: the question as typed;
- ``month/year``: the question plus the current month and year, what the transformer added for
  temporal questions before the date filter (and the NVIDIA-blog system ragbus was specified from does);
- ``filter``: the question with its time words read as a published-date range
  (shared.query.temporal), widened as the retriever widens it when it leaves nothing.

Figures: hit@1 (the answering note ranked first) and key fact@1 (the top chunk states the
note's feature, what an extractive answer would quote).

    python bench/temporal.py            # prints the table
    python bench/temporal.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.adapters.local.index import HybridIndex  # noqa: E402
from shared.contract.filters import Filters  # noqa: E402
from shared.contract.ports import Chunk, embed_queries  # noqa: E402
from shared.contract.text import with_header  # noqa: E402
from shared.query.temporal import newest_first, read_time  # noqa: E402

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FEED = "https://blog.example.com/feed.xml"

PRODUCTS = {
    "NCCL": ["tree all-reduce for small messages", "PAT algorithm for all-gather", "user buffer registration",
             "NVLink SHARP offload", "lazy connection setup", "IB SHARP v3 support", "profiler plugin API",
             "symmetric memory kernels", "RAS error reporting", "cost model for H200", "window registration",
             "copy-engine collectives"],
    "TensorRT": ["FP8 attention kernels", "weight streaming", "strongly typed networks", "INT4 AWQ quantization",
                 "refit of engine weights", "multi-device inference", "debug tensors", "FP4 GEMM on Blackwell",
                 "plugin registry v3", "tiling optimization", "runtime cache sharing", "dynamic shape kernels"],
    "cuDNN": ["flash attention backward", "graph API fusion", "FP8 convolution", "paged attention",
              "block-scaled matmul", "ragged tensors", "SDPA with dropout", "RMSNorm fusion",
              "deterministic backward", "mixed-input GEMM", "variable sequence lengths", "MXFP8 support"],
    "CUTLASS": ["grouped GEMM", "stream-K scheduling", "CuTe DSL in Python", "FP8 blockwise scaling",
                "sparse tensor cores", "distributed GEMM", "Blackwell TMEM support", "epilogue visitor tree",
                "ping-pong kernels", "mixed-precision GEMM", "EVT for SM100", "persistent kernels"],
}
# Each product's release dates: one every two months, offset per product, the newest within the last weeks.
_MONTHS = [(2025, m) for m in range(1, 13)] + [(2026, m) for m in range(1, 12)]


@dataclass(frozen=True)
class Note:
    doc: str
    product: str
    version: str
    published: date
    feature: str

    def text(self) -> str:
        body = (
            f"{self.product} {self.version} is now available. This release of {self.product} adds "
            f"{self.feature}. As in every {self.product} release, performance improves across GPU "
            f"generations and the documentation lists the changes for developers upgrading from the "
            f"previous version. Download {self.product} {self.version} from the developer site."
        )
        return with_header(f"{self.product} {self.version} release", self.published.isoformat(), FEED, body)


def notes() -> list[Note]:
    out = []
    for p, (product, features) in enumerate(PRODUCTS.items()):
        for i, feature in enumerate(features):
            month = 2 * i + (p % 2)
            year, m = _MONTHS[min(month, len(_MONTHS) - 1)]
            day = 5 + 4 * p if (year, m) != (2026, 11) else 16 + 2 * p
            out.append(Note(f"{product.lower()}-{i}", product, f"{2 + i // 10}.{i % 10 + p}", date(year, m, day),
                            feature))
    return out


def questions(corpus: list[Note]) -> list[tuple[str, str]]:
    """(question, id of the note that answers it)."""
    by_product: dict[str, list[Note]] = {}
    for note in corpus:
        by_product.setdefault(note.product, []).append(note)
    out: list[tuple[str, str]] = []
    month_name = lambda d: d.strftime("%B %Y")  # noqa: E731
    for product, items in by_product.items():
        items.sort(key=lambda n: n.published)
        newest = items[-1]
        out.append((f"What was announced most recently about {product}?", newest.doc))
        out.append((f"What is the latest {product} release?", newest.doc))
        for note in (items[1], items[4], items[7]):
            out.append((f"What did the blog say about {product} in {month_name(note.published)}?", note.doc))
        last_month = [n for n in items if (n.published.year, n.published.month) == (2026, 10)]
        if last_month:
            out.append((f"What did the blog announce about {product} last month?", last_month[0].doc))
        last_week = [n for n in items if 0 <= (NOW.date() - n.published).days < 8]
        if last_week:
            out.append((f"What did the blog announce about {product} last week?", last_week[0].doc))
        out.append((f"What changed about {product} since {newest.published.strftime('%B')}?", newest.doc))
        out.append((f"What new feature did {product} get in its {month_name(items[2].published)} release?",
                    items[2].doc))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    args = parser.parse_args()
    corpus = notes()
    asked = questions(corpus)
    facts = {n.doc: n.feature for n in corpus}
    embedder = OnnxMiniLMEmbedder()
    with tempfile.TemporaryDirectory() as home:
        index = HybridIndex(Path(home) / "index", embedder.dimension)
        vectors = embedder.embed([n.text() for n in corpus])
        for note, vector in zip(corpus, vectors, strict=True):
            chunk = Chunk(chunk_id=f"{note.doc}:0", document_id=note.doc, ordinal=0, text=note.text(),
                          title=f"{note.product} {note.version} release", url=f"https://blog.example.com/{note.doc}",
                          published=note.published.isoformat(), source="feed", origin=FEED)
            index.upsert(note.doc, [chunk], vector.reshape(1, -1))
        rows = []
        for question, gold in asked:
            reading = read_time(question, NOW)
            month_year = f"{question} {NOW.strftime('%B %Y')}" if reading is not None and reading.window_days else question
            row = {"question": question, "gold": gold, "read": reading.phrase if reading else None}
            for name, text, current in (("words", question, None), ("month/year", month_year, None),
                                        ("filter", question, reading)):
                hits = []
                while True:
                    f = (Filters(since=current.since, until=current.until) if current is not None else None)
                    vector = embed_queries(embedder, [text])[0]
                    hits = index.search(text, vector, 5, filters=f) if f is not None else index.search(text, vector, 5)
                    if hits or current is None:
                        break
                    current = current.wider(NOW)
                if name == "filter" and reading is not None and reading.newest:
                    hits = newest_first(hits)
                top = hits[0].chunk if hits else None
                row[name] = {"top": top.document_id if top else None,
                             "hit": bool(top and top.document_id == gold),
                             "fact": bool(top and facts[gold] in top.text)}
            rows.append(row)
        index.close()
    summary = {name: {"hit@1": round(sum(r[name]["hit"] for r in rows) / len(rows), 3),
                      "key_fact@1": round(sum(r[name]["fact"] for r in rows) / len(rows), 3)}
               for name in ("words", "month/year", "filter")}
    read = sum(1 for r in rows if r["read"])
    if args.json:
        print(json.dumps({"notes": len(corpus), "questions": len(rows), "time_read": read, "summary": summary,
                          "rows": rows}, indent=2))
        return
    print(f"{len(corpus)} notes, {len(rows)} questions ({read} with time words read), clock {NOW.date()}")
    print(f"{'search':<12}{'hit@1':>8}{'key fact@1':>12}")
    for name, figures in summary.items():
        print(f"{name:<12}{figures['hit@1']:>8.3f}{figures['key_fact@1']:>12.3f}")
    misses = [r for r in rows if not r["filter"]["hit"]]
    for r in misses:
        print(f"  filter missed: {r['question']!r} (read {r['read']!r}) -> {r['filter']['top']}, wanted {r['gold']}")


if __name__ == "__main__":
    main()
