"""The OpenAI-compatible face of the gateway: ``GET /v1/models`` and ``POST /v1/chat/completions``.

Chat front ends (Open WebUI, LibreChat), the ``openai`` SDKs and agent frameworks
(LangChain's ``ChatOpenAI``, LlamaIndex's ``OpenAILike``) speak the OpenAI Chat
Completions API, so this module maps it onto the same query operation as
``POST /v1/queries``: the last user message is the question, the user/assistant turns
before it are the conversation it follows (``history``), and the assistant message is
the query's answer, its citations appended as numbered Markdown links and given
structured in ``citations``. An abstention is an ordinary assistant message saying so;
a query that failed or ran out of time is an error, in OpenAI's error shape
(``{"error": {"message", "type", "param", "code"}}``, the shape every client parses).

What the Chat Completions API has and ragbus has not: a system prompt cannot change
how ragbus answers (its prompts hold the injection rules), so system and developer
messages are read and set aside; ``temperature``, ``max_tokens`` and the other sampling
arguments are accepted and ignored (the loop's own prompts set them), each held to OpenAI's
type and range (``max_tokens: -1`` is OpenAI's 400 ``integer_below_min_value``); arguments that
ask for something ragbus cannot give (``n`` > 1, log probabilities, audio, a JSON
``response_format``) are refused by name rather than silently not honoured.

Request shapes are pydantic models, so the OpenAPI document is generated from them
(:func:`openapi_fragment`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from services.gateway.backlog import BacklogFull, QueryBacklog
from services.gateway.replies import (
    BodyTooLarge,
    DuplicateKey,
    json_problem,
    loads_body,
    read_bounded_body,
    stopping_note,
)
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.contract.text import SHOWN_CHARS
from shared.contract.text import shown as _echo
from shared.query import api
from shared.query.plain_answer import addresses_in_code_spans
from shared.query.record import QueryRecord

log = logging.getLogger("ragbus.gateway")

#: Chat front ends send the whole conversation every turn; the history ragbus keeps of it is
#: bounded by the conversation settings, this only bounds what is read off the socket.
MAX_CHAT_BODY_BYTES = 1024 * 1024
MAX_MESSAGES = 1000
# A query ends by its deadline (readers expire it): waiting a little longer always sees it end.
_WAIT_GRACE_S = 2.0
KEEPALIVE_S = 10.0
#: Answer text is sent in pieces of about this many characters (whole words), so a chat
#: front end shows it arriving; the loop writes the answer whole, at the end.
_PIECE_CHARS = 48
_OWNER = "ragbus"
#: The models a client may name: the loop as configured, and the loop without refinement
#: (one retrieve-and-grade pass: quicker, at the cost of the questions a rewrite would rescue).
MODELS: dict[str, dict[str, Any]] = {
    "ragbus": {},
    "ragbus-quick": {"max_iterations": 0},
}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_TOKENS = re.compile(r"\w+|[^\w\s]")
_SOURCES_BLOCK = re.compile(r"\n\nSources:\n(?:\d+\. [^\n]*(?:\n|$))+\Z")
# pydantic names the member of a union it tried in the error's location: not an argument's name
_UNION_TAG = re.compile(r"(str|int|float|bool|list\[.*\]|dict\[.*\]|TextPart)\Z")
_SAFE_URL = re.compile(r"https?://[^\s<>]+\Z", re.IGNORECASE)
_MARKUP = re.compile(r"([\\\[\]*_`<>])")


# ------------------------------------------------------------------ request shapes

_INT64 = 2**63 - 1  # OpenAI's integers are 64-bit: a larger one is out of range, however it is spelled
#: the numeric arguments' checks, whose failures _validation_error words as OpenAI does
_NUMERIC_ERRORS = frozenset({"int_type", "float_type", "greater_than_equal", "less_than_equal", "finite_number"})


def _Integer(low: int, high: int = _INT64) -> Any:  # noqa: N802 (a type)
    """An integer argument in OpenAI's range (strict: a boolean or 2.0 is no integer)."""
    return Annotated[int, Field(ge=low, le=high)]


def _Decimal(low: float, high: float) -> Any:  # noqa: N802 (a type)
    """A number argument in OpenAI's range; NaN and infinity (JSON's NaN, Infinity) are in none."""
    return Annotated[float, Field(ge=low, le=high, allow_inf_nan=False)]



