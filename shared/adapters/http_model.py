"""The base of every language model behind an HTTP API: what all of them must get right once.

:class:`HttpModelAPI` is a :class:`~shared.query.prompts.PromptedLanguageModel` (the prompts,
context delimiters, reply schemas and the reading of replies) whose subclass supplies only the
wire format: the request body (:meth:`HttpModelAPI.build_request`) and the reading of a reply
(:meth:`HttpModelAPI.read_reply`), and where it differs, its headers and its hints. The base holds
the mechanics, the same for every provider:

- **One deadline** for the whole call (connecting, sending, the headers, every byte of the body,
  and any retries): the time limit the provider's :class:`~shared.contract.providers.CallBudget`
  names, never shortened below what it says but cut to the query's own remaining time
  (:mod:`shared.query.call_deadline`), enforced on every socket operation
  (:mod:`shared.adapters.deadline_http`). A timeout is not retried: the model would be as slow again.
- **Retries**: 408, 429, 5xx and connection failures, :data:`ATTEMPTS` attempts, the server's
  ``Retry-After`` (seconds or an HTTP date) honoured up to :data:`MAX_RETRY_AFTER_S`, else
  exponential backoff; a ``Retry-After`` beyond that or beyond the time left is not waited out:
  :class:`~shared.contract.errors.RetryableError` at once, for the stage to fall back on.
- **Bounded reads**: a body is read up to :data:`MAX_REPLY_BYTES` and refused past it.
- **Error shaping**: any other 4xx is the request refused (unknown model, bad key, a prompt beyond
  the context size): :class:`~shared.contract.errors.ModelUnusable`, and the stages end the query
  ``failed``; a 2xx whose body is not a reply is retryable.
- **Redaction**: the key is remembered as a secret, the base URL is named without
  ``user:password``, and the server's own words (which some proxies fill with the key they were
  sent) pass through :func:`~shared.contract.redaction.redact` and lose control characters.

The settings come from the provider's row (:mod:`shared.contract.providers`): its base URL, model,
key and time-limit settings; ``load_settings`` has already refused what the row requires.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from shared.contract.config import (
    SETTING_BY_FIELD,
    Settings,
    redacted_url,
    require_provider,
    require_provider_budget,
)
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.providers import PROVIDER_BY_NAME, Provider
from shared.contract.redaction import redact, remember_secret
from shared.observability.terminal_text import plain
from shared.query.prompts import PromptedLanguageModel

__all__ = ["ATTEMPTS", "BACKOFF_S", "MAX_REPLY_BYTES", "MAX_RETRY_AFTER_S", "TRANSIENT_STATUS", "HttpModelAPI",
           "Reply", "error_detail", "retry_after", "token_count"]

#: Statuses that mean "try again later"; every other 4xx is a refusal of the request itself.
TRANSIENT_STATUS = frozenset({408, 429})
ATTEMPTS = 3
BACKOFF_S = 1.0
MAX_RETRY_AFTER_S = 10.0


@dataclass(frozen=True)
class Reply:
    """What a provider's reply says: the text, and what the call cost (for telemetry)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str | None = None  # the provider's own stop reason
    model: str | None = None  # the model that answered, when the reply names it
    cut: bool = False  # stopped at max_tokens


def error_detail(response: httpx.Response) -> str:
    """The server's own words: ``{"error": {"message"}}`` (OpenAI, Anthropic), ``{"error": "..."}``,
    FastAPI's ``detail``, or the text; with secrets redacted (some proxies quote the key they were
    sent) and escape sequences and control characters removed (they go on into records, logs and
    terminals)."""
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


def token_count(usage: Any, key: str) -> int:
    """A token count from ``usage`` when it is one (``"usage": "lots"`` is no reason to refuse a reply)."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _asked_wait(response: httpx.Response | None) -> float | None:
    """The wait the server's ``Retry-After`` asks for, unbounded; None without a usable one."""
    header = response.headers.get("retry-after") if response is not None else None
    asked = retry_after_seconds(header, datetime.now(UTC))
    return asked if asked is not None and math.isfinite(asked) else None


