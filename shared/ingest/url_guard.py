"""Which URLs ragbus may fetch: scheme, host and every address the host resolves to.

One guard shared by the feed registry (checked when a feed is added) and the
safe fetcher (checked again on every request and every redirect hop, because
DNS answers change). Feeds and the pages they link to are untrusted input: a
feed must not be able to make ragbus read the cloud metadata server
(169.254.169.254), an admin page on the private network, or the host itself.

The resolver is injectable so that resolve-time decisions can be tested
without DNS.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import SplitResult, quote, urlsplit, urlunsplit

from shared.contract.errors import FetchRefused, InvalidInput, RetryableError
from shared.contract.redaction import redact

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[..., Sequence[tuple[Any, ...]]]  # socket.getaddrinfo's shape

ALLOWED_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def normalise_url(url: str) -> str:
    """The canonical form of an http(s) URL, the identity of a page or a listing whichever
    listing names it (RFC 3986 section 6.2.2): lower-case scheme and host, no default port,
    no fragment, no dot segments, percent-encoding normalised (escapes of unreserved
    characters decoded, the others in upper case, what must be escaped escaped), ``/`` for
    an empty path. No network access.

    Raises :class:`InvalidInput` for another scheme, a missing host or a bad port.
    """
    parts = _split(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"{url!r} has an invalid port: {exc}") from None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[parts.scheme.lower()]:
        netloc += f":{port}"
    path = _escapes(_without_dot_segments(parts.path or "/"), _PATH_SAFE)
    return urlunsplit((parts.scheme.lower(), netloc, path, _escapes(parts.query, _QUERY_SAFE), ""))


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_SAFE = "/:@!$&'()*+,;=%"
_QUERY_SAFE = _PATH_SAFE + "?"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _escapes(text: str, safe: str) -> str:
    decoded = _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if chr(int(m[1], 16)) in _UNRESERVED
                          else "%" + m[1].upper(), text)
    # "%" is kept as it stands: every escape left is a valid one, in upper case
    return quote(decoded, safe=safe)


def _without_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 remove_dot_segments, for an absolute path."""
    out: list[str] = []
    segments = path.split("/")
    for n, segment in enumerate(segments):
        last = n == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    joined = "/".join(out)
    return joined if joined.startswith("/") else "/" + joined


def _split(url: str) -> SplitResult:
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("the URL is empty; give an http:// or https:// URL")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:  # "[" in the host reads as a broken IPv6 literal
        raise InvalidInput(f"{url!r} is not a valid URL ({exc}); give an http:// or https:// URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        shown = scheme or "none"
        raise InvalidInput(
            f"{url!r} has scheme {shown!r}; only http:// and https:// URLs can be fetched"
        )
    if not parts.hostname:
        raise InvalidInput(
            f"{url!r} has no host; give a full URL such as https://example.org/feed.xml"
        )
    if parts.username or parts.password:
        raise InvalidInput(f"{redact(url)!r} carries credentials; remove the user:password@ part")
    return parts


def address_refusal(ip: IPAddress, *, allow_loopback: bool) -> str | None:
    """Why ``ip`` must not be fetched, or None when it is a public address.

    IPv4-mapped (``::ffff:a.b.c.d``) and 6to4 (``2002:a.b.c.d::``) addresses are
    judged by the IPv4 address they carry, so they cannot smuggle a private one.
    Loopback is allowed only with ``allow_loopback``; other private ranges never are.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is not None:
            reason = address_refusal(embedded, allow_loopback=allow_loopback)
            return f"{reason} (embedded in {ip})" if reason else None
    if ip.is_loopback:
        return (
            None
            if allow_loopback
            else (
                f"{ip} is a loopback address (set RAGBUS_ALLOW_LOOPBACK=1, or pass --allow-loopback, to allow "
                f"it for local testing)"
            )
        )
    checks = (
        (ip.is_unspecified, "unspecified"),
        (ip.is_link_local, "link-local"),
        # deprecated (RFC 3879) but still routed inside some networks; Python counts it as global
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "site-local (fec0::/10)"),
        (ip.is_multicast, "multicast"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "carrier-grade NAT (100.64/10)"),
        (ip.is_reserved, "reserved"),
        (ip.is_private, "private"),
        (not ip.is_global, "non-global"),
    )
    for hit, kind in checks:
        if hit:
            return f"{ip} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} address"
    return None


def resolve_host(
    host: str, port: int, *, allow_loopback: bool, resolver: Resolver = socket.getaddrinfo
) -> list[IPAddress]:
    """Every address ``host`` resolves to, all checked; refuse if ANY is forbidden.

    Refusing on any (not just the first) address closes the trick of a name that
    resolves to one public and one private address. Raises :class:`FetchRefused`
    for a forbidden address, :class:`RetryableError` for a temporary DNS failure,
    :class:`InvalidInput` for a name that does not resolve.
    """
    bare = host.strip("[]").lower().rstrip(".")
    try:
        literal: IPAddress | None = ipaddress.ip_address(bare)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        if (bare in _LOOPBACK_NAMES or bare.endswith(".localhost")) and not allow_loopback:
            raise FetchRefused(
                f"host {host!r} is loopback; set RAGBUS_ALLOW_LOOPBACK=1, or pass --allow-loopback, to allow it "
                f"for local testing"
            )
        try:
            infos = resolver(bare, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            if exc.errno == socket.EAI_AGAIN:
                raise RetryableError(f"DNS lookup of {host!r} failed temporarily: {exc}") from exc
            raise InvalidInput(f"host {host!r} does not resolve ({exc}); check the URL") from exc
        except UnicodeError as exc:
            raise InvalidInput(f"host {host!r} is not a valid host name: {exc}") from exc
        addresses = []
        for info in infos:
            raw = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
            ip = ipaddress.ip_address(raw)
            if ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise InvalidInput(f"host {host!r} resolved to no address; check the URL")
    for ip in addresses:
        reason = address_refusal(ip, allow_loopback=allow_loopback)
        if reason:
            raise FetchRefused(f"refusing to fetch from {host!r}: {reason}")
    return addresses


def check_url(
    url: str, *, allow_loopback: bool, resolver: Resolver = socket.getaddrinfo
) -> tuple[str, list[IPAddress]]:
    """Normalise ``url`` and resolve+check its host; return (url, addresses).

    Raises :class:`InvalidInput` (bad scheme, no host), :class:`FetchRefused`
    (forbidden address) or :class:`RetryableError` (temporary DNS failure).
    """
    normal = normalise_url(url)
    parts = urlsplit(normal)
    port = parts.port or _DEFAULT_PORTS[parts.scheme]
    return normal, resolve_host(
        parts.hostname or "", port, allow_loopback=allow_loopback, resolver=resolver
    )
