"""Serving the gateway with uvicorn in a background thread of this process (``ragbus serve``)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

from services.gateway.app import create_app
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput

log = logging.getLogger("ragbus.gateway")


@dataclass
class ServerHandle:
    """A gateway served by uvicorn in a background thread of this process."""

    host: str
    port: int
    server: uvicorn.Server
    thread: threading.Thread
    # set first by stop(): the app's waits for answers end, answered, before uvicorn's graceful
    # shutdown (2 s) would cancel them as crashes (see create_app)
    stopping: threading.Event = field(default_factory=threading.Event)
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def wait(self) -> None:
        """Block until the server stops (for ``ragbus serve`` in the foreground)."""
        while self.thread.is_alive():
            self.thread.join(0.5)

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.stopping.set()
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout)


#: Seconds a refused connection is kept, its input dropped, after its answer (see _refuse)
_LINGER_S = 2.0
_LINGERING: set[BoundedRequestProtocol] = set()


class BoundedRequestProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on reading each request: a client that has not sent
    one whole request, headers and body, ``read_timeout_s`` after it connected (or after the response
    before) is answered 408 and disconnected. uvicorn bounds neither (only the idle time between
    requests): fifty connections dripping a header line or a body byte every few seconds were held for
    as long as they went on. The answer, once the request is read, takes what it takes (an event stream).
    A connection past ``max_connections`` held at once is answered 503 and disconnected as it arrives, and
    one past ``per_address`` from one client address 429 (one address held them all: every other client
    was refused). A kept-alive connection waiting for a next request holds nothing: the longest waiting is
    closed to make room first (see _made_room)."""

    def __init__(self, *args: Any, read_timeout_s: float, max_connections: int, per_address: int,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout_s, self.max_connections, self.per_address = read_timeout_s, max_connections, per_address
        self.read_deadline: asyncio.TimerHandle | None = None
        self.refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.conn.next_event = functools.partial(self._framed_once, self.conn.next_event)  # type: ignore[method-assign]
        # this one counted; refused ones lingering (see _refuse) are not: bounded apart, in _LINGERING (a client at its
        # own bound that kept retrying filled the overall bound with its refusals, and the next client from any
        # address closed another's kept-alive connection to make room, or was refused 503)
        held = [other for other in self.connections if not other.refused and not other.transport.is_closing()]
        address = self.client[0] if self.client else None
        same = [other for other in held if other.client and other.client[0] == address]
        # The address's own bound first, and then only its own idle connection makes room (which makes room under
        # the overall bound too): at most one connection is closed for an arrival, and none for one then refused.
        # (Checked the other way round, a client at its own bound closed other clients' idle connections once
        # per attempt before it was refused 429, and two were closed when both bounds were met.)
        if address is not None and len(same) > self.per_address:
            if not self._made_room(same):
                self._refuse(429, "Too Many Requests", f"this address holds {self.per_address} connections to "
                             "the gateway already (RAGBUS_MAX_CONNECTIONS_PER_ADDRESS); close one or try again "
                             "shortly", retry_after_s=1)
                return
        elif len(held) > self.max_connections and not self._made_room(held):
            self._refuse(503, "Service Unavailable", f"the gateway holds {self.max_connections} connections "
                         "already (RAGBUS_MAX_CONNECTIONS); try again shortly", retry_after_s=1)
            return
        self._watch()

    def _made_room(self, held: Any) -> bool:
        """Close the connection of ``held`` that has waited longest between requests (answered, nothing of a next
        request in), as uvicorn's keep-alive timeout would have: whether there was one. Kept-alive connections
        waiting for a next request held the bound: 256 of them, and the gateway answered /healthz 503 until
        uvicorn let them go. Either end may close a connection at any time (RFC 9112 9.5), and a client retries
        a request on a fresh connection when the one it kept is found closed (9.3.1)."""
        idle = [other for other in held if other is not self and other._between_requests()]
        if not idle:
            return False
        oldest = min(idle, key=lambda other: other.timeout_keep_alive_task.when())
        oldest.timeout_keep_alive_handler()
        oldest.timeout_keep_alive_task.cancel()
        return True

    def _between_requests(self) -> bool:
        """Answered, and waiting for a next request of which nothing has come (uvicorn's keep-alive timer runs)."""
        return (self.timeout_keep_alive_task is not None and not self.refused and not self.transport.is_closing()
                and self.cycle is not None and self.cycle.response_complete)

    def _framed_once(self, next_event: Any) -> Any:
        """h11's next event, but a request framed twice (Content-Length and Transfer-Encoding both) refused: h11
        lets the chunked framing win and reads what follows as the next request, on the same connection, where a
        proxy in front that went by Content-Length reads it as this one's body (request smuggling; RFC 9112 6.3
        has the server close the connection after answering such a request; it did not)."""
        try:
            event = next_event()
        except h11.RemoteProtocolError as exc:
            # uvicorn answered every such request "Invalid HTTP request received." in plain text, naming nothing
            status = exc.error_status_hint if 400 <= exc.error_status_hint < 500 else 400
            self._refuse(status, HTTPStatus(status).phrase, f"the request is not valid HTTP/1.1 "
                         f"({_protocol_fault(exc)}); send a well-formed request, with JSON as the API describes")
            return h11.NEED_DATA
        if isinstance(event, h11.Request) and {b"content-length", b"transfer-encoding"} <= {
                name.lower() for name, _ in event.headers}:
            self._refuse(400, "Bad Request", "the request has both Content-Length and Transfer-Encoding; "
                         "send one of them")
            return h11.NEED_DATA  # uvicorn's loop stops here; what the client sends next is dropped
        return event

    def data_received(self, data: bytes) -> None:
        if self.refused:  # what a refused client still sends is read and dropped (see _refuse)
            return
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown, but a refused connection (lingering, its input dropped) only closed: h11 may
        stand mid-request there (a request framed twice is refused as h11 reads it), where uvicorn's shutdown sends
        h11 ConnectionClosed, which raised LocalProtocolError and aborted the server's shutdown (lifespan cancelled)."""
        if self.refused:
            self.transport.close()
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        _LINGERING.discard(self)
        self._stop_watching()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Start the deadline while a request is still to come or coming; stop it once it is read. Not once refused
        (what the client sent with the refused request, or the answer's end, would re-arm it while it lingers)."""
        if self.refused:
            return
        cycle = self.cycle  # None, or done, until a request's headers are in; then its body is read
        reading = (cycle is None or cycle.response_complete or cycle.more_body) and not self.transport.is_closing()
        if not reading:
            self._stop_watching()
        elif self.read_deadline is None:
            self.read_deadline = self.loop.call_later(self.read_timeout_s, self._too_slow)

    def _stop_watching(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def _too_slow(self) -> None:
        self.read_deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_started and (
                not cycle.response_complete or self.conn.their_state is h11.SEND_BODY):
            # answered (or answering) before the body was read, as the guard's 421 and a declared oversized
            # body's 413 are: the connection ends as it is. A 408 written after that answer was a second
            # response to one request, read by a kept-alive client as its next request's.
            self.transport.close()
            return
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app reading the body hears a disconnect; its answer goes nowhere
            cycle.message_event.set()
        self._refuse(408, "Request Timeout", f"the request was not sent within {self.read_timeout_s:g} s "
                     "(RAGBUS_REQUEST_READ_TIMEOUT_S); send it whole, at once")

    def _refuse(self, status: int, reason: str, error: str, retry_after_s: int | None = None) -> None:
        """Answer ``status`` with ``{"error": ...}`` whatever the client has sent, and disconnect."""
        body = json.dumps({"error": error}).encode()
        retry = b"retry-after: %d\r\n" % retry_after_s if retry_after_s is not None else b""
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n%sconnection: close\r\n"
                             b"content-length: %d\r\n\r\n%s" % (status, reason.encode(), retry, len(body), body))
        # Closed at once, the socket met the request the client was still sending with a reset, which threw
        # the answer away unread (a flood over httpx saw bare ReadErrors, no 429). So end the sending side
        # and drop what comes in until the client closes too, for at most LINGER_S.
        # (Lingering ones are bounded like held ones: past max_connections of them, a refusal closes at once.)
        self.refused = True
        self._stop_watching()
        if self.transport.can_write_eof() and len(_LINGERING) < self.max_connections:
            _LINGERING.add(self)
            try:
                self.transport.write_eof()
            except OSError:  # the client has gone already (ENOTCONN): nothing to linger for
                _LINGERING.discard(self)
                self.transport.close()
                return
            self.loop.call_later(_LINGER_S, self.transport.close)
        else:
            self.transport.close()


def _protocol_fault(exc: h11.RemoteProtocolError) -> str:
    """What h11 found wrong with a request ("bad Content-Length", "Missing mandatory Host: header"), less the bytes
    it quotes ("illegal header line: bytearray(b'...')"): a header's value is never written back."""
    return str(exc).split(":", 1)[0].strip() if "bytearray(" in str(exc) else str(exc)


def check_listenable(host: str, port: int) -> None:
    """Refuse, naming the reason, an address the gateway cannot listen on: uvicorn would log a
    bind failure as a bare ERROR line and exit, and let a port out of range out as a traceback.

    Binds (and closes) a socket for every address ``host`` resolves to, as uvicorn will."""
    if not 0 <= port <= 65535:
        raise InvalidInput(f"port {port} is not a TCP port; choose one from 1 to 65535 (0 picks a free one)")
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInput(f"cannot listen on host {host!r} ({exc}); give an address of this machine, "
                           "such as 127.0.0.1") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise InvalidInput(
                    f"the gateway cannot listen on {host}:{port}: {exc.strerror or exc} (a `ragbus serve` "
                    "already running?); stop what listens there or choose another --port"
                ) from None


def serve(
    deps: Deps,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    app: Starlette | None = None,
    api_token: str | None = None,
    stages: Sequence[str] = (),
    log_level: str = "warning",
    ready_timeout_s: float = 15.0,
) -> ServerHandle:
    """Serve the gateway on ``host:port`` (0 picks a free port) until ``.stop()``; ``stages``: the
    stages this process runs beside it, whose readiness ``/readyz`` reports (see :func:`create_app`).

    Raises :class:`InvalidInput` for an address it cannot listen on (see :func:`check_listenable`)."""
    check_listenable(host, port)
    stopping = threading.Event()
    config = uvicorn.Config(
        app or create_app(deps, host=host, api_token=api_token, stages=stages, stopping=stopping),
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        # Open event streams end with their query; do not let one hold shutdown.
        timeout_graceful_shutdown=2,
        http=functools.partial(BoundedRequestProtocol, read_timeout_s=deps.settings.request_read_timeout_s,
                               max_connections=deps.settings.max_connections,
                               per_address=deps.settings.max_connections_per_address),
    )
    server = uvicorn.Server(config)
    def run() -> None:
        try:
            server.run()
        except SystemExit:
            # uvicorn exits when it cannot bind; the caller hears it from serve() below.
            pass

    thread = threading.Thread(target=run, name=f"gateway@{host}:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_timeout_s
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(
                f"the gateway could not start on {host}:{port} (address in use or not allowed?); "
                "choose another --port or host"
            )
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the gateway did not start on {host}:{port} within {ready_timeout_s:g}s")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1] if port == 0 else port
    log.info("gateway serving on %s:%d", host, bound)
    return ServerHandle(host=host, port=bound, server=server, thread=thread, stopping=stopping)
