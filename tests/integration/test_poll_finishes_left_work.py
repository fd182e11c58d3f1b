"""`ragbus poll` with no feeds left finishes the ingestion work an earlier command left on the
embedded runtime's durable bus (a `feeds remove --timeout` that ran out of time), for real:
SQLite bus and state in a temporary home, the CLI in-process."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from shared.contract.config import load_settings
from shared.contract.messages import FeedPollRequested
from shared.runtime.bootstrap import build_local
from shared.runtime.stages import CONSUMERS, INGESTION_STAGES
from shared.tools.cli import app


def test_poll_without_feeds_finishes_what_an_earlier_command_left(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("RAGBUS_HOME", str(home))
    monkeypatch.setenv("RAGBUS_TRACING", "0")
    system = build_local(load_settings({"RAGBUS_HOME": str(home), "RAGBUS_TRACING": "0"}))
    subscriptions = [c.subscription for c in CONSUMERS if c.stage in INGESTION_STAGES]
    # work published and never run: what a command leaves when its time runs out
    system.deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[],
                                                    requested_at=system.deps.clock.now()))
    assert system.bus.outstanding(subscriptions) == 1

    first = CliRunner().invoke(app, ["poll", "--timeout", "60"])
    assert first.exit_code == 0, first.output
    assert "finished the work an earlier command left" in first.output
    assert system.bus.outstanding(subscriptions) == 0 and system.bus.oldest_outstanding(subscriptions) is None

    second = CliRunner().invoke(app, ["poll"])
    assert second.exit_code == 0 and "nothing to poll" in second.output
