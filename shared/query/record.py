"""The query record as typed values, and its one conversion to and from the stored document.

One document per query in the ``queries`` collection (JSON in the local
runtime, a Firestore document in gcp). Code reads and changes a
:class:`QueryRecord`; only :meth:`QueryRecord.from_doc` and
:meth:`QueryRecord.to_doc` know the stored shape, which is the contract the
gateway, CLI, MCP and web page publish:

``id, status, outcome, original_query, current_query, iteration, top_k,
max_iterations, model_calls, max_model_calls, created_at, updated_at,
deadline, expire_at, iterations[] ({iteration, query, sub_queries, contexts[],
grade{}, decision, timings{stage: ms}}), best_iteration, answer, citations[]
({id, title, url, document_id, chunk_id, chunk_ids, position}), trace_id, error, events[] ({stage,
type, at, iteration, detail})``, plus what the query-loop stages add:
``stages_done`` (``"<iteration>/<stage>"`` keys, the idempotency record),
``model_fallbacks``, ``language``, ``answer_sentences`` ([{text,
citations[]}]), ``answer_provider``, ``answered_from_iteration``, ``fallbacks``
([{stage, iteration, reason}]: each result made without the model); an iteration
may also hold ``sub_queries_used``, ``sub_queries_succeeded``,
``transform_source``, ``grade_source``, ``should_refine``,
``failed_thresholds``, ``shown_scores`` ({score, relevance, completeness}: each as the page and the CLI
show it), ``refined_from`` and ``added_terms`` (the search terms its query appended after the question,
shown apart from it; "" for none). ``filters`` (the
:class:`~shared.contract.filters.Filters` the caller set, as its ``to_dict``, absolute
times) is written when the query has any; ``time_filter`` ({phrase, since, until, newest,
window_days, widened[]}) when the question's own time words set its date range.
``conversation_id`` names the conversation the query is a turn of (every query from this build
on has one); ``standalone_question`` is the standalone question as shown (the page's "Read as"): the
typed ``original_query`` when it needed no earlier turn, the transformer's rewrite of a
follow-up otherwise, and the typed question again for a follow-up no well-formed rewrite was found for (then
``follows.question`` is what the loop reads); null until the transformer has read the history. What is retrieved,
graded and answered is :attr:`QueryRecord.question` (``follows.question``, else ``standalone_question``, else
``original_query``). ``history``
([{question, answer}], bounded) is the conversation a caller sent with the question
(:mod:`shared.query.conversation`). ``follows`` ({document_id, leans, earlier_question[, question]}) names the
document of the earlier turn a later question may lean on, why it leans and the earlier question (the retriever puts that
document's best chunks first, or, with ``leans`` ``"unmarked"``, weighs them; :mod:`services.transformer.handler`); its
``question``, when present, is what the loop read for a follow-up no well-formed rewrite was found for (the typed
question with the earlier one after it in brackets), while ``standalone_question`` keeps the question as typed, and
``current_query`` shows the query searched with that bracket left out (an iteration's ``query`` keeps it). A
remark ("Thanks?", "Really?") stays as typed with no ``question``, and its ``leans`` is ``"unmarked"``: nothing in
it leans on the earlier turn, its document is only weighed. ``feedback`` ([{client, rating, comment, wrong_citations, expected,
at}]) holds the ratings people gave the answer, one per client (:mod:`shared.query.feedback`).

Reading is lenient so records written by older builds keep loading: a missing
field takes its default, and a field this build does not know is kept as it
was and written back unchanged. An optional field is written only when it was
stored before or now holds a value, so ``to_doc(from_doc(d)) == d``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict, get_args

from shared.contract.filters import Filters
from shared.contract.ports import Doc, Grade


def past_expiry(expire_at: object, now: datetime) -> bool:
    """Whether a stored ``expire_at`` (an ISO time; None or unreadable: never) lies before ``now``."""
    if not isinstance(expire_at, str):
        return False
    try:
        return datetime.fromisoformat(expire_at) < now
    except (TypeError, ValueError):  # unreadable, or without a time zone
        return False


def later(now: datetime, delta: timedelta) -> datetime:
    """``now + delta``, or the last representable moment when a clock set near the year 9999 would
    overflow it (a deadline or an expiry then never comes, rather than every query failing)."""
    try:
        return now + delta
    except OverflowError:
        return datetime.max.replace(tzinfo=now.tzinfo)


Status = Literal["pending", "running", "answered", "failed", "timed_out"]
Outcome = Literal["answered", "answered_with_caveat", "not_answerable", "failed", "timed_out"]
Decision = Literal["refine", "accept", "abstain", "exhausted"]

TERMINAL: frozenset[str] = frozenset({"answered", "failed", "timed_out"})
STATUSES: tuple[str, ...] = get_args(Status)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

__all__ = [
    "Citation",
    "Context",
    "Decision",
    "Event",
    "Grade",
    "Iteration",
    "Outcome",
    "QueryRecord",
    "Status",
    "TERMINAL",
    "grade_from_doc",
    "grade_to_doc",
]


class Context(TypedDict, total=False):
    """One retrieved chunk as an iteration keeps it (fused across queries)."""

    chunk_id: str
    document_id: str
    title: str
    url: str
    published: str | None
    text: str
    score: float
    index_score: float
    matched_by: list[str]
    position: str  # "p. 12", "slide 3", "Sales, rows 4–9"; absent for a web page or text file


class Citation(TypedDict):
    id: int
    title: str
    url: str
    document_id: str
    chunk_id: str  # the first chunk cited under this number
    chunk_ids: NotRequired[list[str]]  # every chunk of that source cited; absent in older records
    # where the cited chunks stand in their file ("p. 12", "pp. 12, 14", "slide 3"); absent without one.
    # A PDF's ``url`` then opens at that page (``#page=12``).
    position: NotRequired[str]


class Event(TypedDict, total=False):
    stage: str
    type: str
    at: str
    iteration: int
    detail: str


class AnswerSentenceDoc(TypedDict):
    text: str
    citations: list[int]


_SCALARS = (str, int, float, bool, type(None))


def _copy(value: Any) -> Any:
    """A deep copy of a stored value: JSON dicts, lists and scalars copied directly (every
    stage reads and writes the record, contexts and all, several times a query, and
    copy.deepcopy's bookkeeping was most of that), anything else by copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


def grade_to_doc(grade: Grade) -> dict[str, Any]:
    return {f.name: _copy(getattr(grade, f.name)) for f in fields(Grade)}


def grade_from_doc(doc: dict[str, Any]) -> Grade:
    """A :class:`Grade` from its stored form; fields an older build did not write take defaults."""
    known = {k: doc[k] for k in Grade.__dataclass_fields__ if k in doc}
    known.setdefault("score", 0.0)
    known.setdefault("relevance", 0.0)
    known.setdefault("completeness", 0.0)
    known.setdefault("grounded", False)
    known.setdefault("answerable", True)
    return Grade(**known)


def _split(doc: Doc, names: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
    known = {k: v for k, v in doc.items() if k in names}
    extra = {k: _copy(v) for k, v in doc.items() if k not in names}
    return known, extra, frozenset(doc)


@dataclass
class Iteration:
    """One round of the loop: the query it searched with, what it found, how it was graded."""

    iteration: int
    query: str | None = None
    sub_queries: list[str] = field(default_factory=list)
    contexts: list[Context] = field(default_factory=list)
    grade: Grade | None = None
    decision: Decision | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # Written by the stages that know them; absent on an iteration that has not got there.
    sub_queries_used: list[str] | None = None
    sub_queries_succeeded: int | None = None
    transform_source: str | None = None
    grade_source: str | None = None
    # True when the grade failed a threshold, whatever the grader then decided (refine, abstain or
    # exhausted); stored as ``should_refine``, the key the API has always shown.
    below_thresholds: bool | None = None
    failed_thresholds: list[str] | None = None
    # each score as shown beside the decision (shared.query.grading.shown_scores): "0.5999" under 0.6, not "0.60"
    shown_scores: dict[str, str] | None = None
    refined_from: int | None = None
    # the search terms the rewrite appended after the question (shared.contract.text.query_apart), shown apart
    added_terms: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    stored_keys: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    _BASE = ("iteration", "query", "sub_queries", "contexts", "grade", "decision", "timings")
    _LATER = ("sub_queries_used", "sub_queries_succeeded", "transform_source", "grade_source",
              "below_thresholds", "failed_thresholds", "shown_scores", "refined_from",
              "added_terms")
    _STORED_AS = {"below_thresholds": "should_refine"}

    @classmethod
    def from_doc(cls, doc: Doc) -> Iteration:
        keys = {name: cls._STORED_AS.get(name, name) for name in cls._LATER}
        known, extra, stored = _split(doc, cls._BASE + tuple(keys.values()))
        grade = known.get("grade")
        return cls(
            iteration=int(known.get("iteration") or 0),
            query=known.get("query"),
            sub_queries=list(known.get("sub_queries") or []),
            contexts=_copy(list(known.get("contexts") or [])),
            grade=grade_from_doc(grade) if grade else None,
            decision=known.get("decision"),
            timings=dict(known.get("timings") or {}),
            **{name: _copy(known.get(key)) for name, key in keys.items()},
            extra=extra,
            stored_keys=stored,
        )

    def to_doc(self) -> Doc:
        doc: Doc = {
            "iteration": self.iteration,
            "query": self.query,
            "sub_queries": list(self.sub_queries),
            "contexts": _copy(self.contexts),
            "grade": grade_to_doc(self.grade) if self.grade is not None else None,
            "decision": self.decision,
            "timings": dict(self.timings),
        }
        for name in self._LATER:
            value, key = getattr(self, name), self._STORED_AS.get(name, name)
            if value is not None or key in self.stored_keys:
                doc[key] = _copy(value)
        doc.update(_copy(self.extra))
        return doc

    def chunk_ids(self) -> set[str]:
        return {c.get("chunk_id") for c in self.contexts}


@dataclass
class QueryRecord:
    """One query from submission to its end; see the module docstring for the stored shape."""

    id: str
    status: Status
    original_query: str
    deadline: str
    created_at: str
    updated_at: str
    outcome: Outcome | None = None
    current_query: str = ""
    iteration: int = 0
    top_k: int = 0
    max_iterations: int = 0
    model_calls: int = 0
    max_model_calls: int = 0
    expire_at: str | None = None
    iterations: list[Iteration] = field(default_factory=list)
    best_iteration: int | None = None
    answer: str | None = None
    citations: list[Citation] = field(default_factory=list)
    trace_id: str | None = None
    error: str | None = None
    events: list[Event] = field(default_factory=list)
    # Added by the query-loop stages.
    stages_done: list[str] = field(default_factory=list)
    model_fallbacks: int = 0
    language: str | None = None
    answer_sentences: list[AnswerSentenceDoc] | None = None
    answer_provider: str | None = None
    answered_from_iteration: int | None = None
    # Each stage result made without the model, and why: {stage, iteration, reason}.
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    # The metadata filter every search of this query applies (Filters.to_dict); None: none.
    filters: dict[str, Any] | None = None
    # The date range read from the question's time words (shared.query.temporal), and its widenings.
    time_filter: dict[str, Any] | None = None
    # The conversation this query is a turn of, the question it stands for on its own, and the
    # earlier turns a caller sent with it (shared.query.conversation).
    conversation_id: str | None = None
    standalone_question: str | None = None
    history: list[dict[str, str]] | None = None
    # The earlier turn's document a follow-up leans on, why, and that turn's question: {document_id, leans,
    # earlier_question}; its retrieval prefers that document (services.transformer, services.retriever). With
    # "question" when no well-formed rewrite was found: the typed question with the earlier one, which the loop reads.
    follows: dict[str, str] | None = None
    # Ratings people gave the answer, one per client (shared.query.feedback).
    feedback: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    stored_keys: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    _BASE = ("id", "status", "outcome", "original_query", "current_query", "iteration", "top_k",
             "max_iterations", "model_calls", "max_model_calls", "created_at", "updated_at", "deadline")
    _AFTER = ("iterations", "best_iteration", "answer", "citations", "trace_id", "error", "events")
    # Written only once they hold something (or were stored), as the builds before this one did.
    _LATER = ("expire_at", "stages_done", "model_fallbacks", "language", "answer_sentences",
              "answer_provider", "answered_from_iteration", "fallbacks", "filters", "time_filter",
              "conversation_id", "standalone_question", "history", "follows", "feedback")

    # ----------------------------------------------------------- creating

    @classmethod
    def new(
        cls,
        query_id: str,
        query: str,
        *,
        top_k: int,
        max_iterations: int,
        max_model_calls: int,
        now: datetime,
        timeout_s: float,
        trace_id: str | None = None,
        retention_days: int = 30,
    ) -> QueryRecord:
        """The record the gateway creates; the stages fill it in."""
        at = now.isoformat()
        return cls(
            id=query_id,
            status="pending",
            original_query=query,
            current_query=query,
            top_k=top_k,
            max_iterations=max_iterations,
            max_model_calls=max_model_calls,
            created_at=at,
            updated_at=at,
            deadline=later(now, timedelta(seconds=timeout_s)).isoformat(),
            # when the record may be deleted (Firestore TTL in gcp; see infra/firestore.tf)
            expire_at=later(now, timedelta(days=retention_days)).isoformat(),
            trace_id=trace_id,
            events=[{"stage": "gateway", "type": "submitted", "at": at, "iteration": 0}],
        )

    # --------------------------------------------------------- conversion

    @classmethod
    def from_doc(cls, doc: Doc) -> QueryRecord:
        """The record behind a stored document (of this build or an older one)."""
        known, extra, stored = _split(doc, cls._BASE + cls._AFTER + cls._LATER)
        return cls(
            id=str(known.get("id") or ""),
            status=known.get("status") or "pending",
            outcome=known.get("outcome"),
            original_query=known.get("original_query") or "",
            current_query=known.get("current_query") or "",
            iteration=int(known.get("iteration") or 0),
            top_k=int(known.get("top_k") or 0),
            max_iterations=int(known.get("max_iterations") or 0),
            model_calls=int(known.get("model_calls") or 0),
            max_model_calls=int(known.get("max_model_calls") or 0),
            created_at=known.get("created_at") or "",
            updated_at=known.get("updated_at") or "",
            deadline=known.get("deadline") or "",
            expire_at=known.get("expire_at"),
            iterations=[Iteration.from_doc(e) for e in known.get("iterations") or []],
            best_iteration=known.get("best_iteration"),
            answer=known.get("answer"),
            citations=_copy(list(known.get("citations") or [])),
            trace_id=known.get("trace_id"),
            error=known.get("error"),
            events=_copy(list(known.get("events") or [])),
            stages_done=list(known.get("stages_done") or []),
            model_fallbacks=int(known.get("model_fallbacks") or 0),
            language=known.get("language"),
            answer_sentences=_copy(known.get("answer_sentences")),
            answer_provider=known.get("answer_provider"),
            answered_from_iteration=known.get("answered_from_iteration"),
            fallbacks=_copy(list(known.get("fallbacks") or [])),
            filters=_copy(known.get("filters")),
            time_filter=_copy(known.get("time_filter")),
            conversation_id=known.get("conversation_id"),
            standalone_question=known.get("standalone_question"),
            history=_copy(known.get("history")),
            follows=_copy(known.get("follows")),
            feedback=_copy(list(known.get("feedback") or [])),
            extra=extra,
            stored_keys=stored,
        )

    def to_doc(self) -> Doc:
        """The document to store (and the JSON the front doors return)."""
        doc: Doc = {name: _copy(getattr(self, name)) for name in self._BASE}
        for name in self._LATER[:1]:  # expire_at sits before the lists, as it always has
            if self.expire_at is not None or name in self.stored_keys:
                doc[name] = self.expire_at
        doc["iterations"] = [entry.to_doc() for entry in self.iterations]
        for name in self._AFTER[1:]:
            doc[name] = _copy(getattr(self, name))
        defaults = {"stages_done": [], "model_fallbacks": 0, "fallbacks": [], "feedback": []}
        for name in self._LATER[1:]:
            value = getattr(self, name)
            # A turn of a conversation always says what it stands for (null: not read yet).
            pending = name == "standalone_question" and self.conversation_id is not None
            if name in self.stored_keys or value != defaults.get(name) or pending:
                doc[name] = _copy(value)
        doc.update(_copy(self.extra))
        return doc

    # ------------------------------------------------------------ reading

    def search_filters(self) -> Filters | None:
        """The query's filters as a value (None when it has none)."""
        if not self.filters:
            return None
        # Stored times are absolute, so the clock passed here is never read.
        return Filters.from_dict(self.filters, now=datetime.now(UTC))

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    @property
    def question(self) -> str:
        """The question the loop retrieves for, grades and answers: the standalone question once the
        transformer has read the conversation (or, for a follow-up no well-formed rewrite was found for, the
        question it reads with the earlier one, ``follows.question``), else the question as typed."""
        return (self.follows or {}).get("question") or self.standalone_question or self.original_query

    @property
    def model_calls_left(self) -> int:
        return self.max_model_calls - self.model_calls

    def deadline_passed(self, now: datetime) -> bool:
        """True once the deadline is due; a record without a usable deadline counts as overdue,
        because it could otherwise be waited on forever."""
        try:
            return datetime.fromisoformat(self.deadline) <= now
        except (TypeError, ValueError):
            return True

    def expired(self, now: datetime) -> bool:
        """Past its ``expire_at``: Firestore's TTL deletes such a record within a day or so, the
        embedded runtime's sweep within the hour; until then every reader takes it as gone."""
        return past_expiry(self.expire_at, now)

    def entry(self, iteration: int | None) -> Iteration | None:
        """The ``iterations[]`` entry of ``iteration`` (None if not recorded yet)."""
        for entry in self.iterations:
            if entry.iteration == iteration:
                return entry
        return None

    def ensure_entry(self, iteration: int) -> Iteration:
        """The entry of ``iteration``, created empty if absent."""
        entry = self.entry(iteration)
        if entry is None:
            entry = Iteration(iteration=iteration)
            self.iterations.append(entry)
            self.iterations.sort(key=lambda e: e.iteration)
        return entry

    def stage_done(self, iteration: int, stage: str) -> bool:
        return stage_key(iteration, stage) in self.stages_done

    def stage_done_in_any_iteration(self, stage: str) -> bool:
        return any(key.endswith(f"/{stage}") for key in self.stages_done)

    def best_graded_iteration(self) -> int | None:
        """The iteration with the highest grade score (the earlier one on a tie): what the grader keeps
        as ``best_iteration``."""
        best: tuple[float, int] | None = None
        for entry in self.iterations:
            if entry.grade is None:
                continue
            key = (float(entry.grade.score), -entry.iteration)
            if best is None or key > best:
                best = key
        return None if best is None else -best[1]

    def best_entry(self) -> Iteration | None:
        """The entry of ``best_iteration``, else the last one, else None."""
        if self.best_iteration is not None:
            kept = self.entry(self.best_iteration)
            if kept is not None:
                return kept
        return self.iterations[-1] if self.iterations else None

    def queries_tried(self) -> tuple[str, ...]:
        """Every query searched with so far, oldest first."""
        return tuple(e.query for e in self.iterations if e.query)

    # ------------------------------------------------------------ changing

    def add_event(self, stage: str, type_: str, at: datetime, *, iteration: int | None = None,
                  detail: str | None = None) -> None:
        event: Event = {"stage": stage, "type": type_, "at": at.isoformat()}
        if iteration is not None:
            event["iteration"] = iteration
        if detail is not None:
            event["detail"] = detail
        self.events.append(event)

    def end(self, status: Literal["failed", "timed_out"], error: str, now: datetime) -> None:
        """End the query without an answer, keeping why."""
        self.status = status
        self.outcome = status
        self.error = error
        self.updated_at = now.isoformat()
        self.add_event("runtime", status, now, detail=error)


def stage_key(iteration: int, stage: str) -> str:
    """The idempotency key of one stage's work on one iteration."""
    return f"{iteration}/{stage}"
