"""SafeFetcher and the address guard, with an injected resolver and httpx.MockTransport."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest

from shared.adapters.http_fetch import SafeFetcher, media_type_accepted, parse_content_type
from shared.contract.errors import FetchRefused, InvalidInput, PermanentError, RetryableError
from shared.ingest.url_guard import address_refusal, check_url, normalise_url, resolve_host

PUBLIC = "93.184.216.34"


def resolver_for(table: dict[str, list[str]]):
    """A getaddrinfo stand-in answering from ``table``."""

    def resolve(host, port, type=0, **_):
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in table[host]
        ]

    return resolve


# ------------------------------------------------------------------ the guard


@pytest.mark.parametrize(
    "address, kind",
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::", "unspecified"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:a00:1::", "private"),  # 6to4 wrapping 10.0.0.1
        ("2002:a9fe:a9fe::", "link-local"),  # 6to4 wrapping 169.254.169.254
    ],
)
def test_forbidden_addresses_are_refused_even_with_loopback_allowed(address, kind):
    for allow in (False, True):
        reason = address_refusal(ipaddress.ip_address(address), allow_loopback=allow)
        assert reason is not None and kind in reason
        assert f"is {'an' if kind[0] in 'aeiou' else 'a'} {kind}" in reason  # not "is a unspecified"


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_loopback_only_when_allowed(address):
    ip = ipaddress.ip_address(address)
    assert "loopback" in (address_refusal(ip, allow_loopback=False) or "")
    assert address_refusal(ip, allow_loopback=True) is None


@pytest.mark.parametrize("address", [PUBLIC, "2606:4700:4700::1111", "2002:5db8:d822::"])
def test_public_addresses_pass(address):
    assert address_refusal(ipaddress.ip_address(address), allow_loopback=False) is None


def test_any_private_address_among_several_refuses_the_host():
    resolve = resolver_for({"mixed.example": [PUBLIC, "10.0.0.5"]})
    with pytest.raises(FetchRefused, match="10.0.0.5 is a private"):
        resolve_host("mixed.example", 80, allow_loopback=False, resolver=resolve)


def test_localhost_name_is_refused_without_asking_dns_unless_allowed():
    calls = []

    def resolve(host, port, type=0):
        calls.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    with pytest.raises(FetchRefused, match="loopback"):
        resolve_host("localhost", 80, allow_loopback=False, resolver=resolve)
    assert calls == []
    assert resolve_host("localhost", 80, allow_loopback=True, resolver=resolve) == [
        ipaddress.ip_address("127.0.0.1")
    ]


def test_name_resolving_to_loopback_is_refused():
    resolve = resolver_for({"sneaky.example": ["127.0.0.1"]})
    with pytest.raises(FetchRefused, match="loopback"):
        check_url("http://sneaky.example/", allow_loopback=False, resolver=resolve)


def test_dns_failures_are_classified():
    with pytest.raises(InvalidInput, match="does not resolve"):
        resolve_host("nope.example", 80, allow_loopback=False, resolver=resolver_for({}))

    def flaky(host, port, type=0):
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with pytest.raises(RetryableError, match="temporarily"):
        resolve_host("flaky.example", 80, allow_loopback=False, resolver=flaky)


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://example.org/feed", "scheme 'ftp'"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("javascript:alert(1)", "scheme 'javascript'"),
        ("example.org/feed", "scheme 'none'"),
        ("http:///feed", "no host"),
        ("", "empty"),
        ("http://user:pw@example.org/", "credentials"),
    ],
)
def test_bad_urls_are_invalid_input(url, message):
    with pytest.raises(InvalidInput, match=message):
        normalise_url(url)


def test_normalise_url():
    assert normalise_url("HTTP://Example.ORG:80") == "http://example.org/"
    assert normalise_url("https://example.org:443/a/b?x=1#frag") == "https://example.org/a/b?x=1"
    assert normalise_url("https://example.org:8443/feed") == "https://example.org:8443/feed"
    assert normalise_url("http://[::1]:8080/x") == "http://[::1]:8080/x"


def test_content_type_helpers():
    assert parse_content_type('text/HTML; Charset="ISO-8859-1"') == ("text/html", "iso-8859-1")
    assert parse_content_type(None) == ("application/octet-stream", None)
    assert media_type_accepted("text/html", ["text/*"])
    assert media_type_accepted("image/png", ["*/*"])
    assert not media_type_accepted("image/png", ["text/html", "application/xhtml+xml"])


# ------------------------------------------------------------------ the fetcher


class Server:
    """Routes for MockTransport: host -> path -> handler(request) -> Response."""

    def __init__(self, routes):
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.routes.get(request.url.path)
        if handler is None:
            return httpx.Response(404)
        return handler(request)


def make_fetcher(routes, *, table=None, **kwargs):
    server = Server(routes)
    sleeps: list[float] = []
    fetcher = SafeFetcher(
        transport=httpx.MockTransport(server),
        resolver=resolver_for(table or {"example.org": [PUBLIC]}),
        sleep=sleeps.append,
        **kwargs,
    )
    return fetcher, server, sleeps


def html(body=b"<p>hi</p>", **headers):
    return lambda request: httpx.Response(
        200, headers={"content-type": "text/html", **headers}, content=body
    )


def test_connects_to_the_checked_address_with_the_name_in_host():
    fetcher, server, _ = make_fetcher({"/a": html(b"ok")})
    result = fetcher.fetch("http://Example.org/a", accept=["text/html"])
    assert result.status == 200 and result.body == b"ok"
    assert result.url == "http://example.org/a"
    request = server.requests[0]
    assert request.url.host == PUBLIC  # pinned: no second DNS lookup can redirect it
    assert request.headers["host"] == "example.org"
    assert request.headers["user-agent"] == "ragbus/0.1"


def test_https_keeps_the_name_for_sni_and_certificate_checks():
    fetcher, server, _ = make_fetcher({"/a": html()})
    fetcher.fetch("https://example.org/a", accept=["text/html"])
    request = server.requests[0]
    assert request.url.host == PUBLIC
    assert request.extensions["sni_hostname"] == "example.org"


def test_charset_is_returned_and_bytes_pass_through_untouched():
    latin1 = "café".encode("latin-1")
    fetcher, _, _ = make_fetcher(
        {"/l": html(latin1, **{"content-type": "text/html; charset=ISO-8859-1"})}
    )
    result = fetcher.fetch("http://example.org/l", accept=["text/html"])
    assert (
        result.body == latin1
        and result.charset == "iso-8859-1"
        and result.content_type == "text/html"
    )


def test_conditional_get_sends_validators_and_returns_304():
    def feed(request):
        if request.headers.get("if-none-match") == '"v1"':
            return httpx.Response(304, headers={"etag": '"v1"'})
        return httpx.Response(
            200,
            headers={
                "content-type": "application/rss+xml",
                "etag": '"v1"',
                "last-modified": "Sun, 01 Nov 2026 10:00:00 GMT",
            },
            content=b"<rss/>",
        )

    fetcher, server, _ = make_fetcher({"/feed": feed})
    first = fetcher.fetch("http://example.org/feed", accept=["application/rss+xml"])
    assert first.status == 200 and first.etag == '"v1"'
    second = fetcher.fetch(
        "http://example.org/feed",
        accept=["application/rss+xml"],
        etag=first.etag,
        last_modified=first.last_modified,
    )
    assert second.not_modified and second.body == b"" and second.etag == '"v1"'
    assert server.requests[1].headers["if-modified-since"] == "Sun, 01 Nov 2026 10:00:00 GMT"


def test_size_cap_by_content_length_reads_nothing():
    reads = []

    def stream():
        reads.append(1)
        yield b"x" * 100

    routes = {
        "/big": lambda r: httpx.Response(
            200,
            headers={"content-type": "text/html", "content-length": str(50 * 1024 * 1024)},
            content=stream(),
        )
    }
    fetcher, _, _ = make_fetcher(routes, max_bytes=1024)
    with pytest.raises(FetchRefused, match=r"52428800 bytes .*1024-byte cap"):
        fetcher.fetch("http://example.org/big", accept=["text/html"])
    assert reads == []


def test_size_cap_while_streaming_stops_early():
    produced = []

    def endless():
        for _ in range(50 * 16):  # 50 MB in 64 KB chunks, produced lazily
            produced.append(1)
            yield b"x" * 65536

    routes = {
        "/big": lambda r: httpx.Response(
            200, headers={"content-type": "text/html"}, content=endless()
        )
    }
    fetcher, _, _ = make_fetcher(routes, max_bytes=200_000)
    with pytest.raises(FetchRefused, match="200000-byte cap"):
        fetcher.fetch("http://example.org/big", accept=["text/html"])
    assert len(produced) <= 5


def test_wrong_content_type_is_refused_with_the_type():
    fetcher, _, _ = make_fetcher(
        {"/img": lambda r: httpx.Response(200, headers={"content-type": "image/png"})}
    )
    with pytest.raises(FetchRefused, match="'image/png'"):
        fetcher.fetch("http://example.org/img", accept=["text/html", "application/xhtml+xml"])


def test_404_is_permanent_and_names_status_and_url():
    fetcher, server, sleeps = make_fetcher({})
    with pytest.raises(PermanentError, match=r"http://example.org/missing returned HTTP 404"):
        fetcher.fetch("http://example.org/missing", accept=["text/html"])
    assert len(server.requests) == 1 and sleeps == []


def test_5xx_is_retried_with_exponential_backoff_then_retryable():
    fetcher, server, sleeps = make_fetcher(
        {"/down": lambda r: httpx.Response(503)}, retries=3, backoff_s=0.5
    )
    with pytest.raises(RetryableError, match=r"after 4 attempts: HTTP 503"):
        fetcher.fetch("http://example.org/down", accept=["text/html"])
    assert len(server.requests) == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_5xx_then_success():
    answers = iter(
        [
            httpx.Response(500),
            httpx.Response(200, headers={"content-type": "text/html"}, content=b"ok"),
        ]
    )
    fetcher, _, sleeps = make_fetcher({"/flaky": lambda r: next(answers)})
    assert fetcher.fetch("http://example.org/flaky", accept=["text/html"]).body == b"ok"
    assert sleeps == [0.5]


def test_429_honours_retry_after_up_to_a_cap():
    answers = iter(
        [
            httpx.Response(429, headers={"retry-after": "7"}),
            httpx.Response(429, headers={"retry-after": "3600"}),
            httpx.Response(200, headers={"content-type": "text/html"}, content=b"ok"),
        ]
    )
    fetcher, _, sleeps = make_fetcher({"/busy": lambda r: next(answers)}, max_retry_after_s=30.0,
                                      total_deadline_s=120.0)
    assert fetcher.fetch("http://example.org/busy", accept=["text/html"]).body == b"ok"
    assert sleeps == [7.0, 30.0]


def test_timeouts_are_retried_then_retryable():
    def slow(request):
        raise httpx.ReadTimeout("read timed out", request=request)

    fetcher, server, sleeps = make_fetcher({"/slow": slow}, retries=2)
    with pytest.raises(RetryableError, match="timed out"):
        fetcher.fetch("http://example.org/slow", accept=["text/html"])
    assert len(server.requests) == 3 and len(sleeps) == 2


def test_connection_errors_are_retried():
    def refused(request):
        raise httpx.ConnectError("connection refused", request=request)

    fetcher, _, _ = make_fetcher({"/x": refused}, retries=1)
    with pytest.raises(RetryableError, match="ConnectError"):
        fetcher.fetch("http://example.org/x", accept=["text/html"])


def test_overall_deadline_stops_a_dripping_server():
    clock = iter(range(0, 1000, 5))  # every reading of the clock is 5 s later

    def drip():
        for _ in range(100):
            yield b"."

    fetcher, _, _ = make_fetcher(
        {
            "/drip": lambda r: httpx.Response(
                200, headers={"content-type": "text/html"}, content=drip()
            )
        },
        timeout_s=1.0,
        deadline_s=12.0,
        retries=0,
    )
    fetcher._monotonic = lambda: float(next(clock))
    with pytest.raises(RetryableError, match="overall deadline of 12s"):
        fetcher.fetch("http://example.org/drip", accept=["text/html"])


def test_redirects_are_followed_and_final_url_returned():
    routes = {
        "/old": lambda r: httpx.Response(301, headers={"location": "/new"}),
        "/new": lambda r: httpx.Response(302, headers={"location": "https://cdn.example/page"}),
        "/page": html(b"final"),
    }
    fetcher, server, _ = make_fetcher(
        routes, table={"example.org": [PUBLIC], "cdn.example": ["93.184.216.35"]}
    )
    result = fetcher.fetch("http://example.org/old", accept=["text/html"])
    assert result.body == b"final" and result.url == "https://cdn.example/page"
    assert [r.headers["host"] for r in server.requests] == [
        "example.org",
        "example.org",
        "cdn.example",
    ]
    assert server.requests[2].url.host == "93.184.216.35"


@pytest.mark.parametrize(
    "location, message",
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://10.0.0.7/admin", "private"),
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://internal.example/", "192.168.0.10 is a private"),
        ("file:///etc/passwd", "scheme 'file'"),
    ],
)
def test_each_redirect_hop_is_revalidated(location, message):
    routes = {"/go": lambda r: httpx.Response(302, headers={"location": location})}
    fetcher, server, _ = make_fetcher(
        routes, table={"example.org": [PUBLIC], "internal.example": ["192.168.0.10"]}
    )
    with pytest.raises(FetchRefused, match=message) as caught:
        fetcher.fetch("http://example.org/go", accept=["text/html"])
    assert "redirect from http://example.org/go" in str(caught.value)
    assert len(server.requests) == 1  # the forbidden hop was never requested


def test_redirect_loop_is_refused():
    routes = {
        "/a": lambda r: httpx.Response(302, headers={"location": "/b"}),
        "/b": lambda r: httpx.Response(302, headers={"location": "/a"}),
    }
    fetcher, _, _ = make_fetcher(routes)
    with pytest.raises(
        FetchRefused,
        match=r"redirect loop: http://example.org/a -> http://example.org/b -> http://example.org/a",
    ):
        fetcher.fetch("http://example.org/a", accept=["text/html"])


def test_too_many_redirects_is_refused():
    def hop(n):
        return lambda request: httpx.Response(302, headers={"location": f"/{n + 1}"})

    routes = {f"/{i}": hop(i) for i in range(10)}
    fetcher, server, _ = make_fetcher(routes, max_redirects=3)
    with pytest.raises(FetchRefused, match="too many redirects"):
        fetcher.fetch("http://example.org/0", accept=["text/html"])
    assert len(server.requests) == 4


def test_refuses_private_target_before_any_request():
    fetcher, server, _ = make_fetcher({"/": html()}, table={"intranet.example": ["10.10.10.10"]})
    with pytest.raises(FetchRefused, match="10.10.10.10 is a private"):
        fetcher.fetch("http://intranet.example/", accept=["text/html"])
    assert server.requests == []