class TextPart(BaseModel):
    """One part of a message's content; only text parts can be read."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """A message of the conversation. ``name``, ``tool_calls`` and the like are accepted and not used."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    include_usage: bool | None = None


class ChatFilters(BaseModel):
    """The ``filters`` object of ``POST /v1/queries`` (issue 27), as an extension field."""

    model_config = ConfigDict(extra="forbid", strict=True)
    source: str | None = None
    since: str | None = None
    until: str | None = None
    kind: str | None = None
    where: dict[str, str] | list[str] | None = None


class ChatCompletionRequest(BaseModel):
    """The OpenAI Chat Completions request, plus ragbus's ``filters``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str = Field(description="`ragbus`, or another id from GET /v1/models.")
    messages: list[ChatMessage] = Field(
        min_length=1, max_length=MAX_MESSAGES,
        description="The conversation: the last user message is the question, the user and assistant "
                    "messages before it are the conversation it follows. System messages are read and set aside.")
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    filters: ChatFilters | None = Field(
        default=None, description="ragbus extension: search only documents matching these filters "
                                  "(the `filters` object of POST /v1/queries).")
    # Accepted and ignored: the loop's own prompts set how its model samples and how long it writes. Each is
    # held to OpenAI's range all the same, so a client's mistake is the 400 OpenAI would answer, not silence.
    temperature: _Decimal(0, 2) | None = None
    top_p: _Decimal(0, 1) | None = None
    max_tokens: _Integer(1) | None = None
    max_completion_tokens: _Integer(1) | None = None
    frequency_penalty: _Decimal(-2, 2) | None = None
    presence_penalty: _Decimal(-2, 2) | None = None
    seed: _Integer(-_INT64 - 1) | None = None
    stop: str | list[str] | None = None
    user: str | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    logit_bias: dict[str, _Integer(-100, 100)] | None = None
    parallel_tool_calls: bool | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None  # tools' older name, as function_call is tool_choice's
    function_call: Any = None
    prediction: dict[str, Any] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    prompt_cache_retention: str | None = None
    moderation: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None  # ragbus searches its documents, as it does for every question
    reasoning_effort: str | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    verbosity: str | None = None
    # Refused when set to what ragbus cannot give (checked in _refused_arguments).
    n: _Integer(1, 128) | None = None
    logprobs: bool | None = None
    top_logprobs: _Integer(0, 20) | None = None
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None


#: the arguments held to a numeric range (their errors are worded as OpenAI words them)
_NUMERIC_ARGUMENTS = frozenset({"temperature", "top_p", "max_tokens", "max_completion_tokens", "frequency_penalty",
                                "presence_penalty", "seed", "logit_bias", "n", "top_logprobs"})


# ------------------------------------------------------------------ errors


class ChatError(Exception):
    """An error to answer in OpenAI's shape."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


def error_type(status: int) -> str:
    """OpenAI's error ``type`` for an HTTP status."""
    return {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
            429: "rate_limit_exceeded"}.get(status, "invalid_request_error" if status < 500 else "server_error")


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


def openai_error(exc: ChatError) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message, param=exc.param, code=exc.code),
                        status_code=exc.status, headers=exc.headers)


#: Paths whose errors (the guard's too) are in OpenAI's shape: their clients read no other. Besides the
#: two ragbus serves, the OpenAI API's other endpoints, so an SDK pointed here reads why they are missing.
OPENAI_PATHS = ("/v1/chat/", "/v1/models", "/v1/responses", "/v1/completions", "/v1/embeddings", "/v1/audio/",
                "/v1/images/", "/v1/moderations", "/v1/files", "/v1/batches", "/v1/assistants", "/v1/threads",
                "/v1/fine_tuning/", "/v1/vector_stores", "/v1/uploads", "/v1/realtime")
#: What ragbus serves of the OpenAI API, named when a client asks for another endpoint.
OPENAI_SERVED = "POST /v1/chat/completions and GET /v1/models"


def is_openai_path(path: str) -> bool:
    return path.startswith(OPENAI_PATHS)


# ------------------------------------------------------------------ parsing