def retry_after(response: httpx.Response | None, attempt: int) -> float:
    """The server's ``Retry-After`` (seconds or an HTTP date) within [0, MAX_RETRY_AFTER_S], else
    exponential backoff; "-1", "nan" or garbage are backoff, never an error."""
    asked = _asked_wait(response)
    if asked is None:
        return BACKOFF_S * 2 ** (attempt - 1)
    return min(max(0.0, asked), MAX_RETRY_AFTER_S)


class HttpModelAPI(PromptedLanguageModel):
    """A :class:`~shared.contract.ports.LanguageModel` over an HTTP API (see the module docstring).

    A subclass sets ``provider`` (its row's name) and ``label``, and implements
    :meth:`build_request` and :meth:`read_reply`; it overrides :meth:`auth_headers` when the API
    does not take a bearer token, :meth:`hint` for better advice, and :meth:`call` when one call is
    more than one request and its reply (as the OpenAI-compatible adapter's negotiation is).
    """

    reply_kind = "reply"  # what the API calls one reply, for errors ("chat completion")

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
        self.client = httpx.Client(
            base_url=self.base_url, headers=self.auth_headers(api_key) if api_key else {},
            transport=transport or DeadlineTransport(),
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        )
        self.setup_lock = threading.Lock()

    # ------------------------------------------------------------ settings

    @classmethod
    def row(cls) -> Provider:
        return PROVIDER_BY_NAME[cls.provider]

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """What the first call would refuse, without a client: the whole of one invocation's model
        use must end before the function does (the row's call budget)."""
        require_provider_budget(settings, cls.row())

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpModelAPI:
        """The server, model, key and time limit from the settings the row names; the key is read
        here, when first needed."""
        row = cls.row()
        require_provider(row, vars(settings))
        cls.check_settings(settings)
        assert row.base_url_setting and row.model_setting and row.call_budget, f"{row.name}: not an HTTP provider"
        return cls(
            getattr(settings, row.base_url_setting), getattr(settings, row.model_setting),
            api_key=getattr(settings, row.key_setting) if row.key_setting else None,
            timeout_s=getattr(settings, row.call_budget.setting), max_sub_queries=settings.max_sub_queries,
        )

    @classmethod
    def variable(cls, field: str | None) -> str:
        """The environment variable of one of the row's settings, for messages."""
        return SETTING_BY_FIELD[field].env if field else "its settings"

    def close(self) -> None:
        self.client.close()

    # ------------------------------------------------------------ what a provider supplies

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers carrying the key (a bearer token unless the API wants otherwise)."""
        return {"Authorization": f"Bearer {api_key}"}

    def build_request(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]]:
        """The path (under the base URL) and the JSON body of one call."""
        raise NotImplementedError(f"{type(self).__name__} builds no request: implement build_request or call")

    def read_reply(self, data: Any) -> Reply:
        """The reply's text and cost from the parsed JSON body; any KeyError, TypeError, ... means
        the body is not a reply (retryable)."""
        raise NotImplementedError(f"{type(self).__name__} reads no reply: implement read_reply")

    def hint(self, status: int) -> str:
        """What to do about a refusal with ``status``."""
        row = self.row()
        if status in (401, 403):
            return f"check {self.variable(row.key_setting)} and the key's access to the model"
        if status == 404:
            return (f"check {self.variable(row.model_setting)} and that {self.variable(row.base_url_setting)} "
                    "is the API's base")
        return f"check {self.variable(row.model_setting)} and the server's settings"

    # ------------------------------------------------------------ one call

    def _generate(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        with one_deadline(self.timeout_s):
            return self.call(operation, prompt, temperature=temperature, max_tokens=max_tokens, schema=schema)

    def call(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        """One call within the deadline: the request, a refusal raised, the reply read and recorded."""
        path, body = self.build_request(operation, prompt, temperature=temperature, max_tokens=max_tokens,
                                        schema=schema)
        started = time.monotonic()
        response = self.send(operation, "POST", path, body)
        if response.status_code >= 400:
            raise self.unusable(operation, response.status_code, error_detail(response),
                                self.hint(response.status_code))
        return self.record_reply(operation, response, started=started, temperature=temperature,
                                 max_tokens=max_tokens)

    def record_reply(
        self, operation: str, response: httpx.Response, *, started: float, temperature: float, max_tokens: int
    ) -> str:
        """The reply's text, its cost recorded; a body that is not a reply is retryable."""
        try:
            reply = self.read_reply(response.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            raise RetryableError(
                f"{self.label} {operation} answered HTTP {response.status_code} with a body that is not a "
                f"{self.reply_kind}: {redact(response.text[:200])!r}"
            ) from exc
        self._record_call(
            operation, started=started, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
            temperature=temperature, max_tokens=max_tokens, finish=reply.finish, response_model=reply.model,
            cut=reply.cut, text=reply.text,
        )
        return reply.text

    def unusable(self, operation: str, status: int, detail: str, hint: str) -> ModelUnusable:
        return ModelUnusable(
            redact(f"{self.label} model {self.model!r} at {self.shown_url} is unusable: {operation} was refused "
                   f"with HTTP {status} ({plain(detail)}); {hint}"),
            model=self.model, status=status, operation=operation,
        )

    # ------------------------------------------------------------ HTTP

    def read_bounded(self, operation: str, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        """One request, its body read whole but at most ``MAX_REPLY_BYTES`` (decoded), by the deadline."""
        with self.client.stream(method, path, json=body) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > MAX_REPLY_BYTES:
                    raise RetryableError(
                        f"{self.label} {operation} reply from {self.shown_url} is larger than {MAX_REPLY_BYTES} "
                        "bytes; refused while reading (a model's reply is a few KB)")
                check_deadline()
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(response.status_code, headers=headers, content=bytes(content),
                                  request=response.request)

    def send(
        self, operation: str, method: str, path: str, body: dict[str, Any] | None = None,
        *, final: Callable[[httpx.Response], bool] | None = None,
    ) -> httpx.Response:
        """One request with retries of transient failures; any other status, or a transient one
        that ``final`` says retrying cannot change, is returned as it is."""
        for attempt in range(1, ATTEMPTS + 1):
            response = None
            try:
                response = self.read_bounded(operation, method, path, body)
            except httpx.TimeoutException as exc:
                raise self._too_slow(operation, exc) from exc  # it would be as slow again: no retry
            except httpx.TransportError as exc:
                if attempt == ATTEMPTS:
                    raise RetryableError(
                        f"{self.label} {operation} could not reach {self.shown_url}: {redact(repr(exc))}; "
                        "is the server running?"
                    ) from exc
            else:
                if response.status_code not in TRANSIENT_STATUS and response.status_code < 500 \
                        or final is not None and final(response):
                    return response
                self._refuse_to_wait(operation, response, attempt)
            wait = retry_after(response, attempt)
            left = time_left()
            if left is not None and wait >= left:
                failure = f"HTTP {response.status_code}" if response is not None else "no connection"
                raise RetryableError(f"{self.label} {operation} failed ({failure}) and the call "
                                     f"has {max(left, 0):.1f}s left; not retrying")
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _refuse_to_wait(self, operation: str, response: httpx.Response, attempt: int) -> None:
        """Raise when a transient failure is the last attempt, or asks for a wait the call cannot spend."""
        if attempt == ATTEMPTS:
            raise RetryableError(
                f"{self.label} {operation} failed with HTTP {response.status_code} "
                f"({error_detail(response)}) after {ATTEMPTS} attempts; try again later"
            )
        asked = _asked_wait(response)
        left = time_left()
        if asked is None or asked < MAX_RETRY_AFTER_S and (left is None or asked < left):
            return
        # Waiting would spend the query's time on one call; the stage falls back instead.
        beyond = "what the call has left" if left is not None and asked >= left else f"{MAX_RETRY_AFTER_S:g}s"
        raise RetryableError(f"{self.label} {operation} answered HTTP {response.status_code} asking to retry "
                             f"after {asked:g}s, beyond {beyond}; not waiting")

    def _too_slow(self, operation: str, exc: httpx.TimeoutException) -> RetryableError:
        return RetryableError(
            f"{self.label} {operation} did not finish within {self._budget_words()} at {self.shown_url} "
            f"({type(exc).__name__}); raise {self.variable(self._timeout_setting())} or use a smaller model")

    def _timeout_setting(self) -> str | None:
        budget = self.row().call_budget
        return budget.setting if budget else None

    def _budget_words(self) -> str:
        return (f"its deadline ({self.variable(self._timeout_setting())}={self.timeout_s:g}s, "
                "or the query's time left)")
