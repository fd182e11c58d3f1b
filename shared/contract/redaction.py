"""Secrets out of text that came from outside, before it is stored, logged or shown.

A model server's error text is written by someone else: some proxies answer a
bad key with ``401 invalid key sk-abc...`` or echo the request's
``Authorization`` header, and that text becomes an exception message, then a
query record's reason, a model-health record, a span, a log line, CLI output and
the body of ``/readyz``. :func:`redact` is applied where such text enters
(the providers' error texts, the model-health record), so everything downstream
holds ``[redacted]`` instead.

Two kinds of secret are removed: the values this process was configured with
(:func:`remember_secret`, called where a key or token is read), wherever they
appear, and strings shaped like credentials whatever their value (``Bearer
...``, ``sk-...``, Google's ``AIza...`` keys and ``ya29.`` tokens, ``api_key=...``, a URL's
``?feed_token=...``, its ``user:password@``). Logs, dead letters, spans and listings' errors pass through it too.
"""

from __future__ import annotations

import base64
import functools
import re
import threading
from urllib.parse import quote, quote_plus, unquote, urlsplit

REDACTED = "[redacted]"
#: Shorter configured values are not searched for: "abc" would blank ordinary words.
MIN_SECRET_CHARS = 6

_known: set[str] = set()
_known_lock = threading.Lock()

# RFC 9110 credentials a proxy may echo from the request's Authorization header: Bearer, and
# Basic, whose base64 is the user:password of a URL such as http://user:pass@host/v1
_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_KEY_SHAPED = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}"  # OpenAI / Anthropic style keys
    r"|AIza[0-9A-Za-z_-]{20,}"  # Google API keys
    r"|ya29\.[0-9A-Za-z_.-]{10,}"  # Google OAuth access tokens
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|hf_[A-Za-z0-9]{20,})"  # Hugging Face tokens
)
_NAMED_VALUE = re.compile(
    r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|secret|password|passwd)"
    r"([\"']?\s*[:=]\s*[\"']?)([^\s\"',;&}]{4,})"
)


# A URL's user:password@ part (https://bob:hunter2@host/feed.xml, a link a feed item gave): the user stays.
# The match starts at '://', not at the scheme: a scheme matched from each of its word starts made the pattern
# quadratic (a 40 kB 'a.a.a.' took 7 s), and bounding it to 64 characters let a longer scheme keep its password.
# Each run ends at the next '/', so the runs after successive '://' never overlap: linear in the text. The password
# runs to the last '@' before the host, as urlsplit reads it ('bob:p@ss@host' has the password 'p@ss').
_URL_PASSWORD = re.compile(r"(://[^\s/?#@:'\"<>]*:)([^\s/?#'\"<>]+)(@)")

# A credential in a URL's query (a private feed's ?feed_token=, Jira's &os_authkey=, a signed URL's &sig= or
# X-Amz-Signature=): a parameter whose name holds one of these words keeps its name, not its value. The name is
# matched whole and its words looked up (one pattern with the words inside rescanned the rest of the name from
# each of its segments: 8 kB of '?token_token_...' took 0.4 s, a log line)
_QUERY_NAME = re.compile(r"(?i)[?&;]([a-z0-9]+(?:[_.-][a-z0-9]+)*)=")
_QUERY_VALUE = re.compile(r"[^&#\s\"'<>;]+")
_CREDENTIAL_WORDS = frozenset({"token", "key", "apikey", "secret", "password", "passwd", "pwd", "sig", "signature",
                               "auth", "authkey", "credential", "credentials", "session"})


def _query_credentials_redacted(text: str) -> str:
    """``text`` with the value of every query parameter named as a credential replaced."""
    out, kept, at = [], 0, 0
    while name := _QUERY_NAME.search(text, at):
        # (the name first: a value runs past '?' and '=', so matching it for every name of '?x=?x=...' was quadratic)
        if _CREDENTIAL_WORDS & set(re.split(r"[_.-]", name[1].lower())) and (
                value := _QUERY_VALUE.match(text, name.end())):
            out += [text[kept:name.end()], REDACTED]
            kept = at = value.end()
        else:
            at = name.start() + 1
    return "".join(out) + text[kept:]


def remember_secret(value: str | None) -> None:
    """Redact ``value`` wherever it appears from now on (a configured key or token)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        # as a server may echo it too: percent-encoded (a key with / + = echoed in a URL's query read
        # "[redacted]%2FRAGBUS%2BKEY..." when the key-shaped pattern took only its head, newcomer16)
        with _known_lock:
            _known.update({value, quote(value, safe=""), quote_plus(value, safe="")})


def remember_url_credentials(url: str | None) -> None:
    """Redact the password of ``url``'s ``user:password@`` part, and the Basic credential an HTTP
    client builds from it, wherever they appear from now on."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.password:
        remember_secret(parts.password)
        user_info = f"{unquote(parts.username or '')}:{unquote(parts.password)}".encode()
        remember_secret(base64.b64encode(user_info).decode())


def redact(text: str) -> str:
    """``text`` with every configured secret and every credential-shaped string replaced."""
    if not text:
        return text
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if "%" in secret:  # a percent-encoded form: its hex in either case ('%2F' or '%2f', RFC 3986 allows both)
            if secret.partition("%")[0] in text:
                text = _hex_in_any_case(secret).sub(REDACTED, text)
        elif secret in text:
            text = text.replace(secret, REDACTED)
    text = _SCHEME_CREDENTIAL.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    text = _KEY_SHAPED.sub(REDACTED, text)
    text = _query_credentials_redacted(text)
    return _NAMED_VALUE.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) if m.group(3) == REDACTED else REDACTED),
                            text)


@functools.lru_cache(maxsize=256)
def _hex_in_any_case(secret: str) -> re.Pattern[str]:
    """``secret`` as a pattern whose percent escapes match in upper or lower case: only '%2F' was redacted, and
    '%2f' (as a client writing lower-case hex sends it) kept the whole key, not even key-shaped in that form."""
    return re.compile(re.sub(r"%([0-9A-Fa-f])([0-9A-Fa-f])",
                             lambda m: "%" + "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c
                                                     for c in m.groups()), re.escape(secret)))
