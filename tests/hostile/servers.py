"""A hostile web server on 127.0.0.1: each route is a function writing the raw response."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support import loopback_http

Route = Callable[[http.server.BaseHTTPRequestHandler], None]


class Hostile:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: dict[str, int] = {}
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()
        self.base = ""

    def put(self, path: str, body: bytes | str, content_type: str = "text/html; charset=utf-8",
            **headers: str) -> None:
        data = body.encode() if isinstance(body, str) else body

        def route(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("Content-Type", content_type)
            h.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                h.send_header(name.replace("_", "-"), value)
            h.end_headers()
            h.wfile.write(data)

        self.routes[path] = route


@contextmanager
def hostile_server() -> Iterator[Hostile]:
    site = Hostile()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            with site.lock:
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                site.in_flight += 1
                site.most_in_flight = max(site.most_in_flight, site.in_flight)
            try:
                route = site.routes.get(self.path)
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                route(self)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with site.lock:
                    site.in_flight -= 1

    with loopback_http(Handler) as server:
        site.base = f"http://127.0.0.1:{server.server_address[1]}"
        yield site
