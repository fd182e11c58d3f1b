"""The retriever stage: finds the contexts of one iteration.

The question leads every iteration: whenever the searched text differs from it, the question is
searched too, first, and its own ranking is the first half of the contexts; the rest is weighted
reciprocal rank fusion of every ranking (the question and its rewrite weigh twice a sub-query).
A German, French or Spanish question is searched by its English terms and in its own words, the
latter first when the corpus holds most of the words the translation replaced (its pages are written in
that language): on the real-text development part a French question over French pages was searched only
as "what both kind paquets Debian" (bench/retrieval_keys.py, docs/benchmarks.md). The first iteration
also fuses the chunk the leading query's words alone rank first (BM25), weighing as the question does: it
can sit below the hybrid top k by its cosine (a release's date under its version number, an exact command).
Only the first: fusing BM25's whole top k lost fitz-gov's pipeline 0.010 nDCG@10, its top 3 0.002.
A rewrite that only adds words to the question is searched with the question's vector, and every
sub-query with the leading search's vector, all in one batch, so the fan-out embeds nothing new.
Every search asks for exactly ``top_k`` (the index's ranking depends on k), chunks that are only a
metadata header are dropped, and the ``top_k`` best go to the query's record (claim check).
Sub-queries count only when at least ``min_sub_queries_for_synthesis`` of them find something;
why, with the figures: docs/benchmarks.md, "The retriever's rules, and the measurements behind them".
A follow-up that leans on the earlier turn (the record's ``follows``) is also searched, with the
earlier question, for that turn's document: when it points back at the earlier turn those chunks are
its contexts; when it only opens with "and", they lead only if its own search finds that document too;
when nothing in its form leans ("unmarked"), only if one of them holds as many of its words as any other's.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from shared.contract.deps import Deps
from shared.contract.errors import RetryableError
from shared.contract.filters import Filters
from shared.contract.messages import Message, QueryHop
from shared.contract.ports import (
    Embedder,
    Index,
    ScoredChunk,
    SearchesMany,
    SearchMode,
    TermStatistics,
)
from shared.contract.text import in_quotes, split_header
from shared.query.reading.extractive import content_terms, stem, term_set
from shared.query.reading.followup import CONNECTIVE, UNMARKED
from shared.query.reading.language import in_english
from shared.query.record import Context, QueryRecord
from shared.query.runner import Change, handle_query_message
from shared.query.temporal import TimeReading, newest_first
from shared.query.vectors import query_vectors
from shared.runtime.query_steps import registered_step

log = logging.getLogger("ragbus.retriever")

RRF_K = 60  # the usual reciprocal-rank-fusion constant
LEAD_SHARE = 0.5  # this share of the contexts is the first ranking's own order, whatever else found
REWRITTEN_LABEL = "rewritten"  # the question, or its rewrite when that only adds words (one search)
QUESTION_LABEL = "question"  # the question itself, searched first beside a rewrite that changed it
AS_TYPED_LABEL = "as_typed"  # a German, French or Spanish question in its own words, beside its English terms
KEYWORDS_LABEL = "keywords"  # the chunk the leading query's words alone (BM25) rank first
# The question, its rewrite, its own words and its keyword ranking each ask the whole question; a sub-query
# one aspect.
WHOLE_QUESTION_WEIGHT = 2.0
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


@dataclass(frozen=True)
class QueryHits:
    """One query's usable hits (or the error that stopped its search)."""

    label: str
    query: str
    hits: list[ScoredChunk]
    error: str | None = None
    dropped: int = 0  # header-only chunks the index returned and the filter removed

    @property
    def succeeded(self) -> bool:
        return self.error is None and bool(self.hits)


def usable(label: str, query: str, hits: list[ScoredChunk]) -> QueryHits:
    """``hits`` without header-only chunks, counting the dropped ones."""
    kept = [h for h in hits if not is_header_only(h.chunk.text)]
    return QueryHits(label, query, kept, dropped=len(hits) - len(kept))


def is_header_only(text: str) -> bool:
    """A metadata header with no body, or no text at all.

    A short body is still an answer: the indexer keeps no short sliver of a long document
    (its first chunk holds at least 100 characters of body, a short last window is
    dropped), so a short chunk is a whole short document (a note, a stub README), or a
    short passage indexed some other way.
    """
    return not split_header(text)[1].strip()


_WORD = re.compile(r"\w+", re.UNICODE)


