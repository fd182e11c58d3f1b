"""Temporal questions: hit@1 with the question's time read as a date filter, against words alone.

A set written for this benchmark: 54 dated release notes of five products over two years
(2025-01 .. 2026-11; one product quieter, its last release in April 2026), each product's notes
alike in wording and differing in version, date and one feature, the date in each note's metadata header as the cleaner writes it; and 38 questions
with relative or absolute time ("most recently", "last month", "last week", "in March 2025",
"since September"), each with the note that answers it. The clock is fixed at 2026-11-26.

Three ways to search each question with the real local index and the packaged MiniLM embedder:

- ``words``: the question as typed;
- ``month/year``: the question plus the current month and year, what the transformer added for
  temporal questions before the date filter (and the NVIDIA-blog system ragbus was specified from does);
- ``filter``: the question with its time words read as a published-date range
  (shared.query.temporal), widened as the retriever widens it when it leaves nothing on the
  question's topic.

Figures: hit@1 (the answering note ranked first) and key fact@1 (the top chunk states the
note's feature, what an extractive answer would quote).

``--loop`` runs the same set (and nine questions in German, French and Spanish, reported apart)
through the whole system instead: the notes are served as an RSS feed
on 127.0.0.1 (each item's pubDate, and the date on each article page), polled and ingested by the
embedded runtime (fetch, clean, chunk, embed, index), and every question is asked through
transform -> retrieve -> grade -> synthesize with the offline model, twice: with the time read as a
date filter (the default) and with ``RAGBUS_TIME_FILTER=0`` (time words searched as words, with the
month and year the model adds). The runtime's clock starts at the set's clock. Scored on the
answer: key facts (the answering note's feature stated; for "the latest X release" its version),
key facts + the answering note cited, and hit@1 of the final iteration's contexts.

    python bench/temporal.py            # prints the table (search only)
    python bench/temporal.py --json
    python bench/temporal.py --loop     # the full loop over the served feed (a few minutes)
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.retriever.handler import QueryHits, best_cosine, on_topic  # noqa: E402
from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.adapters.local.index import HybridIndex  # noqa: E402
from shared.contract.filters import Filters  # noqa: E402
from shared.contract.ports import Chunk, embed_queries  # noqa: E402
from shared.contract.text import with_header  # noqa: E402
from shared.query.temporal import newest_first, read_time  # noqa: E402
from tests.support import Site, serve_site  # noqa: E402

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
# A quieter product, one release a quarter until April 2026: its "latest" is older than the 90 days
# "latest" looks back first, so the loop has to widen the range (and the record says so).
QUIET = ("NVSHMEM", ["device-initiated puts", "IBGDA transport", "team-based collectives",
                     "CUDA graph capture of collectives", "host proxy removal", "multi-node NVLink support"])


@dataclass(frozen=True)
class Note:
    doc: str
    product: str
    version: str
    published: date
    feature: str

    def paragraphs(self) -> list[str]:
        return [
            # The lead sentence names the release and what it adds, as release-note posts do; the offline
            # reader quotes a lead sentence, and with the version alone in it ("X 2.2 is now available.
            # This release adds ...") its answers named the right release but not the feature.
            f"{self.product} {self.version} is now available and adds {self.feature}.",
            f"This release of {self.product} also carries the usual fixes. As in every {self.product} release, performance improves across GPU generations and the "
            f"documentation lists the changes for developers upgrading from the previous version. "
            f"Download {self.product} {self.version} from the developer site.",
        ]

    @property
    def title(self) -> str:
        return f"{self.product} {self.version} release"

    def text(self) -> str:
        return with_header(self.title, self.published.isoformat(), FEED, " ".join(self.paragraphs()))


def notes() -> list[Note]:
    out = []
    for p, (product, features) in enumerate(PRODUCTS.items()):
        for i, feature in enumerate(features):
            month = 2 * i + (p % 2)
            year, m = _MONTHS[min(month, len(_MONTHS) - 1)]
            day = 5 + 4 * p if (year, m) != (2026, 11) else 16 + 2 * p
            out.append(Note(f"{product.lower()}-{i}", product, f"{2 + i // 10}.{i % 10 + p}", date(year, m, day),
                            feature))
    product, features = QUIET
    for i, feature in enumerate(features):
        year, m = _MONTHS[3 * i]
        out.append(Note(f"{product.lower()}-{i}", product, f"3.{i}", date(year, m, 12), feature))
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
        for note in (items[i] for i in (1, 4, 7) if i < len(items)):
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


_MONTH_NAMES = {
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
           "novembre", "décembre"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
           "noviembre", "diciembre"],
}


def questions_in_other_languages(corpus: list[Note]) -> list[tuple[str, str]]:
    """The offline provider's other languages (German, French, Spanish): three questions each, the
    newest release, a named month and last week or last month, each with the note that answers it."""
    by_product: dict[str, list[Note]] = {}
    for note in sorted(corpus, key=lambda n: n.published):
        by_product.setdefault(note.product, []).append(note)
    newest = {p: items[-1] for p, items in by_product.items()}
    last_month = {p: n for p, items in by_product.items() for n in items if (n.published.year, n.published.month) == (2026, 10)}
    last_week = {p: n for p, items in by_product.items() for n in items if 0 <= (NOW.date() - n.published).days < 8}

    def month(language: str, note: Note) -> str:
        name = _MONTH_NAMES[language][note.published.month - 1]
        return f"{name} de {note.published.year}" if language == "es" else f"{name} {note.published.year}"

    tensorrt, cudnn, cutlass = by_product["TensorRT"][4], by_product["cuDNN"][1], by_product["CUTLASS"][7]
    return [
        ("Was ist die neueste NCCL-Version?", newest["NCCL"].doc),
        (f"Was hat der Blog im {month('de', tensorrt)} über TensorRT geschrieben?", tensorrt.doc),
        ("Was wurde letzte Woche über cuDNN angekündigt?", last_week["cuDNN"].doc),
        ("Quelle est la dernière version de CUTLASS ?", newest["CUTLASS"].doc),
        ("Qu'a annoncé le blog sur TensorRT le mois dernier ?", last_month["TensorRT"].doc),
        (f"Qu'a dit le blog sur cuDNN en {month('fr', cudnn)} ?", cudnn.doc),
        ("¿Cuál es la versión más reciente de NVSHMEM?", newest["NVSHMEM"].doc),
        ("¿Qué anunció el blog sobre CUTLASS el mes pasado?", last_month["CUTLASS"].doc),
        (f"¿Qué dijo el blog sobre CUTLASS en {month('es', cutlass)}?", cutlass.doc),
    ]


# ------------------------------------------------------------------ the full loop over a served feed


class SetClock:
    """The real clock moved to the set's clock (NOW) when the run starts: the questions' "last week"
    and "since September" mean what the set means, on whatever day the benchmark runs."""

    def __init__(self, start: datetime) -> None:
        self.start, self.started = start, time.monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=time.monotonic() - self.started)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def feed_xml(corpus: list[Note], base: str) -> bytes:
    items = "".join(
        f"<item><title>{html.escape(n.title)}</title><link>{base}/posts/{n.doc}.html</link>"
        f"<guid isPermaLink=\"false\">temporal:{n.doc}</guid>"
        f"<pubDate>{format_datetime(datetime(n.published.year, n.published.month, n.published.day, 9, tzinfo=UTC))}"
        f"</pubDate><description>{html.escape(n.paragraphs()[0])}</description></item>"
        for n in sorted(corpus, key=lambda n: n.published, reverse=True))
    return (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><rss version=\"2.0\"><channel><title>GPU library "
            f"release notes</title><link>{base}/</link><description>Release notes</description>{items}"
            f"</channel></rss>").encode()


def page_html(note: Note) -> bytes:
    when = note.published
    body = "".join(f"<p>{html.escape(p)}</p>" for p in note.paragraphs())
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(note.title)}"
            f"</title><meta property=\"article:published_time\" content=\"{when.isoformat()}T09:00:00Z\"></head>"
            f"<body><article><h1>{html.escape(note.title)}</h1><p class=\"byline\">Published "
            f"<time datetime=\"{when.isoformat()}\">{when.strftime('%B')} {when.day}, {when.year}</time></p>"
            f"{body}</article></body></html>").encode()


@contextmanager
def serve_notes(corpus: list[Note]) -> Iterator[str]:
    """The notes as an RSS feed and article pages on 127.0.0.1 (a free port); yields the feed's URL."""
    site = Site()
    with serve_site(site):
        site.put("/feed.xml", feed_xml(corpus, site.base), "application/rss+xml")
        for note in corpus:
            site.put(f"/posts/{note.doc}.html", page_html(note))
        yield f"{site.base}/feed.xml"


