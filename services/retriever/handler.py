"""The retriever stage: finds the contexts of one iteration.

The rewritten query and every sub-query are embedded in one batch and searched
together (hybrid: BM25 + dense in the index): in one call on one snapshot where
the index offers :class:`~shared.contract.ports.SearchesMany`, else in parallel. The per-query rankings are
fused with weighted reciprocal rank fusion (the rewritten query weighs most),
the same chunk found by several queries is kept once with every query that
found it (``matched_by``), chunks that are only a metadata header are dropped,
and the ``top_k`` best are stored in the query's state (claim check: the
message carries only their count).

Sub-queries count only when enough of them succeed: with fewer than
``min_sub_queries_for_synthesis`` sub-queries returning anything, their
results are set aside and the iteration uses the rewritten query alone (the
reference pipeline's rule for its synthesis step).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import RetryableError
from shared.contract.messages import ContextsRetrieved, Message, QueryTransformed
from shared.contract.ports import (
    Clock,
    Embedder,
    Index,
    Publisher,
    ScoredChunk,
    SearchesMany,
    StateStore,
)
from shared.contract.text import strip_header
from shared.observability.tracing import annotate
from shared.query.record import Context, QueryRecord
from shared.query.state import RETRIEVE, apply_stage, live_record
from shared.query.vectors import query_vectors

log = logging.getLogger("ragbus.retriever")

MIN_BODY_CHARS = 100  # shorter than this once the header is removed: a header-only chunk
RRF_K = 60  # the usual reciprocal-rank-fusion constant
REWRITTEN_WEIGHT = 2.0  # the rewritten query is the whole question; a sub-query one aspect
SUB_QUERY_WEIGHT = 1.0
MAX_PARALLEL_SEARCHES = 6
# The query record keeps every iteration's contexts, and Firestore refuses a document over
# 1 MiB: at the API's limits (6 iterations x 50 contexts) a context gets about 3 KB. The
# grader reads grade_context_chars (500) of each; the synthesizer quotes a chunk, which the
# packaged embedder keeps near 1.2 KB, so only long chunks of a larger embedding model are cut.
CONTEXT_TEXT_MAX_BYTES = 2000
CONTEXT_TITLE_MAX_BYTES = 300
CONTEXT_URL_MAX_BYTES = 500


def clip_utf8(text: str | None, max_bytes: int) -> str | None:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    if text is None:
        return None
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", "ignore")


def handle(message: Message, deps: Deps) -> None:
    """Dispatch ``QueryTransformed`` to :func:`retrieve_contexts`."""
    if not isinstance(message, QueryTransformed):
        log.warning("retriever ignores %s", type(message).__name__)
        return
    retrieve_contexts(
        message,
        state=deps.state,
        publisher=deps.publisher,
        clock=deps.clock,
        embedder=deps.embedder,
        index=deps.index,
        settings=deps.settings,
    )


@dataclass(frozen=True)
class QueryHits:
    """One query's usable hits (or the error that stopped its search)."""

    label: str
    query: str
    hits: list[ScoredChunk]
    error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None and bool(self.hits)


def is_header_only(text: str) -> bool:
    return len(strip_header(text).strip()) < MIN_BODY_CHARS


def search_all(
    queries: list[tuple[str, str]], *, embedder: Embedder, index: Index, k: int
) -> list[QueryHits]:
    """Search every (label, query) at once (or in parallel); one embedding batch for all of them (texts
    this process embedded already, such as the question, are not embedded again)."""
    vectors = query_vectors(embedder, [q for _, q in queries])
    if len(queries) > 1 and isinstance(index, SearchesMany):
        # One pass over the index for all of them, on one snapshot: the fan-out costs little more
        # than the rewritten query alone. Should the batch fail, the one-by-one searches below
        # tell which query failed.
        try:
            batch = index.search_many([q for _, q in queries], np.asarray(vectors), k, mode="hybrid")
        except Exception as exc:  # noqa: BLE001 - retried query by query below
            log.warning("searching %d queries at once failed, searching one by one: %s", len(queries), exc)
        else:
            return [QueryHits(label, query, [h for h in hits if not is_header_only(h.chunk.text)])
                    for (label, query), hits in zip(queries, batch, strict=True)]

    def one(i: int) -> QueryHits:
        label, query = queries[i]
        try:
            hits = index.search(query, np.asarray(vectors[i]), k, mode="hybrid")
        except Exception as exc:  # noqa: BLE001 - reported per query; the caller decides
            return QueryHits(label, query, [], f"{type(exc).__name__}: {exc}")
        return QueryHits(label, query, [h for h in hits if not is_header_only(h.chunk.text)])

    if len(queries) == 1:
        return [one(0)]
    with ThreadPoolExecutor(max_workers=min(len(queries), MAX_PARALLEL_SEARCHES)) as pool:
        return list(pool.map(one, range(len(queries))))


