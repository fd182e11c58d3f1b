"""The base of every adapter that calls an HTTP API: the mechanics each must get right once.

:class:`HttpAPI` holds one :class:`httpx.Client` over :class:`~shared.adapters.deadline_http.DeadlineTransport`
and the way a request is made (:meth:`HttpAPI.send`):

- **One deadline** for the whole call, set by the caller with
  :func:`~shared.adapters.deadline_http.one_deadline` and enforced on every socket operation; a
  timeout is not retried (the server would be as slow again): :meth:`HttpAPI.too_slow` says which
  setting to raise.
- **Retries**: 408, 429, 5xx and connection failures, :attr:`HttpAPI.attempts` attempts, the
  server's ``Retry-After`` (seconds or an HTTP date) honoured up to :attr:`HttpAPI.max_retry_after_s`,
  else exponential backoff; a ``Retry-After`` beyond that or beyond the time left is not waited
  out: :class:`~shared.contract.errors.RetryableError` at once, for the caller's own redelivery.
- **Bounded reads**: a body is read up to :attr:`HttpAPI.max_reply_bytes` and refused past it.
- **The server's own words** in errors (:func:`error_detail`), redacted of secrets and control
  characters.

Language models extend it (:class:`~shared.adapters.http_model.HttpModelAPI`), and so does
Document AI's layout parser (:mod:`shared.adapters.gcp.document_ai`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from shared.adapters.deadline_http import (
    MAX_REPLY_BYTES,
    DeadlineTransport,
    check_deadline,
    time_left,
)
from shared.adapters.http_fetch import retry_after_seconds
from shared.contract.config import redacted_url
from shared.contract.errors import RetryableError
from shared.contract.redaction import redact
from shared.observability.terminal_text import plain

__all__ = ["ATTEMPTS", "BACKOFF_S", "MAX_RETRY_AFTER_S", "TRANSIENT_STATUS", "HttpAPI", "error_detail",
           "retry_after"]

#: Statuses that mean "try again later"; every other 4xx is a refusal of the request itself.
TRANSIENT_STATUS = frozenset({408, 429})
ATTEMPTS = 3
BACKOFF_S = 1.0
MAX_RETRY_AFTER_S = 10.0


def error_detail(response: httpx.Response) -> str:
    """The server's own words: ``{"error": {"message"}}`` (OpenAI, Anthropic, Google), ``{"error": "..."}``,
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


def _asked_wait(response: httpx.Response | None) -> float | None:
    """The wait the server's ``Retry-After`` asks for, unbounded; None without a usable one."""
    header = response.headers.get("retry-after") if response is not None else None
    asked = retry_after_seconds(header, datetime.now(UTC))
    return asked if asked is not None and math.isfinite(asked) else None


def retry_after(response: httpx.Response | None, attempt: int, longest: float = MAX_RETRY_AFTER_S) -> float:
    """The server's ``Retry-After`` (seconds or an HTTP date) within [0, ``longest``], else
    exponential backoff; "-1", "nan" or garbage are backoff, never an error."""
    asked = _asked_wait(response)
    if asked is None:
        return BACKOFF_S * 2 ** (attempt - 1)
    return min(max(0.0, asked), longest)


class HttpAPI:
    """An HTTP API called with one deadline, bounded replies and retries (see the module docstring).

    A subclass calls :meth:`open_client` and sets ``label`` (the API's name in messages); it
    overrides :meth:`too_slow` to name its time-limit setting."""

    label = "HTTP API"
    attempts = ATTEMPTS
    max_retry_after_s = MAX_RETRY_AFTER_S
    max_reply_bytes = MAX_REPLY_BYTES
    reply_size = "a model's reply is a few KB"  # why the bound is enough, for the refusal past it

    base_url: str
    shown_url: str
    timeout_s: float
    client: httpx.Client

    def open_client(self, base_url: str, *, timeout_s: float, headers: dict[str, str] | None = None,
                    transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown_url = redacted_url(self.base_url)  # what messages and logs name: no user:password
        self.timeout_s = timeout_s
        self.client = httpx.Client(
            base_url=self.base_url, headers=headers or {}, transport=transport or DeadlineTransport(),
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        )

    def close(self) -> None:
        self.client.close()

    def read_bounded(self, operation: str, method: str, path: str, body: dict[str, Any] | None,
                     headers: dict[str, str] | None = None) -> httpx.Response:
        """One request, its body read whole but at most ``max_reply_bytes`` (decoded), by the deadline."""
        with self.client.stream(method, path, json=body, headers=headers) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > self.max_reply_bytes:
                    raise RetryableError(
                        f"{self.label} {operation} reply from {self.shown_url} is larger than {self.max_reply_bytes} "
                        f"bytes; refused while reading ({self.reply_size})")
                check_deadline()
            kept = [(k, v) for k, v in response.headers.multi_items()
                    if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(response.status_code, headers=kept, content=bytes(content),
                                  request=response.request)

    def send(
        self, operation: str, method: str, path: str, body: dict[str, Any] | None = None,
        *, final: Callable[[httpx.Response], bool] | None = None, headers: Callable[[], dict[str, str]] | None = None,
    ) -> httpx.Response:
        """One request with retries of transient failures; any other status, or a transient one
        that ``final`` says retrying cannot change, is returned as it is. ``headers`` is asked
        before each attempt (an access token that may have been refreshed)."""
        for attempt in range(1, self.attempts + 1):
            response = None
            try:
                response = self.read_bounded(operation, method, path, body, headers() if headers else None)
            except httpx.TimeoutException as exc:
                raise self.too_slow(operation, exc) from exc  # it would be as slow again: no retry
            except httpx.TransportError as exc:
                if attempt == self.attempts:
                    raise RetryableError(
                        f"{self.label} {operation} could not reach {self.shown_url}: {redact(repr(exc))}; "
                        "is the server running?"
                    ) from exc
            else:
                if response.status_code not in TRANSIENT_STATUS and response.status_code < 500 \
                        or final is not None and final(response):
                    return response
                self._refuse_to_wait(operation, response, attempt)
            wait = retry_after(response, attempt, self.max_retry_after_s)
            left = time_left()
            if left is not None and wait >= left:
                failure = f"HTTP {response.status_code}" if response is not None else "no connection"
                raise RetryableError(f"{self.label} {operation} failed ({failure}) and the call "
                                     f"has {max(left, 0):.1f}s left; not retrying")
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _refuse_to_wait(self, operation: str, response: httpx.Response, attempt: int) -> None:
        """Raise when a transient failure is the last attempt, or asks for a wait the call cannot spend."""
        if attempt == self.attempts:
            raise RetryableError(
                f"{self.label} {operation} failed with HTTP {response.status_code} "
                f"({error_detail(response)}) after {self.attempts} attempts; try again later"
            )
        asked = _asked_wait(response)
        left = time_left()
        if asked is None or asked < self.max_retry_after_s and (left is None or asked < left):
            return
        # Waiting would spend the caller's time on one call; it falls back or is redelivered instead.
        beyond = "what the call has left" if left is not None and asked >= left else f"{self.max_retry_after_s:g}s"
        raise RetryableError(f"{self.label} {operation} answered HTTP {response.status_code} asking to retry "
                             f"after {asked:g}s, beyond {beyond}; not waiting")

    def too_slow(self, operation: str, exc: httpx.TimeoutException) -> RetryableError:
        """The error for a call that outran its deadline (a subclass names the setting to raise)."""
        return RetryableError(f"{self.label} {operation} did not finish within {self.timeout_s:g}s at "
                              f"{self.shown_url} ({type(exc).__name__})")
