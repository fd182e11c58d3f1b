"""The root main.py exposes every stage, and a stage's entry point maps outcomes onto delivery."""

import base64
from datetime import UTC, datetime, timedelta

import pytest
from cloudevents.http import CloudEvent

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import QuerySubmitted, encode
from shared.runtime import functions
from shared.runtime.stages import CONSUMERS
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher
from tests.support import root_main


def test_every_stage_is_a_target_of_the_root_module():
    stages = {c.stage for c in CONSUMERS} | {"gateway"}
    assert stages <= set(root_main().__all__)
    for stage in stages:
        assert callable(getattr(root_main(), stage))


def _event(message, *, published=None, attempt=None):
    data, attributes = encode(message)
    body = {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes, "messageId": "m1"}}
    if published:
        body["message"]["publishTime"] = published.isoformat().replace("+00:00", "Z")
    if attempt:
        body["deliveryAttempt"] = attempt
    return CloudEvent({"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//pubsub"}, body)


@pytest.fixture
def deps(monkeypatch):
    d = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", d)
    return d


def test_a_handler_crash_raises_so_the_platform_redelivers(deps, monkeypatch):
    def boom(message, deps):
        raise ConnectionError("firestore unavailable")

    consumer = functions.consumer_for("transformer", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: boom))
    with pytest.raises(RuntimeError, match="transformer.query-submitted: ConnectionError: firestore unavailable"):
        root_main().transformer(_event(QuerySubmitted(query_id="q1")))
    assert deps.state.count(state_collections.DEAD_LETTERS) == 0


def test_consumer_is_chosen_by_message_type():
    assert functions.consumer_for("transformer", {"type": "QueryGraded"}).topic == "query-graded"
    assert functions.consumer_for("transformer", {"type": "QuerySubmitted"}).topic == "query-submitted"
    assert functions.consumer_for("indexer", {"type": "DocumentDeleted"}).topic == "document-deleted"


def test_an_unknown_type_is_recorded_as_a_dead_letter_and_acknowledged(deps):
    event = CloudEvent({"type": "google.cloud.pubsub.topic.v1.messagePublished", "source": "//pubsub"},
                       {"message": {"data": base64.b64encode(b"{}").decode(), "attributes": {"type": "Nope"},
                                    "messageId": "m9"}})
    root_main().grader(event)  # returns: acknowledged
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert "unknown message type 'Nope'" in letter["error"]


def test_events_older_than_the_cutoff_are_dropped(deps, monkeypatch):
    called = []
    consumer = functions.consumer_for("grader", {"type": "QuerySubmitted"})
    monkeypatch.setattr(type(consumer), "handler", property(lambda self: lambda m, d: called.append(m)))
    old = datetime.now(UTC) - timedelta(days=3)
    root_main().grader(_event(QuerySubmitted(query_id="q1"), published=old))
    assert called == []
    root_main().grader(_event(QuerySubmitted(query_id="q1"), published=datetime.now(UTC)))
    assert len(called) == 1


def test_every_event_entry_point_flushes_telemetry_before_it_returns(deps, monkeypatch):
    """Cloud Run throttles the CPU after the response: each invocation exports its own spans."""
    from opentelemetry import trace

    flushed: list[str] = []
    real = trace.get_tracer_provider()

    class Provider:
        def force_flush(self, timeout_millis=None):
            flushed.append(current)
            return True

        def __getattr__(self, name):  # spans are still made by the real provider
            return getattr(real, name)

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: Provider())
    event = _event(QuerySubmitted(query_id="q1"))
    targets = sorted(set(root_main().__all__) - {"gateway"})
    for current in targets:
        try:
            getattr(root_main(), current)(event)
        except Exception:  # noqa: BLE001 - a wrong kind of event for this target; the flush still counts
            pass
    assert flushed == targets


GATEWAY_STACK = ("starlette", "mcp", "uvicorn", "sse_starlette")


@pytest.mark.parametrize("target", ["grader", "indexer", "gcs_finalized"])
def test_a_stage_function_does_not_import_the_gateway_stack(tmp_path, target):
    """functions-framework loads the one root main.py for every function: a stage must not pay
    the gateway's imports (Starlette, MCP, uvicorn) on each cold start."""
    import json
    import os
    import subprocess
    import sys

    from tests.support import REPO

    probe = (
        "import json, sys, functions_framework\n"
        f"functions_framework.create_app(target={target!r}, source='main.py')\n"
        f"print(json.dumps([m for m in {GATEWAY_STACK!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "RAGBUS_HOME": str(tmp_path), "FUNCTION_TARGET": target, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_gateway_target_still_loads_on_demand():
    assert root_main().gateway.__name__ == "gateway"
    assert "gateway" in dir(root_main())
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        root_main().nope  # noqa: B018
