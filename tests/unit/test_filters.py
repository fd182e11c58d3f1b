"""The filter language: parsing, validation errors, relative dates against a fixed clock, matching."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from shared.contract.filters import FilterError, Filters, published_at

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _chunk(**fields):
    base = {"chunk_id": "c", "document_id": "d", "origin": "https://blog.example/feed.xml",
            "url": "https://blog.example/posts/1", "published": "2026-06-15T08:00:00+00:00",
            "source": "feed", "title": "CUDA 13", "metadata": {"author": "ana"}}
    return {**base, **fields}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", datetime(2026, 11, 19, 12, 0, tzinfo=UTC)),
        ("12h", datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("2w", datetime(2026, 11, 12, 12, 0, tzinfo=UTC)),
        ("3m", datetime(2026, 8, 28, 12, 0, tzinfo=UTC)),
        ("1y", datetime(2025, 11, 26, 12, 0, tzinfo=UTC)),
        ("2025-06-01", datetime(2025, 6, 1, tzinfo=UTC)),
        ("2025-06-01T10:00:00+02:00", datetime(2025, 6, 1, 8, 0, tzinfo=UTC)),
        ("2025-06-01T10:00:00Z", datetime(2025, 6, 1, 10, 0, tzinfo=UTC)),
    ],
)
def test_since_reads_absolute_and_relative_times_against_the_clock(text, expected):
    assert Filters.parse(now=NOW, since=text).since == expected


def test_until_of_a_date_is_the_end_of_that_day():
    f = Filters.parse(now=NOW, until="2025-12-31")
    assert f.until == datetime(2026, 1, 1, tzinfo=UTC)
    assert f.matches(_chunk(published="2025-12-31T23:59:00+00:00"))
    assert not f.matches(_chunk(published="2026-01-01T00:00:00+00:00"))
    assert Filters.parse(now=NOW, until=date(2025, 12, 31)).until == f.until


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"since": "yesterday"}, "since 'yesterday'"),
        ({"since": ""}, "since is empty"),
        ({"until": "2025-02-30"}, "not a calendar date"),
        ({"since": "2026-01-01", "until": "2025-01-01"}, "is not before until"),
        ({"source": "  "}, "source is empty"),
        ({"source": "ftp://x/y"}, "ftp://x/y"),
        ({"kind": "email"}, "kind 'email'"),
        ({"where": ["author"]}, "write key=value"),
        ({"where": ["=x"]}, "where key ''"),
        ({"where": ["a="]}, "value is empty"),
        ({"where": ["a=1", "a=2"]}, "given twice"),
        ({"where": "a=1"}, "list of key=value"),
        ({"source": "\x00"}, "control character"),
        ({"source": "https://x/\x1b[2J"}, "control character"),
        ({"where": ["vendor=nv\x00"]}, "control character"),
        ({"source": "https://reader:s3cret@blog.example/feed"}, "carries credentials"),
        ({"source": "gs://"}, "source 'gs://' names no bucket"),  # admitted nothing, said nothing
        ({"source": "https:///feed.xml"}, "source 'https:///feed.xml' names no host"),
        # well-formed, but past datetime's years 1-9999: an OverflowError (HTTP 500) before
        ({"since": "99999y"}, "since '99999y' falls outside the years 1 to 9999"),
        ({"until": "9999-12-31"}, "until '9999-12-31' falls outside"),
        ({"until": date(9999, 12, 31)}, "until '9999-12-31' falls outside"),
        ({"since": "0001-01-01T00:00:00+01:00"}, "since '0001-01-01T00:00:00+01:00' falls outside"),
    ],
)
def test_bad_input_is_one_clear_error_naming_the_field(kwargs, names):
    with pytest.raises(FilterError) as caught:
        Filters.parse(now=NOW, **kwargs)
    assert names in str(caught.value)
    assert "\n" not in str(caught.value) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize("kwargs", [
    {"kind": "k" * 100_000}, {"since": "s" * 100_000}, {"where": ["w" * 100_000]}, {"where": ["k" * 100_000 + "=v"]},
    {"source": "ftp://" + "x" * 1000},
])
def test_a_bad_value_is_quoted_back_cut_short(kwargs):
    with pytest.raises(FilterError) as caught:
        Filters.parse(now=NOW, **kwargs)
    assert len(str(caught.value)) < 300  # the whole value came back: a 100 kB error line
    with pytest.raises(FilterError) as caught:
        Filters.from_dict({"k" * 100_000: "v"}, now=NOW)
    assert len(str(caught.value)) < 300


def test_from_dict_refuses_unknown_keys_and_wrong_types():
    with pytest.raises(FilterError, match="unknown key"):
        Filters.from_dict({"sources": "x"}, now=NOW)
    with pytest.raises(FilterError, match="filters.since must be a string"):
        Filters.from_dict({"since": 7}, now=NOW)
    with pytest.raises(FilterError, match="must be an object"):
        Filters.from_dict(["x"], now=NOW)  # type: ignore[arg-type]


def test_round_trip_and_key_are_stable():
    f = Filters.parse(now=NOW, source="https://blog.example/feed.xml", since="7d", kind="feed",
                      where=["b=2", "a=1"])
    again = Filters.from_dict(f.to_dict(), now=datetime(2030, 1, 1, tzinfo=UTC))  # absolute now: clock ignored
    assert again == f and again.key == f.key
    assert f.where == (("a", "1"), ("b", "2"))
    assert Filters.parse(now=NOW, where={"a": "1", "b": 2}).key == Filters.parse(now=NOW, where=["b=2", "a=1"]).key
    assert Filters().is_empty and not f.is_empty
    assert Filters.from_dict(None, now=NOW).is_empty
    assert f.describe() == "source https://blog.example/feed.xml, since 2026-11-19, kind feed, a=1, b=2"


def test_matching_is_the_and_of_every_condition():
    chunk = _chunk()
    assert Filters().matches(chunk)
    assert Filters.parse(now=NOW, source="https://blog.example/feed.xml").matches(chunk)
    assert Filters.parse(now=NOW, source="https://blog.example/posts/").matches(chunk)  # the page URL too
    assert not Filters.parse(now=NOW, source="https://other.example/").matches(chunk)
    assert Filters.parse(now=NOW, since="2026-06-01", until="2026-07-01").matches(chunk)
    assert not Filters.parse(now=NOW, since="2026-06-16").matches(chunk)
    assert Filters.parse(now=NOW, kind="feed", where=["author=ana", "title=CUDA 13"]).matches(chunk)
    assert not Filters.parse(now=NOW, kind="file").matches(chunk)
    assert not Filters.parse(now=NOW, where=["author=bo"]).matches(chunk)
    assert not Filters.parse(now=NOW, where=["team=x"]).matches(chunk)  # a key the chunk lacks
    assert not Filters.parse(now=NOW, kind="feed", since="2026-07-01").matches(chunk)


def test_a_metadata_key_with_several_values_matches_any_of_them():
    chunk = _chunk(metadata={"category": ["CUDA", "Graphs"], "author": "ana"})
    assert Filters.parse(now=NOW, where=["category=Graphs"]).matches(chunk)
    assert Filters.parse(now=NOW, where=["category=CUDA", "author=ana"]).matches(chunk)
    assert not Filters.parse(now=NOW, where=["category=HIP"]).matches(chunk)
    assert not Filters.parse(now=NOW, where=["category=CUDA,Graphs"]).matches(chunk)


def test_a_chunk_without_a_date_never_matches_a_date_condition():
    f = Filters.parse(now=NOW, since="10y")
    assert not f.matches(_chunk(published=None))
    assert not f.matches(_chunk(published="not a date"))
    assert Filters.parse(now=NOW, kind="feed").matches(_chunk(published=None))
    assert published_at("2025-03-01") == datetime(2025, 3, 1, tzinfo=UTC)


def test_source_prefixes_for_buckets_and_folders(tmp_path):
    gcs = _chunk(origin="gs://bucket", url="gs://bucket/reports/2025/q1.pdf", source="gcs")
    assert Filters.parse(now=NOW, source="gs://bucket/reports/").matches(gcs)
    assert Filters.parse(now=NOW, source="gs://bucket/rep").matches(gcs)  # Cloud Storage prefixes are strings
    assert not Filters.parse(now=NOW, source="gs://bucket/slides/").matches(gcs)
    folder = tmp_path / "docs"
    inside = _chunk(origin=str(folder / "sub"), url=(folder / "sub" / "a.md").as_uri(), source="file")
    sibling = _chunk(origin=str(tmp_path / "docs-old"), url=(tmp_path / "docs-old" / "a.md").as_uri(), source="file")
    f = Filters.parse(now=NOW, source=str(folder) + "/")
    assert f.source == str(folder)
    assert f.matches(inside) and not f.matches(sibling)
    assert Filters.parse(now=NOW, source=folder.as_uri()).matches(inside)


def test_a_url_source_ends_at_a_path_boundary():
    assert Filters.parse(now=NOW, source="https://blog.example/posts").matches(_chunk(origin=""))
    assert not Filters.parse(now=NOW, source="https://blog.example/post").matches(_chunk(origin=""))
    assert not Filters.parse(now=NOW, source="https://blog.example/feed").matches(_chunk())


def test_source_tokens_cover_every_value_a_prefix_admits():
    from shared.contract.filters import source_token, source_tokens

    values = ["https://blog.example/feed.xml", "https://blog.example/posts/1", "gs://bucket/reports/2025/q1.pdf",
              "/data/docs/sub", "/data/docs-old"]
    prefixes = ["https://blog.example/", "https://blog.example/posts", "https://blog.example/feed.xml",
                "gs://bucket/rep", "gs://bucket/reports/", "gs://bucket", "/data/docs", "/data/"]
    for prefix in prefixes:
        f = Filters.parse(now=NOW, source=prefix)
        for value in values:
            if f.matches(_chunk(origin=value, url="")):
                assert source_token(f.source) in source_tokens(value), (prefix, value)


def test_a_source_names_one_file_by_its_path_or_its_file_url():
    # issue 31: `--source /usr/share/doc/adduser/users-and-groups.txt.gz` (or its file:// URL) matched nothing
    fields = {"origin": "/usr/share/doc/adduser", "url": "file:///usr/share/doc/adduser/users%20and%20groups.txt.gz"}
    for source in ("/usr/share/doc/adduser/users and groups.txt.gz",
                   "file:///usr/share/doc/adduser/users%20and%20groups.txt.gz", "/usr/share/doc/adduser"):
        assert Filters.parse(now=datetime(2026, 11, 1, tzinfo=UTC), source=source).matches(fields), source
    other = Filters.parse(now=datetime(2026, 11, 1, tzinfo=UTC), source="/usr/share/doc/adduser/other.txt")
    assert not other.matches(fields)
