"""Ratings beyond tests/hostile/test_feedback_hostile.py (issue 35's own campaign): bodies of the wrong
shape over HTTP, a rating of a query still running, twenty clients rating one
answer at once, and a comment holding console markup shown by `ragbus trace`. Each is refused with a
4xx naming the problem or kept exactly; nothing else in the record changes and no rating is lost."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import trace as otel_trace

from shared.query import api
from tests.hostile.test_feedback_hostile import answered, rate, stored
from tests.support import gateway_on, run_cli

pytestmark = pytest.mark.hostile


@pytest.fixture
def gateway(tmp_path):
    with gateway_on(tmp_path / "home") as served:
        yield served


@pytest.mark.parametrize("body,said", [
    ([{"rating": "down"}], "the body must be a JSON object"),
    ("down", "the body must be a JSON object"),
    ({"rating": 1}, "'rating' must be \"up\" or \"down\""),
    ({"rating": "DOWN "}, "'rating' must be \"up\" or \"down\""),
    ({"rating": None}, "'rating'"),
    ({"comment": "no rating"}, "missing 'rating'"),
    ({"rating": "down", "admin": True, "status": "failed"}, "unknown field(s)"),
    ({"rating": "down", "comment": {"$gt": ""}}, "'comment' must be text"),
    ({"rating": "down", "wrong_citations": "1"}, "'wrong_citations' must be a list"),
    ({"rating": "down", "wrong_citations": [99]}, "'wrong_citations' names 99"),
], ids=["array", "string", "number", "padded", "null", "missing", "extra-fields", "object-comment",
        "citations-string", "citations-unknown"])
def test_a_body_of_the_wrong_shape_is_refused_naming_the_field_and_changes_nothing(gateway, body, said):
    server, deps = gateway
    query_id = answered(deps)
    before = stored(deps, query_id)
    response = rate(server, query_id, body)
    assert response.status_code == 400 and said in response.json()["error"], response.text
    assert stored(deps, query_id) == before


def test_a_query_still_running_cannot_be_rated(gateway):
    server, deps = gateway
    query_id = api.submit_query(deps, "What is BM25?").id  # no stage runs: it stays pending
    before = stored(deps, query_id)
    response = rate(server, query_id, {"rating": "down", "comment": "too slow"})
    assert response.status_code == 409 and "still" in response.json()["error"], response.text
    assert stored(deps, query_id) == before


def test_twenty_clients_rating_one_answer_at_once_are_all_kept(gateway):
    server, deps = gateway
    query_id = answered(deps)
    codes: list[int] = []

    def one(n: int) -> None:
        codes.append(rate(server, query_id, {"rating": "up" if n % 2 else "down", "comment": f"client {n}"},
                          headers={"X-Ragbus-Client": f"client-{n}"}).status_code)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert codes == [200] * 20
    kept = stored(deps, query_id)["feedback"]
    assert sorted(k["comment"] for k in kept) == sorted(f"client {n}" for n in range(20))  # no update lost
    assert stored(deps, query_id)["answer"] == "BM25 ranks documents [1]."


def test_a_comment_holding_console_markup_is_shown_by_trace_as_the_text_it_is(gateway, tmp_path):
    server, deps = gateway
    query_id = answered(deps)
    comment = '[link=javascript:alert(1)]click[/link] [bold red]LOUD[/] <img src="http://127.0.0.1:9/x">'
    assert rate(server, query_id, {"rating": "down", "comment": comment}).status_code == 200
    otel_trace.get_tracer_provider().force_flush()  # the gateway's spans batch for 200 ms: in the store first
    shown = run_cli(tmp_path / "home", "trace", query_id, check=False, COLUMNS="400")
    assert "Traceback" not in shown.stderr, shown.stderr
    assert comment in shown.stdout, shown.stdout + shown.stderr  # literally: no link made, no style eaten
