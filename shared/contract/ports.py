"""The ports every handler depends on. Adapters implement them; handlers never
import an adapter, they receive these objects from the runtime's bootstrap.

Value types that cross a port (chunks, grades, answers, fetch results) live here
too, so adapters and handlers share one vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from shared.contract.filters import Filters
from shared.contract.messages import Message

Doc = dict[str, Any]


# ------------------------------------------------------------------ bus


@runtime_checkable
class Publisher(Protocol):
    """Publishes a message to its topic (``type(message).TOPIC``)."""

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        """Publish and wait until the bus has it; return the message id.

        ``attributes`` are extra attributes (trace context) added to the
        message's own (type, schema_version, idempotency_key).
        Raises :class:`~shared.contract.errors.RetryableError` when the bus is unreachable.
        """
        ...


# ---------------------------------------------------------------- state


@runtime_checkable
class StateStore(Protocol):
    """Collections of JSON documents, shaped like Firestore.

    ``create`` is atomic create-if-absent; ``update`` is a transaction: ``fn``
    receives the current document (or None) and returns the new one (or None to
    leave it unchanged), and may be called more than once under contention, so
    it must be pure.
    """

    def get(self, collection: str, key: str) -> Doc | None: ...

    def get_many(self, collection: str, keys: Sequence[str]) -> dict[str, Doc]:
        """The documents of ``keys`` that exist, by key, in one round trip where the store can."""
        ...

    def create(self, collection: str, key: str, doc: Doc) -> bool: ...

    def put(self, collection: str, key: str, doc: Doc) -> None: ...

    def delete(self, collection: str, key: str) -> bool: ...

    def update(self, collection: str, key: str, fn: Callable[[Doc | None], Doc | None]) -> Doc | None: ...

    def list(
        self, collection: str, where: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> list[Doc]: ...

    def count(self, collection: str, where: Mapping[str, Any] | None = None) -> int: ...


# ----------------------------------------------------------------- blobs


@runtime_checkable
class BlobStore(Protocol):
    """Raw and clean text by reference (claim check)."""

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Store ``data`` under ``key`` (overwriting); return its reference."""
        ...

    def get(self, ref: str) -> bytes:
        """The bytes behind ``ref``; :class:`KeyError` if there are none."""
        ...

    def delete(self, ref: str) -> None: ...


# ----------------------------------------------------------------- clock


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC datetime."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


# ----------------------------------------------------------------- fetch


