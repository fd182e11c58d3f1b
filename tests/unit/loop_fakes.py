"""Fakes of the ports the query loop needs (index, embedder, language model) and a
hand-driven message pump, shared by the query-loop unit tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import Message, QueryTransformed, encode
from shared.contract.ports import (
    Answer,
    AnswerSentence,
    Chunk,
    ConversationTurn,
    Grade,
    NumberedContext,
    RefineRequest,
    ScoredChunk,
    Transformation,
)
from shared.query.state import apply_stage, new_query_record
from shared.runtime.dispatch import Disposition, handle_delivery
from shared.runtime.stages import CONSUMERS
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "of", "is", "are", "what", "how", "does", "do", "and", "to", "in", "for", "it"}


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class HashingEmbedder:
    """Bag of words hashed into 512 buckets, L2-normalised: shared words mean similar vectors."""

    model_name = "hashing-test"
    dimension = 512
    max_tokens = 256

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                bucket = int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension
                out[row, bucket] += 1.0
            norm = np.linalg.norm(out[row])
            if norm:
                out[row] /= norm
        return out

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]


class MemoryIndex:
    """Chunks in a list; search = cosine of the given vector plus word overlap."""

    def __init__(self, embedder: HashingEmbedder, chunks: Sequence[Chunk] = ()) -> None:
        self.embedder = embedder
        self.chunks: list[Chunk] = []
        self.searches: list[tuple[str, int, str]] = []
        self.fail_on: Callable[[str], bool] = lambda text: False
        self.add(chunks)

    def add(self, chunks: Sequence[Chunk]) -> None:
        self.chunks.extend(chunks)
        self._vectors = self.embedder.embed([c.text for c in self.chunks]) if self.chunks else None

    def search(self, text: str, vector: np.ndarray, k: int, mode: str = "hybrid") -> list[ScoredChunk]:
        self.searches.append((text, k, mode))
        if self.fail_on(text):
            raise RuntimeError(f"index unavailable for {text!r}")
        if not self.chunks:
            return []
        query_words = set(words(text))
        scored = []
        for chunk, vec in zip(self.chunks, self._vectors, strict=True):
            overlap = len(query_words & set(words(chunk.text))) / max(1, len(query_words))
            dense = float(vec @ vector)
            if mode == "bm25" and overlap == 0:
                continue
            scored.append(ScoredChunk(chunk, 0.5 * dense + 0.5 * overlap, dense, overlap))
        scored.sort(key=lambda s: (-s.score, s.chunk.chunk_id))
        return scored[:k]

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        wanted = set(chunk_ids)
        return [c for c in self.chunks if c.chunk_id in wanted]

    def count_chunks(self) -> int:
        return len(self.chunks)

    def count_documents(self) -> int:
        return len({c.document_id for c in self.chunks})

    def upsert(self, document_id, chunks, vectors) -> None:  # pragma: no cover - not used by the loop
        self.add(chunks)

    def delete_document(self, document_id: str) -> int:
        """Take the document's chunks out (a delete carried out while a query runs)."""
        kept = [c for c in self.chunks if c.document_id != document_id]
        gone, self.chunks = len(self.chunks) - len(kept), []
        self.add(kept)
        return gone


def chunk(n: int, title: str, body: str, *, doc: str | None = None, published: str = "2026-10-20") -> Chunk:
    """A chunk with the ingestion header in front of ``body``."""
    url = f"https://example.org/{doc or n}"
    text = f"Title: {title}\nPublished: {published}\nSource: {url}\n\n{body}"
    return Chunk(chunk_id=f"{doc or 'doc' + str(n)}:h:{n}", document_id=doc or f"doc{n}", ordinal=n,
                 text=text, title=title, url=url, published=published, source="feed")


