"""Every log line, span error and stored error is redacted (shared.contract.redaction): its patterns take time
linear in the text (the CPU-time ratio of 8x the text stays near 8; a quadratic pattern makes it near 64)."""

from __future__ import annotations

from shared.contract.redaction import REDACTED, redact
from tests.support import cpu_ratio


def test_a_long_dotted_or_hyphenated_run_is_redacted_in_linear_time():
    # the URL password pattern scanned such a run for '://' from each of its word starts: 40 kB took 7 s
    runs = {n: f"fetching https://feeds.example/{'part-' * n}x.xml failed" for n in (500, 4000)}

    def check(n, text):
        assert text == runs[n]

    assert cpu_ratio(lambda n: redact(runs[n]), 500, 4000, check=check) < 24
    dotted = {n: "a." * n for n in (1000, 8000)}
    assert cpu_ratio(lambda n: redact(dotted[n]), 1000, 8000) < 24


def test_a_urls_password_is_still_redacted_whatever_its_scheme():
    for url in ("https://bob:hunter2@feeds.example/a.xml", "svn+ssh://bob:hunter2@host/repo",
                "x-custom.scheme://bob:hunter2@host/"):
        shown = redact(f"fetching {url} failed")
        assert "hunter2" not in shown and f"bob:{REDACTED}@" in shown, shown


def test_a_urls_password_is_redacted_whatever_the_length_of_its_scheme_and_in_linear_time():
    # the scheme was bounded to 64 characters to stay linear, and a longer one kept the password
    for scheme in ("a" * 65, "x" * 300 + "+.-", "svn+ssh"):
        shown = redact(f"fetching {scheme}://bob:hunter2@host/repo failed")
        assert "hunter2" not in shown and f"{scheme}://bob:{REDACTED}@host/repo" in shown, shown
    # a password holding an unescaped '@' is read as urlsplit reads it: up to the last '@' before the host
    assert redact("https://bob:p@ss@host/x") == f"https://bob:{REDACTED}@host/x"
    colons = {n: "://" + "a:" * n for n in (1000, 8000)}  # no '@': each run is scanned and given up once
    assert cpu_ratio(lambda n: redact(colons[n]), 1000, 8000) < 24
    ats = {n: "://a:b" * n for n in (1000, 8000)}
    assert cpu_ratio(lambda n: redact(ats[n]), 1000, 8000) < 24


def test_a_long_query_parameter_name_is_redacted_in_linear_time():
    # one pattern with the credential words inside rescanned the rest of the name from each segment: 8 kB 0.4 s
    names = {n: f"fetching https://feeds.example/a.xml?{'token_' * n}x failed" for n in (500, 4000)}

    def check(n, text):
        assert text == names[n]  # no '=': nothing to redact

    assert cpu_ratio(lambda n: redact(names[n]), 500, 4000, check=check) < 24
    plain = {n: "?x=" * n for n in (500, 4000)}  # names that are no credential, in one unbroken value
    assert cpu_ratio(lambda n: redact(plain[n]), 500, 4000) < 24
    assert redact("https://feeds.example/a.xml?feed_token=s3cr3t&page=2") == \
        f"https://feeds.example/a.xml?feed_token={REDACTED}&page=2"
    assert redact("https://h/x?next=/feed?token=s3cr3t") == f"https://h/x?next=/feed?token={REDACTED}"
    assert redact("https://h/x?X-Amz-Signature=abc123&tokenizer=bert") == \
        f"https://h/x?X-Amz-Signature={REDACTED}&tokenizer=bert"
