"""The gateway's request and response shapes as types, from which ``/openapi.json`` is generated.

Responses are TypedDicts (the handlers send JSON objects, and a key that is not always there is
``NotRequired``, not null); the request body is a pydantic model whose bounds are the constants
:mod:`shared.query.api` validates with, so the document cannot drift from the checks. The checks
themselves stay in :mod:`shared.query.api`, shared with the CLI and MCP, whose error texts are
the API's (a field list for the unknown-field check comes from :class:`QueryRequest`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, RootModel
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

from shared.contract.sources import SOURCE_KINDS
from shared.query.api import MAX_ITERATIONS_RANGE, TOP_K_RANGE
from shared.query.feedback import MAX_COMMENT_CHARS, MAX_EXPECTED_CHARS
from shared.query.record import Outcome, Status

SourceKind = Literal[SOURCE_KINDS]  # type: ignore[valid-type]
DateTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
#: Seconds POST /v1/queries waits at most; a longer ``wait_s`` is shortened, not refused.
MAX_WAIT_S = 60.0


class Error(TypedDict):
    error: Annotated[str, Field(description="What was wrong and what to send instead.")]


class Refusal(TypedDict):
    id: str
    error: str


class Redrive(TypedDict):
    """retried or purged: the dead letters handled; refused: those that could not be."""

    retried: NotRequired[list[str]]
    purged: NotRequired[list[str]]
    refused: NotRequired[list[Refusal]]


class DeadLetters(TypedDict):
    dead_letters: list[dict[str, Any]]


class Filters(BaseModel):
    """Which documents every search of the query may return, decided before ranking; all conditions
    must hold. Relative times are resolved when the query is submitted."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(None, description="A feed or sitemap URL, gs://bucket/prefix or a folder the documents "
                        "came from (a prefix).")
    since: str = Field(None, description="Published at or after: a date (2025-06-01), an ISO 8601 time or an "
                       "age (12h, 7d, 2w, 3m, 1y).")
    until: str = Field(None, description="Published before: a date (through that day), an ISO 8601 time or an age.")
    kind: SourceKind = Field(None)
    where: dict[str, str] = Field(None, description="Metadata key: value pairs that must all be equal.")


class QueryRequest(BaseModel):
    """POST /v1/queries. ``question`` is the name everywhere (CLI, MCP, page); ``query`` is its old
    name, still accepted, never both."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "anyOf": [{"required": ["question"]}, {"required": ["query"]}],
        "not": {"required": ["question", "query"]},
    })

    question: str = Field(None, min_length=1, description="The question. Plain text: control characters other "
                          "than tab and newline are refused.")
    top_k: int = Field(None, ge=TOP_K_RANGE[0], le=TOP_K_RANGE[1],
                       description="How many contexts to retrieve per iteration.")
    max_iterations: int = Field(None, ge=MAX_ITERATIONS_RANGE[0], le=MAX_ITERATIONS_RANGE[1],
                                description="How many refinements the loop may make after the first try.")
    wait_s: float = Field(0, ge=0, description=f"Seconds to wait for the answer before replying 202; values "
                          f"above {MAX_WAIT_S:g} are treated as {MAX_WAIT_S:g}.")
    filters: Filters = Field(None)
    conversation_id: str = Field(None, description="Continue this conversation (the id an earlier question "
                                 "returned): the question is read in the light of its earlier turns. Leave it "
                                 "out to start one.")
    query: str = Field(None, min_length=1, deprecated=True,
                       description="The old name of `question`, accepted for one more release.")


class QueryAccepted(TypedDict):
    id: str
    status: Status
    conversation_id: NotRequired[str | None]
    status_url: Annotated[str, Field(description="GET it for the record.")]
    events_url: Annotated[str, Field(description="Server-Sent Events of its stages.")]


class Grade(TypedDict, total=False):
    """How well an iteration's contexts answer the query (0..1 scores)."""

    score: float
    relevance: float
    completeness: float
    grounded: bool
    answerable: bool
    reasoning: str
    missing_aspects: list[str]


class Context(TypedDict, total=False):
    """A retrieved chunk as the iteration saw it."""

    chunk_id: str
    document_id: str
    title: str
    url: str
    text: str
    score: float
    position: str
    heading: str  # the heading of the section the chunk starts in (absent when none)


class Iteration(TypedDict):
    iteration: Annotated[int, Field(ge=0)]
    query: NotRequired[Annotated[str, Field(description="The (rewritten) query retrieved with.")]]
    sub_queries: NotRequired[list[str]]
    contexts: NotRequired[list[Context]]
    grade: NotRequired[Grade | None]
    decision: NotRequired[Annotated[str | None, Field(description="refine, accept, abstain or exhausted.")]]
    timings: NotRequired[Annotated[dict[str, float], Field(description="Milliseconds spent per stage.")]]


class Citation(TypedDict):
    id: Annotated[int | str, Field(description="The number the answer cites as [n].")]
    title: NotRequired[str]
    url: NotRequired[str]
    document_id: NotRequired[str]
    chunk_id: NotRequired[Annotated[str, Field(description="The first chunk cited under this number.")]]
    chunk_ids: NotRequired[Annotated[list[str], Field(
        description="Every chunk of this source the answer cites: chunks of one document (or one URL) share "
        "one number.")]]
    position: NotRequired[Annotated[str, Field(
        description="Where in its file the cited chunks stand: \"p. 12\", \"pp. 12, 15\", \"slide 3\", "
        "\"Sales, rows 4–9\"; absent for a web page or text file. A PDF's url then ends #page=12.")]]


class Event(TypedDict):
    stage: str
    type: str
    at: DateTime
    iteration: NotRequired[int | None]
    detail: NotRequired[Any]