def only_adds_to(question: str, rewrite: str) -> bool:
    """True when ``rewrite`` holds every word of ``question`` (case-insensitive): it only adds words."""
    return set(_WORD.findall(question.casefold())) <= set(_WORD.findall(rewrite.casefold()))


def search_all(
    queries: list[tuple[str, str]], *, embedder: Embedder, index: Index, k: int,
    meanings: Sequence[str] | None = None, filters: Filters | None = None, mode: SearchMode = "hybrid",
) -> list[QueryHits]:
    """Search every (label, query) at once (or in parallel); one embedding batch for all of them (texts
    this process embedded already, such as the question, are not embedded again).

    ``meanings``: per query, the text whose vector the dense side searches with (default: the
    query itself); the BM25 side always reads the query.
    """
    if meanings is None:
        meanings = [q for _, q in queries]
    if len(meanings) != len(queries):
        raise ValueError(f"{len(queries)} queries need as many meanings, got {len(meanings)}")
    vectors = query_vectors(embedder, list(meanings))
    # Only a filtered search passes the argument, so an index without filters keeps working unfiltered.
    restrict = {} if filters is None or filters.is_empty else {"filters": filters}
    if len(queries) > 1 and isinstance(index, SearchesMany):
        # One pass over the index for all of them, on one snapshot: the fan-out costs little more
        # than the rewritten query alone. Should the batch fail, the one-by-one searches below
        # tell which query failed.
        try:
            batch = index.search_many([q for _, q in queries], np.asarray(vectors), k, mode=mode, **restrict)
        except Exception as exc:  # noqa: BLE001 - retried query by query below
            log.warning("searching %d queries at once failed, searching one by one: %s", len(queries), exc)
        else:
            return [usable(label, query, hits) for (label, query), hits in zip(queries, batch, strict=True)]

    def one(i: int) -> QueryHits:
        label, query = queries[i]
        try:
            hits = index.search(query, np.asarray(vectors[i]), k, mode=mode, **restrict)
        except Exception as exc:  # noqa: BLE001 - reported per query; the caller decides
            return QueryHits(label, query, [], f"{type(exc).__name__}: {exc}")
        return usable(label, query, hits)

    if len(queries) == 1:
        return [one(0)]
    with ThreadPoolExecutor(max_workers=min(len(queries), MAX_PARALLEL_SEARCHES)) as pool:
        return list(pool.map(one, range(len(queries))))


def fuse(results: list[QueryHits], top_k: int) -> list[Context]:
    """One entry per chunk, best first: with several rankings, the first one's (the question's)
    first ``LEAD_SHARE`` of ``top_k`` in its own order, then the rest by weighted reciprocal
    rank fusion of every ranking (the question and its rewrite weigh ``WHOLE_QUESTION_WEIGHT``,
    a sub-query ``SUB_QUERY_WEIGHT``). ``score`` is each chunk's fusion score, so the leading
    part may hold a lower one than what follows it."""
    fused: dict[str, Context] = {}
    for result in results:
        whole = result.label in (REWRITTEN_LABEL, QUESTION_LABEL, AS_TYPED_LABEL, KEYWORDS_LABEL)
        weight = WHOLE_QUESTION_WEIGHT if whole else SUB_QUERY_WEIGHT
        for rank, hit in enumerate(result.hits, start=1):
            chunk = hit.chunk
            # index_score is a similarity (what `ragbus search` and the page show, 0 to 1): the keywords search's
            # raw BM25 score ("score 4.44" among sources scored 0.4 to 1.00) says how it matched by its similarity
            similarity = float(hit.score) if result.label != KEYWORDS_LABEL else float(hit.dense_score or 0.0)
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
                    "index_score": similarity,
                    "matched_by": [],
                    **({"position": chunk.position} if chunk.position else {}),
                    **({"heading": chunk.heading} if chunk.heading else {}),
                }
            entry["score"] += weight / (RRF_K + rank)
            entry["index_score"] = max(entry["index_score"], similarity)
            if result.label not in entry["matched_by"]:
                entry["matched_by"].append(result.label)
    lead: list[str] = []
    if results and len(results) > 1:
        for hit in results[0].hits:
            if len(lead) >= math.ceil(top_k * LEAD_SHARE):
                break
            if hit.chunk.chunk_id not in lead:
                lead.append(hit.chunk.chunk_id)
    first = {chunk_id: n for n, chunk_id in enumerate(lead)}
    ranked = sorted(fused.values(), key=lambda e: (first.get(e["chunk_id"], len(first)), -e["score"],
                                                   -e["index_score"], e["chunk_id"]))
    for entry in ranked:
        entry["score"] = round(entry["score"], 6)
    return ranked[:top_k]


