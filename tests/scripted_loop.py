"""A scripted stand-in for the query loop, for gateway tests.

It is a Publisher: when the gateway publishes ``QuerySubmitted`` it starts a
thread that fills the query record the way the real stages do (status,
iterations with query/sub-queries/contexts/grade/decision/timings, answer,
citations, and one event per stage), through ``StateStore.update`` like they
do. The gateway's tests then watch a record that changes while they read it,
without depending on the real loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from shared.contract import state_collections
from shared.contract.config import GradeThresholds
from shared.contract.messages import Message, QuerySubmitted, encode
from shared.contract.ports import Clock, Doc, Grade, StateStore
from shared.contract.text import query_apart
from shared.query.grading import failed_thresholds, shown_scores

CONTEXTS = [
    {
        "chunk_id": "doc-bm25:abc:0",
        "document_id": "doc-bm25",
        "title": "Okapi BM25 explained",
        "url": "https://example.org/bm25",
        "text": "BM25 ranks documents by term frequency with saturation and inverse document "
        "frequency. <b>not bold</b>",
        "score": 0.91,
    },
    {
        "chunk_id": "doc-dense:def:3",
        "document_id": "doc-dense",
        "title": "Dense retrieval",
        "url": "https://example.org/dense",
        "text": "Dense retrieval embeds queries and passages in one vector space.",
        "score": 0.74,
    },
    {
        "chunk_id": "doc-evil:666:0",
        "document_id": "doc-evil",
        "title": "A page with a script URL",
        "url": "javascript:alert(1)",
        "text": "Hostile documents must not become script links.",
        "score": 0.2,
    },
]

ANSWER = (
    "BM25 ranks documents by term frequency with saturation and IDF [1]. "
    "Dense retrieval instead compares embeddings [2]. An unsafe source is cited too [3]."
)


def citations_for(contexts: list[Doc]) -> list[Doc]:
    return [
        {
            "id": n,
            "title": c["title"],
            "url": c["url"],
            "document_id": c["document_id"],
            "chunk_id": c["chunk_id"],
        }
        for n, c in enumerate(contexts, start=1)
    ]


class ScriptedLoop:
    """Publisher whose ``QuerySubmitted`` sets off a scripted run of the stages."""

    def __init__(
        self,
        state: StateStore,
        clock: Clock,
        *,
        step_s: float = 0.05,
        iterations: int = 2,
        hang: bool = False,
        fail_publish: Exception | None = None,
    ) -> None:
        self.state = state
        self.clock = clock
        self.step_s = step_s
        self.iterations = iterations
        self.hang = hang
        self.fail_publish = fail_publish
        self.messages: list[Message] = []
        self.threads: list[threading.Thread] = []
        self.release = threading.Event()  # set to let a held run continue
        self.hold_before_answer = False
        self.refined_score = 0.41  # the overall score of the iterations before the last (refined)

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        encode(message)  # a schema error shows up here, as on the real bus
        if self.fail_publish is not None:
            raise self.fail_publish
        self.messages.append(message)
        if isinstance(message, QuerySubmitted) and not self.hang:
            thread = threading.Thread(target=self._run, args=(message.query_id,), daemon=True)
            thread.start()
            self.threads.append(thread)
        return str(len(self.messages))

    def join(self, timeout: float = 10.0) -> None:
        for thread in self.threads:
            thread.join(timeout)

    # ------------------------------------------------------------ stages

    def _change(self, query_id: str, fn) -> None:
        def change(doc: Doc | None) -> Doc | None:
            if doc is None or doc.get("status") in {"answered", "failed", "timed_out"}:
                return None
            doc = dict(doc)
            fn(doc)
            doc["updated_at"] = self.clock.now().isoformat()
            return doc

        self.state.update(state_collections.QUERIES, query_id, change)

    def _event(self, doc: Doc, stage: str, kind: str, iteration: int, detail: Any = None) -> None:
        doc.setdefault("events", []).append(
            {
                "stage": stage,
                "type": kind,
                "at": self.clock.now().isoformat(),
                "iteration": iteration,
                "detail": detail,
            }
        )

    def _run(self, query_id: str) -> None:
        last = self.iterations - 1
        for n in range(self.iterations):
            time.sleep(self.step_s)

            def transformed(doc: Doc, n: int = n) -> None:
                doc["status"] = "running"
                doc["iteration"] = n
                query = doc["original_query"] + (" ranking function" if n else "")
                doc["current_query"] = query
                if n == 0 and doc.get("standalone_question") is None and doc.get("conversation_id"):
                    # a follow-up: the transformer reads it as a question that stands alone
                    doc["standalone_question"] = f"{doc['original_query']} (read with the turn before)"
                doc["iterations"] = [*doc["iterations"], {
                    "iteration": n,
                    "query": query,
                    # as the transformer records them (shared.contract.text.query_apart)
                    "added_terms": query_apart(doc["original_query"], query)[1],
                    "sub_queries": [f"definition of {query}", f"method of {query}"],
                    "contexts": [],
                    "grade": None,
                    "decision": None,
                    "timings": {"transformer": 12.5},
                }]
                self._event(doc, "transformer", "transformed", n, {"query": query})

            self._change(query_id, transformed)
            time.sleep(self.step_s)

            def retrieved(doc: Doc, n: int = n) -> None:
                item = dict(doc["iterations"][-1])
                item["contexts"] = CONTEXTS if n == last else CONTEXTS[1:2]
                item["timings"] = {**item["timings"], "retriever": 30.0}
                doc["iterations"] = [*doc["iterations"][:-1], item]
                self._event(doc, "retriever", "retrieved", n, {"contexts": len(item["contexts"])})

            self._change(query_id, retrieved)
            time.sleep(self.step_s)

            def graded(doc: Doc, n: int = n) -> None:
                item = dict(doc["iterations"][-1])
                good = n == last
                item["grade"] = {
                    "score": 0.82 if good else self.refined_score,
                    "relevance": 0.9 if good else 0.5,
                    "completeness": 0.75 if good else 0.3,
                    "grounded": good,
                    "answerable": True,
                    "reasoning": "covers the question" if good else "misses the method",
                    "missing_aspects": [] if good else ["method"],
                }
                item["decision"] = "accept" if good else "refine"
                # as the grader records them (shared.query.grading.failed_thresholds)
                item["failed_thresholds"] = [] if good else failed_thresholds(
                    Grade(**item["grade"]), GradeThresholds())
                item["shown_scores"] = shown_scores(Grade(**item["grade"]), GradeThresholds())
                item["timings"] = {**item["timings"], "grader": 8.0}
                doc["iterations"] = [*doc["iterations"][:-1], item]
                self._event(doc, "grader", "graded", n, {"decision": item["decision"]})

            self._change(query_id, graded)
        if self.hold_before_answer:
            self.release.wait(30)
        time.sleep(self.step_s)

        def answered(doc: Doc) -> None:
            doc["status"] = "answered"
            doc["outcome"] = "answered"
            doc["best_iteration"] = last
            doc["answer"] = ANSWER
            doc["citations"] = citations_for(CONTEXTS)
            self._event(doc, "synthesizer", "answered", last, {"citations": len(CONTEXTS)})

        self._change(query_id, answered)


class WordEmbedder:
    """A tiny deterministic Embedder: hashed bag of words, unit length."""

    model_name = "hashed-words"
    dimension = 64
    max_tokens = 256

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dimension] += 1.0
            norm = float(np.linalg.norm(out[row])) or 1.0
            out[row] /= norm
        return out

    def token_spans(self, text):
        import re

        return [m.span() for m in re.finditer(r"\S+", text)]


class ContextsIndex:
    """An Index over :data:`CONTEXTS`, ranked by cosine of :class:`WordEmbedder` vectors."""

    def __init__(self) -> None:
        from shared.contract.ports import Chunk

        self.embedder = WordEmbedder()
        self.chunks = [
            Chunk(c["chunk_id"], c["document_id"], 0, c["text"], title=c["title"], url=c["url"])
            for c in CONTEXTS
        ]
        self.vectors = self.embedder.embed([c.text for c in self.chunks])

    def search(self, text, vector, k, mode="hybrid"):
        from shared.contract.ports import ScoredChunk

        scores = self.vectors @ vector
        order = sorted(range(len(self.chunks)), key=lambda i: -float(scores[i]))[:k]
        return [ScoredChunk(self.chunks[i], float(scores[i])) for i in order]