class Fallback(TypedDict):
    stage: str
    iteration: int
    reason: str


class TimeFilter(TypedDict):
    """The question's time words read as a published-date range (issue 27; absent when it names no time
    or the caller gave a date range), and each step the retriever widened it by when it held nothing on
    the question's topic."""

    phrase: str
    since: DateTime | None
    until: DateTime | None
    newest: bool
    window_days: int | None
    widened: list[str]


class FeedbackRequest(BaseModel):
    """POST /v1/queries/{query_id}/feedback: a rating of the query's answer. One rating per query and
    client: a second one from the same client replaces the first."""

    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"] = Field(description="up: the answer was right; down: it was not.")
    comment: str = Field(None, max_length=MAX_COMMENT_CHARS, description="Why, in plain text (control "
                         "characters other than tab and newline are refused). Kept as data, shown as text, never "
                         "sent to a model.")
    wrong_citations: list[int] = Field(None, description="The numbers of the citations ([n]) that were wrong; each "
                                       "must be one the answer has.")
    expected: str = Field(None, max_length=MAX_EXPECTED_CHARS, description="The answer that was expected, in plain "
                          "text (an evaluation case exported with `ragbus eval --from-feedback` keeps it).")


class Rating(TypedDict):
    client: Annotated[str, Field(description="A hash of who rated (X-Ragbus-Client and the remote address), "
                                 "never the name or address itself.")]
    rating: Literal["up", "down"]
    comment: str | None
    wrong_citations: list[int]
    expected: str | None
    at: DateTime


class FeedbackAccepted(TypedDict):
    query_id: str
    rating: Literal["up", "down"]
    replaced: Annotated[bool, Field(description="True when this client's earlier rating was replaced.")]
    up: Annotated[int, Field(ge=0, description="Clients that rated the answer up.")]
    down: Annotated[int, Field(ge=0, description="Clients that rated the answer down.")]


class QueryRecord(TypedDict):
    id: str
    status: Status
    outcome: Outcome | None
    original_query: str
    current_query: NotRequired[str]
    iteration: NotRequired[int]
    top_k: NotRequired[int]
    max_iterations: NotRequired[int]
    model_calls: NotRequired[int]
    max_model_calls: NotRequired[int]
    created_at: DateTime
    updated_at: NotRequired[DateTime]
    deadline: DateTime
    iterations: list[Iteration]
    best_iteration: NotRequired[int | None]
    answer: NotRequired[str | None]
    citations: list[Citation]
    trace_id: NotRequired[str | None]
    filters: NotRequired[Filters]
    time_filter: NotRequired[TimeFilter]
    error: NotRequired[str | None]
    events: list[Event]
    fallbacks: NotRequired[Annotated[list[Fallback], Field(
        description="Each stage result made without the model (a transient model failure, an unusable reply "
        "or a spent model-call budget), and why.")]]
    feedback: NotRequired[Annotated[list[Rating], Field(
        description="The ratings people gave the answer, one per client (POST /v1/queries/{query_id}/feedback).")]]


class SearchResult(TypedDict):
    rank: Annotated[int, Field(ge=1)]
    score: float
    text: str
    document_id: str
    chunk_id: str
    title: str
    url: str
    published: NotRequired[str | None]
    position: NotRequired[Annotated[str, Field(
        description="Where in its file the chunk stands: \"p. 12\", \"slide 3\", \"Sales, rows 4–9\"; absent "
        "for a web page or text file.")]]


class SearchResponse(TypedDict):
    query: str
    k: int
    results: list[SearchResult]


class TraceRow(TypedDict):
    span_id: str
    parent_id: NotRequired[str | None]
    depth: Annotated[int, Field(ge=0)]
    name: str
    label: str
    status: str
    offset_ms: float
    duration_ms: float


class Trace(TypedDict):
    """Every span of the query's one trace, depth-first."""

    trace_id: str | None
    note: NotRequired[str]
    console_url: NotRequired[str]
    duration_ms: float
    rows: list[TraceRow]


class UnreadyStages(RootModel[dict[str, str]]):
    """Each stage this gateway's process runs (ragbus serve) that cannot do its work, with the reason
    (e.g. the local grader's model file is missing or was fit on other features, and how to refit it).
    Absent when every stage is ready."""


class ModelHealth(TypedDict):
    """Whether the configured model answers; after the model API refused a stage (unknown or retired model,
    invalid argument, no permission) it is unusable with the HTTP status and the reason, and while its server
    cannot be reached (an OpenAI-compatible server that is down) unusable with ``reachable`` false and the reason."""

    model: str | None
    usable: bool
    reachable: NotRequired[bool]
    status: NotRequired[int]
    reason: NotRequired[str]
    stage: NotRequired[str]
    at: NotRequired[str]
    trace_id: NotRequired[str | None]


class Health(TypedDict):
    status: Literal["ok"]
    runtime: NotRequired[str]
    model: NotRequired[ModelHealth]
    stages: NotRequired[UnreadyStages]


class DamagedFile(TypedDict):
    """A damaged index file found and not yet repaired."""

    file: str
    reason: str
    set_aside: str  # where the damaged folder was moved ("" when it was not)
    answering: bool  # searches answer meanwhile (rows rebuilt from chunks.db), or fail (chunks.db itself)


class IndexDamage(TypedDict):
    damaged: dict[str, DamagedFile]


class Readiness(TypedDict):
    """``degraded``: answering, while a damaged index file is rebuilt (``index``)."""

    status: Literal["ready", "degraded", "unready"]
    model: ModelHealth
    stages: NotRequired[UnreadyStages]
    index: NotRequired[IndexDamage]
    storage: NotRequired[str]  # why nothing can be stored: the data directory's disk is full
