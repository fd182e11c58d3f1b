"""Parity of the cloud's hybrid search with the local index's: overlap@10 on the same corpus and questions.

The realdocs evaluation set's plain-text and Markdown documents (shared/tools/eval/datasets/realdocs)
are chunked and embedded once (the packaged MiniLM), then indexed twice: in the local HybridIndex,
and in VertexVectorSearchIndex through its REST client against the Vector Search stand-in's HTTP
server (tests/fake_vector_search.py: dense, sparse and RRF-fused hybrid queries in the v1 REST
shapes). Every question of those documents is searched in both, in each mode, and the overlap of
the two top-10 lists (|A ∩ B| / 10) is averaged. The stand-in's dense search is exact, as the
local index's is at this size, so the figure measures the keyword side and the fusion.

    .venv/bin/python bench/vertex_parity.py
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATASET = ROOT / "shared" / "tools" / "eval" / "datasets" / "realdocs"
SUFFIXES = (".md", ".txt")
K = 10
MODES = ("hybrid", "bm25", "dense")


@dataclass(frozen=True)
class Parity:
    questions: int
    chunks: int
    overlap: dict[str, float]  # mode -> mean overlap@10
    before: dict[str, float]  # the same for the old re-scoring of a dense pool (BM25 over the pool)
    seconds: float


def measure(documents: int | None = None) -> Parity:
    """``documents``: the first that many documents only (a shorter run, for tests)."""
    import numpy as np

    from services.indexer.chunking import chunk_document
    from shared.adapters.gcp.candidate_rescoring import candidate_pool, rank_candidates
    from shared.adapters.gcp.vector_search_rest import VectorSearchRest
    from shared.adapters.gcp.vertex_index import VertexVectorSearchIndex
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder
    from shared.adapters.local.index import HybridIndex
    from tests.fake_vector_search import FakeMatchingEngine, FakeVectorSearchServer
    from tests.fakes import InMemoryStateStore

    started = time.monotonic()
    embedder = OnnxMiniLMEmbedder()
    files = sorted(p for p in (DATASET / "documents").iterdir() if p.suffix in SUFFIXES)[:documents]
    questions = [q for q in map(json.loads, (DATASET / "questions.jsonl").read_text().splitlines())
                 if q["file"] in {f.name for f in files}]
    index_name, endpoint_name = "projects/p/locations/l/indexes/1", "projects/p/locations/l/indexEndpoints/2"
    engine = FakeMatchingEngine(dimension=embedder.dimension)
    chunks_total = 0
    with tempfile.TemporaryDirectory() as folder, \
            FakeVectorSearchServer(engine, index=index_name, endpoint=endpoint_name) as server:
        local = HybridIndex(Path(folder) / "index", dimension=embedder.dimension)
        rest = VectorSearchRest(index_name, endpoint_name, api_base=server.url, token=lambda: None)
        cloud = VertexVectorSearchIndex(rest, engine.deployed_index_id, InMemoryStateStore(),
                                        dimension=embedder.dimension)
        for file in files:
            text = file.read_text(encoding="utf-8", errors="replace")
            chunks = chunk_document(text, document_id=file.stem, content_hash=hashlib.sha256(text.encode()).hexdigest(),
                                    embedder=embedder, title=file.stem)
            vectors = embedder.embed([c.text for c in chunks])
            local.upsert(file.stem, chunks, vectors)
            cloud.upsert(file.stem, chunks, vectors)
            chunks_total += len(chunks)
        vectors = embedder.embed([q["question"] for q in questions])
        overlap, before = {}, {}
        for mode in MODES:
            shares, old_shares = [], []
            for question, vector in zip(questions, vectors, strict=True):
                text, vector = question["question"], np.asarray(vector)
                a = {h.chunk.chunk_id for h in local.search(text, vector, K, mode=mode)}
                b = {h.chunk.chunk_id for h in cloud.search(text, vector, K, mode=mode)}
                # before this change: a dense pool, re-scored with BM25 over the pool alone
                pool = cloud.search(text, vector, candidate_pool(K, mode, cap=1000), mode="dense")
                old = {h.chunk.chunk_id for h in rank_candidates(text, [(h.chunk, h.dense_score) for h in pool], K, mode)}
                shares.append(len(a & b) / K)
                old_shares.append(len(a & old) / K)
            overlap[mode] = sum(shares) / len(shares)
            before[mode] = sum(old_shares) / len(old_shares)
        rest.close()
        local.close()
    return Parity(len(questions), chunks_total, overlap, before, time.monotonic() - started)


def main() -> None:
    result = measure()
    print(f"{result.questions} questions, {result.chunks} chunks ({result.seconds:.0f} s)")
    for mode, share in result.overlap.items():
        print(f"overlap@{K} {mode}: {share:.3f} (dense pool re-scored, as before: {result.before[mode]:.3f})")


if __name__ == "__main__":
    main()
