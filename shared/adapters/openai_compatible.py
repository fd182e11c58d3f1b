"""A language model behind the OpenAI-compatible chat completions API.

Ollama, llama.cpp's ``llama-server``, llama-cpp-python's server, vLLM and LM Studio
all serve ``POST {base}/chat/completions``; ``RAGBUS_OPENAI_BASE_URL`` is that
``{base}`` as the OpenAI SDK takes it (usually ending in ``/v1``), and
``RAGBUS_OPENAI_MODEL`` the model name the server serves. The prompts, the
context delimiters and the reply schemas are :mod:`shared.query.prompts`, the
same as the Gemini provider's; this module is the transport (``httpx``).

Structured output, negotiated once per process: each call first asks for
``response_format: {"type": "json_schema", ...}`` (OpenAI, Ollama, vLLM, LM
Studio, llama.cpp's server). A server that refuses that field (a 400 or 422
naming ``response_format``; llama-cpp-python's server accepts only
``json_object``, with an optional ``schema`` it turns into a grammar, and
answers ``json_schema`` with a 500 naming the field) is asked for
``json_object`` with the schema, and then for no format at all; the step it
accepted is kept for later calls. Every reply is parsed robustly anyway
(:mod:`shared.query.grading`).

The same loud-failure rules as the Gemini provider: a refusal of the request
itself (400, 401, 403, 404, 422: unknown model, bad key, invalid argument,
prompt beyond the server's context size) is
:class:`~shared.contract.errors.ModelUnusable` and the stages end the query
``failed``; 408, 429, 5xx and connection failures are retried (three attempts,
``Retry-After`` honoured up to 10 s), then raised as
:class:`~shared.contract.errors.RetryableError` for the stage to fall back on.
Some servers (llama-cpp-python's, llama.cpp's) answer a request for a model they
do not serve with the model they have, so on first use ``GET {base}/models`` is
read: a model not in that list is a 404 :class:`ModelUnusable` naming the ones
that are, rather than answers from a model nobody chose.

Bounds: ``RAGBUS_OPENAI_TIMEOUT_S`` is one deadline for the whole call (connecting,
sending, the headers, every byte of the body, and any retries), never shortened
below what it says but cut to the query's own remaining time
(:mod:`shared.query.call_deadline`); httpx's timeouts alone are per read, so a
server dribbling a byte every 2 s was never cut off. Every socket operation is
given what is left of the deadline (:mod:`shared.adapters.deadline_http`). A ``Retry-After``
beyond :data:`MAX_RETRY_AFTER_S` or beyond the time left is not waited out: the
stage falls back at once. A body is read up to :data:`MAX_REPLY_BYTES` and
refused past it. The server's own words in an error (which some proxies fill
with the key they were sent) pass through :func:`~shared.contract.redaction.redact`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from shared.adapters.deadline_http import (
    MAX_REPLY_BYTES,
    DeadlineTransport,
    check_deadline,
    one_deadline,
    time_left,
)
from shared.adapters.http_fetch import retry_after_seconds
from shared.contract.config import Settings, redacted_url, require_call_budget
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.contract.redaction import redact, remember_secret
from shared.observability.terminal_text import plain
from shared.query.prompts import SYSTEM_INSTRUCTION, PromptedLanguageModel

log = logging.getLogger("ragbus.llm.openai")

#: Statuses that mean "try again later"; every other 4xx is a refusal of the request itself.
TRANSIENT_STATUS = frozenset({408, 429})
ATTEMPTS = 3
BACKOFF_S = 1.0
MAX_RETRY_AFTER_S = 10.0
#: The structured-output requests tried in order until the server accepts one.
JSON_MODES = ("json_schema", "json_object", "none")

def _response_format(mode: str, operation: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": f"ragbus_{operation}", "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def _error_detail(response: httpx.Response) -> str:
    """The server's own words: OpenAI's ``{"error": {"message"}}``, FastAPI's ``detail``, or the
    text; with secrets redacted (some proxies quote the key they were sent) and escape sequences
    and control characters removed (they go on into records, logs and terminals)."""
    return " ".join(plain(redact(_server_words(response))).split())


def _server_words(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return response.text.strip()[:300] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if "detail" in body:
            return json.dumps(body["detail"])[:300]
    return json.dumps(body)[:300]


def _token_count(usage: Any, key: str) -> int:
    """A token count from ``usage`` when it is one (``"usage": "lots"`` is no reason to refuse a reply)."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _message_text(content: Any) -> str:
    """The assistant message's content: a string, or OpenAI's list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TypeError(f"message content is {type(content).__name__}, not text")


def _refuses_format(response: httpx.Response) -> bool:
    """A refusal of the ``response_format`` asked for: 400 or 422, or the 500 llama-cpp-python's
    server answers for a request that fails its validation, naming the field."""
    return response.status_code in (400, 422, 500) and "response_format" in _error_detail(response)


def check_settings(settings: Settings) -> None:
    """The whole of one invocation's model use must end before the function does. Counted as a cold
    start's GET /models and the call, each up to the timeout, and two backoffs: an upper bound
    (the call now has one deadline for all of it, :meth:`OpenAICompatibleLanguageModel._generate`),
    kept equal to the plan's check in infra/functions.tf."""
    require_call_budget(
        settings, who="RAGBUS_LLM=openai", budget_s=retry_budget_s(settings.openai_timeout_s),
        formula=f"GET /models and the call, each up to RAGBUS_OPENAI_TIMEOUT_S={settings.openai_timeout_s:g} s, "
                f"plus {ATTEMPTS - 1} backoffs of up to {MAX_RETRY_AFTER_S:g} s",
        knob="RAGBUS_OPENAI_TIMEOUT_S",
    )


