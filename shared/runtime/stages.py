"""The registry of stages: the one table the topology, both runtimes, infra/, the eval and the docs follow.

Each :class:`Stage` says what starts it (Pub/Sub topics, HTTP, GCS events), what
it publishes, its entry points in the root ``main.py`` and, for a Pub/Sub
stage, the handler each topic is delivered to: a Pub/Sub stage's functions-framework
target is made from this entry (no ``main.py`` of its own); the others name the module
that defines theirs. Everything else is derived:
:data:`CONSUMERS` (one per stage and topic; the embedded runtime and the
emulator topology subscribe these), the stage groups, the stages the emulator
topology serves, and the table in docs/architecture.md. ``tests/unit/test_stage_registry.py``
fails when main.py, infra/, the topology, the eval pipeline or the docs disagree.

Handlers are named by import path so that ``shared`` never imports ``services``
at import time (the layering stays one-way until a runtime starts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from shared.contract import topics
from shared.contract.messages import hop_message

if TYPE_CHECKING:
    from shared.contract.deps import Deps
    from shared.contract.messages import Message

Handler = Callable[["Message", "Deps"], None]

Group = Literal["ingestion", "query", "front door", "operations"]
Trigger = Literal["pubsub", "http", "gcs"]


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


@dataclass(frozen=True)
class Function:
    """One deployed Cloud Function of a stage: its access and sizing (infra/registry.tf's
    ``local.functions``; the fields are explained in infra/stages.tf). The defaults suit a small
    stage that calls nothing heavy."""

    topic: str = ""  # a stage consuming several topics is deployed once per topic (one trigger each)
    target: str = ""  # a stage with several targets: the one this function runs
    event: str = ""  # a GCS-triggered target: its Eventarc event type
    publishes: tuple[str, ...] | None = None  # None: every topic the stage publishes
    blobs: Literal["none", "read", "write"] = "none"
    documents: Literal["none", "read"] = "none"
    model: bool = False
    embeds: bool = False
    index: bool = False
    memory: str = "512Mi"
    cpu: str = "1"
    timeout: int = 120
    max_instances: int = 10
    concurrency: int = 4
    note: str = ""  # why it is sized or allowed as it is


@dataclass(frozen=True)
class Stage:
    """One deployable stage of the system."""

    name: str
    group: Group
    trigger: Trigger
    summary: str
    publishes: tuple[str, ...] = ()  # its hop, when another stage follows it, is added (linked)
    # Pub/Sub stages: (topic, workers in the embedded runtime), delivered to ``handler``.
    consumes: tuple[tuple[str, int], ...] = ()
    handler: str = ""  # "package.module:function" for consumed messages
    entry_points: tuple[str, ...] = ()  # targets in the root main.py; the stage's name when empty
    # The module defining the targets, for a stage whose entry point is not the generated Pub/Sub
    # one (HTTP, GCS events, the dead-letter recorder); a Pub/Sub stage with a handler needs none.
    entry_module: str = ""
    # Pushed every dead-letter topic (in the cloud and the emulator topology; the embedded
    # runtime records dead letters in process instead).
    records_dead_letters: bool = False
    # What the stage needs before it can do its work, by the name of a check in
    # :mod:`shared.runtime.readiness` (each check says when it applies, e.g. only with the local model).
    needs: tuple[str, ...] = ()
    # Its Cloud Functions (one per consumed topic, or per target for GCS events).
    functions: tuple[Function, ...] = (Function(),)
    # A query stage that follows another: its predecessor's name (it consumes that stage's hop,
    # with ``after_workers`` workers in the embedded runtime, and waits for its iteration's record).
    after: str = ""
    after_workers: int = 2
    # The topic of its own hop (:class:`~shared.contract.messages.QueryHop`), published when another
    # stage follows it; empty: ``<name>-done``.
    hop: str = ""

    @property
    def hop_topic(self) -> str:
        return self.hop or f"{self.name.replace('_', '-')}-done"

    @property
    def targets(self) -> tuple[str, ...]:
        return self.entry_points or (self.name,)

    @property
    def generated_entry_point(self) -> bool:
        """Its target is made from the registry (:func:`shared.runtime.functions.pubsub_target`)."""
        return not self.entry_module

    @property
    def consumers(self) -> tuple[Consumer, ...]:
        return tuple(Consumer(self.name, topic, self.handler, workers) for topic, workers in self.consumes)


DECLARED: tuple[Stage, ...] = (
    Stage("feed_poller", "ingestion", "pubsub", "polls RSS/Atom feeds, announces new, changed and removed items",
          publishes=(topics.DOCUMENT_FETCHED, topics.DOCUMENT_DELETED),
          consumes=((topics.FEED_POLL_REQUESTED, 1),), handler="services.feed_poller.handler:handle",
          functions=(Function(blobs="write", memory="1Gi", timeout=540, max_instances=3, concurrency=1,
                              note="Polls every registered feed with 10 s fetch timeouts and retries: give it time."),)),
    Stage("gcs_ingest", "ingestion", "gcs", "announces objects written to or deleted from the documents bucket",
          publishes=(topics.DOCUMENT_FETCHED, topics.DOCUMENT_DELETED),
          entry_points=("gcs_finalized", "gcs_deleted"), entry_module="services.gcs_ingest.main",
          functions=(
              Function(target="gcs_finalized", event="google.cloud.storage.object.v1.finalized",
                       publishes=(topics.DOCUMENT_FETCHED,), documents="read", max_instances=5,
                       note="An uploaded or overwritten object in the documents bucket becomes a DocumentFetched."),
              Function(target="gcs_deleted", event="google.cloud.storage.object.v1.deleted",
                       publishes=(topics.DOCUMENT_DELETED,), max_instances=5,
                       note="A deleted object becomes a DocumentDeleted (its chunks are removed)."))),
    # several cleaner/indexer workers let their embedding calls coalesce into larger batches
    Stage("cleaner", "ingestion", "pubsub", "extracts the main text and prepends a metadata header",
          publishes=(topics.DOCUMENT_CLEANED,),
          consumes=((topics.DOCUMENT_FETCHED, 2),), handler="services.cleaner.handler:handle",
          functions=(Function(blobs="write", documents="read", memory="1Gi",
                              note="Reads raw HTML from the blob bucket, or the uploaded object for GCS-sourced "
                                   "documents."),)),
    Stage("indexer", "ingestion", "pubsub", "chunks, embeds and indexes a document; drops a deleted one",
          publishes=(topics.DOCUMENT_INDEXED,),
          consumes=((topics.DOCUMENT_CLEANED, 3), (topics.DOCUMENT_DELETED, 1)),
          handler="services.indexer.handler:handle", needs=("embedder",),
          functions=(
              Function(topic=topics.DOCUMENT_CLEANED, blobs="read", embeds=True, index=True, memory="2Gi",
                       timeout=300, max_instances=5, concurrency=2),
              Function(topic=topics.DOCUMENT_DELETED, index=True, max_instances=3,
                       note="Deletes chunks only: the embedder is built lazily and never loaded here."))),
    Stage("transformer", "query", "pubsub", "makes a follow-up stand alone, rewrites the question (iteration 0) or refines it after a grade "
          "(a refinement that brings nothing new ends the loop)",
          # a refinement that brings nothing new (the query an earlier iteration searched) ends the loop: the
          # graded iteration goes on to the synthesizer (query-graded, decision exhausted), nothing is searched
          publishes=(topics.QUERY_GRADED,), hop=topics.QUERY_TRANSFORMED,
          consumes=((topics.QUERY_SUBMITTED, 2), (topics.QUERY_GRADED, 2)),
          handler="services.transformer.handler:handle", needs=("served_model",),
          functions=tuple(Function(topic=t, model=True, timeout=150, max_instances=20, concurrency=8,
                                   publishes=None if t == topics.QUERY_GRADED else (topics.QUERY_TRANSFORMED,))
                          for t in (topics.QUERY_SUBMITTED, topics.QUERY_GRADED))),
    Stage("retriever", "query", "pubsub",
          "searches the index for the question, its rewrite and its sub-queries; "
          "the question's own ranking leads, the rest is fused",
          publishes=(), hop=topics.CONTEXTS_RETRIEVED, after="transformer",
          handler="services.retriever.handler:handle",
          needs=("embedder",), functions=(Function(embeds=True, index=True, memory="2Gi"),)),
    Stage("grader", "query", "pubsub", "grades the contexts and decides: refine, accept, abstain or exhausted",
          publishes=(topics.QUERY_GRADED,), after="retriever",
          handler="services.grader.handler:handle",
          needs=("grade_model", "served_model"),
          functions=(Function(model=True, timeout=150, max_instances=20, concurrency=8),)),
    Stage("synthesizer", "query", "pubsub", "writes the cited answer from the best iteration and ends the query",
          publishes=(topics.ANSWER_READY,),
          consumes=((topics.QUERY_GRADED, 2),), handler="services.synthesizer.handler:handle",
          needs=("served_model", "embedder"),
          functions=(Function(model=True, embeds=True, memory="2Gi", timeout=180,
                              note="Loads the embedder for the extractive answer when the model's answer is "
                                   "unusable."),)),
    Stage("dead_letters", "operations", "pubsub", "records what Pub/Sub dead-lettered and fails its query",
          publishes=(), records_dead_letters=True, entry_module="services.dead_letters.main",
          functions=(Function(timeout=60, max_instances=3, concurrency=8,
                              note="Records what Pub/Sub dead-lettered (a push subscription on every dead-letter "
                                   "topic, pubsub.tf) and ends the query it belongs to as failed."),)),
    Stage("gateway", "front door", "http", "REST, event stream, MCP and the web page; starts queries",
          publishes=(topics.QUERY_SUBMITTED,), entry_module="services.gateway.main",
          functions=(Function(embeds=True, index=True, memory="2Gi", timeout=300, concurrency=40,
                              note="HTTP: REST, event stream, MCP and the web page; /search embeds the query."),)),
)



def linked(declared: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The stages with their hops filled in: a stage that names ``after`` consumes its predecessor's
    hop topic, which the predecessor publishes (its :class:`QueryHop` class is made here)."""
    by_name = {s.name: s for s in declared}
    followed = {s.after for s in declared if s.after}
    unknown = followed - set(by_name)
    if unknown:
        raise LookupError(f"a stage follows {sorted(unknown)}, which is no registered stage")
    linked = []
    for stage in declared:
        publishes, consumes = stage.publishes, stage.consumes
        if stage.name in followed and stage.hop_topic not in publishes:
            publishes = (*publishes, hop_message(stage.hop_topic).TOPIC)
        if stage.after:
            hop = by_name[stage.after].hop_topic
            consumes = ((hop, stage.after_workers), *((t, w) for t, w in consumes if t != hop))
        linked.append(replace(stage, publishes=publishes, consumes=consumes))
    return tuple(linked)