def fuse(results: list[QueryHits], top_k: int) -> list[Context]:
    """Weighted reciprocal rank fusion across queries, one entry per chunk, best first."""
    fused: dict[str, Context] = {}
    for result in results:
        weight = REWRITTEN_WEIGHT if result.label == "rewritten" else SUB_QUERY_WEIGHT
        for rank, hit in enumerate(result.hits, start=1):
            chunk = hit.chunk
            entry = fused.get(chunk.chunk_id)
            if entry is None:
                entry = fused[chunk.chunk_id] = {
                    "chunk_id": chunk.chunk_id,
                    "document_id": chunk.document_id,
                    "title": clip_utf8(chunk.title, CONTEXT_TITLE_MAX_BYTES),
                    "url": clip_utf8(chunk.url, CONTEXT_URL_MAX_BYTES),
                    "published": chunk.published,
                    "text": clip_utf8(chunk.text, CONTEXT_TEXT_MAX_BYTES),
                    "score": 0.0,
                    "index_score": float(hit.score),
                    "matched_by": [],
                }
            entry["score"] += weight / (RRF_K + rank)
            entry["index_score"] = max(entry["index_score"], float(hit.score))
            if result.label not in entry["matched_by"]:
                entry["matched_by"].append(result.label)
    ranked = sorted(fused.values(), key=lambda e: (-e["score"], -e["index_score"], e["chunk_id"]))
    for entry in ranked:
        entry["score"] = round(entry["score"], 6)
    return ranked[:top_k]


def retrieve_contexts(
    message: QueryTransformed,
    *,
    state: StateStore,
    publisher: Publisher,
    clock: Clock,
    embedder: Embedder,
    index: Index,
    settings: Settings,
) -> None:
    """Search, fuse, store the iteration's contexts and publish ``ContextsRetrieved``."""
    query_id, iteration = message.query_id, message.iteration
    record = live_record(state, query_id, clock.now())
    if record is None:
        log.info("query %s is gone, ended or overdue; not retrieving", query_id)
        return
    if record.stage_done(iteration, RETRIEVE):
        _publish_retrieved(publisher, record, iteration)
        return

    top_k = record.top_k or settings.top_k
    # Search deeper than top_k: fusion, dedupe and the header filter all thin the lists.
    depth = max(top_k * 2, top_k + 5)
    queries = [("rewritten", message.query)] + [
        (f"sub_query_{n}", q) for n, q in enumerate(message.sub_queries[: settings.max_sub_queries], start=1)
    ]
    start = clock.monotonic()
    results = search_all(queries, embedder=embedder, index=index, k=depth)
    main = results[0]
    if main.error:
        raise RetryableError(f"query {query_id}: searching the rewritten query failed ({main.error}); retrying")
    subs = results[1:]
    succeeded = [r for r in subs if r.succeeded]
    for failed in (r for r in subs if r.error):
        log.warning("query %s: %s failed: %s", query_id, failed.label, failed.error)
    used = [main] + succeeded if len(succeeded) >= settings.min_sub_queries_for_synthesis else [main]
    contexts = fuse(used, top_k)
    elapsed_ms = (clock.monotonic() - start) * 1000.0

    def change(r: QueryRecord) -> None:
        entry = r.ensure_entry(iteration)
        if entry.query is None:
            entry.query = message.query
            entry.sub_queries = list(message.sub_queries)
        entry.contexts = contexts
        entry.sub_queries_used = [hits.query for hits in used[1:]]
        entry.sub_queries_succeeded = len(succeeded)

    annotate(context_count=len(contexts), sub_query_count=len(subs), sub_queries_succeeded=len(succeeded),
             query=None if settings.redact_query_text else message.query)
    detail = f"{len(contexts)} contexts"
    if subs:
        detail += f"; {len(succeeded)}/{len(subs)} sub-queries found results"
        if len(used) == 1:
            detail += f" (fewer than {settings.min_sub_queries_for_synthesis}: rewritten query only)"
    result = apply_stage(
        state, query_id, iteration=iteration, stage=RETRIEVE, event_type="retrieved", detail=detail,
        now=clock.now(), change=change, elapsed_ms=elapsed_ms,
    )
    if result.publish:
        _publish_retrieved(publisher, result.record, iteration)


def _publish_retrieved(publisher: Publisher, record: QueryRecord, iteration: int) -> None:
    entry = record.entry(iteration)
    publisher.publish(ContextsRetrieved(query_id=record.id, iteration=iteration,
                                        context_count=len(entry.contexts) if entry else 0))