@dataclass(frozen=True)
class FetchResult:
    url: str  # final URL after redirects
    status: int
    content_type: str  # media type only, lower case ("text/html")
    charset: str | None
    body: bytes
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@runtime_checkable
class Fetcher(Protocol):
    """HTTP GET for untrusted URLs: timeouts, retries, size cap, address guard.

    Raises :class:`~shared.contract.errors.FetchRefused` for a URL that must not be
    fetched (private address, wrong content type, too large, redirect loop),
    :class:`~shared.contract.errors.PermanentError` for 4xx, and
    :class:`~shared.contract.errors.RetryableError` for timeouts and 5xx after retries.
    """

    def fetch(
        self,
        url: str,
        *,
        accept: Sequence[str],
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> FetchResult: ...

    def allowing_loopback(self) -> Fetcher:
        """The same fetcher, allowed on 127.0.0.0/8 and ::1: for a listing registered with
        ``--allow-loopback``, whose pages live there too."""
        ...


# ----------------------------------------------------------- embed/index


@runtime_checkable
class Embedder(Protocol):
    """Text to L2-normalised float32 vectors, with its tokenizer's view of text."""

    model_name: str
    dimension: int
    max_tokens: int  # content tokens the model reads (special tokens excluded)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimension), rows of unit length."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of each content token of ``text``, in order."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors for search queries, as opposed to the documents they search.

    Asymmetric models (Google's, with task types RETRIEVAL_QUERY and
    RETRIEVAL_DOCUMENT) embed the two sides differently and offer
    ``embed_queries``; a symmetric one (the packaged MiniLM) embeds both alike.
    """
    for_queries = getattr(embedder, "embed_queries", None)
    return for_queries(texts) if callable(for_queries) else embedder.embed(texts)


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    document_id: str
    ordinal: int
    text: str
    title: str = ""
    url: str = ""
    published: str | None = None
    source: str = ""  # the document's kind: feed, sitemap, file, gcs
    origin: str = ""  # the feed or sitemap URL, gs://bucket, or the file's folder (what --source matches)
    # keys a source set (what --where matches); a list holds several values (a feed item's categories)
    metadata: Mapping[str, str | list[str]] = field(default_factory=dict)
    # where in its file the chunk stands, as a citation shows it: "p. 12", "pp. 12–13", "slide 3",
    # "Sales, rows 4–9" ("" for a web page or a text file)
    position: str = ""
    # the heading of the section the chunk starts in ("Noteworthy changes in release 3.8 > Bug fixes"; "" before the
    # first heading, or in an index written before chunks carried it): what its sentences need not repeat, never embedded
    heading: str = ""

    def fields(self) -> dict[str, Any]:
        """The chunk as the stored fields every index adapter writes beside its vector."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Chunk:
        """The chunk behind stored fields (text fields absent in older records read as empty)."""
        return cls(
            chunk_id=data["chunk_id"],
            document_id=data["document_id"],
            ordinal=int(data["ordinal"]),
            text=data.get("text", ""),
            title=data.get("title", ""),
            url=data.get("url", ""),
            published=data.get("published"),
            source=data.get("source", ""),
            origin=data.get("origin") or "",
            metadata=dict(data.get("metadata") or {}),
            position=data.get("position") or "",
            heading=data.get("heading") or "",
        )


@dataclass(frozen=True)
class ScoredChunk:
    chunk: Chunk
    score: float
    dense_score: float | None = None
    bm25_score: float | None = None


SearchMode = Literal["hybrid", "dense", "bm25"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "dense", "bm25")


def checked_query(vector: np.ndarray, k: int, mode: str, dimension: int) -> np.ndarray | None:
    """The query ``vector`` as a float32 row after checking the search contract (a known
    ``mode``, ``dimension`` values); None when ``k`` asks for nothing. Raises ValueError."""
    if mode not in SEARCH_MODES:
        raise ValueError(f"search mode {mode!r}: use 'hybrid', 'dense' or 'bm25'")
    if k <= 0:
        return None
    query = np.asarray(vector, dtype=np.float32).reshape(-1)
    if query.shape != (dimension,):
        raise ValueError(f"query vector has {query.size} values, expected {dimension}")
    return query


def checked_vectors(document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray, dimension: int) -> np.ndarray:
    """``vectors`` as float32 after checking the upsert contract: one finite row of
    ``dimension`` per chunk, every chunk of ``document_id``. Raises ValueError."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (len(chunks), dimension):
        raise ValueError(
            f"upsert of {document_id}: vectors have shape {vectors.shape}, expected ({len(chunks)}, {dimension})"
        )
    strangers = {c.document_id for c in chunks} - {document_id}
    if strangers:
        raise ValueError(f"upsert of {document_id} got chunks of other documents: {sorted(strangers)}")
    if not np.isfinite(vectors).all():
        raise ValueError(f"upsert of {document_id}: vectors contain NaN or infinity")
    return vectors


@runtime_checkable
class Index(Protocol):
    """Chunks of documents, searchable by text and vector; upsert/delete by document."""

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` atomically."""
        ...

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks; return how many were removed."""
        ...

    def search(
        self, text: str, vector: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks among those ``filters`` admits (a pre-filter: restricted before
        ranking, so a narrow filter still gets ``k`` results when ``k`` chunks match)."""
        ...

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]: ...

    def count_chunks(self) -> int: ...

    def count_documents(self) -> int: ...


# ------------------------------------------------ optional index capabilities
# An index may offer more than :class:`Index`. Callers test for a capability
# with ``isinstance(index, TermStatistics)`` (never ``getattr``), so what an
# index offers is declared here and checked by its contract tests, and an index
# without it takes the caller's documented fallback instead of a silent change.


@runtime_checkable
class CountsChanges(Protocol):
    """An index whose ``generation`` grows with every change, so callers can cache per state."""

    @property
    def generation(self) -> int: ...


