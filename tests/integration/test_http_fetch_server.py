"""SafeFetcher against a real threaded http.server on 127.0.0.1."""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from shared.adapters.http_fetch import SafeFetcher
from shared.contract.errors import FetchRefused, InvalidInput, PermanentError, RetryableError

FIFTY_MB = 50 * 1024 * 1024
HTML = ["text/html", "application/xhtml+xml"]


class Web:
    """Routes: path -> function(handler) that writes the response."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[http.server.BaseHTTPRequestHandler], None]] = {}
        self.hits: dict[str, int] = {}
        self.headers: dict[str, list[dict[str, str]]] = {}
        self.sent: dict[str, int] = {}
        self.finished: dict[str, threading.Event] = {}
        self.base = ""


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-response is exactly what these tests provoke.
        pass


@contextmanager
def serve(web: Web) -> Iterator[Web]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            web.hits[self.path] = web.hits.get(self.path, 0) + 1
            web.headers.setdefault(self.path, []).append(
                {k.lower(): v for k, v in self.headers.items()}
            )
            route = web.routes.get(self.path)
            if route is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            route(self)

    server = _QuietServer(("127.0.0.1", 0), Handler)
    web.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield web
    finally:
        server.shutdown()
        server.server_close()


def respond(status: int = 200, body: bytes = b"", **headers: str):
    def route(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name.replace("_", "-"), value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return route


def redirect(location: str, status: int = 302):
    return respond(status, Location=location)


def endless(web: Web, path: str, *, declare_length: bool, total: int = FIFTY_MB):
    """Streams ``total`` bytes lazily, counting what the socket accepted before the client hung up."""
    web.finished[path] = threading.Event()

    def route(h: http.server.BaseHTTPRequestHandler) -> None:
        sent = 0
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            if declare_length:
                h.send_header("Content-Length", str(total))
            else:
                h.send_header("Connection", "close")  # body ends when the connection does
            h.end_headers()
            chunk = b"x" * 65536
            while sent < total:
                h.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            h.close_connection = True
            web.sent[path] = sent
            web.finished[path].set()

    return route


@pytest.fixture
def web():
    with serve(Web()) as running:
        yield running


def fetcher(**kwargs) -> SafeFetcher:
    kwargs.setdefault("allow_loopback", True)
    kwargs.setdefault("sleep", lambda s: None)
    kwargs.setdefault("timeout_s", 2.0)
    return SafeFetcher(**kwargs)


def test_loopback_is_refused_unless_allowed(web):
    web.routes["/page"] = respond(body=b"<p>hi</p>", Content_Type="text/html")
    with pytest.raises(FetchRefused, match="127.0.0.1 is a loopback address"):
        SafeFetcher(allow_loopback=False).fetch(f"{web.base}/page", accept=HTML)
    assert web.hits == {}
    assert fetcher().fetch(f"{web.base}/page", accept=HTML).body == b"<p>hi</p>"


def test_localhost_by_name_works_when_allowed(web):
    port = web.base.rsplit(":", 1)[1]
    web.routes["/page"] = respond(body=b"ok", Content_Type="text/html")
    result = fetcher().fetch(f"http://localhost:{port}/page", accept=HTML)
    assert result.body == b"ok" and result.url == f"http://localhost:{port}/page"
    assert web.headers["/page"][0]["host"] == f"localhost:{port}"


def test_declared_and_mislabelled_charsets_pass_through_as_bytes(web):
    latin1 = "<p>Café crème</p>".encode("latin-1")
    web.routes["/latin1"] = respond(body=latin1, Content_Type="text/html; charset=ISO-8859-1")
    web.routes["/mislabelled"] = respond(body=latin1, Content_Type="text/html; charset=utf-8")
    web.routes["/undeclared"] = respond(body=latin1, Content_Type="text/html")
    f = fetcher()
    assert (
        f.fetch(f"{web.base}/latin1", accept=HTML).body,
        f.fetch(f"{web.base}/latin1", accept=HTML).charset,
    ) == (latin1, "iso-8859-1")
    mislabelled = f.fetch(f"{web.base}/mislabelled", accept=HTML)
    assert mislabelled.body == latin1 and mislabelled.charset == "utf-8"
    assert f.fetch(f"{web.base}/undeclared", accept=HTML).charset is None


def test_empty_page_is_returned_empty(web):
    web.routes["/empty"] = respond(body=b"", Content_Type="text/html")
    result = fetcher().fetch(f"{web.base}/empty", accept=HTML)
    assert result.status == 200 and result.body == b""


def test_conditional_get_round_trip(web):
    def feed(h):
        if h.headers.get("If-None-Match") == '"v1"':
            respond(304, ETag='"v1"')(h)
        else:
            respond(
                body=b"<rss/>",
                Content_Type="application/rss+xml",
                ETag='"v1"',
                Last_Modified="Sun, 01 Nov 2026 10:00:00 GMT",
            )(h)

    web.routes["/feed"] = feed
    f = fetcher()
    first = f.fetch(f"{web.base}/feed", accept=["application/rss+xml"])
    second = f.fetch(
        f"{web.base}/feed",
        accept=["application/rss+xml"],
        etag=first.etag,
        last_modified=first.last_modified,
    )
    assert first.status == 200 and second.not_modified
    assert web.headers["/feed"][1]["if-modified-since"] == "Sun, 01 Nov 2026 10:00:00 GMT"


def test_404_is_permanent(web):
    with pytest.raises(PermanentError, match=r"/missing returned HTTP 404") as caught:
        fetcher().fetch(f"{web.base}/missing", accept=HTML)
    assert not isinstance(caught.value, FetchRefused)
    assert web.hits["/missing"] == 1


def test_500_is_retried_then_retryable(web):
    sleeps: list[float] = []
    web.routes["/down"] = respond(500)
    with pytest.raises(RetryableError, match="after 3 attempts: HTTP 500"):
        fetcher(retries=2, sleep=sleeps.append, backoff_s=0.25).fetch(
            f"{web.base}/down", accept=HTML
        )
    assert web.hits["/down"] == 3 and sleeps == [0.25, 0.5]


def test_a_server_that_recovers_is_read(web):
    answers = iter([respond(503, Retry_After="1"), respond(body=b"back", Content_Type="text/html")])
    web.routes["/flaky"] = lambda h: next(answers)(h)
    sleeps: list[float] = []
    assert fetcher(sleep=sleeps.append).fetch(f"{web.base}/flaky", accept=HTML).body == b"back"
    assert sleeps == [1.0]


def test_a_slow_server_times_out_and_is_retryable(web):
    release = threading.Event()

    def slow(h):
        release.wait(5)
        respond(body=b"late", Content_Type="text/html")(h)

    web.routes["/slow"] = slow
    try:
        with pytest.raises(RetryableError, match="timed out"):
            fetcher(timeout_s=0.2, retries=1).fetch(f"{web.base}/slow", accept=HTML)
        assert web.hits["/slow"] == 2
    finally:
        release.set()


def test_redirects_are_followed_to_the_final_url(web):
    web.routes["/old"] = redirect("/middle", 301)
    web.routes["/middle"] = redirect(f"{web.base}/new", 307)
    web.routes["/new"] = respond(body=b"here", Content_Type="text/html")
    result = fetcher().fetch(f"{web.base}/old", accept=HTML)
    assert result.body == b"here" and result.url == f"{web.base}/new"


def test_redirect_loop_is_refused(web):
    web.routes["/a"] = redirect("/b")
    web.routes["/b"] = redirect("/a")
    with pytest.raises(FetchRefused, match="redirect loop"):
        fetcher().fetch(f"{web.base}/a", accept=HTML)
    assert web.hits == {"/a": 1, "/b": 1}


def test_too_many_redirects_is_refused(web):
    for n in range(10):
        web.routes[f"/hop{n}"] = redirect(f"/hop{n + 1}")
    with pytest.raises(FetchRefused, match="too many redirects"):
        fetcher(max_redirects=5).fetch(f"{web.base}/hop0", accept=HTML)
    assert len(web.hits) == 6


@pytest.mark.parametrize(
    "target, message",
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://10.1.2.3/admin", "10.1.2.3 is a private address"),
        ("http://[::ffff:192.168.1.1]/", "192.168.1.1 is a private address"),
        ("http://100.64.1.1/", "carrier-grade NAT"),
        ("file:///etc/passwd", "scheme 'file'"),
    ],
)
def test_a_redirect_into_a_private_range_is_refused_even_with_loopback_allowed(
    web, target, message
):
    web.routes["/jump"] = redirect(target)
    with pytest.raises(FetchRefused, match=message):
        fetcher().fetch(f"{web.base}/jump", accept=HTML)


def test_a_redirect_into_loopback_is_followed_only_when_loopback_is_allowed(web):
    port = web.base.rsplit(":", 1)[1]
    web.routes["/jump"] = redirect(f"http://localhost:{port}/landing")
    web.routes["/landing"] = respond(body=b"landed", Content_Type="text/html")
    assert fetcher().fetch(f"{web.base}/jump", accept=HTML).body == b"landed"
    with pytest.raises(FetchRefused, match="loopback"):
        SafeFetcher(allow_loopback=False).fetch(f"http://localhost:{port}/jump", accept=HTML)


def test_wrong_content_type_is_refused(web):
    web.routes["/logo.png"] = respond(body=b"\x89PNG", Content_Type="image/png")
    with pytest.raises(FetchRefused, match="content type 'image/png'"):
        fetcher().fetch(f"{web.base}/logo.png", accept=HTML)


def test_a_50_mb_page_with_content_length_is_refused_before_reading(web):
    web.routes["/big"] = endless(web, "/big", declare_length=True)
    with pytest.raises(
        FetchRefused, match=f"{FIFTY_MB} bytes \\(Content-Length\\), over the 5242880-byte cap"
    ):
        fetcher().fetch(f"{web.base}/big", accept=HTML)
    assert web.finished["/big"].wait(10)
    print(
        f"\n/big: server got {web.sent['/big'] / 1e6:.1f} MB into the socket before the client hung up"
    )
    assert web.sent["/big"] < FIFTY_MB // 2


def test_a_50_mb_page_without_length_is_cut_off_at_the_cap(web):
    web.routes["/stream"] = endless(web, "/stream", declare_length=False)
    started = time.monotonic()
    with pytest.raises(FetchRefused, match="exceeded the 5242880-byte cap"):
        fetcher().fetch(f"{web.base}/stream", accept=HTML)
    assert web.finished["/stream"].wait(10)
    print(
        f"\n/stream: refused after {time.monotonic() - started:.2f}s, server wrote "
        f"{web.sent['/stream'] / 1e6:.1f} MB of {FIFTY_MB / 1e6:.0f} MB"
    )
    assert web.sent["/stream"] < FIFTY_MB // 2


def test_a_gzip_bomb_is_cut_off_at_the_cap_after_decompression(web):
    bomb = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=6)
    web.routes["/bomb"] = respond(body=bomb, Content_Type="text/html", Content_Encoding="gzip")
    with pytest.raises(FetchRefused, match="exceeded the 1048576-byte cap"):
        fetcher(max_bytes=1024 * 1024).fetch(f"{web.base}/bomb", accept=HTML)
    assert len(bomb) < 1024 * 1024  # the compressed size alone would have passed


def test_invalid_urls_are_refused_before_any_request():
    with pytest.raises(InvalidInput, match="scheme 'ftp'"):
        fetcher().fetch("ftp://127.0.0.1/x", accept=HTML)
