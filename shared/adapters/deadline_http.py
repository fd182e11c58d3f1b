"""HTTP calls with one deadline for the whole call, not one per socket read.

httpx's timeouts (and so every SDK built on it) bound each read: a server that
sends a byte every 2 s is never cut off, and neither is one dribbling its status
line. :class:`DeadlineTransport` is httpx's own transport over an httpcore network
backend whose every connect, TLS handshake, write and read is given what is left
of the deadline :func:`one_deadline` set for the calling context; past it, the
operation fails as a timeout, which httpx raises as usual. Outside
:func:`one_deadline` the transport behaves as httpx's.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from shared.query.call_deadline import query_time_left

#: The most of one reply read: a chat completion of SYNTHESIS_MAX_TOKENS tokens is a few KB, and
#: a model list of hundreds of models well under 1 MB. (A 300 MB reply took `ask` to 1.77 GB.)
MAX_REPLY_BYTES = 4 * 1024 * 1024

# The deadline (time.monotonic()) of the call this thread is making, read by every socket operation.
_call_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("http_call_deadline", default=None)


# The bytes the call may still read, for an SDK that reads whole bodies itself (google-genai).
_byte_budget: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("http_byte_budget", default=None)


@contextmanager
def one_deadline(seconds: float, *, max_bytes: int | None = None) -> Iterator[float]:
    """Every request made inside on a :class:`DeadlineTransport` ends within ``seconds`` (cut to
    the query's time left, :mod:`shared.query.call_deadline`); yields the deadline (time.monotonic()).
    With ``max_bytes``, reading more than that off the wire (all attempts together) fails as a read error."""
    deadline = time.monotonic() + seconds
    query_left = query_time_left()
    if query_left is not None:
        deadline = min(deadline, time.monotonic() + query_left)
    token = _call_deadline.set(deadline)
    budget = _byte_budget.set([max_bytes, max_bytes] if max_bytes is not None else None)
    try:
        yield deadline
    finally:
        _byte_budget.reset(budget)
        _call_deadline.reset(token)


def time_left() -> float | None:
    """Seconds left of the current call's deadline; None outside :func:`one_deadline`."""
    deadline = _call_deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def check_deadline() -> None:
    """Raise httpx's ReadTimeout once the current call's deadline has passed (between chunks)."""
    try:
        _time_left(None, httpcore.ReadTimeout)
    except httpcore.ReadTimeout as exc:
        raise httpx.ReadTimeout(str(exc)) from exc


def _time_left(timeout: float | None, operation: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of this call's deadline; past it, ``operation`` is raised."""
    deadline = _call_deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise operation("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most until the call's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self.inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))
        budget = _byte_budget.get()
        if budget is not None:
            budget[1] -= len(data)
            if budget[1] < 0:
                raise httpcore.ReadError(f"the reply is larger than {budget[0]} bytes; refused while reading")
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self.inner.start_tls(ssl_context, server_hostname,
                                                    _time_left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self.inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self.inner.connect_tcp(host, port, _time_left(timeout, httpcore.ConnectTimeout),
                                                      local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self.inner.connect_unix_socket(path, _time_left(timeout, httpcore.ConnectTimeout),
                                                              socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over connections that honour the call's one deadline (see the module
    docstring); everything else (TLS, pooling, HTTP/1.1) is httpx's and httpcore's own."""

    def __init__(self) -> None:
        super().__init__()
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                             network_backend=_DeadlineBackend())
