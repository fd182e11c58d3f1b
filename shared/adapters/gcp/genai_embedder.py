"""The Embedder port on Google's embedding models through google-genai.

One ``client.models.embed_content`` call per batch. With an API key the SDK
posts to ``/v1beta/models/{model}:batchEmbedContents`` (one request per text);
on Vertex AI to ``…/publishers/google/models/{model}:predict`` (one instance per
text). Limits, and what this adapter does about them:

- **Per text: 2048 tokens** (gemini-embedding-001, text-embedding-004/005). No
  tokenizer for these models ships offline, so tokens are *estimated*,
  conservatively, by :meth:`GenAiEmbedder.token_spans` (below). A text estimated
  over ``max_tokens`` is refused with :class:`~shared.contract.errors.InvalidInput`,
  never truncated: the indexer cuts chunks with the same estimate, so nothing it
  sends is refused. On Vertex AI the request also sets ``autoTruncate=false``,
  so a text the estimate got wrong is refused by the service (HTTP 400) rather
  than silently cut; the Gemini API has no such switch (the SDK rejects it).
- **Per request:** the Gemini API's ``batchEmbedContents`` takes at most 100
  requests; Vertex AI takes at most 250 texts and 20,000 tokens per call, and
  gemini-embedding-001 on Vertex AI one text per call. Batches are cut by both
  counts (``max_batch_texts``, ``max_batch_tokens`` estimated).

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
from typing import Any

import numpy as np

from shared.contract.config import Settings
from shared.contract.errors import ConfigError, InvalidInput, PermanentError, RetryableError

log = logging.getLogger("ragbus.embedder.genai")

DEFAULT_MODEL = "gemini-embedding-001"
DEFAULT_DIMENSION = 768
#: The models' input window (tokens); the estimate below stays under it.
MAX_INPUT_TOKENS = 2048
#: Texts per batchEmbedContents call (Gemini API).
GEMINI_API_BATCH = 100
#: Texts and tokens per :predict call (Vertex AI text-embedding models).
VERTEX_BATCH = 250
VERTEX_BATCH_TOKENS = 20_000
#: Letters per estimated token. Gemini's tokenizers average about four characters of
#: English per token; three leaves room for rarer words.
CHARS_PER_TOKEN = 3

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def _is_word_char(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


class GenAiEmbedder:
    """:class:`~shared.contract.ports.Embedder` on gemini-embedding-001 (or another Google embedding model).

    ``client`` is a ``google.genai.Client`` (API key or Vertex AI; build one with
    :meth:`from_settings`). :meth:`embed` sends ``task_type`` with every text
    (``RETRIEVAL_DOCUMENT`` by default: the chunks the indexer stores) and
    :meth:`embed_queries` sends ``query_task_type`` (``RETRIEVAL_QUERY``, the
    other side of the asymmetric pair; with the symmetric ``SEMANTIC_SIMILARITY``
    both sides default to it).

    Retries: HTTP 429 and 5xx, and connection failures, are retried
    ``attempts`` times in all with exponential backoff (``backoff_s`` doubling,
    capped at ``max_backoff_s``), then raised as :class:`RetryableError` for the
    bus to redeliver. Other 4xx are :class:`PermanentError`. A reply with the
    wrong number of vectors, or an empty, non-numeric or zero vector, is a
    :class:`RetryableError` (the service misbehaved); vectors of the wrong
    dimension are a :class:`ConfigError` (the model does not support the
    configured ``dimension``). The SDK's own retries should be off (the default)
    so attempts do not multiply.
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
        attempts: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if dimension <= 0:
            raise ConfigError(f"embedding dimension {dimension} must be positive")
        if not 0 < max_tokens <= MAX_INPUT_TOKENS:
            raise ConfigError(
                f"max_tokens={max_tokens} must be between 1 and the models' {MAX_INPUT_TOKENS}"
            )
        if max_batch_tokens < max_tokens:
            raise ConfigError(
                f"max_batch_tokens={max_batch_tokens} must hold at least one text of max_tokens={max_tokens}"
            )
        self.client = client
        self.model_name = model
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.task_type = task_type
        self.query_task_type = query_task_type or (
            "RETRIEVAL_QUERY" if task_type == "RETRIEVAL_DOCUMENT" else task_type
        )
        self.vertexai = bool(getattr(client, "vertexai", False))
        self.max_batch_texts = max(1, max_batch_texts or self._default_batch_texts())
        self.max_batch_tokens = max_batch_tokens
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    def _default_batch_texts(self) -> int:
        if not self.vertexai:
            return GEMINI_API_BATCH
        # Vertex AI serves Gemini embedding models one text per call.
        return 1 if "gemini" in self.model_name else VERTEX_BATCH

    @classmethod
    def from_settings(
        cls, settings: Settings, env: Mapping[str, str] | None = None, **options: Any
    ) -> GenAiEmbedder:
        """API-key mode when ``GOOGLE_API_KEY``/``GEMINI_API_KEY`` is set, else Vertex AI.

        ``RAGBUS_EMBED_MODEL`` (default gemini-embedding-001) and
        ``RAGBUS_EMBED_DIMENSION`` (default 768) choose the model and vector size.
        """
        from google import genai
        from google.genai import types

        env = os.environ if env is None else env
        model = env.get("RAGBUS_EMBED_MODEL") or DEFAULT_MODEL
        raw_dimension = env.get("RAGBUS_EMBED_DIMENSION") or str(DEFAULT_DIMENSION)
        try:
            dimension = int(raw_dimension)
        except ValueError as exc:
            raise ConfigError(
                f"RAGBUS_EMBED_DIMENSION={raw_dimension!r} is not a whole number"
            ) from exc
        http_options = types.HttpOptions(timeout=60_000)  # no SDK retries: ours are explicit
        api_key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")
        if api_key:
            client = genai.Client(api_key=api_key, http_options=http_options)
        elif settings.gcp_project and settings.gcp_location:
            client = genai.Client(
                vertexai=True,
                project=settings.gcp_project,
                location=settings.gcp_location,
                http_options=http_options,
            )
        else:
            raise ConfigError(
                "the Google embedder needs GOOGLE_API_KEY / GEMINI_API_KEY (API key mode) or both "
                "GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION (Vertex AI)"
            )
        return cls(client, model, dimension=dimension, **options)

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
        sizes = [self._checked_tokens(i, text) for i, text in enumerate(texts)]
        for batch in self._batches(sizes):
            out[batch] = self._embed_batch([texts[i] for i in batch], task_type)
        return out

    def _checked_tokens(self, position: int, text: str) -> int:
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
        return tokens

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

        options: dict[str, Any] = {
            "task_type": task_type,
            "output_dimensionality": self.dimension,
        }
        if self.vertexai:
            options["auto_truncate"] = False  # refuse, never cut, a text the estimate got wrong
        config = types.EmbedContentConfig(**options)
        response = self._call_with_retries(
            lambda: self.client.models.embed_content(
                model=self.model_name, contents=texts, config=config
            ),
            len(texts),
        )
        return self._vectors(response, len(texts))

    def _call_with_retries(self, call: Callable[[], Any], size: int) -> Any:
        import json

        import httpx
        import pydantic
        from google.genai import errors

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
            except httpx.TransportError as exc:
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