def key_facts(note: Note) -> dict[str, str]:
    """What an answer from the right note states: which release (its version) and what it added."""
    return {"release": f"{note.product} {note.version}", "feature": note.feature}


def states(answer: str, fact: str) -> bool:
    # a version must not match a longer one ("NCCL 2.1" inside "NCCL 2.11")
    return re.search(rf"(?<![\w.]){re.escape(fact.lower())}(?![\w]|\.\d)", answer.lower()) is not None


def ask_through_the_loop(corpus: list[Note], groups: dict[str, list[tuple[str, str]]], *, timeout_s: float) -> dict:
    """Serve the notes, poll the feed into a fresh home, ask every question of every group with and
    without the date filter; figures per group."""
    from shared.contract.config import load_settings
    from shared.contract.messages import FeedPollRequested
    from shared.ingest.listings import add_listing
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from shared.runtime.stages import CONSUMERS, QUERY_STAGES

    by_doc = {n.doc: n for n in corpus}
    out: dict = {"runs": {}}
    with tempfile.TemporaryDirectory(prefix="ragbus-temporal-") as home, serve_notes(corpus) as feed_url:
        settings = load_settings({"RAGBUS_HOME": home, "RAGBUS_TRACING": "0"}).with_(allow_loopback=True)
        clock = SetClock(NOW)
        system = build_local(settings, clock=clock)
        started = time.perf_counter()
        with LocalRuntime(system.deps, system.bus) as runtime:
            add_listing(system.deps.state, feed_url, allow_loopback=True, now=clock.now())
            system.deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed_url],
                                                            requested_at=clock.now()))
            if not runtime.wait_idle(600):
                raise SystemExit("the feed was not ingested within 10 minutes")
        out["ingest_s"] = round(time.perf_counter() - started, 1)
        index = system.deps.index
        out["chunks"] = index.count_chunks()
        out["documents_dated"] = len(_published_dates(system.deps))
        for name, time_filter in (("with date filter", True), ("without (words + month/year)", False)):
            run_settings = settings.with_(time_filter=time_filter)
            runner = build_local(run_settings, clock=clock, index=index, embedder=system.deps.embedder)
            rows = []
            asked = [(group, q, gold) for group, pairs in groups.items() for q, gold in pairs]
            with LocalRuntime(runner.deps, runner.bus, [c for c in CONSUMERS if c.stage in QUERY_STAGES]):
                for group, question, gold in asked:
                    record = wait_for_query(runner.deps, submit_query(runner.deps, question).id, timeout_s)
                    note = by_doc[gold]
                    final = record.entry(record.answered_from_iteration) if record.answered_from_iteration \
                        is not None else (record.iterations[-1] if record.iterations else None)
                    top = final.contexts[0].get("url") if final and final.contexts else None
                    facts = {name: states(record.answer or "", fact) for name, fact in key_facts(note).items()}
                    cited = {c.get("url") for c in record.citations}
                    rows.append({"group": group, "question": question, "gold": gold, "status": record.status,
                                 "outcome": record.outcome, "hit": _is_note(top, gold),
                                 "release": facts["release"], "feature": facts["feature"],
                                 "key_facts": all(facts.values()), "cited_gold": any(_is_note(u, gold) for u in cited),
                                 "time_filter": (record.time_filter or {}).get("phrase"),
                                 "widened": (record.time_filter or {}).get("widened", []),
                                 "answer": (record.answer or "")[:300]})
            out["runs"][name] = {group: _scored([r for r in rows if r["group"] == group]) for group in groups}
        index.close()
    return out


