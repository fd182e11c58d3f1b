"""The base of every language model behind an HTTP API: what all of them must get right once.

:class:`HttpModelAPI` is a :class:`~shared.query.prompts.PromptedLanguageModel` (the prompts,
context delimiters, reply schemas and the reading of replies) whose subclass supplies only the
wire format: the request body (:meth:`HttpModelAPI.build_request`) and the reading of a reply
(:meth:`HttpModelAPI.read_reply`), and where it differs, its headers and its hints. The base holds
the mechanics, the same for every provider (the HTTP ones in :class:`~shared.adapters.http_api.HttpAPI`,
which other HTTP adapters extend too):

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

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from shared.adapters.deadline_http import MAX_REPLY_BYTES, one_deadline
from shared.adapters.http_api import (
    ATTEMPTS,
    BACKOFF_S,
    MAX_RETRY_AFTER_S,
    TRANSIENT_STATUS,
    HttpAPI,
    error_detail,
    retry_after,
)
from shared.contract.config import (
    SETTING_BY_FIELD,
    Settings,
    require_provider,
    require_provider_budget,
)
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.providers import PROVIDER_BY_NAME, Provider
from shared.contract.redaction import redact, remember_secret
from shared.observability.terminal_text import plain
from shared.query.prompts import PromptedLanguageModel

__all__ = ["ATTEMPTS", "BACKOFF_S", "MAX_REPLY_BYTES", "MAX_RETRY_AFTER_S", "TRANSIENT_STATUS", "HttpModelAPI",
           "PROBE_TIMEOUT_S", "Reply", "error_detail", "retry_after", "token_count"]

#: How long readiness waits for the model's server to answer (a probe must not hold /readyz for a call's deadline).
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Reply:
    """What a provider's reply says: the text, and what the call cost (for telemetry)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str | None = None  # the provider's own stop reason
    model: str | None = None  # the model that answered, when the reply names it
    cut: bool = False  # stopped at max_tokens


def token_count(usage: Any, key: str) -> int:
    """A token count from ``usage`` when it is one (``"usage": "lots"`` is no reason to refuse a reply)."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class HttpModelAPI(PromptedLanguageModel, HttpAPI):
    """A :class:`~shared.contract.ports.LanguageModel` over an HTTP API (see the module docstring).

    A subclass sets ``provider`` (its row's name) and ``label``, and implements
    :meth:`build_request` and :meth:`read_reply`; it overrides :meth:`auth_headers` when the API
    does not take a bearer token, :meth:`hint` for better advice, and :meth:`call` when one call is
    more than one request and its reply (as the OpenAI-compatible adapter's negotiation is).
    """

    reply_kind = "reply"  # what the API calls one reply, for errors ("chat completion")
    #: A path under the base URL that a GET answers cheaply, whatever its status: readiness asks it whether the
    #: server is up (None: not asked).
    probe_path: str | None = None

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
        remember_secret(api_key)
        self.open_client(base_url, timeout_s=timeout_s, headers=self.auth_headers(api_key) if api_key else {},
                         transport=transport)
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

    def unreachable(self, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
        """Why the server cannot be reached now, else None: one GET of :attr:`probe_path` within ``timeout_s``, not
        retried, its body not read. Any reply counts as reachable (a refusal is recorded when a stage meets it)."""
        if self.probe_path is None:
            return None
        try:
            with self.client.stream("GET", self.probe_path, timeout=httpx.Timeout(timeout_s)):
                return None
        except httpx.TransportError as exc:  # refused, reset, unknown host, timed out
            return (f"the {self.label} server at {self.shown_url} cannot be reached ({type(exc).__name__}); "
                    f"is it running, and is {self.variable(self.row().base_url_setting)} its address?")

    # ------------------------------------------------------------ HTTP

    def too_slow(self, operation: str, exc: httpx.TimeoutException) -> RetryableError:
        return RetryableError(
            f"{self.label} {operation} did not finish within {self._budget_words()} at {self.shown_url} "
            f"({type(exc).__name__}); raise {self.variable(self._timeout_setting())} or use a smaller model")

    def _timeout_setting(self) -> str | None:
        budget = self.row().call_budget
        return budget.setting if budget else None

    def _budget_words(self) -> str:
        return (f"its deadline ({self.variable(self._timeout_setting())}={self.timeout_s:g}s, "
                "or the query's time left)")
