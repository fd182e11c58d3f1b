"""Embedding calls that arrive together run as one batch.

Ingestion embeds one document at a time (a handful of chunks per call), and a
small ONNX batch costs far more per text than a large one. Wrapped in this,
concurrent ``embed`` calls from several indexer workers coalesce: whoever finds
the model idle runs everything queued so far; the others wait for their share.
A call that finds the model idle runs at once, so a lone query embedding never
waits for company.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shared.contract.ports import Embedder


@dataclass
class _Request:
    texts: list[str]
    vectors: np.ndarray | None = None
    error: BaseException | None = None
    done: bool = False


class CoalescingEmbedder:
    """An :class:`Embedder` that batches concurrent calls to ``inner.embed``."""

    def __init__(self, inner: Embedder, max_texts: int = 256) -> None:
        self.inner = inner
        self.max_texts = max_texts
        self.model_name = inner.model_name
        self.dimension = inner.dimension
        self.max_tokens = inner.max_tokens
        self._queue: list[_Request] = []
        self._running = False
        self._cond = threading.Condition()
        self.batches = 0  # how many inner calls were made (for tests and benchmarks)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_spans(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        request = _Request(list(texts))
        if not request.texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._cond:
            self._queue.append(request)
        # The caller that finds the model idle runs the queue's head, which may not
        # include its own request (it may not fit in the batch): it goes on until
        # its own request is done, by itself or by whoever runs next.
        while True:
            with self._cond:
                while not request.done and self._running:
                    self._cond.wait()
                if request.done:
                    return self._result(request)
                self._running = True
                batch, taken = [], 0
                while self._queue and (not batch or taken + len(self._queue[0].texts) <= self.max_texts):
                    batch.append(self._queue.pop(0))
                    taken += len(batch[-1].texts)
            self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        try:
            vectors = self.inner.embed([t for r in batch for t in r.texts])
            start = 0
            for r in batch:
                r.vectors = vectors[start : start + len(r.texts)]
                start += len(r.texts)
        except BaseException as exc:  # every caller in the batch hears of the failure
            for r in batch:
                r.error = exc
        finally:
            with self._cond:
                for r in batch:
                    r.done = True
                self._running = False
                self.batches += 1
                self._cond.notify_all()

    @staticmethod
    def _result(request: _Request) -> np.ndarray:
        if request.error is not None:
            raise request.error
        assert request.vectors is not None
        return request.vectors


def packaged_embedder(cache_dir: Path | None = None) -> Embedder:
    """The packaged all-MiniLM-L6-v2 (ONNX, offline), its concurrent callers' texts batched; its
    optimised graph cached under ``cache_dir`` when one is given."""
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    return CoalescingEmbedder(OnnxMiniLMEmbedder(cache_dir=cache_dir))
