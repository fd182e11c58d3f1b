"""Which stage consumes which topic: the one table both runtimes and infra/ follow.

Handlers are named by import path so that ``shared`` never imports ``services``
at import time (the layering stays one-way until a runtime starts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from shared import topics

if TYPE_CHECKING:
    from shared.messages import Message
    from shared.runtime.deps import Deps

Handler = Callable[["Message", "Deps"], None]


@dataclass(frozen=True)
class Consumer:
    stage: str
    topic: str
    target: str  # "package.module:function"
    workers: int = 1

    @property
    def subscription(self) -> str:
        return f"{self.stage}.{self.topic}"

    @cached_property
    def handler(self) -> Handler:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


CONSUMERS: tuple[Consumer, ...] = (
    Consumer("feed_poller", topics.FEED_POLL_REQUESTED, "services.feed_poller.handler:handle"),
    Consumer("cleaner", topics.DOCUMENT_FETCHED, "services.cleaner.handler:handle", workers=2),
    # several indexer workers let their embedding calls coalesce into larger batches
    Consumer("indexer", topics.DOCUMENT_CLEANED, "services.indexer.handler:handle", workers=3),
    Consumer("indexer", topics.DOCUMENT_DELETED, "services.indexer.handler:handle"),
    Consumer("transformer", topics.QUERY_SUBMITTED, "services.transformer.handler:handle", workers=2),
    Consumer("transformer", topics.QUERY_GRADED, "services.transformer.handler:handle", workers=2),
    Consumer("retriever", topics.QUERY_TRANSFORMED, "services.retriever.handler:handle", workers=2),
    Consumer("grader", topics.CONTEXTS_RETRIEVED, "services.grader.handler:handle", workers=2),
    Consumer("synthesizer", topics.QUERY_GRADED, "services.synthesizer.handler:handle", workers=2),
)

INGESTION_STAGES = ("feed_poller", "cleaner", "indexer")
QUERY_STAGES = ("transformer", "retriever", "grader", "synthesizer")


def consumers_of(stage: str) -> tuple[Consumer, ...]:
    return tuple(c for c in CONSUMERS if c.stage == stage)


def subscription_topics() -> dict[str, str]:
    return {c.subscription: c.topic for c in CONSUMERS}
