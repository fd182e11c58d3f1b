"""The MCP face of the gateway: three tools over the same query operations as HTTP (``search_documents``,
``ask``, and ``feedback``, which rates an answer as ``POST /v1/queries/{id}/feedback`` does).

Both tools run the whole loop (submit, then wait for the record to end) so an
agent gets graded contexts or a cited answer in one call. The tools are
coroutines: a tool call waits for its query on the event loop (each read of the
record a short worker-thread job), never holding a worker thread for the whole
query. (As plain functions the SDK ran each in a worker thread until its query
ended, and ~40 pending asks took every thread of anyio's pool: ``/healthz`` then
waited 58 s.)

Arguments are as strict as the HTTP API's: ``top_k`` is a JSON integer, not
``"5"`` or ``true`` (pydantic's lax mode would take both), and an argument the
tool does not take is refused, naming it (the SDK dropped ``max_iterations: 99``
or a misspelt ``top_k`` without a word, where REST answers 400).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import Tool as MCPTool
from pydantic import Field

from services.gateway.backlog import QueryBacklog
from services.gateway.feedback import RateBound, client_of, remote_address
from services.gateway.mcp_messages import name_invalid_params
from services.gateway.replies import stopping_note
from shared.contract.deps import Deps
from shared.contract.errors import DataFileError, InvalidInput, RetryableError
from shared.contract.text import shown
from shared.query.api import (
    TOP_K_RANGE,
    ConversationNotFound,
    QueryNotFound,
    answer_summary,
    contexts_summary,
    submit_query,
    validate_int,
    validate_query_text,
    wait_for_query_async,
)
from shared.query.feedback import (
    QueryNotEnded,
    feedback_counts,
    give_feedback,
    strip_completion_prefix,
    validate_feedback,
)
from shared.query.record import QueryRecord

log = logging.getLogger("ragbus.gateway")

# A query ends by its deadline (readers expire it), so waiting slightly longer
# than the query timeout always returns a finished record.
_WAIT_GRACE_S = 2.0

#: ``top_k`` as the HTTP API takes it: a JSON integer in range (strict: no "5", no true).
TopK = Annotated[int, Field(strict=True, ge=TOP_K_RANGE[0], le=TOP_K_RANGE[1])]


def _quietly(build: Callable[[], MCPServer]) -> MCPServer:
    """Build the server without letting it reconfigure the process's logging.

    ``MCPServer.__init__`` calls ``logging.basicConfig`` (a rich handler at INFO on
    the root logger) when the root has no handler yet; logging belongs to the
    application (CLI, Cloud Function), so the root logger is put back as it was.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return build()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def build_mcp_server(deps: Deps, *, unready: Callable[[], dict[str, str]] = dict,
                     ratings: RateBound | None = None, stopping: threading.Event | None = None,
                     backlog: QueryBacklog | None = None) -> MCPServer:
    """An MCP server exposing ``search_documents``, ``ask`` and ``feedback`` for ``deps``; ``unready`` gives the
    stages of this process that cannot work, with the reason (then a tool refuses the question, as the HTTP API
    does); ``ratings`` bounds the ratings per remote address and minute (shared with the HTTP route);
    ``stopping`` is set when the server stops (a tool waiting for an answer then says so)."""
    server = _quietly(lambda: _Server(
        "ragbus",
        title="ragbus retrieval and answers",
        instructions=(
            "Use search_documents to get graded passages from the indexed documents for a "
            "question, and ask to get a written answer with numbered citations. When the user says an "
            "answer was right or wrong, call feedback with its query_id."
        ),
        version="0.1.0",
    ))
    server.max_query_chars = deps.settings.max_query_chars
    server.middleware.append(name_invalid_params)

    run_loop = _query_loop(deps, unready, stopping or threading.Event(), backlog or QueryBacklog(deps))
    _add_search_documents(server, run_loop)
    _add_ask(server, run_loop)
    _add_feedback(server, deps, ratings or RateBound())
    return server


#: Runs one question through the whole query loop: (question, top_k, filters, conversation_id) -> the ended record.
_RunLoop = Callable[..., Awaitable[QueryRecord]]


