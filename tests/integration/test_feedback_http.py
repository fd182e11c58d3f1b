"""``POST /v1/queries/{id}/feedback`` against a real SQLite state store with the loop played by the
scripted thread (tests/scripted_loop.py): the rating kept in the record, one per client, the id the
chat completion returned taken too, 404/409/400, the token rule, the rate bound, and the OpenAPI
document validating real requests and replies."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import pytest
from starlette.testclient import TestClient

from services.gateway import create_app
from shared.contract import state_collections
from shared.query.feedback import RATINGS_PER_MINUTE, client_key
from tests.integration.test_gateway_http import make_deps

pytestmark = pytest.mark.integration


@pytest.fixture
def deps(tmp_path):
    return make_deps(tmp_path)


@pytest.fixture
def client(deps) -> Iterator[TestClient]:
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        yield client


def answered(client: TestClient) -> str:
    record = client.post("/v1/queries", json={"question": "what is bm25", "wait_s": 10}).json()
    assert record["status"] == "answered"
    return record["id"]


def test_a_rating_is_kept_in_the_record_and_a_second_from_the_same_client_replaces_it(client):
    query_id = answered(client)
    page = {"X-Ragbus-Client": "page-1234"}
    first = client.post(f"/v1/queries/{query_id}/feedback", headers=page,
                        json={"rating": "down", "comment": "wrong source", "wrong_citations": [2],
                              "expected": "a ranking function"})
    assert first.status_code == 200, first.text
    assert first.json() == {"query_id": query_id, "rating": "down", "replaced": False, "up": 0, "down": 1}
    again = client.post(f"/v1/queries/{query_id}/feedback", headers=page, json={"rating": "up"})
    assert again.json() == {"query_id": query_id, "rating": "up", "replaced": True, "up": 1, "down": 0}
    # without the header the client is the remote address: another rating
    other = client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "down", "comment": "too short"})
    assert other.json()["up"] == 1 and other.json()["down"] == 1
    record = client.get(f"/v1/queries/{query_id}").json()
    assert [(r["client"], r["rating"], r["comment"]) for r in record["feedback"]] == [
        (client_key("client:page-1234"), "up", None), (client_key("address:testclient"), "down", "too short")]
    assert record["answer"] and record["citations"]  # the answer is kept as it was


def test_the_chat_completion_id_is_taken_as_the_query_id(client):
    query_id = answered(client)
    response = client.post(f"/v1/queries/chatcmpl-{query_id}/feedback", json={"rating": "up"})
    assert response.status_code == 200 and response.json()["query_id"] == query_id


def test_unknown_pending_and_wrong_citation_ratings_are_refused(tmp_path):
    deps = make_deps(tmp_path, hang=True)
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        unknown = client.post("/v1/queries/0123abcd/feedback", json={"rating": "up"})
        assert unknown.status_code == 404 and "no query with id '0123abcd'" in unknown.json()["error"]
        pending = client.post("/v1/queries", json={"question": "what is bm25"}).json()["id"]
        refused = client.post(f"/v1/queries/{pending}/feedback", json={"rating": "down"})
        assert refused.status_code == 409 and "rate its answer once it has ended" in refused.json()["error"]
        assert "feedback" not in deps.state.get(state_collections.QUERIES, pending)


def test_bad_bodies_get_400_saying_what_to_send(client):
    query_id = answered(client)
    for body, expected in (({"rating": "sideways"}, "'rating' must be"), ({"stars": 5}, "unknown field(s) 'stars'"),
                           ({"rating": "down", "wrong_citations": [9]}, "names 9, which the answer does not cite")):
        response = client.post(f"/v1/queries/{query_id}/feedback", json=body)
        assert response.status_code == 400 and expected in response.json()["error"], response.text
    empty = client.post(f"/v1/queries/{query_id}/feedback", content=b"", headers={"Content-Type": "application/json"})
    assert empty.status_code == 400 and '{"rating": "down"' in empty.json()["error"]
    header = client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "up"},
                         headers={"X-Ragbus-Client": "has space"})
    assert header.status_code == 400 and "client id" in header.json()["error"]
    assert "feedback" not in client.get(f"/v1/queries/{query_id}").json()


def test_the_token_rule_applies(tmp_path):
    deps = make_deps(tmp_path)
    with TestClient(create_app(deps, api_token="s3cret-token"), base_url="http://127.0.0.1") as client:
        auth = {"Authorization": "Bearer s3cret-token"}
        query_id = client.post("/v1/queries", json={"question": "what is bm25", "wait_s": 10}, headers=auth).json()["id"]
        refused = client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "up"})
        assert refused.status_code == 401
        assert client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "up"}, headers=auth).status_code == 200


def test_ratings_per_address_and_minute_are_bounded_with_retry_after(client):
    query_id = answered(client)
    for n in range(RATINGS_PER_MINUTE):
        response = client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "up"},
                               headers={"X-Ragbus-Client": f"c{n}"})  # a new name each time does not help
        assert response.status_code == 200, (n, response.text)
    refused = client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "up"},
                          headers={"X-Ragbus-Client": "fresh"})
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    assert f"more than {RATINGS_PER_MINUTE} ratings a minute" in refused.json()["error"]


def test_the_openapi_document_describes_the_route_and_validates_real_replies(client):
    doc = json.loads(client.get("/openapi.json").text)
    operation = doc["paths"]["/v1/queries/{query_id}/feedback"]["post"]
    assert set(operation["responses"]) == {"200", "400", "404", "409", "413", "429"}

    def check(instance, name):
        jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                         "components": doc["components"]}).validate(instance)

    check({"rating": "down", "comment": "why", "wrong_citations": [1], "expected": "x"}, "FeedbackRequest")
    for bad in ({"rating": "meh"}, {}, {"rating": "up", "extra": 1}, {"rating": "up", "comment": "x" * 2001}):
        with pytest.raises(jsonschema.ValidationError):
            check(bad, "FeedbackRequest")
    query_id = answered(client)
    check(client.post(f"/v1/queries/{query_id}/feedback", json={"rating": "down", "comment": "no"}).json(),
          "FeedbackAccepted")
    check(client.get(f"/v1/queries/{query_id}").json(), "QueryRecord")
    check(client.post("/v1/queries/nope/feedback", json={"rating": "up"}).json(), "Error")