def leading_queries(question: str, rewrite: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The leading (label, query) pairs and the text each one's dense side uses (see the module
    docstring): the question alone when the rewrite is the question; else the question first and
    the rewrite beside it, which means the question when it only adds words to it, else itself."""
    question, rewrite = " ".join(question.split()), " ".join(rewrite.split())
    if question == rewrite:
        return [(REWRITTEN_LABEL, rewrite)], [question]
    if only_adds_to(question, rewrite):
        return [(QUESTION_LABEL, question), (REWRITTEN_LABEL, rewrite)], [question, question]
    return [(QUESTION_LABEL, question), (REWRITTEN_LABEL, rewrite)], [question, rewrite]


def corpus_speaks(index: Index, typed: str, english: str) -> bool:
    """Whether the corpus is written in the typed question's language too: it holds more than half of the
    words its English search terms replaced (an index that cannot count terms: no)."""
    own = set(_WORD.findall(english.casefold()))
    replaced = [w for w in dict.fromkeys(_WORD.findall(typed.casefold())) if w not in own and not w.isdigit()]
    if not replaced or not isinstance(index, TermStatistics):
        return False
    try:
        found = index.document_frequency(replaced)
    except Exception as exc:  # noqa: BLE001 - the English terms lead, as without the statistics
        log.warning("document frequencies unavailable: %s", exc)
        return False
    return sum(found.get(w, 0) > 0 for w in replaced) * 2 > len(replaced)


@dataclass(frozen=True)
class Searched:
    """One iteration's searches: the filters they used, each query's hits, the time-range widenings,
    how many leading (question, rewrite) searches there are and which results are used."""

    filters: Filters | None
    results: list[QueryHits]
    widened: list[str]
    leading: int
    used: list[QueryHits]
    anywhere: float | None = None  # the leading searches' best cosine at any date, when a window was checked
    earlier: EarlierDocument | None = None  # a follow-up's search of the earlier turn's document
    keywords: QueryHits | None = None  # BM25's first chunk for the leading query (None: not searched)

    @property
    def subs(self) -> list[QueryHits]:
        return self.results[self.leading:]

    @property
    def succeeded(self) -> list[QueryHits]:
        return [r for r in self.subs if r.succeeded]


def search_iteration(record: QueryRecord, message: QueryHop, ports: Deps) -> Searched:
    """Search the question, its rewrite and its sub-queries (module docstring); a failed leading search is
    retried (raised), a failed sub-query is left out."""
    settings, embedder, index = ports.settings, ports.embedder, ports.index
    top_k = record.top_k or settings.top_k
    # A German, French or Spanish question leads by its English search terms (the corpus's
    # language), as the transformer searched it; English comes back unchanged.
    entry = record.entry(message.iteration)
    if entry is None or not entry.query:
        raise RetryableError(f"query {record.id}: iteration {message.iteration} has no recorded query yet; "
                             "retry once the transformer's write is visible")
    typed = " ".join((record.question or entry.query).split())
    question = in_english(typed)[1]
    queries, meanings = leading_queries(question, entry.query)
    sub_meaning = meanings[-1]
    if question != typed:
        # its own words too, first when the corpus is written in them (a French question over French pages)
        at = 0 if corpus_speaks(index, typed, question) else len(queries)
        queries.insert(at, (AS_TYPED_LABEL, typed))
        meanings.insert(at, typed)
    leading = len(queries)
    for n, sub in enumerate(entry.sub_queries[: settings.max_sub_queries], start=1):
        queries.append((f"sub_query_{n}", sub))
        meanings.append(sub_meaning)
    # Every ranking is asked for exactly top_k: the index's candidate pool, and so its ranking,
    # is then the plain search's, and the contexts' leading half is the default retrieval's
    # (the question alone fills top_k, so fusion is never short). The question is searched
    # deeper only when the header filter left it short.
    filters = record.search_filters()
    follows = record.follows or {}
    if " ".join(record.question.split()) != " ".join(record.original_query.split()):
        # a rewrite carries the earlier subject: its search of the earlier document needs no earlier question, whose
        # words would pull it back to the chunk that answered the earlier turn
        follows = {**follows, "earlier_question": ""}
    if follows.get("document_id"):  # a follow-up's search of the earlier document: embedded in the same batch
        query_vectors(embedder, [*meanings, earlier_text(follows, question)])
    results = search_all(queries, embedder=embedder, index=index, k=top_k, meanings=meanings, filters=filters)
    widened: list[str] = []
    anywhere = None
    if (record.time_filter or {}).get("window_days") and any(r.hits for r in results[:leading]):
        # A relative window ("latest", "last week") over many topics nearly always holds something:
        # whether it holds the question's topic is told by the best match at any date.
        anywhere = best_cosine(search_all(queries[:leading], embedder=embedder, index=index, k=top_k,
                                          meanings=meanings[:leading], filters=without_dates(filters)))
    if record.time_filter and not on_topic(results[:leading], anywhere):
        # The question's own time words left nothing (on its topic): widen their range (or drop it),
        # never the caller's.
        filters, results, widened = widen_time_filter(record, queries, meanings, embedder=embedder, index=index,
                                                      k=top_k, filters=filters, results=results, leading=leading,
                                                      anywhere=anywhere)
    if results[0].dropped and len(results[0].hits) + results[0].dropped >= top_k:
        deep = max(top_k * 2, top_k + 5)
        results[0] = search_all(queries[:1], embedder=embedder, index=index, k=deep, meanings=meanings[:1],
                                filters=filters)[0]
    if (record.time_filter or {}).get("newest"):
        # "the latest": of the leading searches' equally on-topic hits, the most recently published first.
        results[:leading] = [replace(r, hits=newest_first(r.hits)) for r in results[:leading]]
    main = results[:leading]
    failed_main = next((r for r in main if r.error), None)
    if failed_main is not None:
        raise RetryableError(f"query {record.id}: searching the {failed_main.label} query failed "
                             f"({failed_main.error}); retrying")
    subs = results[leading:]
    succeeded = [r for r in subs if r.succeeded]
    for failed in (r for r in subs if r.error):
        log.warning("query %s: %s failed: %s", record.id, failed.label, failed.error)
    used = main + succeeded if len(succeeded) >= settings.min_sub_queries_for_synthesis else main
    earlier = None
    if follows.get("document_id"):
        earlier = search_earlier_document(follows, question, main, embedder=embedder, index=index, k=top_k,
                                          filters=filters)
    # The chunk the leading query's words alone rank first can sit below the hybrid top k when its cosine
    # is low (a release's date under its version number, an exact command); a failure leaves it out. The
    # first iteration only: a refinement is searched to bring in what the question's own words did not.
    keywords = None
    if message.iteration == 0:
        (keywords,) = search_all([(KEYWORDS_LABEL, queries[0][1])], embedder=embedder, index=index, k=top_k,
                                 meanings=meanings[:1], filters=filters, mode="bm25")
        keywords = replace(keywords, hits=keywords.hits[:1])  # the first that is not a bare header
    return Searched(filters, results, widened, leading, used, anywhere, earlier, keywords)


EARLIER_LABEL = "earlier_document"
EARLIER_DEPTH = 5  # how many times top_k the follow-up is searched for the earlier turn's document


@dataclass(frozen=True)
class EarlierDocument:
    """A follow-up's best chunks of the earlier turn's document, and how they take part in its contexts."""

    document_id: str
    hits: QueryHits
    points_back: bool  # the question points back at the earlier turn: it cannot change topic
    on_topic: bool  # the question's own search finds that document among its best
    unmarked: bool = False  # nothing in the question's form leans: points_back and on_topic weigh its words

    @property
    def leads(self) -> bool:
        return bool(self.hits.hits) and (self.points_back or self.on_topic)

    def describe(self) -> str:
        name = f"the earlier turn's document {self.document_id}"
        if not self.hits.hits:
            return f"{name} has none of the follow-up's best chunks"
        if self.unmarked:
            return f"{name} gives the contexts (a chunk of it holds as many of the question's words as any other)" \
                if self.leads else f"{name} holds fewer of the question's words than another: a new topic, not preferred"
        if self.points_back:
            return f"{name} gives the contexts (the question points back at the earlier turn)"
        if self.on_topic:
            return f"{name} leads (the question's own search finds it too)"
        return f"{name} is not among the question's own best: a new topic, not preferred"


def earlier_text(follows: dict[str, str], question: str) -> str:
    """What a follow-up searches the earlier turn's document with: the question and the earlier question (left out
    of ``follows`` by :func:`search_iteration` for a rewritten question: a rewrite carries the earlier subject)."""
    return " ".join(f"{question} {in_english(str(follows.get('earlier_question') or ''))[1]}".split())


def search_earlier_document(follows: dict[str, str], question: str, main: list[QueryHits], *, embedder: Embedder,
                            index: Index, k: int, filters: Filters | None) -> EarlierDocument:
    """A follow-up's best ``k`` chunks of the document its earlier turn was answered from (``follows``:
    the record's, :mod:`services.transformer.handler`), searched with the question and the earlier
    question together (what a pronoun or "that release" stands for is in the earlier one; retrieval only,
    the question shown stays as it is). Searched ``EARLIER_DEPTH`` times deeper and kept to that document,
    not filtered by it: every index can, where a filter on a chunk field is one the Firestore index
    refuses. A question that only opens with "and" may change topic ("And what is chunking?"): it is on
    the earlier topic when its own search finds that document among its best; one that points back at
    the earlier turn cannot change topic."""
    document_id = str(follows["document_id"])
    (deep,) = search_all([(EARLIER_LABEL, earlier_text(follows, question))], embedder=embedder, index=index, k=k * EARLIER_DEPTH, filters=filters)
    hits = replace(deep, hits=[h for h in deep.hits if h.chunk.document_id == document_id][:k])
    on_topic = any(h.chunk.document_id == document_id for r in main for h in r.hits)
    if follows.get("leans") == UNMARKED:
        # a question whose form does not lean: read from that document when one of its chunks holds as many of the
        # question's own words as the best chunk of any other document its own search found (the evidence, not the
        # wording: "Which systems were affected?" after a gzip release's fix, not a new question on adduser.conf)
        words = {stem(t) for t in content_terms(question)}
        own = max((len(words & term_set(h.chunk.text)) for r in main for h in r.hits
                   if h.chunk.document_id != document_id), default=0)
        held = max((len(words & term_set(h.chunk.text)) for h in hits.hits), default=0)
        return EarlierDocument(document_id, hits, held > 0 and held >= own, held > 0 and held >= own, unmarked=True)
    return EarlierDocument(document_id, hits, follows.get("leans") != CONNECTIVE, on_topic)


def retrieve(record: QueryRecord, message: QueryHop, ports: Deps) -> Change:
    """The iteration's contexts: every search fused, the ``top_k`` best kept in the record."""
    settings, iteration = ports.settings, message.iteration
    searched = search_iteration(record, message, ports)
    filters, widened, leading, used = searched.filters, searched.widened, searched.leading, searched.used
    subs, succeeded = searched.subs, searched.succeeded
    top_k = record.top_k or settings.top_k
    contexts = fuse([*used, searched.keywords] if searched.keywords is not None else used, top_k)
    earlier = searched.earlier
    if earlier is not None and earlier.leads:
        # a follow-up's best chunks of the earlier turn's document: first, then the question's own from other
        # documents, when it points back at that turn; fused with its own when it only opens with "and"
        if earlier.points_back:
            contexts = fuse([earlier.hits], top_k) + [c for c in contexts if c["document_id"] != earlier.document_id]
        else:
            contexts = fuse([earlier.hits, *used], top_k)
        contexts = contexts[:top_k]

    def change(r: QueryRecord) -> None:
        if widened:
            r.filters = filters.to_dict() if filters is not None else None
            r.time_filter = {**(r.time_filter or {}), "widened": [*(r.time_filter or {}).get("widened", []), *widened]}
        entry = r.ensure_entry(iteration)
        entry.contexts = contexts
        entry.sub_queries_used = [hits.query for hits in used[leading:]]
        entry.sub_queries_succeeded = len(succeeded)

    detail = f"{len(contexts)} contexts"
    if filters is not None:
        detail += f" (filters: {filters.describe()})"
    if widened:
        found = "nothing" if searched.anywhere is None else "nothing on its topic"
        detail += f"; the question's time range found {found}, widened: {' -> '.join(widened)}"
    if searched.earlier is not None:
        detail += f"; {searched.earlier.describe()}"
    if subs:
        detail += f"; {len(succeeded)}/{len(subs)} sub-queries found results"
        if len(used) == leading:
            searched_text = "the question and its rewrite" if leading == 2 else "the question"
            detail += f" (fewer than {settings.min_sub_queries_for_synthesis}: {searched_text} only)"
    return Change(change, "retrieved", detail, annotations={
        "context_count": len(contexts), "sub_query_count": len(subs), "sub_queries_succeeded": len(succeeded),
        "query": None if settings.redact_query_text else record.entry(iteration).query,
        "filters": filters.describe() if filters is not None else None,
        "time_widened": " -> ".join(widened) if widened else None})