def _query_loop(deps: Deps, unready: Callable[[], dict[str, str]], stopping: threading.Event,
                backlog: QueryBacklog) -> _RunLoop:
    """Submit a question and wait for its record to end, each failure a tool error the agent can read."""

    async def run_loop(question: str, top_k: int | None, filters: dict[str, Any] | None = None,
                       conversation_id: str | None = None) -> QueryRecord:
        if reasons := await anyio.to_thread.run_sync(unready):
            raise ToolError("not ready, so no question is taken: "
                            + "; ".join(f"{stage}: {reason}" for stage, reason in reasons.items()))
        try:
            record = await anyio.to_thread.run_sync(
                lambda: backlog.submit(lambda: submit_query(deps, question, top_k=top_k, field="question",
                                                            filters=filters, conversation_id=conversation_id)))
        except InvalidInput as exc:
            raise ToolError(str(exc)) from exc
        except ConversationNotFound as exc:
            raise ToolError(f"no conversation with id {shown(conversation_id)} (it may have expired with its "
                            "queries); leave conversation_id out to start one") from exc
        except RetryableError as exc:
            raise ToolError(f"the query could not be started: {exc}") from exc
        except DataFileError as exc:  # a full disk: named, as on REST (507) and chat completions
            raise ToolError(f"the query could not be stored: {exc}") from exc
        record = await wait_for_query_async(deps, record.id, deps.settings.query_timeout_s + _WAIT_GRACE_S, stopping)
        if not record.ended and stopping.is_set():
            raise ToolError(stopping_note(record.id))
        return record
    return run_loop


def _add_search_documents(server: MCPServer, run_loop: _RunLoop) -> None:
    @server.tool(
        title="Search documents",
        description=(
            "Retrieve passages for a question through the full query loop (rewrite, "
            f"retrieve, grade, refine). top_k is {TOP_K_RANGE[0]}..{TOP_K_RANGE[1]} (default: RAGBUS_TOP_K, as on "
            "REST and the CLI). Returns "
            "the best iteration's contexts with its grade (score, relevance, completeness, "
            "grounded) and how many iterations ran. `query` is the old name of `question`. "
            + _FILTERS_DESCRIPTION
        ),
    )
    async def search_documents(question: str | None = None, top_k: TopK | None = None,
                               query: str | None = None, source: str | None = None,
                               since: str | None = None, until: str | None = None,
                               where: dict[str, str] | None = None, kind: str | None = None) -> dict[str, Any]:
        # "question" is the name everywhere (HTTP, CLI, the ask tool); "query" is still accepted
        if question is not None and query is not None:
            raise ToolError("send 'question' only: 'query' is its old name")
        if question is None and query is None:
            raise ToolError(_MISSING_QUESTION)
        return contexts_summary(await run_loop(question if question is not None else query, top_k,
                                               _filters(source, since, until, where, kind)))


def _add_ask(server: MCPServer, run_loop: _RunLoop) -> None:
    @server.tool(
        title="Ask",
        description=(
            "Answer a question from the indexed documents. Returns the answer text, its "
            "numbered citations (title, url, document and chunk ids), the outcome "
            "(answered, answered_with_caveat, not_answerable, failed, timed_out), the query id and the "
            "conversation id. To ask a follow-up question (\"and what is its maximum?\"), send the "
            "conversation_id the previous answer returned: the question is read in the light of the "
            "earlier turns (standalone_question says how). " + _FILTERS_DESCRIPTION
        ),
    )
    async def ask(question: str | None = None, source: str | None = None, since: str | None = None,
                  until: str | None = None, where: dict[str, str] | None = None,
                  conversation_id: str | None = None, kind: str | None = None) -> dict[str, Any]:
        if question is None:  # as POST /v1/queries says it, not the SDK's validation text
            raise ToolError(_MISSING_QUESTION)
        record = await run_loop(question, None, _filters(source, since, until, where, kind), conversation_id)
        doc = record.to_doc()
        return {**answer_summary(record), "conversation_id": doc.get("conversation_id"),
                "standalone_question": doc.get("standalone_question")}


def _add_feedback(server: MCPServer, deps: Deps, bound: RateBound) -> None:
    @server.tool(
        title="Rate an answer",
        description=(
            "Say whether an answer was right: query_id is the id ask returned; rating is up or down; comment "
            "(optional, plain text) says why; wrong_citations (optional) lists the numbers [n] of the citations "
            "that were wrong; expected (optional) is the answer that was expected. One rating per query and "
            "client: rating again replaces the earlier one. Returns the answer's counts of up and down ratings."
        ),
    )
    async def feedback(query_id: str, rating: str, ctx: Context, comment: str | None = None,
                       wrong_citations: list[int] | None = None, expected: str | None = None) -> dict[str, Any]:
        given = {name: value for name, value in (("rating", rating), ("comment", comment),
                                                 ("wrong_citations", wrong_citations), ("expected", expected))
                 if value is not None}
        try:
            request = ctx.request_context.request  # the HTTP request on the streamable HTTP transport
        except ValueError:  # called in-process, outside a request
            request = None
        try:
            checked = validate_feedback(given)
            client = client_of(request) if request is not None else "mcp:in-process"
        except InvalidInput as exc:
            raise ToolError(str(exc)) from exc
        if request is not None and (wait := bound.take(remote_address(request))) > 0:
            raise ToolError(f"more than {bound.limit} ratings a minute from this address; try again in "
                            f"{max(1, round(wait))} s")
        query_id = strip_completion_prefix(query_id)
        try:
            record, replaced = await anyio.to_thread.run_sync(
                lambda: give_feedback(deps, query_id, checked, client=client))
        except QueryNotFound as exc:
            raise ToolError(f"no query with id {shown(query_id)}; send the query_id ask returned") from exc
        except (QueryNotEnded, InvalidInput) as exc:
            raise ToolError(str(exc)) from exc
        return {"query_id": record.id, "rating": checked.rating, "replaced": replaced, **feedback_counts(record)}