STAGES: tuple[Stage, ...] = linked(DECLARED)

#: Topics published from outside the stages: Cloud Scheduler's poll (infra/scheduler.tf) and
#: ``ragbus poll`` / ``serve`` / ``demo`` request one.
PUBLISHED_OUTSIDE: tuple[str, ...] = (topics.FEED_POLL_REQUESTED,)

STAGE_BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}
(DEAD_LETTER_RECORDER,) = (s.name for s in STAGES if s.records_dead_letters)

CONSUMERS: tuple[Consumer, ...] = tuple(c for s in STAGES for c in s.consumers)

INGESTION_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.group == "ingestion" and s.consumes)
QUERY_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.group == "query")
#: The sources of a query's live events, each the name of its events on the stream (a record
#: event's stage): the gateway that starts the query, each query stage, the runtime that ends
#: one (a timeout, a dead letter) and "message" for an event without a stage. The gateway puts
#: this list in its page, which listens for exactly these.
QUERY_EVENT_SOURCES: tuple[str, ...] = ("gateway", *QUERY_STAGES, "runtime", "message")
# The emulator topology runs one server per Pub/Sub or HTTP stage (GCS events have no emulator).
SERVED_STAGES: tuple[str, ...] = tuple(s.name for s in STAGES if s.trigger in ("pubsub", "http"))
ENTRY_POINTS: tuple[str, ...] = tuple(t for s in STAGES for t in s.targets)


def consumers_of(stage: str) -> tuple[Consumer, ...]:
    return tuple(c for c in CONSUMERS if c.stage == stage)


def subscription_topics() -> dict[str, str]:
    return {c.subscription: c.topic for c in CONSUMERS}


def stage_table() -> str:
    """The registry as the Markdown table docs/architecture.md embeds."""
    lines = ["| stage | group | started by | publishes | entry points | does |",
             "|---|---|---|---|---|---|"]
    for s in STAGES:
        started = ", ".join(f"`{t}`" for t, _ in s.consumes) or (
            "every dead-letter topic" if s.records_dead_letters
            else {"http": "HTTP", "gcs": "GCS object events"}[s.trigger])
        lines.append(f"| `{s.name}` | {s.group} | {started} | {', '.join(f'`{t}`' for t in s.publishes)} | "
                     f"{', '.join(f'`{t}`' for t in s.targets)} | {s.summary} |")
    return "\n".join(lines) + "\n"