@dataclass
class ScriptedLLM:
    """A LanguageModel whose replies (or exceptions) are given per call, in order."""

    transforms: list[Any] = field(default_factory=list)
    refines: list[Any] = field(default_factory=list)
    grades: list[Any] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)
    standalones: list[Any] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    provider: str = "scripted"
    model: str = "scripted-1"

    @staticmethod
    def _next(queue: list[Any], default: Any) -> Any:
        value = queue.pop(0) if queue else default
        if isinstance(value, BaseException):
            raise value
        return value

    def transform(self, query: str, *, today: date) -> Transformation:
        self.calls.append(("transform", query))
        return self._next(self.transforms, Transformation(rewritten=query))

    def standalone(self, question: str, history: Sequence[ConversationTurn], *, today: date) -> str:
        self.calls.append(("standalone", (question, list(history))))
        return self._next(self.standalones, question)

    def refine(self, request: RefineRequest, *, today: date) -> str:
        self.calls.append(("refine", request))
        return self._next(self.refines, request.original_query + " refined")

    def grade(self, query: str, contexts: Sequence[NumberedContext]) -> Grade:
        self.calls.append(("grade", list(contexts)))
        return self._next(self.grades, good_grade())

    def synthesize(self, query: str, contexts: Sequence[NumberedContext], *, language: str) -> Answer:
        self.calls.append(("synthesize", list(contexts)))
        default = Answer(text="From context one. [1]",
                         sentences=[AnswerSentence("From context one.", [1])], language=language)
        return self._next(self.answers, default)

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.calls if op == operation)


def good_grade(score: float = 0.9) -> Grade:
    return Grade(score=score, relevance=score, completeness=score, grounded=True, answerable=True,
                 reasoning="fine")


def weak_grade(score: float = 0.4, missing: Sequence[str] = ("latency",), answerable: bool = True) -> Grade:
    return Grade(score=score, relevance=score, completeness=score, grounded=False, answerable=answerable,
                 reasoning="weak", missing_aspects=list(missing))


def transformed_hop(deps: Deps, query_id: str, iteration: int, query: str,
                    sub_queries: Sequence[str] = ()) -> QueryTransformed:
    """Iteration ``iteration``'s query recorded as the transformer records it, and the hop it then
    publishes (the hop carries no query: the retriever reads it from the record)."""

    def change(record: Any) -> None:
        entry = record.ensure_entry(iteration)
        entry.query, entry.sub_queries = query, list(sub_queries)

    apply_stage(deps.state, query_id, iteration=iteration, stage="transformer", event_type="transformed",
                detail=query, now=deps.clock.now(), change=change)
    return QueryTransformed(query_id=query_id, iteration=iteration)


@dataclass
class Loop:
    """Everything a query-loop test touches."""

    deps: Deps
    state: InMemoryStateStore
    publisher: RecordingPublisher
    clock: FakeClock
    index: MemoryIndex
    embedder: HashingEmbedder
    llm: Any

    def submit(self, query: str, query_id: str = "q1", **overrides: Any) -> str:
        settings = self.deps.settings
        record = new_query_record(
            query_id, query,
            top_k=overrides.get("top_k", settings.top_k),
            max_iterations=overrides.get("max_iterations", settings.max_iterations),
            max_model_calls=overrides.get("max_model_calls", settings.max_model_calls),
            now=self.clock.now(), timeout_s=overrides.get("timeout_s", settings.query_timeout_s),
        )
        self.state.create(state_collections.QUERIES, query_id, record)
        return query_id

    def record(self, query_id: str = "q1") -> dict:
        return self.state.get(state_collections.QUERIES, query_id)

    def transformed(self, query: str, iteration: int = 0, sub_queries: Sequence[str] = (),
                    query_id: str = "q1") -> QueryTransformed:
        """The transformer's work for ``iteration`` done by hand: :func:`transformed_hop`."""
        return transformed_hop(self.deps, query_id, iteration, query, sub_queries)

    def deliver(self, message: Message) -> list[Disposition]:
        """Hand ``message`` to every consumer of its topic, as the bus would (encoded and decoded)."""
        data, attributes = encode(message)
        outcomes = []
        for consumer in CONSUMERS:
            if consumer.topic == type(message).TOPIC:
                outcomes.append(handle_delivery(consumer, data, attributes, self.deps).disposition)
        return outcomes

    def run_up_to(self, stage: str, first: Message, limit: int = 20) -> Message:
        """Deliver ``first``, then what the stages publish in turn, until a message ``stage`` consumes is
        published; return that one, undelivered. The stages on the way are the registry's, so a test of
        one stage does not name the stages before it."""
        wanted = {c.topic for c in CONSUMERS if c.stage == stage}
        queue, seen = [first], len(self.publisher.messages)
        while queue and limit:
            limit -= 1
            outcomes = self.deliver(queue.pop(0))
            assert Disposition.RETRY not in outcomes and Disposition.DEAD not in outcomes, outcomes
            published, seen = self.publisher.messages[seen:], len(self.publisher.messages)
            for message in published:
                if type(message).TOPIC in wanted:
                    return message
            queue.extend(published)
        raise AssertionError(f"no message for the {stage} was published after {first!r}")

    def pump(self, first: Message, limit: int = 50) -> list[Message]:
        """Deliver ``first`` and then every message the handlers publish, until none is left."""
        queue = [first]
        seen = len(self.publisher.messages)
        delivered = []
        while queue and len(delivered) < limit:
            message = queue.pop(0)
            delivered.append(message)
            outcomes = self.deliver(message)
            assert Disposition.RETRY not in outcomes and Disposition.DEAD not in outcomes, (message, outcomes)
            queue.extend(self.publisher.messages[seen:])
            seen = len(self.publisher.messages)
        return delivered


