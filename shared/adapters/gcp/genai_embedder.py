"""The Embedder port on Google's embedding models through google-genai.

What each model takes is :data:`EMBEDDING_MODELS` (Vertex AI "Get text
embeddings", the gemini-embedding-2 model page and the SDK's own routing,
googleapis/python-genai ``models.embed_content``, November 2026):

- **Per text:** 2048 tokens (gemini-embedding-001, text-embedding-004/005,
  text-multilingual-embedding-002), 8192 (gemini-embedding-2). No tokenizer for
  these models ships offline, so tokens are *estimated*, conservatively, by
  :meth:`GenAiEmbedder.token_spans` (below). A text estimated over ``max_tokens``
  is refused with :class:`~shared.contract.errors.InvalidInput`, never truncated:
  the indexer cuts chunks with the same estimate, so nothing it sends is refused.
  On Vertex AI the request also sets ``autoTruncate=false``, so a text the
  estimate got wrong is refused by the service (HTTP 400) rather than silently
  cut; the Gemini API has no such switch (the SDK rejects it).
- **Per request:** the Gemini API's ``batchEmbedContents`` takes at most 100
  texts. On Vertex AI the text-embedding models take 250 texts and 20,000 tokens
  per ``:predict``; the Gemini embedding models take one text per online request
  (``:predict`` or ``:embedContent``, by SDK version). Batches are cut by both
  counts, and **several batches are in flight at once** (``concurrency``, default
  8): a 2,000-chunk document on gemini-embedding-001 is 2,000 requests, which one
  after another would not fit the indexer's 300 s.
- **Task:** gemini-embedding-001 and the text-embedding models take ``task_type``;
  gemini-embedding-2 takes no such field and wants the task written into the text
  (``task: search result | query: ...`` for a query, ``title: none | text: ...``
  for a document), which :func:`task_prefix` does.
- **Location:** gemini-embedding-2 is served from ``global``, ``us`` and ``eu``
  only, like Gemini 3; the others from regions (and ``us``/``eu``).

Vectors are L2-normalised here: gemini-embedding-001 normalises only its full
3072 dimensions, and a truncated (Matryoshka) ``output_dimensionality`` is not
unit length.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.contract.config import (
    DEFAULTS,
    MULTI_REGIONAL_LOCATIONS,
    Settings,
    require_call_budget,
)
from shared.contract.errors import ConfigError, InvalidInput, PermanentError, RetryableError

log = logging.getLogger("ragbus.embedder.genai")

# The defaults are the settings' (RAGBUS_EMBED_*, shared/contract/config.py).
DEFAULT_MODEL = DEFAULTS.embed_model
DEFAULT_DIMENSION = DEFAULTS.embed_dimension
#: The chunk size the indexer cuts to (tokens): every model's input window holds it.
MAX_INPUT_TOKENS = 2048
#: Texts per batchEmbedContents call (Gemini API).
GEMINI_API_BATCH = 100
#: Texts and tokens per :predict call (Vertex AI text-embedding models).
VERTEX_BATCH = 250
VERTEX_BATCH_TOKENS = 20_000
DEFAULT_TIMEOUT_S = DEFAULTS.embed_timeout_s
DEFAULT_CONCURRENCY = DEFAULTS.embed_concurrency


@dataclass(frozen=True)
class EmbeddingModel:
    """What one embedding model takes: its input window, texts per Vertex AI request, how it is
    told the task, and (when restricted) the only Vertex AI locations that serve it."""

    input_tokens: int
    vertex_batch_texts: int
    task_in_text: bool = False
    locations: frozenset[str] | None = None


_TEXT_EMBEDDING = EmbeddingModel(input_tokens=2048, vertex_batch_texts=VERTEX_BATCH)
_GEMINI_EMBEDDING_2 = EmbeddingModel(input_tokens=8192, vertex_batch_texts=1, task_in_text=True,
                                     locations=frozenset(MULTI_REGIONAL_LOCATIONS))
EMBEDDING_MODELS: dict[str, EmbeddingModel] = {
    "gemini-embedding-001": EmbeddingModel(input_tokens=2048, vertex_batch_texts=1),
    "gemini-embedding-2": _GEMINI_EMBEDDING_2,
    "gemini-embedding-2-preview": _GEMINI_EMBEDDING_2,
    "text-embedding-005": _TEXT_EMBEDDING,
    "text-embedding-004": _TEXT_EMBEDDING,
    "text-multilingual-embedding-002": _TEXT_EMBEDDING,
}
#: A model not listed: the smallest window, one text per Vertex AI request, task_type as a field.
UNKNOWN_MODEL = EmbeddingModel(input_tokens=2048, vertex_batch_texts=1)

#: gemini-embedding-2's task instructions, written before the text instead of a task_type
#: field (its Vertex AI model page and the Gemini API embeddings guide): queries and
#: single-input tasks as "task: <task> | query: ", documents as "title: none | text: ".
TASK_PREFIXES = {
    "RETRIEVAL_QUERY": "task: search result | query: ",
    "RETRIEVAL_DOCUMENT": "title: none | text: ",
    "QUESTION_ANSWERING": "task: question answering | query: ",
    "FACT_VERIFICATION": "task: fact checking | query: ",
    "CODE_RETRIEVAL_QUERY": "task: code retrieval | query: ",
    "CLASSIFICATION": "task: classification | query: ",
    "CLUSTERING": "task: clustering | query: ",
    "SEMANTIC_SIMILARITY": "task: sentence similarity | query: ",
}


def embedding_model(name: str) -> EmbeddingModel:
    return EMBEDDING_MODELS.get(name.rsplit("/", 1)[-1].lower(), UNKNOWN_MODEL)


def task_prefix(task_type: str) -> str:
    try:
        return TASK_PREFIXES[task_type]
    except KeyError:
        raise ConfigError(
            f"task type {task_type!r} has no task instruction for gemini-embedding-2; use one of "
            + ", ".join(TASK_PREFIXES)
        ) from None


def _transport_errors() -> tuple[type[Exception], ...]:
    """Connection failures of either HTTP stack google-genai may use (httpx; httpx2 from 3.x)."""
    import httpx

    errors: list[type[Exception]] = [httpx.TransportError]
    try:
        import httpx2
    except ImportError:  # pragma: no cover - google-genai 2.x without httpx2
        pass
    else:
        errors.append(httpx2.TransportError)
    return tuple(errors)
#: Letters per estimated token. Gemini's tokenizers average about four characters of
#: English per token; three leaves room for rarer words.
CHARS_PER_TOKEN = 3

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def _is_word_char(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


class GenAiEmbedder:
    """:class:`~shared.contract.ports.Embedder` on gemini-embedding-001 (or another Google embedding model).

    ``client`` is a ``google.genai.Client`` (API key or Vertex AI; build one with
    :meth:`from_settings`). :meth:`embed` embeds documents for ``task_type``
    (``RETRIEVAL_DOCUMENT`` by default: the chunks the indexer stores) and
    :meth:`embed_queries` queries for ``query_task_type`` (``RETRIEVAL_QUERY``, the
    other side of the asymmetric pair; with the symmetric ``SEMANTIC_SIMILARITY``
    both sides default to it): as the ``task_type`` field, or written into the
    text for a model that wants it there (gemini-embedding-2).

    Batches (see the module docstring) go out ``concurrency`` at a time, and the
    vectors come back in the order given. Retries, per batch: HTTP 429 and 5xx,
    and connection failures, are retried ``attempts`` times in all with
    exponential backoff (``backoff_s`` doubling, capped at ``max_backoff_s``), then
    raised as :class:`RetryableError` for the bus to redeliver. Other 4xx are
    :class:`PermanentError`. A reply with the wrong number of vectors, or an
    empty, non-numeric or zero vector, is a :class:`RetryableError` (the service
    misbehaved); vectors of the wrong dimension are a :class:`ConfigError` (the
    model does not support the configured ``dimension``). One failing batch fails
    the call; batches not yet sent are not sent. The SDK's own retries should be
    off (the default) so attempts do not multiply.
    """

    def __init__(
        self,
        client: Any,
        model: str = DEFAULT_MODEL,
        *,
        dimension: int = DEFAULT_DIMENSION,
        task_type: str = "RETRIEVAL_DOCUMENT",
        query_task_type: str | None = None,
        max_tokens: int = MAX_INPUT_TOKENS,
        max_batch_texts: int | None = None,
        max_batch_tokens: int = VERTEX_BATCH_TOKENS,
        concurrency: int = DEFAULT_CONCURRENCY,
        attempts: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = embedding_model(model)
        if dimension <= 0:
            raise ConfigError(f"embedding dimension {dimension} must be positive")
        if not 0 < max_tokens <= self.spec.input_tokens:
            raise ConfigError(
                f"max_tokens={max_tokens} must be between 1 and {model}'s {self.spec.input_tokens}"
            )
        if max_batch_tokens < max_tokens:
            raise ConfigError(
                f"max_batch_tokens={max_batch_tokens} must hold at least one text of max_tokens={max_tokens}"
            )
        if concurrency < 1:
            raise ConfigError(f"embedding concurrency {concurrency} must be at least 1")
        self.client = client
        self.model_name = model
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.task_type = task_type
        self.query_task_type = query_task_type or (
            "RETRIEVAL_QUERY" if task_type == "RETRIEVAL_DOCUMENT" else task_type
        )
        if self.spec.task_in_text:  # unknown task types fail here, not at the first document
            task_prefix(self.task_type), task_prefix(self.query_task_type)
        self.vertexai = bool(getattr(client, "vertexai", False))
        self.max_batch_texts = max(1, max_batch_texts or self._default_batch_texts())
        self.max_batch_tokens = max_batch_tokens
        self.concurrency = concurrency
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    def _default_batch_texts(self) -> int:
        return self.spec.vertex_batch_texts if self.vertexai else GEMINI_API_BATCH

    @classmethod
    def from_settings(
        cls, settings: Settings, env: Mapping[str, str] | None = None, **options: Any
    ) -> GenAiEmbedder:
        """API-key mode when ``GOOGLE_API_KEY``/``GEMINI_API_KEY`` is set in ``env`` (default: the
        process environment), else Vertex AI. The rest comes from ``settings``:

        ``RAGBUS_EMBED_MODEL`` (default gemini-embedding-001),
        ``RAGBUS_EMBED_DIMENSION`` (default 768), ``RAGBUS_EMBED_CONCURRENCY``
        (default 8) and ``RAGBUS_EMBED_TIMEOUT_S`` (default 20, one attempt) choose
        the model, the vector size, the requests in flight and their time limit; in
        the gcp runtime every attempt of a batch must end before the function's
        timeout (:func:`~shared.contract.config.require_call_budget`).
        On Vertex AI the model is served from ``RAGBUS_EMBED_LOCATION`` when set,
        else from Gemini's location (``RAGBUS_GEMINI_LOCATION``) for a model served
        only from global/us/eu (gemini-embedding-2), else from the functions'
        region (``GOOGLE_CLOUD_LOCATION``).
        """
        from google import genai
        from google.genai import types

        env = os.environ if env is None else env
        model, dimension, timeout_s, location = cls._resolve(settings, env, options)
        # no SDK retries: ours are explicit (milliseconds, per attempt)
        http_options = types.HttpOptions(timeout=int(timeout_s * 1000))
        if location is None:
            client = genai.Client(api_key=env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY"),
                                  http_options=http_options)
        else:
            # enterprise= is google-genai's current name for the legacy vertexai= flag
            client = genai.Client(enterprise=True, project=settings.gcp_project, location=location,
                                  http_options=http_options)
        return cls._checked(settings, cls(client, model, dimension=dimension, **options), timeout_s)

    @classmethod
    def check_settings(cls, settings: Settings, env: Mapping[str, str] | None = None, **options: Any) -> None:
        """What :meth:`from_settings` would refuse, without a client: for start-up checks."""
        env = os.environ if env is None else env
        model, dimension, timeout_s, _ = cls._resolve(settings, env, options)
        cls._checked(settings, cls(None, model, dimension=dimension, **options), timeout_s)

    @staticmethod
    def _resolve(
        settings: Settings, env: Mapping[str, str], options: dict[str, Any]
    ) -> tuple[str, int, float, str | None]:
        """(model, dimension, timeout, Vertex location or None for API-key mode), each checked."""
        model, dimension, timeout_s = settings.embed_model, settings.embed_dimension, settings.embed_timeout_s
        options.setdefault("concurrency", settings.embed_concurrency)
        if env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY"):
            return model, dimension, timeout_s, None
        spec = embedding_model(model)
        location = settings.embed_location or (
            settings.gemini_location if spec.locations is not None else settings.gcp_location
        )
        if not (settings.gcp_project and location):
            raise ConfigError(
                "the Google embedder needs GOOGLE_API_KEY / GEMINI_API_KEY (API key mode) or "
                "GOOGLE_CLOUD_PROJECT and a location (GOOGLE_CLOUD_LOCATION or RAGBUS_EMBED_LOCATION) for Vertex AI"
            )
        if spec.locations is not None and location not in spec.locations:
            raise ConfigError(
                f"Vertex AI serves {model} only from {', '.join(sorted(spec.locations))}, not {location!r}; "
                "set RAGBUS_EMBED_LOCATION (or leave it unset to use RAGBUS_GEMINI_LOCATION, default global)"
            )
        return model, dimension, timeout_s, location

    @staticmethod
    def _checked(settings: Settings, embedder: GenAiEmbedder, timeout_s: float) -> GenAiEmbedder:
        require_call_budget(
            settings, who="RAGBUS_EMBEDDER=genai", budget_s=embedder.retry_budget_s(timeout_s),
            formula=f"{embedder.attempts} attempts of RAGBUS_EMBED_TIMEOUT_S={timeout_s:g} s plus backoffs",
            knob="RAGBUS_EMBED_TIMEOUT_S",
        )
        return embedder

    def retry_budget_s(self, timeout_s: float) -> float:
        """The longest one batch can take: every attempt timing out, plus the backoffs between them."""
        backoffs = sum(min(self.max_backoff_s, self.backoff_s * 2**n) for n in range(self.attempts - 1))
        return self.attempts * timeout_s + backoffs

    # ------------------------------------------------------------ tokens

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Conservative pseudo-tokens of ``text``, as character spans, in order.

        Not the model's tokenizer (none is available offline) but an
        over-estimate of it, so chunks cut to ``max_tokens`` of these fit the
        model: every run of ASCII letters counts one token per three letters
        (rounded up), and every other non-space character — digit, punctuation,
        symbol, any non-ASCII letter — counts one token on its own (Gemini's
        tokenizers split digits one by one). On the project's corpus this
        counts 1.36 to 1.70 times as many tokens as MiniLM's WordPiece, whose
        30k vocabulary already splits finer than Gemini's; text made of random
        letter strings (hashes, base64) could still be under-estimated, which is
        why Vertex AI requests also forbid truncation.
        """
        spans: list[tuple[int, int]] = []
        i, n = 0, len(text)
        while i < n:
            ch = text[i]
            if ch.isspace():
                i += 1
            elif _is_word_char(ch):
                start = i
                while i < n and _is_word_char(text[i]):
                    i += 1
                spans.extend(
                    (s, min(s + CHARS_PER_TOKEN, i)) for s in range(start, i, CHARS_PER_TOKEN)
                )
            else:
                spans.append((i, i + 1))
                i += 1
        return spans

    def count_tokens(self, text: str) -> int:
        """The estimate of :meth:`token_spans` as a count."""
        count, run = 0, 0
        for ch in text:
            if _is_word_char(ch):
                run += 1
                continue
            count += math.ceil(run / CHARS_PER_TOKEN)
            run = 0
            if not ch.isspace():
                count += 1
        return count + math.ceil(run / CHARS_PER_TOKEN)

    # ------------------------------------------------------------- embed

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors of documents, shape ``(len(texts), dimension)``, in the order given."""
        return self._embed(texts, self.task_type)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Like :meth:`embed`, for search queries (``query_task_type``)."""
        return self._embed(texts, self.query_task_type)

    def _embed(self, texts: Sequence[str], task_type: str) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        prefix = task_prefix(task_type) if self.spec.task_in_text else ""
        sizes = [self._checked_tokens(i, text, prefix) for i, text in enumerate(texts)]
        batches = self._batches(sizes)

        def embed(batch: list[int]) -> np.ndarray:
            return self._embed_batch([prefix + texts[i] for i in batch], task_type)

        if len(batches) == 1 or self.concurrency == 1:
            for batch in batches:
                out[batch] = embed(batch)
            return out
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches)),
                                  thread_name_prefix="genai-embed")
        try:
            futures = {pool.submit(embed, batch): batch for batch in batches}
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                # the first batch in document order that failed; the rest are not sent
                raise min(failed, key=lambda f: futures[f][0]).exception()  # type: ignore[misc]
            for future, batch in futures.items():
                out[batch] = future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return out

    def _checked_tokens(self, position: int, text: str, prefix: str = "") -> int:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(
                f"text {position} to embed is empty; the embedding service refuses empty content, "
                "so leave it out (an empty chunk or query carries nothing to search for)"
            )
        tokens = self.count_tokens(text)
        if tokens > self.max_tokens:
            raise InvalidInput(
                f"text {position} to embed is about {tokens} tokens ({len(text)} characters), over "
                f"{self.model_name}'s {self.max_tokens}; it is refused rather than truncated: cut it "
                "with token_spans()/max_tokens (the indexer's chunker does)"
            )
        sent = tokens + (self.count_tokens(prefix) if prefix else 0)
        if sent > self.spec.input_tokens:
            raise InvalidInput(
                f"text {position} to embed is about {sent} tokens with its task instruction, over "
                f"{self.model_name}'s {self.spec.input_tokens}; lower max_tokens"
            )
        return sent

    def _batches(self, sizes: list[int]) -> list[list[int]]:
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for i, size in enumerate(sizes):
            if current and (
                len(current) >= self.max_batch_texts or tokens + size > self.max_batch_tokens
            ):
                batches.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += size
        if current:
            batches.append(current)
        return batches

    def _embed_batch(self, texts: list[str], task_type: str) -> np.ndarray:
        from google.genai import types

        options: dict[str, Any] = {"output_dimensionality": self.dimension}
        if not self.spec.task_in_text:  # gemini-embedding-2 takes the task in the text, no task_type
            options["task_type"] = task_type
        if self.vertexai:
            options["auto_truncate"] = False  # refuse, never cut, a text the estimate got wrong
        config = types.EmbedContentConfig(**options)
        contents: Any = texts
        if self.spec.task_in_text:
            # a multimodal model joins a list of strings into one Content (one vector for all);
            # one Content per text keeps them apart
            contents = [types.Content(role="user", parts=[types.Part(text=text)]) for text in texts]
        response = self._call_with_retries(
            lambda: self.client.models.embed_content(
                model=self.model_name, contents=contents, config=config
            ),
            len(texts),
        )
        return self._vectors(response, len(texts))

    def _call_with_retries(self, call: Callable[[], Any], size: int) -> Any:
        import json

        import pydantic
        from google.genai import errors

        transport_errors = _transport_errors()

        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except (json.JSONDecodeError, pydantic.ValidationError) as exc:
                # The SDK could not parse the reply: the service misbehaved, a redelivery may fare better.
                raise RetryableError(
                    f"{self.model_name} sent a reply that is not an embedding response ({type(exc).__name__}: "
                    f"{str(exc)[:200]}); the batch will be retried on redelivery"
                ) from exc
            except errors.APIError as exc:
                code = int(getattr(exc, "code", 0) or 0)
                if code not in _RETRY_STATUS:
                    raise PermanentError(
                        f"{self.model_name} refused a batch of {size} texts with HTTP {code}: {exc}; check "
                        "the model name, the credentials and output_dimensionality"
                    ) from exc
                failure: Exception = exc
                why = f"HTTP {code}"
            except transport_errors as exc:
                failure, why = exc, f"{type(exc).__name__}: {exc}"
            if attempt == self.attempts:
                raise RetryableError(
                    f"{self.model_name} failed {self.attempts} times embedding {size} texts (last: {why}); "
                    "the message will be redelivered"
                ) from failure
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
            log.warning(
                "%s embedding attempt %d/%d failed (%s); retrying in %.1fs",
                self.model_name,
                attempt,
                self.attempts,
                why,
                delay,
            )
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _vectors(self, response: Any, expected: int) -> np.ndarray:
        embeddings = list(getattr(response, "embeddings", None) or [])
        if len(embeddings) != expected:
            raise RetryableError(
                f"{self.model_name} returned {len(embeddings)} embeddings for {expected} texts; "
                "the batch will be retried on redelivery"
            )
        rows = []
        for n, embedding in enumerate(embeddings):
            values = getattr(embedding, "values", None)
            try:
                row = np.asarray(values, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise RetryableError(
                    f"{self.model_name} returned a non-numeric embedding {n}"
                ) from exc
            if row.ndim != 1 or row.size == 0:
                raise RetryableError(f"{self.model_name} returned an empty embedding {n}")
            if row.size != self.dimension:
                raise ConfigError(
                    f"{self.model_name} returned {row.size}-dimensional vectors, configured for "
                    f"{self.dimension}; set RAGBUS_EMBED_DIMENSION to a size the model supports"
                )
            norm = float(np.linalg.norm(row))
            if not math.isfinite(norm) or norm < 1e-12:
                raise RetryableError(
                    f"{self.model_name} returned a zero or non-finite embedding {n}"
                )
            rows.append(row / norm)
        return np.stack(rows).astype(np.float32)
