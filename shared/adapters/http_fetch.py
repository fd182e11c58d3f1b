"""The :class:`~shared.contract.ports.Fetcher` for untrusted URLs, on httpx.

Feeds and the pages they link to are written by strangers, so every request is
treated as hostile input:

- address guard (:mod:`shared.ingest.url_guard`): http/https only, and the host's every
  resolved address must be public; loopback only with ``allow_loopback``;
- DNS pinning: the connection goes to the address that was checked, not to a
  second lookup that a rebinding DNS server could answer differently. The URL's
  host is replaced by the checked IP, the ``Host`` header keeps the name, and for
  https the TLS SNI and certificate check use the name (httpx's ``sni_hostname``
  extension), so pinning costs nothing in certificate safety;
- redirects are followed by hand, each hop re-checked (scheme, address), with a
  loop and hop limit;
- a size cap enforced up front by Content-Length and again while streaming, so a
  50 MB page is never held in memory; a compressed body is decompressed here, a
  bounded piece at a time, so a gzip bomb stops at the cap, not at 1000 times it;
- a content-type check against what the caller accepts;
- connect/read timeouts, an overall per-attempt deadline and a total deadline for
  the whole fetch, every retry and redirect included (a server dripping a byte at
  a time costs seconds, not minutes);
- per host, at most ``host_concurrency`` requests in flight and ``host_rate``
  started per second (per process), so one feed's 100,000 items cannot turn this
  process into a flood against one server;
- retries with exponential backoff on timeouts, connection errors, 5xx and 429
  (honouring Retry-After up to a cap).
"""

from __future__ import annotations

import copy
import email.utils
import ipaddress
import logging
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import httpx

from shared.contract.config import Settings
from shared.contract.errors import FetchRefused, InvalidInput, PermanentError, RetryableError
from shared.contract.ports import FetchResult
from shared.ingest.url_guard import IPAddress, Resolver, check_url

log = logging.getLogger("ragbus.fetch")

_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True)
class _Redirect:
    location: str


class _Transient(Exception):
    """One attempt failed in a way that another attempt may not."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def parse_content_type(header: str | None) -> tuple[str, str | None]:
    """(media type in lower case, charset or None) from a Content-Type header."""
    if not header:
        return "application/octet-stream", None
    media, *params = header.split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'").lower()
    return media.strip().lower() or "application/octet-stream", charset


def media_type_accepted(media: str, accept: Sequence[str]) -> bool:
    """Whether ``media`` matches one of ``accept`` (exact, ``type/*`` or ``*/*``)."""
    for pattern in accept:
        pattern = pattern.split(";")[0].strip().lower()
        if pattern in ("*/*", media):
            return True
        if pattern.endswith("/*") and media.startswith(pattern[:-1]):
            return True
    return False


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


class _HostGate:
    """At most ``concurrency`` requests in flight and ``rate`` started per second, per host."""

    def __init__(self, concurrency: int, rate: float, monotonic: Callable[[], float]) -> None:
        self.concurrency = max(1, concurrency)
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._next_start: dict[str, float] = {}

    def enter(self, host: str, give_up: float) -> None:
        with self._lock:
            slot = self._slots.setdefault(host, threading.BoundedSemaphore(self.concurrency))
        if not slot.acquire(timeout=max(0.0, give_up - self._monotonic())):
            raise _Transient(f"{self.concurrency} requests to {host} already in flight until the deadline")
        try:
            with self._lock:
                now = self._monotonic()
                start = max(now, self._next_start.get(host, now))
                self._next_start[host] = start + self.interval
            wait = start - now
            if wait > 0:
                if start > give_up:
                    raise _Transient(f"the request rate to {host} is capped at {1 / self.interval:g}/s")
                time.sleep(wait)
        except BaseException:
            slot.release()
            raise

    def leave(self, host: str) -> None:
        self._slots[host].release()


def _decoder(encoding: str, url: str) -> Callable[[bytes, int], bytes] | None:
    """A function (compressed bytes, most output bytes) -> output; None for identity.

    zlib's ``max_length`` bounds what one call may produce; the rest stays in
    ``unconsumed_tail`` for the next call, so the cap is checked as output grows."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        state = {"d": zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS),
                 "raw_deflate": encoding == "deflate"}

        def decode(data: bytes, limit: int) -> bytes:
            try:
                return state["d"].decompress(state["d"].unconsumed_tail + data, limit)
            except zlib.error as exc:
                if state.pop("raw_deflate", False):  # "deflate" sent without the zlib wrapper
                    state["d"] = zlib.decompressobj(-zlib.MAX_WBITS)
                    return state["d"].decompress(data, limit)
                raise PermanentError(f"GET {url}: the {encoding} body could not be decoded ({exc})") from exc

        decode.pending = lambda: bool(state["d"].unconsumed_tail)  # type: ignore[attr-defined]
        return decode
    raise FetchRefused(f"GET {url} used content encoding {encoding!r}; only gzip and deflate are accepted")