_FILTERS_DESCRIPTION = (
    "Optional filters, all of which must hold: source (a feed or sitemap URL, gs://bucket/prefix or a "
    "folder the documents came from), since and until (published time: a date such as 2025-06-01, an "
    "ISO time, or an age such as 7d, 2w, 3m, 1y), kind (how the document came in: feed, sitemap, file or gcs), "
    "where (metadata key: value pairs)."
)


def _filters(source: str | None, since: str | None, until: str | None,
             where: dict[str, str] | None, kind: str | None) -> dict[str, Any] | None:
    """The tools' filter arguments as the API's ``filters`` object (None when none is set)."""
    out = {name: value for name, value in (("source", source), ("since", since), ("until", until),
                                           ("kind", kind), ("where", where)) if value is not None}
    return out or None


_MISSING_QUESTION = 'missing \'question\'; send {"question": "your question"}'
#: The arguments each tool takes ("query" is search_documents' old name for "question").
_TAKES = {"search_documents": {"question", "top_k", "query", "source", "since", "until", "kind", "where"},
          "ask": {"question", "source", "since", "until", "kind", "where", "conversation_id"},
          "feedback": {"query_id", "rating", "comment", "wrong_citations", "expected"}}


def _checked_arguments(tool: str, arguments: dict[str, Any], *, max_query_chars: int) -> dict[str, Any]:
    """The tools' arguments checked by the HTTP API's own rules, so a wrong type or value gets the
    API's one-line message (the SDK would answer with pydantic's multi-line text and a link)."""
    out = dict(arguments)
    try:
        for field in ("question", "query"):
            if out.get(field) is not None:
                validate_query_text(out[field], max_chars=max_query_chars, field=field)
        if out.get("top_k") is not None:
            out["top_k"] = validate_int(out["top_k"], "top_k", TOP_K_RANGE)
        for field in ("source", "since", "until", "kind", "conversation_id", "query_id"):
            value = out.get(field)
            if value is not None and (not isinstance(value, str) or not value.isprintable()):
                raise InvalidInput(f"'{field}' must be printable text, got {shown(value)}")
        where = out.get("where")
        if where is not None and (not isinstance(where, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in where.items())):
            raise InvalidInput(f"'where' must be an object of text keys and values, got {shown(where)}")
        if tool == "feedback":  # the API's own checks, before pydantic's lax conversions and its missing-field text
            if out.get("query_id") is None:
                raise InvalidInput("missing 'query_id'; send the query_id ask returned")
            validate_feedback({k: v for k, v in out.items() if k != "query_id" and v is not None})
    except InvalidInput as exc:
        raise ToolError(str(exc)) from None
    return out


class _Server(MCPServer):
    """The SDK's server, with ``question`` declared required in the listed input schemas, which
    clients and models read.

    The tool functions take it as optional so that a missing one gets the API's own message
    rather than the SDK's validation text, and so that search_documents still takes the old
    name ``query`` alone (marked deprecated in the schema)."""

    #: The submitted query's limit, so the empty-question message names it (build_mcp_server sets it).
    max_query_chars: int

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        taken = _TAKES.get(name)
        unknown = sorted(set(arguments) - taken) if taken is not None else []
        if unknown:
            raise ToolError(f"{name} takes no argument {', '.join(map(shown, unknown))}; send only "
                            f"{', '.join(sorted(taken - {'query'}))}")
        if taken is not None:
            arguments = _checked_arguments(name, arguments, max_query_chars=self.max_query_chars)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK's generic message, its text kept on the server
        except ToolError as exc:
            # The SDK puts "Error executing tool ask: " before a tool's own message: the agent (and the person
            # reading its transcript) reads the problem plainly, as REST and the CLI say it
            if isinstance(exc.__cause__, ToolError):
                raise ToolError(str(exc.__cause__)) from exc.__cause__
            raise

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        for tool in tools:
            schema = dict(tool.input_schema)
            properties = dict(schema.get("properties") or {})
            if "question" not in properties:
                continue
            properties["question"] = {"type": "string", "title": "Question", "minLength": 1,
                                      "description": "The question, in words."}
            if "query" in properties:
                properties["query"] = {"type": "string", "title": "Query", "deprecated": True,
                                       "description": "The old name of 'question'; send one of them."}
            tool.input_schema = {**schema, "properties": properties, "required": ["question"]}
        return tools