def make_loop(
    chunks: Sequence[Chunk] = (), llm: Any = None, settings: Settings | None = None, real_local_llm: bool = False
) -> Loop:
    embedder = HashingEmbedder()
    index = MemoryIndex(embedder, chunks)
    if real_local_llm:
        from shared.adapters.local.llm import LocalLanguageModel

        llm = LocalLanguageModel(index=index, embedder=embedder)
    llm = llm if llm is not None else ScriptedLLM()
    state, publisher, clock = InMemoryStateStore(), RecordingPublisher(), FakeClock()
    deps = Deps(settings or Settings(), publisher=publisher, state=state, clock=clock,
                embedder=embedder, index=index, llm=llm)
    return Loop(deps, state, publisher, clock, index, embedder, llm)


CORPUS = [
    chunk(1, "Reciprocal rank fusion",
          "Reciprocal rank fusion merges ranked lists by summing one over k plus rank for every document. "
          "Fusion lets BM25 and dense retrieval results be combined without normalising their scores."),
    chunk(2, "BM25 ranking",
          "BM25 ranks documents by term frequency with saturation and inverse document frequency. "
          "It is the standard keyword ranking function in search engines like Lucene and Elasticsearch."),
    chunk(3, "Dense retrieval",
          "Dense retrieval encodes queries and passages with a neural encoder into vectors. "
          "Passages are found by cosine similarity between the query vector and passage vectors."),
    chunk(4, "GPU kernels",
          "Compute Unified Device Architecture (CUDA) lets developers write kernels that run on the GPU. "
          "CUDA kernels are launched over a grid of thread blocks to process data in parallel."),
    chunk(5, "Header only", ""),
]


def stating_verdict():
    """A reader's verdict for tests with the hashing embedder (whose cosines the shipped model was not fit on):
    it refuses an asked value no quoted sentence states, and answers one that is stated."""
    from shared.query.reading.verdict import FEATURES, Logistic, VerdictModel

    zero, one = np.zeros(len(FEATURES)), np.ones(len(FEATURES))
    near = np.zeros(len(FEATURES))
    near[FEATURES.index("asks_value")], near[FEATURES.index("states_value")] = 5.0, -10.0
    return VerdictModel(Logistic(zero, one, -near, 0.0), Logistic(zero, one, near, -2.0), 0.5, 0.5)


def bag_of_words(texts):
    """A cheap stand-in for MiniLM: each text's words hashed into 64 dimensions, unit length."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for n, text in enumerate(texts):
        for word in text.lower().split():
            out[n, sum(map(ord, word.strip(".,:?"))) % 64] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