def _scored(rows: list[dict]) -> dict:
    n = len(rows)
    return {
        "questions": n,
        "hit@1": round(sum(r["hit"] for r in rows) / n, 3),
        "release_named": round(sum(r["release"] for r in rows) / n, 3),
        "feature_stated": round(sum(r["feature"] for r in rows) / n, 3),
        "key_facts": round(sum(r["key_facts"] for r in rows) / n, 3),
        "right_note_cited": round(sum(r["cited_gold"] for r in rows) / n, 3),
        "answered": sum(r["outcome"] in ("answered", "answered_with_caveat") for r in rows),
        "rows": rows,
    }


def _published_dates(deps) -> set[str]:
    from shared.contract import state_collections

    return {str(d["published"])[:10] for d in deps.state.list(state_collections.DOCUMENTS) if d.get("published")}


def _is_note(url: str | None, doc: str) -> bool:
    return bool(url) and url.endswith(f"/posts/{doc}.html")


def print_loop(result: dict) -> None:
    print(f"full loop: {result['chunks']} chunks from the served feed ({result['documents_dated']} distinct "
          f"published dates), ingested in {result['ingest_s']} s; offline model")
    print(f"{'asked':<30}{'questions':<14}{'hit@1':>7}{'release':>9}{'feature':>9}{'both':>7}{'cited':>7}"
          f"{'answered':>10}")
    for name, groups in result["runs"].items():
        for group, run in groups.items():
            print(f"{name:<30}{group:<14}{run['hit@1']:>7.3f}{run['release_named']:>9.3f}{run['feature_stated']:>9.3f}"
                  f"{run['key_facts']:>7.3f}{run['right_note_cited']:>7.3f}{run['answered']:>7}/{run['questions']}")
    print("release: the answer names the answering note's version; feature: it states what that release "
          "added; both: the answer's key facts; cited: the answering note among its citations")
    for name, groups in result["runs"].items():
        for run in groups.values():
            for r in run["rows"]:
                if not (r["hit"] and r["key_facts"]):
                    widened = f", widened {'/'.join(r['widened'])}" if r["widened"] else ""
                    print(f"  {name}: {r['question']!r} (read {r['time_filter']!r}{widened}) hit={r['hit']} "
                          f"-> {r['answer'][:100]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    parser.add_argument("--loop", action="store_true",
                        help="ask through the whole system over the notes served as a feed on 127.0.0.1")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one question may take (--loop)")
    args = parser.parse_args()
    corpus = notes()
    asked = questions(corpus)
    if args.loop:
        logging.basicConfig(level=logging.WARNING)
        groups = {"English": asked, "de / fr / es": questions_in_other_languages(corpus)}
        result = ask_through_the_loop(corpus, groups, timeout_s=args.timeout)
        if args.json:
            print(json.dumps({"notes": len(corpus), **result}, indent=2))
        else:
            print_loop(result)
        return
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
                vector = embed_queries(embedder, [text])[0]
                # widened as the retriever widens: until the range holds something on the question's topic
                anywhere = (best_cosine([QueryHits("question", text, index.search(text, vector, 5))])
                            if current is not None and current.window_days else None)
                while True:
                    f = (Filters(since=current.since, until=current.until) if current is not None else None)
                    hits = index.search(text, vector, 5, filters=f) if f is not None else index.search(text, vector, 5)
                    if current is None or on_topic([QueryHits("question", text, hits)], anywhere):
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
