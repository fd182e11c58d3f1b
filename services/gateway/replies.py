"""What every route answers with: the API's one error shape, and a request's JSON object read
within :data:`MAX_BODY_BYTES` while it arrives."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared.contract.text import shown

MAX_BODY_BYTES = 64 * 1024


class DuplicateKey(ValueError):
    """A JSON object in a body names one key twice: json.loads keeps the last silently, so a client that
    sent two ``question`` keys (a template and its fill, a merge gone wrong) got an answer to one of them."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"the body's JSON names the key {shown(self.key)} twice in one object; send each key once"


#: ASCII digits only: int() also takes '1_0' and other scripts' digits ('٥' was k=5 while '⑤' was refused, newcomer16),
#: which a query parameter or header spelled so is more likely a mistake than meant
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def header_text(raw: str) -> str:
    """A request header's value as the client wrote it, for an error to quote: Starlette decodes a header's bytes
    as Latin-1, so UTF-8 ('\u0661\u0662' from curl) was quoted back as mojibake ('\u00d9\u00a1\u00d9\u00a2');
    bytes that are not UTF-8 are shown as ``\\x`` escapes."""
    try:
        return raw.encode("latin-1").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # not from the wire (a test's str): already text
        return raw


def ascii_int(raw: str) -> int:
    """``raw`` as a whole number written in ASCII digits; ValueError for anything else."""
    if not _WHOLE_NUMBER.fullmatch(raw):
        raise ValueError(raw)
    return int(raw)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def loads_body(text: str) -> Any:
    """``json.loads`` that refuses an object naming a key twice (:class:`DuplicateKey`), at any depth."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def json_problem(exc: ValueError | RecursionError) -> str:
    """What is wrong with a body :func:`loads_body` refused, to follow "the body ", in JSON's terms: Python's
    own words for a deep nesting ("maximum recursion depth exceeded") or a long number ("use
    sys.set_int_max_str_digits() to increase the limit") are advice to a Python programmer, not to the
    client who sent the body."""
    if isinstance(exc, RecursionError):
        return "nests its JSON too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if "integer string conversion" in str(exc):
        return f"has a number of more than {sys.get_int_max_str_digits()} digits"
    return "has a JSON value that cannot be read"


def stopping_note(query_id: str) -> str:
    """What a client waiting for query ``query_id`` is told when the server stops under it: its
    work is kept, and the next ``ragbus serve`` (or ingest, poll) in the data directory finishes it."""
    return (f"ragbus is stopping, so the answer is not waited for here; the question is kept as query {query_id}, "
            f"answered once ragbus runs again (GET /v1/queries/{query_id})")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error shape of the API: ``{"error": "..."}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def declared_over(request: Request, limit: int) -> bool:
    """Whether the request's Content-Length already says its body is over ``limit`` bytes: it is refused at once,
    not waited for (a client that declared 100,000 bytes and sent two held its connection for the whole
    RAGBUS_REQUEST_READ_TIMEOUT_S, 30 s, then got 408 for a body that would have been refused anyway)."""
    declared = request.headers.get("content-length", "")
    return declared.isascii() and declared.isdigit() and int(declared) > limit


class BodyTooLarge(Exception):
    """A request body over its bound; ``str()`` is the 413's message: the bound, then ``advice``."""

    def __init__(self, limit: int, advice: str) -> None:
        super().__init__(f"the body is larger than {limit} bytes; {advice}")


async def read_bounded_body(request: Request, limit: int, advice: str) -> bytes:
    """The request's body, read only up to ``limit`` bytes; over it (or declared over it), :class:`BodyTooLarge`
    saying so and what to send instead (``advice``). The REST API and the chat completions endpoint both read so."""
    if declared_over(request, limit):
        raise BodyTooLarge(limit, advice)
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, advice)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json_object(request: Request, example: str = '{"question": "your question"}') -> dict[str, Any] | Response:
    """The body as a JSON object, else the error to answer with; ``example`` is what the errors say to send."""
    try:
        raw = await read_bounded_body(request, MAX_BODY_BYTES, f"send a shorter one, like {example}")
    except BodyTooLarge as exc:
        return error(413, str(exc))
    if not raw.strip():
        return error(400, f"the body is empty; send JSON like {example}")
    try:
        body = loads_body(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return error(400, "the body is not UTF-8; send UTF-8 encoded JSON")
    except DuplicateKey as exc:
        return error(400, str(exc))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return error(400, f"the body {json_problem(exc)}; send JSON like {example}")
    if not isinstance(body, dict):
        return error(400, f"the body must be a JSON object; send one like {example}")
    return body