def retry_budget_s(timeout_s: float) -> float:
    """The longest one invocation's model use can take (see :meth:`OpenAICompatibleLanguageModel.from_settings`)."""
    return 2 * timeout_s + (ATTEMPTS - 1) * MAX_RETRY_AFTER_S


def _never(response: httpx.Response) -> bool:
    return False


def _asked_wait(response: httpx.Response | None) -> float | None:
    """The wait the server's ``Retry-After`` asks for, unbounded; None without a usable one."""
    header = response.headers.get("retry-after") if response is not None else None
    asked = retry_after_seconds(header, datetime.now(UTC))
    return asked if asked is not None and math.isfinite(asked) else None


def _retry_after(response: httpx.Response | None, attempt: int) -> float:
    """The server's ``Retry-After`` (seconds or an HTTP date) within [0, MAX_RETRY_AFTER_S], else
    exponential backoff; "-1", "nan" or garbage are backoff, never an error."""
    header = response.headers.get("retry-after") if response is not None else None
    asked = retry_after_seconds(header, datetime.now(UTC))
    if asked is None or not math.isfinite(asked):
        return BACKOFF_S * 2 ** (attempt - 1)
    return min(max(0.0, asked), MAX_RETRY_AFTER_S)


def serves(model: str, ids: Sequence[str]) -> bool:
    """Whether ``model`` is one of the served ``ids`` (Ollama also answers ``name`` for ``name:latest``)."""
    return model in ids or f"{model}:latest" in ids