@runtime_checkable
class TermStatistics(Protocol):
    """An index that knows its corpus-wide term statistics."""

    def document_frequency(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks contain each term (0 for a term none contains)."""
        ...


@runtime_checkable
class StoredVectors(Protocol):
    """An index that returns the embeddings it stored at indexing time."""

    def get_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vector of each known chunk id; unknown ids are left out."""
        ...


@runtime_checkable
class SearchesMany(Protocol):
    """An index that searches several queries at once, on one consistent state of the index.

    A query with sub-queries is one question: its searches must see the same chunks, and an
    index that reads its data once for all of them (one matrix product instead of one pass
    per query) makes the fan-out almost free. Without it, callers search one by one.
    """

    def search_many(
        self, texts: Sequence[str], vectors: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[list[ScoredChunk]]:
        """``[search(texts[i], vectors[i], k, mode, filters) for i]``, all against the same snapshot."""
        ...


# ------------------------------------------------------------------- LLM


@dataclass(frozen=True)
class Transformation:
    rewritten: str
    sub_queries: list[str] = field(default_factory=list)
    reasoning: str = ""
    # The publication-date range the question asks about, as a model read it (YYYY-MM-DD; None: none).
    published_since: str | None = None
    published_until: str | None = None


@dataclass(frozen=True)
class Grade:
    score: float
    relevance: float
    completeness: float
    grounded: bool
    answerable: bool  # False: the corpus evidently cannot answer this question
    reasoning: str = ""
    missing_aspects: list[str] = field(default_factory=list)
    fallback: bool = False  # True when the model's reply could not be used


@dataclass(frozen=True)
class NumberedContext:
    """A context as a model reads it, to grade or to answer from: numbered from 1, so a reply cites it by number."""

    number: int
    source: str
    text: str
    chunk_id: str | None = None  # lets a provider reuse what the index already knows
    # The passage whole, where ``text`` was cut to a grading budget: what an extractive reader may quote
    # from (the grade's own measures stay on ``text``, as the grade model was fit on).
    whole: str | None = None
    heading: str = ""  # the heading of the section the passage starts in (:attr:`Chunk.heading`)


GradingContext = NumberedContext  # its name before the synthesizer read it too (code written against it still works)


@dataclass(frozen=True)
class RefineRequest:
    original_query: str
    previous_query: str
    reasoning: str
    missing_aspects: list[str]
    earlier_queries: tuple[str, ...] = ()  # every query tried so far, oldest first


@dataclass(frozen=True)
class ConversationTurn:
    """One earlier turn of a conversation: the question (as it stood on its own) and the answer
    given ("" when the turn failed, timed out, abstained or has not ended)."""

    question: str
    answer: str = ""


@dataclass(frozen=True)
class AnswerSentence:
    text: str
    citations: list[int]  # numbers of the contexts that support it


@dataclass(frozen=True)
class Finding:
    """What the reader found for a question and what it did not, in the question's own words: the evidence a
    caveat names (:func:`shared.query.reading.caveat.caveat_note`). Measured on what is quoted, never guessed."""

    found: tuple[str, ...] = ()  # runs of the question's words the quoted text holds ("tty group")
    missing: tuple[str, ...] = ()  # parts of the question, and its names, numbers and identifiers, nothing quoted holds
    unquoted: tuple[str, ...] = ()  # the question's other words nothing quoted holds ("nobody", "changed")
    asks: str = ""  # "value" when the question asks for a value of a type, "list" for several items, else ""
    # a value: some sentence the reader checked (quoted or not) states one of the asked type; a list: the quoted
    # text lists items
    stated: bool = False
    disagree: bool = False  # two quoted sentences stating the asked value give different values
    condition: str = ""  # the asked condition a quoted sentence states the value for the opposite of, or another option's


@dataclass(frozen=True)
class Answer:
    text: str
    sentences: list[AnswerSentence] = field(default_factory=list)
    language: str = "en"
    abstained: bool = False
    # The reader's own verdict on what it quoted (the extractive reader gives one; a generative
    # model does not, None): True when a quoted sentence states what the question asks, tied to its
    # terms. ``unstated`` names what the question asks that nothing quoted states.
    states_fact: bool | None = None
    unstated: tuple[str, ...] = ()
    finding: Finding | None = None  # what the reader found and did not (None: no reader measured it)


@dataclass(frozen=True)
class ModelCall:
    """What one model call cost, for budgets and GenAI telemetry."""

    operation: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0


@runtime_checkable
class LanguageModel(Protocol):
    """The model behind the query loop. Every method treats contexts as data."""

    provider: str
    model: str

    def transform(self, query: str, *, today: date) -> Transformation: ...

    def refine(self, request: RefineRequest, *, today: date) -> str: ...

    def standalone(self, question: str, history: Sequence[ConversationTurn], *, today: date) -> str:
        """``question`` rewritten so it can be understood without ``history`` (the earlier turns,
        oldest first, which are data); ``question`` itself when it needs none of them."""
        ...

    def grade(self, query: str, contexts: Sequence[NumberedContext]) -> Grade: ...

    def synthesize(
        self, query: str, contexts: Sequence[NumberedContext], *, language: str
    ) -> Answer: ...