#: A time range's best match (dense cosine) below this share of the best match at any date holds
#: nothing on the question's topic. With the packaged MiniLM on bench/temporal.py's set: 0.91-1.00
#: for a window holding the product asked about, 0.35-0.49 for one holding only other products.
ON_TOPIC_SHARE = 0.75


def best_cosine(results: list[QueryHits]) -> float | None:
    scores = [h.dense_score for r in results for h in r.hits if h.dense_score is not None]
    return max(scores) if scores else None


def on_topic(results: list[QueryHits], anywhere: float | None) -> bool:
    """Whether the leading ``results`` found something, and (given ``anywhere``, the best cosine of
    the same searches at any date) something about as close to the question as the corpus holds."""
    if not any(r.hits for r in results):
        return False
    best = best_cosine(results)
    return anywhere is None or best is None or best >= ON_TOPIC_SHARE * anywhere


def without_dates(filters: Filters | None) -> Filters | None:
    rest = (filters or Filters()).replace(since=None, until=None)
    return None if rest.is_empty else rest


def widen_time_filter(
    record: QueryRecord, queries: list[tuple[str, str]], meanings: list[str], *, embedder: Embedder, index: Index,
    k: int, filters: Filters | None, results: list[QueryHits], leading: int, anywhere: float | None = None,
) -> tuple[Filters | None, list[QueryHits], list[str]]:
    """Search again with the question's time range widened step by step (shared.query.temporal) until
    the leading queries find something (on the question's topic, given ``anywhere``: see
    :func:`on_topic`); the last step drops the range. Returns the filters used, their results and
    each step taken, described."""
    doc = record.time_filter or {}
    asked_at = datetime.fromisoformat(record.created_at) if record.created_at else datetime.now(UTC)
    reading: TimeReading | None = TimeReading(
        doc.get("phrase", ""), since=datetime.fromisoformat(doc["since"]) if doc.get("since") else None,
        until=datetime.fromisoformat(doc["until"]) if doc.get("until") else None,
        newest=bool(doc.get("newest")), window_days=doc.get("window_days"),
    )
    caller = (filters or Filters()).replace(since=None, until=None)
    steps: list[str] = []
    while reading is not None and not on_topic(results[:leading], anywhere):
        reading = reading.wider(asked_at)
        filters = caller.replace(since=reading.since, until=reading.until) if reading is not None else caller
        filters = None if filters.is_empty else filters
        steps.append(f"since {reading.since.date().isoformat()}" if reading is not None and reading.since
                     else "any date")
        results = search_all(queries, embedder=embedder, index=index, k=k, meanings=meanings, filters=filters)
    if steps and steps[-1] == "any date" and doc.get("window_days") and not _dated(results[:leading]):
        # Nothing found is dated, so no date filter can help: the month and year the transformer
        # dropped for the filter are the only proxy for "now" left (issue 27: the words stay only
        # where no date metadata exists).
        month_year = asked_at.strftime("%B %Y")
        worded = [(label, q if month_year.lower() in q.lower() or label != REWRITTEN_LABEL else f"{q} {month_year}")
                  for label, q in queries]
        if worded != queries:
            steps.append(f"no dated document: searched with {in_quotes(month_year)}")
            results = search_all(worded, embedder=embedder, index=index, k=k, meanings=meanings, filters=filters)
    return filters, results, steps


def _dated(results: list[QueryHits]) -> bool:
    return any(h.chunk.published for r in results for h in r.hits)


# It publishes its hop (contexts-retrieved) for the stage that follows it in the registry.
STEP = registered_step(__name__, run=retrieve)


def handle(message: Message, deps: Deps) -> None:
    """Retrieve the contexts of a transformed query's iteration."""
    handle_query_message((STEP,), message, deps)
