"""Hostile questions and parameters through the gateway on 127.0.0.1: 400 naming the problem,
no query record stored."""

from __future__ import annotations

import httpx
import pytest

from tests.hostile.test_gateway_guard import _queries, gateway  # noqa: F401 - the fixture

BAD_BODIES = [
    ({"question": "what\x1b[2J is bm25"}, "control character"),
    ({"question": "what\x00 is bm25"}, "control character"),
    ({"question": "x" * 5000}, "characters"),
    ({"question": ""}, "empty"),
    ({"question": "   \n\t "}, "empty"),
    ({"question": ["what", "is", "bm25"]}, "question"),
    ({"question": {"$gt": ""}}, "question"),
    ({"question": "q", "top_k": "5"}, "top_k"),
    ({"question": "q", "top_k": True}, "top_k"),
    ({"question": "q", "top_k": -1}, "top_k"),
    ({"question": "q", "top_k": 10**9}, "top_k"),
    ({"question": "q", "max_iterations": 99}, "max_iterations"),
    ({"question": "q", "wait_s": "forever"}, "wait_s"),
    ({"question": "q", "wait_s": -5}, "wait_s"),
]


@pytest.mark.parametrize("body,expected", BAD_BODIES)
def test_a_hostile_question_gets_400_and_stores_nothing(gateway, body, expected):  # noqa: F811
    server, deps = gateway
    before = _queries(deps)
    response = httpx.post(server.url + "/v1/queries", json=body)
    assert response.status_code == 400, response.text
    assert expected in response.json()["error"]
    assert _queries(deps) == before


@pytest.mark.parametrize("path", ["/v1/queries/..%2F..%2Fetc%2Fpasswd", "/v1/queries/%00",
                                  "/v1/queries/" + "a" * 5000, "/v1/queries/x/events?after=-1"])
def test_hostile_query_ids_are_not_found_or_refused(gateway, path):  # noqa: F811
    server, _ = gateway
    response = httpx.get(server.url + path)
    assert response.status_code in (400, 404, 414)
    assert "root:" not in response.text


@pytest.mark.parametrize("params", ["q=" + "x" * 5000, "q=bm25&k=100000", "q=bm25&k=-3", "q=", "q=%1b%5b2J"])
def test_hostile_searches_get_400(gateway, params):  # noqa: F811
    server, _ = gateway
    response = httpx.get(server.url + "/v1/search?" + params)
    assert response.status_code == 400, response.text
