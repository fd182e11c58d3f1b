"""Hostile ratings against a real gateway (uvicorn on 127.0.0.1, the embedded runtime's SQLite state):
oversized comments, markup and control characters in comments, unknown and odd ids, repeated ratings,
cross-site posts and the rate bound. Each is refused with a 4xx that says why, or kept as plain data;
nothing else in the record changes."""

from __future__ import annotations

import httpx
import pytest

from shared.contract import state_collections
from shared.query import api
from shared.query.feedback import MAX_COMMENT_CHARS, RATINGS_PER_MINUTE
from shared.query.record import QueryRecord
from tests.support import gateway_on

pytestmark = pytest.mark.hostile


@pytest.fixture
def gateway(tmp_path):  # one per test: the rate bound counts from zero in each
    with gateway_on(tmp_path / "home") as served:
        yield served


def answered(deps) -> str:
    record = api.submit_query(deps, "What is BM25?")

    def change(doc):
        found = QueryRecord.from_doc(doc)
        found.status, found.outcome, found.answer = "answered", "answered", "BM25 ranks documents [1]."
        found.citations = [{"id": 1, "title": "t", "url": "https://example.org/", "document_id": "d",
                            "chunk_id": "c"}]
        return found.to_doc()

    deps.state.update(state_collections.QUERIES, record.id, change)
    return record.id


def rate(server, query_id: str, body=None, **kwargs) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/queries/{query_id}/feedback", json=body, timeout=10, **kwargs)


def stored(deps, query_id):
    return deps.state.get(state_collections.QUERIES, query_id)


def test_oversized_comments_are_refused_and_nothing_is_kept(gateway):
    server, deps = gateway
    query_id = answered(deps)
    before = stored(deps, query_id)
    long = rate(server, query_id, {"rating": "down", "comment": "x" * (MAX_COMMENT_CHARS + 1)})
    assert long.status_code == 400 and f"more than the limit of {MAX_COMMENT_CHARS}" in long.json()["error"]
    huge = httpx.post(f"{server.url}/v1/queries/{query_id}/feedback", timeout=10,
                      content=b'{"rating": "down", "comment": "' + b"x" * 200_000 + b'"}',
                      headers={"Content-Type": "application/json"})
    assert huge.status_code == 413 and "larger than 65536 bytes" in huge.json()["error"]
    expected = rate(server, query_id, {"rating": "down", "expected": "y" * 5000})
    assert expected.status_code == 400 and "'expected' has 5000 characters" in expected.json()["error"]
    assert stored(deps, query_id) == before


@pytest.mark.parametrize("comment", ["\x1b[31mred\x1b[0m", "nul\x00byte", "bell\x07", "del\x7f", "\ud800"])
def test_control_characters_in_comments_are_refused(gateway, comment):
    server, deps = gateway
    query_id = answered(deps)
    response = httpx.post(f"{server.url}/v1/queries/{query_id}/feedback", timeout=10,
                          content=('{"rating": "down", "comment": ' + _json_string(comment) + "}").encode(),
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "control character" in response.json()["error"]
    assert "feedback" not in stored(deps, query_id)


def _json_string(text: str) -> str:
    import json

    return json.dumps(text)  # \ud800 as its escape: valid JSON, an unpaired surrogate once read


def test_markup_in_a_comment_is_kept_as_the_text_it_is(gateway):
    server, deps = gateway
    query_id = answered(deps)
    markup = '<img src=x onerror="alert(1)"><script>alert(2)</script>[bold]x[/bold] **y**'
    assert rate(server, query_id, {"rating": "down", "comment": markup}).status_code == 200
    record = httpx.get(f"{server.url}/v1/queries/{query_id}", timeout=10)
    assert record.headers["content-type"] == "application/json"
    assert record.json()["feedback"][0]["comment"] == markup  # data, not rendered, not escaped into something else
    assert record.json()["answer"] == "BM25 ranks documents [1]."


@pytest.mark.parametrize("query_id", ["nope", "x" * 500, "..%2F..%2Fetc", "%00", "chatcmpl-"])
def test_unknown_ids_are_404_and_store_nothing(gateway, query_id):
    server, deps = gateway
    before = deps.state.count(state_collections.QUERIES)
    response = rate(server, query_id, {"rating": "up"})
    assert response.status_code == 404, response.text
    assert "no query with id" in response.json()["error"] or "no such endpoint" in response.json()["error"]
    assert deps.state.count(state_collections.QUERIES) == before


def test_repeated_ratings_from_one_client_keep_one(gateway):
    server, deps = gateway
    query_id = answered(deps)
    for n in range(RATINGS_PER_MINUTE):
        response = rate(server, query_id, {"rating": "up" if n % 2 else "down", "comment": f"take {n}"},
                        headers={"X-Ragbus-Client": "same"})
        assert response.status_code == 200
    (kept,) = stored(deps, query_id)["feedback"]
    assert (kept["rating"], kept["comment"]) == ("up", f"take {RATINGS_PER_MINUTE - 1}")


@pytest.mark.parametrize("headers,status,expected", [
    ({"Origin": "https://evil.example"}, 403, "cross-origin POST"),
    ({"Origin": "null"}, 403, "cross-origin POST"),
    ({"Sec-Fetch-Site": "cross-site"}, 403, "cross-site POST"),
    ({"Content-Type": "text/plain"}, 415, "Content-Type: application/json"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "Content-Type: application/json"),
])
def test_cross_site_posts_are_refused(gateway, headers, status, expected):
    server, deps = gateway
    query_id = answered(deps)
    response = httpx.post(f"{server.url}/v1/queries/{query_id}/feedback", timeout=10,
                          content=b'{"rating": "down", "comment": "csrf"}',
                          headers={"Content-Type": "application/json", **headers})
    assert response.status_code == status and expected in response.json()["error"]
    assert "feedback" not in stored(deps, query_id)


def test_the_rate_bound_holds_against_a_client_changing_its_name(gateway):
    server, deps = gateway
    query_id = answered(deps)
    codes = [rate(server, query_id, {"rating": "down"}, headers={"X-Ragbus-Client": f"n{n}"}).status_code
             for n in range(RATINGS_PER_MINUTE + 5)]
    assert codes == [200] * RATINGS_PER_MINUTE + [429] * 5
    refused = rate(server, "unknown-id", {"rating": "down"})  # probing ids counts too
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert len(stored(deps, query_id)["feedback"]) == RATINGS_PER_MINUTE
