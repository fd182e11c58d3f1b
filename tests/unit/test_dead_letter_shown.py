"""A dead letter's data is kept whole for its retry, but shown with its credentials redacted."""

from __future__ import annotations

import json
from types import SimpleNamespace

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient
from typer.testing import CliRunner

from services.dead_letters.redrive import as_shown, letters
from services.gateway.dead_letters import DeadLetterRoutes
from shared.contract import state_collections
from tests.fakes import InMemoryStateStore

TOKEN = "s3cr3t-feed-t0ken"


def _state() -> InMemoryStateStore:
    # what a failed `ragbus poll --feed 'https://host/feed.xml?feed_token=...'` leaves behind
    state = InMemoryStateStore()
    state.put(state_collections.DEAD_LETTERS, "feed_poller.feed-poll-requested:m1", {
        "subscription": "feed_poller.feed-poll-requested", "topic": "feed-poll-requested", "message_id": "m1",
        "attempts": 5, "error": "HTTP 500 from https://host/feed.xml?feed_token=[redacted]",
        "data": json.dumps({"url": f"https://host/feed.xml?feed_token={TOKEN}"}), "at": "2026-11-29T08:00:00+00:00"})
    return state


def test_the_kept_data_is_whole_and_the_shown_data_redacted():
    state = _state()
    (kept,) = letters(state)
    assert TOKEN in kept["data"]  # the retry publishes this again
    (shown,) = as_shown([kept])
    assert TOKEN not in json.dumps(shown)
    assert json.loads(shown["data"]) == {"url": "https://host/feed.xml?feed_token=[redacted]"}
    assert {k: v for k, v in shown.items() if k != "data"} == {k: v for k, v in kept.items() if k != "data"}


def test_get_v1_dead_letters_shows_no_credential():
    routes = DeadLetterRoutes(SimpleNamespace(state=_state()))
    app = Starlette(routes=[Route("/v1/dead-letters", routes.dead_letters, methods=["GET"])])
    reply = TestClient(app).get("/v1/dead-letters")
    assert reply.status_code == 200
    assert TOKEN not in reply.text
    (letter,) = reply.json()["dead_letters"]
    assert "feed_token=[redacted]" in letter["data"]


def test_dead_letters_json_shows_no_credential(monkeypatch):
    from shared.tools.cli import dead_letters as command
    from shared.tools.cli.root import app

    state = _state()
    monkeypatch.setattr(command, "open_session", lambda: SimpleNamespace(deps=SimpleNamespace(state=state)))
    result = CliRunner().invoke(app, ["dead-letters", "--json"])
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    (letter,) = json.loads(result.output)
    assert "feed_token=[redacted]" in letter["data"]