class OpenAICompatibleLanguageModel(PromptedLanguageModel):
    """:class:`~shared.contract.ports.LanguageModel` over any OpenAI-compatible chat completions server."""

    provider = "openai"
    label = "OpenAI-compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_sub_queries: int = 5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(model, max_sub_queries=max_sub_queries)
        self.base_url = base_url.rstrip("/")
        self.shown_url = redacted_url(self.base_url)  # what messages and logs name: no user:password
        self.timeout_s = timeout_s
        remember_secret(api_key)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            base_url=self.base_url, headers=headers, transport=transport or DeadlineTransport(),
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        )
        self.json_mode = JSON_MODES[0]
        self._checked_model = False
        self._setup_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleLanguageModel:
        """The server and model from ``RAGBUS_OPENAI_*``; the key is read here, when first needed."""
        if not settings.openai_base_url or not settings.openai_model:
            raise ConfigError(
                "RAGBUS_LLM=openai needs RAGBUS_OPENAI_BASE_URL (e.g. http://127.0.0.1:11434/v1 for Ollama) "
                "and RAGBUS_OPENAI_MODEL (a model the server serves); set both, or use RAGBUS_LLM=local"
            )
        check_settings(settings)
        return cls(
            settings.openai_base_url, settings.openai_model, api_key=settings.openai_api_key,
            timeout_s=settings.openai_timeout_s, max_sub_queries=settings.max_sub_queries,
        )

    def close(self) -> None:
        self.client.close()

    # ------------------------------------------------------------ HTTP

    def _unusable(self, operation: str, status: int, detail: str, hint: str) -> ModelUnusable:
        return ModelUnusable(
            redact(f"{self.label} model {self.model!r} at {self.shown_url} is unusable: {operation} was refused "
                   f"with HTTP {status} ({plain(detail)}); {hint}"),
            model=self.model, status=status, operation=operation,
        )

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            return "check RAGBUS_OPENAI_API_KEY (or OPENAI_API_KEY) and the key's access to the model"
        if status == 404:
            return (f"check RAGBUS_OPENAI_MODEL (GET {self.shown_url}/models lists what the server serves) "
                    "and that RAGBUS_OPENAI_BASE_URL is the API's base, usually ending in /v1")
        return ("check RAGBUS_OPENAI_MODEL and the server's settings (a prompt beyond its context size "
                "is refused: give it a context of at least 8192 tokens)")

    def _request(self, operation: str, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        """One request, its body read whole but at most ``MAX_REPLY_BYTES`` (decoded), by the deadline."""
        with self.client.stream(method, path, json=body) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > MAX_REPLY_BYTES:
                    raise RetryableError(
                        f"{self.label} {operation} reply from {self.shown_url} is larger than {MAX_REPLY_BYTES} "
                        "bytes; refused while reading (a chat completion is a few KB)")
                check_deadline()
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(response.status_code, headers=headers, content=bytes(content),
                                  request=response.request)

    def _send(
        self, operation: str, method: str, path: str, body: dict[str, Any] | None = None,
        *, final: Callable[[httpx.Response], bool] = _never,
    ) -> httpx.Response:
        """One request with retries of transient failures; any other status, or a transient one
        that ``final`` says retrying cannot change, is returned as it is."""
        for attempt in range(1, ATTEMPTS + 1):
            response = None
            try:
                response = self._request(operation, method, path, body)
            except httpx.TimeoutException as exc:
                # a model too slow for the deadline will be as slow again: no retry
                raise RetryableError(
                    f"{self.label} {operation} did not finish within {self._budget_words()} at {self.shown_url} "
                    f"({type(exc).__name__}); raise RAGBUS_OPENAI_TIMEOUT_S or use a smaller model"
                ) from exc
            except httpx.TransportError as exc:
                if attempt == ATTEMPTS:
                    raise RetryableError(
                        f"{self.label} {operation} could not reach {self.shown_url}: {redact(repr(exc))}; "
                        "is the server running?"
                    ) from exc
            else:
                if response.status_code not in TRANSIENT_STATUS and response.status_code < 500 or final(response):
                    return response
                if attempt == ATTEMPTS:
                    raise RetryableError(
                        f"{self.label} {operation} failed with HTTP {response.status_code} "
                        f"({_error_detail(response)}) after {ATTEMPTS} attempts; try again later"
                    )
                asked = _asked_wait(response)
                left = self._left()
                if asked is not None and (asked >= MAX_RETRY_AFTER_S or left is not None and asked >= left):
                    # Waiting would spend the query's time on one call; the stage falls back instead.
                    raise RetryableError(
                        f"{self.label} {operation} answered HTTP {response.status_code} asking to retry after "
                        f"{asked:g}s, beyond {'what the call has left' if left is not None and asked >= left else f'{MAX_RETRY_AFTER_S:g}s'}; "
                        "not waiting"
                    )
            wait = _retry_after(response, attempt)
            left = self._left()
            if left is not None and wait >= left:
                raise RetryableError(f"{self.label} {operation} failed ({self._failure(response)}) and the call "
                                     f"has {max(left, 0):.1f}s left; not retrying")
            time.sleep(wait)
        raise AssertionError("unreachable")

    @staticmethod
    def _failure(response: httpx.Response | None) -> str:
        return f"HTTP {response.status_code}" if response is not None else "no connection"

    @staticmethod
    def _left() -> float | None:
        return time_left()

    def _budget_words(self) -> str:
        return f"its deadline (RAGBUS_OPENAI_TIMEOUT_S={self.timeout_s:g}s, or the query's time left)"

    def _check_model(self) -> None:
        """Once: is the model among those ``GET /models`` lists? (See the module docstring.)"""
        with self._setup_lock:
            if self._checked_model:
                return
            response = self._send("models", "GET", "/models")
            if response.status_code in (401, 403):
                raise self._unusable("models", response.status_code, _error_detail(response),
                                     self._hint(response.status_code))
            ids: list[str] = []
            if response.status_code == 200:
                try:
                    ids = [str(m["id"]) for m in response.json().get("data") or [] if isinstance(m, dict)]
                except (ValueError, AttributeError, KeyError, TypeError, RecursionError):
                    ids = []
            # A server without a model list (404, 405, an odd body) is judged by its chat replies alone.
            if ids and not serves(self.model, ids):
                raise self._unusable(
                    "models", 404, f"the server serves {', '.join(map(repr, ids[:10]))}",
                    "set RAGBUS_OPENAI_MODEL to one of them",
                )
            self._checked_model = True

    def _generate(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        with one_deadline(self.timeout_s):
            return self._call(operation, prompt, temperature=temperature, max_tokens=max_tokens, schema=schema)

    def _call(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        self._check_model()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_INSTRUCTION}, {"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        started = time.monotonic()
        while True:
            mode = self.json_mode
            response_format = _response_format(mode, operation, schema) if schema else None
            if response_format:
                body["response_format"] = response_format
            else:
                body.pop("response_format", None)
            response = self._send(operation, "POST", "/chat/completions", body,
                                  final=_refuses_format if response_format else _never)
            status = response.status_code
            if status < 400:
                break
            detail = _error_detail(response)
            if response_format and _refuses_format(response):
                with self._setup_lock:
                    if self.json_mode == mode:  # another thread may have stepped down already
                        self.json_mode = JSON_MODES[JSON_MODES.index(mode) + 1]
                        log.warning("%s server at %s refused response_format %s (%s); asking for %s from now on",
                                    self.label, self.shown_url, mode, detail, self.json_mode)
                continue
            raise self._unusable(operation, status, detail, self._hint(status))
        try:
            data = response.json()
            choice = data["choices"][0]
            text = _message_text(choice["message"].get("content"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            raise RetryableError(
                f"{self.label} {operation} answered HTTP {response.status_code} with a body that is not a "
                f"chat completion: {redact(response.text[:200])!r}"
            ) from exc
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        finish = finish if isinstance(finish, str) else None
        response_model = data.get("model") if isinstance(data.get("model"), str) else None
        self._record_call(
            operation, started=started, input_tokens=_token_count(data.get("usage"), "prompt_tokens"),
            output_tokens=_token_count(data.get("usage"), "completion_tokens"), temperature=temperature,
            max_tokens=max_tokens, finish=finish, response_model=response_model, cut=finish == "length", text=text,
        )
        return text