async def _read_request(request: Request) -> ChatCompletionRequest:
    try:
        raw = await read_bounded_body(request, MAX_CHAT_BODY_BYTES, "send fewer or shorter messages (ragbus reads "
                                      "only the last turns of a conversation anyway)")
    except BodyTooLarge as exc:
        raise ChatError(413, str(exc)) from None
    try:
        body = loads_body(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ChatError(400, "the body is not UTF-8; send UTF-8 encoded JSON") from None
    except DuplicateKey as exc:
        raise ChatError(400, str(exc), param=exc.key[:SHOWN_CHARS]) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise ChatError(400, f"the body {json_problem(exc)}; send a JSON chat completion request") from None
    if not isinstance(body, dict):
        raise ChatError(400, 'the body must be a JSON object like {"model": "ragbus", "messages": [...]}')
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise _validation_error(exc) from None


def _validation_error(exc: ValidationError) -> ChatError:
    """The first problem pydantic found, as one line naming the argument (``messages[2].role``)."""
    errors = exc.errors(include_url=False)

    def place(error: dict[str, Any]) -> list[Any]:
        return [part for part in error["loc"] if not (isinstance(part, str) and _UNION_TAG.match(part))]

    # each member of a union reports; the one that read deepest into what was sent names the problem (a text
    # part's "text": true was "messages[0].content: Input should be a valid string", the string member's)
    at = place(errors[0])
    first = max((e for e in errors if place(e)[:len(at)] == at), key=lambda e: len(place(e)))
    loc = place(first)
    # an unknown argument's name is the client's text: cut short like any value quoted back
    param = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")[:SHOWN_CHARS]
    if first["type"] == "extra_forbidden":
        if param.startswith("filters."):
            return ChatError(400, f"filters: unknown filter {_echo(param.split('.', 1)[1])}; send source, since, until, "
                                  "kind or where", param=param)
        return ChatError(400, f"unrecognized request argument {_echo(param)}; ragbus takes the OpenAI chat "
                              "completion arguments and 'filters'", param=param)
    if first["type"] in _NUMERIC_ERRORS and first["loc"][0] in _NUMERIC_ARGUMENTS:
        return _numeric_error(first, param)
    if first["type"] == "missing":
        return ChatError(400, f"missing required argument {param!r}", param=param)
    if param.endswith(".role") and first["type"] == "literal_error":
        return ChatError(400, f"{param} is {_echo(first['input'])}; ragbus reads system, developer, user and assistant "
                              "messages (it calls no tools)", param=param)
    if first["type"] == "too_long":  # (pydantic's "List should have at most 1000 items after validation, not 5000")
        return ChatError(400, f"{param} has {first['ctx']['actual_length']} items, more than the limit of "
                              f"{first['ctx']['max_length']}; send the last turns only (ragbus reads only the last "
                              "turns of a conversation)", param=param)
    shown = json.dumps(first["input"], ensure_ascii=False)[:60] if _jsonable(first["input"]) else "?"
    return ChatError(400, f"{param}: {first['msg']} (got {shown})", param=param)


def _numeric_error(error: dict[str, Any], param: str) -> ChatError:
    """A numeric argument's type or range, in OpenAI's words and codes: "Invalid 'max_tokens': integer below
    minimum value. Expected a value >= 1, but got -1 instead." (``integer_below_min_value``)."""
    value, kind = error["input"], error["type"]
    if kind in ("int_type", "float_type"):
        expected = "an integer" if kind == "int_type" else "a number"
        return ChatError(400, f"Invalid type for {param!r}: expected {expected}, but got {_json_kind(value)} instead.",
                         param=param, code="invalid_type")
    shown = json.dumps(value)[:40]  # NaN as JSON spells it; an integer of 4,000 digits cut short
    if kind == "finite_number":
        return ChatError(400, f"Invalid {param!r}: expected a finite number, but got {shown} instead.",
                         param=param, code="invalid_value")
    below = kind == "greater_than_equal"
    bound = error["ctx"]["ge" if below else "le"]
    number = "integer" if isinstance(bound, int) else "decimal"  # pydantic gives a float field's bounds as floats
    limit = f"{'>=' if below else '<='} {bound if number == 'integer' else format(bound, 'g')}"
    return ChatError(400, f"Invalid {param!r}: {number} {'below minimum' if below else 'above maximum'} value. "
                          f"Expected a value {limit}, but got {shown} instead.", param=param,
                     code=f"{number}_{'below_min' if below else 'above_max'}_value")


def _json_kind(value: Any) -> str:
    """What JSON calls ``value``, with its article: "a boolean", "a string"."""
    if value is None:
        return "null"
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a decimal"), (str, "a string"),
                       (list, "an array"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return "a value"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _refused_arguments(req: ChatCompletionRequest) -> None:
    """Arguments set to something ragbus cannot give: refused by name, never silently not honoured."""
    if req.n not in (None, 1):
        raise ChatError(400, f"n is {req.n}; ragbus gives one answer per question (send n 1 or leave it out)",
                        param="n")
    if req.logprobs or req.top_logprobs:
        param = "logprobs" if req.logprobs else "top_logprobs"
        raise ChatError(400, "ragbus gives no log probabilities (its answer is assembled from several model "
                             "calls, or written without a model)", param=param)
    if req.modalities and set(req.modalities) - {"text"} or req.audio is not None:
        raise ChatError(400, "ragbus answers in text only", param="modalities" if req.audio is None else "audio")
    if req.response_format is not None and req.response_format.get("type") not in (None, "text"):
        raise ChatError(400, f"response_format {_echo(req.response_format.get('type'))} is not available: ragbus answers "
                             "in text, its citations in the 'citations' field", param="response_format")
    for param, choice in (("tool_choice", req.tool_choice), ("function_call", req.function_call)):
        if choice not in (None, "auto", "none"):
            # "required" or a named function asks the model to call a tool: ragbus's loop calls none
            named = "function" if isinstance(choice, dict) else choice  # a boolean or number quoted as sent
            raise ChatError(400, f"{param} {_echo(named)} is not "
                                 "available: ragbus answers from its documents and calls no tools (send 'auto', "
                                 "'none' or leave it out)", param=param)
    if req.model not in MODELS:
        raise ChatError(404, f"the model {_echo(req.model)} does not exist here; use one of "
                             f"{', '.join(MODELS)} (GET /v1/models)", param="model", code="model_not_found")


def _a(shown: str) -> str:
    """``shown`` after its article: "an 'image_url'", "a 'text'"."""
    first = shown.lstrip("'\"")[:1].lower()
    return f"{'an' if first and first in 'aeiou' else 'a'} {shown}"


def message_text(message: ChatMessage, index: int) -> str:
    """The message's text: the string, or its text parts joined; other parts are refused."""
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        text = message.content
    else:
        texts = []
        for n, part in enumerate(message.content):
            if part.type != "text":
                raise ChatError(400, f"messages[{index}].content[{n}] is {_a(_echo(part.type))} part; ragbus reads text "
                                     "only", param=f"messages[{index}].content[{n}]")
            if part.text is None:
                raise ChatError(400, f"messages[{index}].content[{n}] is a text part without 'text'; send "
                                     '{"type": "text", "text": "..."}', param=f"messages[{index}].content[{n}].text")
            texts.append(part.text)
        text = "\n".join(texts)
    # The rule of every question ragbus takes, said here with the message's place: the history's own
    # check would name a 'history[n]' the client never sent.
    bad = _CONTROL.search(text)
    if bad is not None:
        code = ord(bad.group())
        what = "an unpaired surrogate" if 0xD800 <= code <= 0xDFFF else "the control character"
        raise ChatError(400, f"messages[{index}].content contains {what} U+{code:04X} at position {bad.start()}; "
                             "send plain text (tabs and newlines are fine)", param=f"messages[{index}].content")
    return text


def strip_sources(answer: str) -> str:
    """An earlier answer as history: without the sources block this endpoint appended to it."""
    return _SOURCES_BLOCK.sub("", answer).rstrip()


def conversation(messages: list[ChatMessage]) -> tuple[str, int, list[dict[str, str]]]:
    """``(question, its message index, history)`` from OpenAI ``messages``.

    The question is the last user message; the history pairs each earlier user message
    with the assistant messages that answered it (``""`` when none did). Nothing but system
    messages may follow the question: an assistant message there would be an answer ragbus
    was asked to continue, which it cannot do."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise ChatError(400, "the messages hold no user message; send the question as the last "
                             '{"role": "user", "content": "..."}', param="messages", code="missing_user_message")
    last = users[-1]
    after = [i for i in range(last + 1, len(messages)) if messages[i].role == "assistant"]
    if after:
        raise ChatError(400, f"messages[{after[0]}] is an assistant message after the last user message; "
                             "ragbus answers the last user message, so send it last", param=f"messages[{after[0]}]")
    history: list[dict[str, str]] = []
    for i, message in enumerate(messages[:last]):
        text = message_text(message, i)
        if message.role == "user" and text.strip():
            history.append({"question": text, "answer": ""})
        elif message.role == "assistant" and history and text.strip():
            answer = strip_sources(text)
            previous = history[-1]["answer"]
            history[-1]["answer"] = f"{previous}\n\n{answer}" if previous else answer
        # system/developer messages, empty ones, and an assistant greeting before any question: not a turn
    return message_text(messages[last], last), last, history


# ------------------------------------------------------------------ responses


def count_tokens(text: str) -> int:
    """Words and punctuation marks: ragbus's own count, not any model's tokenizer (see docs/mcp-and-openai.md)."""
    return len(_TOKENS.findall(text))


def _escaped(text: str) -> str:
    """``text`` with what Markdown reads as markup escaped."""
    return _MARKUP.sub(r"\\\1", text)


def _markdown_link(title: str, url: str) -> str:
    shown = " ".join((title or url or "untitled").split())
    if not _SAFE_URL.match(url or ""):
        # a javascript: or relative address never becomes a link in a chat client, nor one in the title
        return addresses_in_code_spans(shown, escape=_escaped)
    shown = _escaped(shown)  # inside the link's own text no renderer makes another
    # what a Markdown link's address would read as its end or an escape: "https://e.example/a\\)" lost its ")"
    href = url.replace("\\", "%5C").replace("(", "%28").replace(")", "%29")
    return f"[{shown}]({href})"


def content_of(record: QueryRecord) -> str:
    """The assistant message: the answer, then its sources as numbered Markdown links."""
    # The answer is stored plain (services/synthesizer number_citations): no tag, image or link other
    # than to its own sources, so no document or model can make a chat client load an address.
    answer = record.answer or ""
    if not record.citations:
        return answer
    lines = [f"{c['id']}. {_markdown_link(c.get('title') or '', c.get('url') or '')}"
             + (f" ({c['position']})" if c.get("position") else "") for c in record.citations]
    return answer + "\n\nSources:\n" + "\n".join(lines)


def _extension(record: QueryRecord) -> dict[str, Any]:
    doc = record.to_doc()
    return {
        "query_id": record.id,
        "conversation_id": doc.get("conversation_id"),
        "outcome": record.outcome,
        "question": record.original_query,
        "standalone_question": doc.get("standalone_question"),
        "filters": doc.get("filters"),
        "status_url": f"/v1/queries/{record.id}",
        "trace_url": f"/v1/queries/{record.id}/trace",
        # POST {"rating": "up"|"down", ...} there; the completion's own id (chatcmpl-<query id>) is taken too
        "feedback_url": f"/v1/queries/{record.id}/feedback",
    }


def _usage(prompt_tokens: int, content: str) -> dict[str, int]:
    completion = count_tokens(content)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion}


def _ended_error(record: QueryRecord) -> ChatError | None:
    """A query that ended without an answer, as the error a client retries or reports."""
    if record.status != "answered":
        log.warning("chat completion of query %s: %s (%s)", record.id, record.status, record.error)
    if record.status == "timed_out" or not record.ended:
        return ChatError(504, f"the question was not answered in time ({record.error or 'deadline passed'}); "
                              f"query {record.id}", code="timed_out")
    if record.status == "failed":
        return ChatError(500, f"the question could not be answered: {record.error or 'the query failed'} "
                              f"(query {record.id})", code="query_failed")
    return None


def _gone(query_id: str) -> ChatError:
    return ChatError(500, f"the record of query {query_id} went away before it ended (purged?)", code="query_failed")


def _created(record: QueryRecord) -> int:
    try:
        return int(datetime.fromisoformat(str(record.to_doc().get("created_at"))).timestamp())
    except ValueError:
        return int(time.time())


# ------------------------------------------------------------------ routes


class ChatCompletions:
    """The endpoints, bound to one Deps. ``unready`` names the stages of this process that
    cannot work (the same check as POST /v1/queries)."""

    def __init__(self, deps: Deps, unready: Callable[[], dict[str, str]] = dict,
                 stopping: threading.Event | None = None, backlog: QueryBacklog | None = None) -> None:
        self.deps = deps
        self.unready = unready
        self.backlog = backlog or QueryBacklog(deps)  # shared with POST /v1/queries by the app
        self.stopping = stopping or threading.Event()  # set when the server stops: a wait ends, said so

    def routes(self) -> list[Route]:
        return [
            Route("/v1/models", self.list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.read_model, methods=["GET"]),
            Route("/v1/chat/completions", self.complete, methods=["POST"]),
        ]

    async def list_models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model(name) for name in MODELS]})

    async def read_model(self, request: Request) -> Response:
        name = request.path_params["model_id"]
        if name not in MODELS:
            return openai_error(ChatError(404, f"the model {_echo(name)} does not exist here; use one of "
                                               f"{', '.join(MODELS)}", param="model", code="model_not_found"))
        return JSONResponse(_model(name))

    async def complete(self, request: Request) -> Response:
        try:
            req = await _read_request(request)
            _refused_arguments(req)
            question, index, history = conversation(req.messages)
            record = await self._submit(req, question, index, history)
        except ChatError as exc:
            return openai_error(exc)
        prompt_tokens = sum(count_tokens(message_text(m, i)) for i, m in enumerate(req.messages))
        wait_s = self.deps.settings.query_timeout_s + _WAIT_GRACE_S
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        if req.stream:
            return StreamingResponse(
                self._chunks(req.model, record, wait_s, prompt_tokens, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            record = await api.wait_for_query_async(self.deps, record.id, wait_s, self.stopping)
        except api.QueryNotFound:
            return openai_error(_gone(record.id))
        failure = self._unfinished(record) or _ended_error(record)
        if failure is not None:
            return openai_error(failure)
        content = content_of(record)
        return JSONResponse({
            "id": f"chatcmpl-{record.id}",
            "object": "chat.completion",
            "created": _created(record),
            "model": req.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(prompt_tokens, content),
            "citations": list(record.citations),
            "ragbus": _extension(record),
        })

    def _unfinished(self, record: QueryRecord) -> ChatError | None:
        """A query still running when the server stops: a 503 the SDKs retry, naming the kept query."""
        if record.ended or not self.stopping.is_set():
            return None
        return ChatError(503, stopping_note(record.id), code="unavailable", headers={"Retry-After": "2"})

    async def _submit(self, req: ChatCompletionRequest, question: str, index: int,
                      history: list[dict[str, str]]) -> QueryRecord:
        reasons = await anyio.to_thread.run_sync(self.unready)
        if reasons:
            raise ChatError(503, "not ready, so no question is taken: " + "; ".join(
                f"{stage}: {reason}" for stage, reason in reasons.items()) + " (GET /readyz says the same)",
                code="not_ready", headers={"Retry-After": "2"})
        filters = req.filters.model_dump(exclude_none=True) if req.filters is not None else None
        options = MODELS[req.model]
        try:
            return await anyio.to_thread.run_sync(lambda: self.backlog.submit(lambda: api.submit_query(
                self.deps, question, field=f"messages[{index}].content", filters=filters or None,
                history=history or None, **options)))
        except InvalidInput as exc:
            message = str(exc)
            param = f"messages[{index}].content" if f"messages[{index}].content" in message else None
            if message.startswith("filters"):
                param = "filters"
            raise ChatError(400, message, param=param) from None
        except BacklogFull as exc:
            raise ChatError(429, str(exc), code="queue_full", headers={"Retry-After": str(exc.retry_after_s)}) from None
        except RetryableError as exc:
            raise ChatError(503, str(exc), code="unavailable", headers={"Retry-After": "2"}) from None

    async def _chunks(self, model: str, record: QueryRecord, wait_s: float, prompt_tokens: int,
                      include_usage: bool) -> AsyncIterator[str]:
        """``chat.completion.chunk`` events: the role at once (a front end shows it is working), a
        keep-alive comment while the loop runs, then the answer in pieces, then ``[DONE]``."""
        head = {"id": f"chatcmpl-{record.id}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            body = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                    **extra}
            return "data: " + json.dumps(body, ensure_ascii=False) + "\n\n"

        yield chunk({"role": "assistant", "content": ""})
        give_up_at, failure = time.monotonic() + wait_s, None
        while True:
            remaining = give_up_at - time.monotonic()
            try:
                record = await api.wait_for_query_async(self.deps, record.id, max(0.0, min(KEEPALIVE_S, remaining)),
                                                        self.stopping)
            except api.QueryNotFound:
                failure = _gone(record.id)
                break
            if record.ended or remaining <= KEEPALIVE_S or self.stopping.is_set():
                break
            yield ": keepalive\n\n"
        failure = failure or self._unfinished(record) or _ended_error(record)
        if failure is not None:
            # Headers went out with the first chunk: the error travels as an event, which the SDKs raise.
            yield "data: " + json.dumps(error_body(failure.status, failure.message, code=failure.code)) + "\n\n"
            yield "data: [DONE]\n\n"
            return
        content = content_of(record)
        for piece in pieces(content):
            yield chunk({"content": piece})
        yield chunk({}, "stop", citations=list(record.citations), ragbus=_extension(record))
        if include_usage:
            yield "data: " + json.dumps({**head, "choices": [], "usage": _usage(prompt_tokens, content)}) + "\n\n"
        yield "data: [DONE]\n\n"


def pieces(text: str, size: int = _PIECE_CHARS) -> list[str]:
    """``text`` cut after whitespace into pieces of about ``size`` characters; joined, they are ``text``."""
    out: list[str] = []
    start = 0
    while start < len(text):
        end = start + size
        if end >= len(text):
            out.append(text[start:])
            break
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        end = cut + 1 if cut > start else end
        out.append(text[start:end])
        start = end
    return out


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": _OWNER}


# ------------------------------------------------------------------ OpenAPI


def openapi_fragment() -> dict[str, Any]:
    """The paths and schemas of this module for the gateway's OpenAPI document."""
    ref = "#/components/schemas/{model}"
    schema = ChatCompletionRequest.model_json_schema(ref_template=ref)
    schemas: dict[str, Any] = dict(schema.pop("$defs", {}))
    schemas["ChatCompletionRequest"] = schema
    schemas["OpenAIError"] = {
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["message", "type"], "properties": {
            "message": {"type": "string"}, "type": {"type": "string"},
            "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}},
    }
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}}
    return {
        "schemas": schemas,
        "paths": {
            "/v1/models": {"get": {
                "summary": "The models a chat client may name (OpenAI-compatible)",
                "responses": {"200": {"description": '{"object": "list", "data": [{"id", "object", "created", '
                                                     '"owned_by"}]}'}}}},
            "/v1/models/{model_id}": {"get": {
                "summary": "One model (OpenAI-compatible)",
                "parameters": [{"name": "model_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": '{"id", "object": "model", "created", "owned_by"}'},
                              "404": {"description": "No such model", **error}}}},
            "/v1/chat/completions": {"post": {
                "summary": "Answer the last user message from the documents (OpenAI-compatible)",
                "description": "The OpenAI Chat Completions API. The answer's citations are numbered Markdown "
                               "links at the end of the content and a `citations` array; `ragbus` holds the "
                               "query id (`query_id`), conversation id and outcome, and `feedback_url`: a chat front "
                               "end rates the answer by POSTing {\"rating\": \"up\"|\"down\"} there (the "
                               "completion's `id`, chatcmpl-<query id>, is taken as the query id too). With `stream: true`, Server-Sent Events of "
                               "`chat.completion.chunk` objects ending with `data: [DONE]`.",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/ChatCompletionRequest"}}}},
                "responses": {
                    "200": {"description": "A chat.completion object, or with stream: true an event stream"},
                    "400": {"description": "A bad request (the error names the argument in param)", **error},
                    "401": {"description": "No or a wrong bearer token", **error},
                    "404": {"description": "An unknown model", **error},
                    "500": {"description": "The question's query failed", **error},
                    "503": {"description": "Not ready, or the bus took no question", **error},
                    "504": {"description": "The question was not answered in time", **error},
                },
            }},
        },
    }
