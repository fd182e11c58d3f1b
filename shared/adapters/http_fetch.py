"""The :class:`~shared.ports.Fetcher` for untrusted URLs, on httpx.

Feeds and the pages they link to are written by strangers, so every request is
treated as hostile input:

- address guard (:mod:`shared.url_guard`): http/https only, and the host's every
  resolved address must be public; loopback only with ``allow_loopback``;
- DNS pinning: the connection goes to the address that was checked, not to a
  second lookup that a rebinding DNS server could answer differently. The URL's
  host is replaced by the checked IP, the ``Host`` header keeps the name, and for
  https the TLS SNI and certificate check use the name (httpx's ``sni_hostname``
  extension), so pinning costs nothing in certificate safety;
- redirects are followed by hand, each hop re-checked (scheme, address), with a
  loop and hop limit;
- a size cap enforced up front by Content-Length and again while streaming, so a
  50 MB page is never held in memory;
- a content-type check against what the caller accepts;
- connect/read timeouts and an overall per-attempt deadline (a server dripping a
  byte at a time cannot hold a worker forever);
- retries with exponential backoff on timeouts, connection errors, 5xx and 429
  (honouring Retry-After up to a cap).
"""

from __future__ import annotations

import email.utils
import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import httpx

from shared.errors import FetchRefused, InvalidInput, PermanentError, RetryableError
from shared.ports import FetchResult
from shared.url_guard import IPAddress, Resolver, check_url

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


def _retry_after_seconds(value: str | None, now: datetime) -> float | None:
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

    def close(self) -> None:
        self._client.close()

    def fetch(
        self,
        url: str,
        *,
        accept: Sequence[str],
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> FetchResult:
        """GET ``url``; see :class:`~shared.ports.Fetcher` for the errors raised."""
        chain: list[str] = []
        current = url
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
        deadline = self._monotonic() + self.deadline_s
        try:
            with self._client.stream(
                "GET", pinned, headers=headers, extensions=extensions
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
                _retry_after_seconds(response.headers.get("retry-after"), datetime.now(UTC)),
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
        body = bytearray()
        # No chunk_size: a re-chunking buffer would wait for 64 KB before the
        # deadline and cap are checked again, which a dripping server exploits.
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                raise FetchRefused(
                    f"GET {url} exceeded the {self.max_bytes}-byte cap after {len(body)} bytes "
                    f"(stopped reading); raise RAGBUS_FETCH_MAX_BYTES to allow it"
                )
            if self._monotonic() > deadline:
                raise _Transient(f"overall deadline of {self.deadline_s}s passed while reading")
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