class SafeFetcher:
    """HTTP GET for untrusted URLs (see the module docstring for every guard).

    ``retries`` is the number of attempts after the first. ``deadline_s`` bounds
    one attempt from connect to last byte (default three times ``timeout_s``).
    ``resolver`` and ``transport`` are seams for tests.
    """

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        timeout_s: float = 10.0,
        max_bytes: int = 5 * 1024 * 1024,
        retries: int = 3,
        max_redirects: int = 5,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        user_agent: str = "ragbus/0.1",
        deadline_s: float | None = None,
        max_retry_after_s: float = 30.0,
        resolver: Resolver = socket.getaddrinfo,
        transport: httpx.BaseTransport | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        total_deadline_s: float = 30.0,
        host_concurrency: int = 4,
        host_rate: float = 10.0,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.retries = max(0, retries)
        self.max_redirects = max_redirects
        self.backoff_s = backoff_s
        self.user_agent = user_agent
        self.deadline_s = deadline_s if deadline_s is not None else 3 * timeout_s
        self.max_retry_after_s = max_retry_after_s
        self.total_deadline_s = total_deadline_s
        self._gate = _HostGate(host_concurrency, host_rate, monotonic)
        self._give_up = threading.local()  # the current fetch's total deadline, per thread
        self._sleep = sleep
        self._resolver = resolver
        self._monotonic = monotonic
        # No keep-alive: pooled connections are keyed by the pinned IP, and a TLS
        # connection verified for one name must not be reused for another name on
        # the same address. trust_env=False: a proxy from the environment would
        # do its own DNS lookup and bypass both the guard and the pinning.
        self._client = httpx.Client(
            transport=transport,
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )


    @classmethod
    def from_settings(cls, settings: Settings) -> SafeFetcher:
        """The fetcher the ``RAGBUS_FETCH_*`` settings describe (and ``--allow-loopback``)."""
        return cls(allow_loopback=settings.allow_loopback, timeout_s=settings.fetch_timeout_s,
                   max_bytes=settings.fetch_max_bytes, retries=settings.fetch_retries,
                   max_redirects=settings.fetch_max_redirects, total_deadline_s=settings.fetch_deadline_s,
                   host_concurrency=settings.fetch_host_concurrency, host_rate=settings.fetch_host_rate)
    def close(self) -> None:
        self._client.close()

    def allowing_loopback(self) -> SafeFetcher:
        """This fetcher allowed on loopback; it shares the connection settings and the per-host gate."""
        if self.allow_loopback:
            return self
        allowed = copy.copy(self)
        allowed.allow_loopback = True
        return allowed

    def fetch(
        self,
        url: str,
        *,
        accept: Sequence[str],
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> FetchResult:
        """GET ``url``; see :class:`~shared.contract.ports.Fetcher` for the errors raised."""
        chain: list[str] = []
        current = url
        self._give_up.at = self._monotonic() + self.total_deadline_s
        while True:
            try:
                normal, addresses = check_url(
                    current, allow_loopback=self.allow_loopback, resolver=self._resolver
                )
            except InvalidInput as exc:
                if not chain:
                    raise
                raise FetchRefused(
                    f"redirect from {chain[-1]} to {current} refused: {exc}"
                ) from exc
            except FetchRefused as exc:
                if not chain:
                    raise
                raise FetchRefused(f"redirect from {chain[-1]} refused: {exc}") from exc
            if normal in chain:
                raise FetchRefused(
                    f"redirect loop: {' -> '.join([*chain, normal])}; the server keeps redirecting"
                )
            chain.append(normal)
            outcome = self._with_retries(normal, addresses, accept, etag, last_modified)
            if isinstance(outcome, FetchResult):
                return outcome
            if len(chain) > self.max_redirects:
                raise FetchRefused(
                    f"too many redirects (more than {self.max_redirects}) starting at {url}: "
                    f"{' -> '.join(chain)}"
                )
            current = urljoin(normal, outcome.location)
            log.debug("redirect %s -> %s", normal, current)

    def _with_retries(
        self,
        url: str,
        addresses: list[IPAddress],
        accept: Sequence[str],
        etag: str | None,
        last_modified: str | None,
    ) -> FetchResult | _Redirect:
        reason = ""
        for attempt in range(self.retries + 1):
            # Rotate through the checked addresses so one dead address is not fatal.
            address = addresses[attempt % len(addresses)]
            try:
                return self._attempt(url, address, accept, etag, last_modified)
            except _Transient as exc:
                reason = exc.reason
                if attempt == self.retries:
                    break
                delay = self.backoff_s * (2**attempt)
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, self.max_retry_after_s))
                if self._monotonic() + delay >= self._give_up.at:
                    raise RetryableError(
                        f"GET {url} gave up at the total deadline of {self.total_deadline_s:g}s "
                        f"(RAGBUS_FETCH_DEADLINE_S) after {attempt + 1} attempt(s): {reason}; it may work later"
                    ) from None
                log.info(
                    "GET %s attempt %d/%d failed (%s); retrying in %.2fs",
                    url,
                    attempt + 1,
                    self.retries + 1,
                    reason,
                    delay,
                )
                self._sleep(delay)
        raise RetryableError(
            f"GET {url} failed after {self.retries + 1} attempts: {reason}; it may work later"
        )

    def _attempt(
        self,
        url: str,
        address: IPAddress,
        accept: Sequence[str],
        etag: str | None,
        last_modified: str | None,
    ) -> FetchResult | _Redirect:
        parts = urlsplit(url)
        host = parts.hostname or ""
        pinned = httpx.URL(url).copy_with(host=str(address))
        headers = {
            "Host": parts.netloc,
            "User-Agent": self.user_agent,
            "Accept": ", ".join(accept) if accept else "*/*",
            "Accept-Encoding": "gzip, deflate",
        }
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        extensions = {}
        if parts.scheme == "https" and not _is_ip_literal(host):
            extensions["sni_hostname"] = host
        give_up = getattr(self._give_up, "at", None) or self._monotonic() + self.total_deadline_s
        deadline = min(self._monotonic() + self.deadline_s, give_up)
        if deadline <= self._monotonic():
            raise _Transient(f"the total deadline of {self.total_deadline_s:g}s passed")
        self._gate.enter(parts.hostname or "", deadline)
        try:
            left = max(0.01, deadline - self._monotonic())
            with self._client.stream(
                "GET", pinned, headers=headers, extensions=extensions,
                timeout=httpx.Timeout(min(self.timeout_s, left)),
            ) as response:
                return self._read(url, response, accept, etag, last_modified, deadline)
        except httpx.TimeoutException as exc:
            raise _Transient(f"timed out ({type(exc).__name__}, limit {self.timeout_s}s)") from exc
        except httpx.DecodingError as exc:
            raise PermanentError(
                f"GET {url}: the response body could not be decoded ({exc})"
            ) from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise FetchRefused(f"GET {url} refused: {exc}") from exc
        except httpx.TransportError as exc:
            raise _Transient(f"{type(exc).__name__}: {exc or 'connection failed'}") from exc
        finally:
            self._gate.leave(parts.hostname or "")

    def _read(
        self,
        url: str,
        response: httpx.Response,
        accept: Sequence[str],
        etag: str | None,
        last_modified: str | None,
        deadline: float,
    ) -> FetchResult | _Redirect:
        status = response.status_code
        if status in _REDIRECTS:
            location = response.headers.get("location")
            if not location:
                raise PermanentError(f"GET {url} returned HTTP {status} without a Location header")
            return _Redirect(location)
        if status == 304:
            return FetchResult(
                url=url,
                status=304,
                content_type="",
                charset=None,
                body=b"",
                etag=response.headers.get("etag") or etag,
                last_modified=response.headers.get("last-modified") or last_modified,
            )
        if status == 429 or status >= 500:
            raise _Transient(
                f"HTTP {status}",
                retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC)),
            )
        if status >= 400:
            raise PermanentError(
                f"GET {url} returned HTTP {status}; the page is missing or forbidden, check the URL"
            )
        if not 200 <= status < 300:
            raise PermanentError(f"GET {url} returned unexpected HTTP {status}")
        media, charset = parse_content_type(response.headers.get("content-type"))
        if not media_type_accepted(media, accept):
            raise FetchRefused(
                f"GET {url} returned content type {media!r}, expected one of {list(accept)}"
            )
        declared = response.headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchRefused(
                f"GET {url} is {int(declared)} bytes (Content-Length), over the "
                f"{self.max_bytes}-byte cap; raise RAGBUS_FETCH_MAX_BYTES to allow it"
            )
        decode = _decoder(response.headers.get("content-encoding", ""), url)
        body = bytearray()
        received = 0
        # No chunk_size: a re-chunking buffer would wait for 64 KB before the
        # deadline and cap are checked again, which a dripping server exploits.
        # The raw stream, not iter_bytes: httpx would inflate a whole network chunk at once.
        for chunk in response.stream:
            received += len(chunk)
            if decode is None:
                body += chunk
            else:
                body += decode(chunk, self.max_bytes - len(body) + 1)
                while decode.pending() and len(body) <= self.max_bytes:  # type: ignore[attr-defined]
                    body += decode(b"", self.max_bytes - len(body) + 1)
            if len(body) > self.max_bytes or received > self.max_bytes:
                what = "decompressed body" if decode is not None else "body"
                raise FetchRefused(
                    f"GET {url}: the {what} exceeded the {self.max_bytes}-byte cap (stopped "
                    f"{'decompressing' if decode is not None else 'reading'}); raise RAGBUS_FETCH_MAX_BYTES to allow it"
                )
            if self._monotonic() > deadline:
                raise _Transient(f"overall deadline of {min(self.deadline_s, self.total_deadline_s):g}s passed while reading")
        return FetchResult(
            url=url,
            status=status,
            content_type=media,
            charset=charset,
            body=bytes(body),
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
        )


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
