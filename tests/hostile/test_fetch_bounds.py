"""Hostile servers against the fetcher: bombs, drips, floods. Every request goes to 127.0.0.1."""

from __future__ import annotations

import gzip
import threading
import time
import tracemalloc
import zlib

import pytest

from shared.adapters.http_fetch import SafeFetcher
from shared.contract.errors import FetchRefused, RetryableError
from tests.hostile.servers import hostile_server

HTML = ["text/html"]
MB = 1024 * 1024


def _fetcher(**kw) -> SafeFetcher:
    return SafeFetcher(allow_loopback=True, backoff_s=0.01, **kw)


@pytest.fixture
def site():
    with hostile_server() as s:
        yield s


@pytest.mark.parametrize("encoding,compress", [
    ("gzip", lambda b: gzip.compress(b, 9)),
    ("deflate", lambda b: zlib.compress(b, 9)),
])
def test_a_compression_bomb_is_stopped_while_decompressing(site, encoding, compress):
    bomb = compress(b"\0" * (64 * MB))  # 64 MB of zeros in ~64 KB: one or two network reads
    site.put("/bomb", bomb, Content_Encoding=encoding)
    tracemalloc.start()
    try:
        with pytest.raises(FetchRefused, match="decompressed body exceeded the 1048576-byte cap"):
            _fetcher(max_bytes=MB).fetch(f"{site.base}/bomb", accept=HTML)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB, f"decompressed {peak / MB:.0f} MB before stopping"


def test_an_unknown_content_encoding_is_refused(site):
    site.put("/br", b"\x0b\x02\x80hello\x03", Content_Encoding="br")
    with pytest.raises(FetchRefused, match="content encoding 'br'"):
        _fetcher().fetch(f"{site.base}/br", accept=HTML)


def test_a_slow_loris_server_costs_the_total_deadline_not_minutes(site):
    def drip(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.end_headers()
        for _ in range(600):
            h.wfile.write(b".")
            h.wfile.flush()
            time.sleep(0.1)

    site.routes["/drip"] = drip
    started = time.monotonic()
    with pytest.raises(RetryableError, match="total deadline of 2s|overall deadline of 2s"):
        # per read 1 s and per attempt 3 s would allow 4 attempts (12 s+); the total caps it
        _fetcher(timeout_s=1.0, retries=3, total_deadline_s=2.0).fetch(f"{site.base}/drip", accept=HTML)
    assert time.monotonic() - started < 4.0


def test_a_server_that_never_answers_costs_the_total_deadline(site):
    site.routes["/silent"] = lambda h: time.sleep(30)
    started = time.monotonic()
    with pytest.raises(RetryableError):
        _fetcher(timeout_s=5.0, retries=5, total_deadline_s=1.5).fetch(f"{site.base}/silent", accept=HTML)
    assert time.monotonic() - started < 3.5


def test_requests_in_flight_to_one_host_are_capped(site):
    # Counted from a request's arrival until its answer is written, not until the handler thread returns: the
    # fetcher may read a whole answer and send the next request before the server's thread gets the CPU back to
    # count the first one out (most_in_flight read 3 under a loaded suite).
    waiting = {"now": 0, "most": 0}
    lock = threading.Lock()
    site.put("/ok", b"ok")

    def slow(h):
        with lock:
            waiting["now"] += 1
            waiting["most"] = max(waiting["most"], waiting["now"])
        time.sleep(0.3)
        with lock:
            waiting["now"] -= 1
        site.routes["/ok"](h)

    site.routes["/slow"] = slow
    fetcher = _fetcher(host_concurrency=2, host_rate=1000.0)
    threads = [threading.Thread(target=fetcher.fetch, args=(f"{site.base}/slow",), kwargs={"accept": HTML})
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert site.hits["/slow"] == 6 and waiting["most"] == 2


def test_requests_started_per_second_to_one_host_are_capped(site):
    site.put("/page", b"ok")
    fetcher = _fetcher(host_rate=5.0)
    started = time.monotonic()
    for _ in range(6):
        fetcher.fetch(f"{site.base}/page", accept=HTML)
    assert time.monotonic() - started >= 0.9  # 6 starts at 5/s: at least 1 s
