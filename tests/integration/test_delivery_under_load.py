"""A burst into a function with no free capacity, on the Pub/Sub emulator: Cloud Run's 429
spends a delivery attempt, so max_delivery_attempts decides whether work that never ran is
dead-lettered (infra/pubsub.tf, docs/google-cloud.md's "Delivery under load").

A front admitting one push at a time answers 429 to the rest at once, in front of a
functions-framework process (tests/probes/burst.py). The emulator redelivers a refused push
after about a second (its retry-policy backoff stalls under a burst, so the subscriptions have
none; see bench/delivery_burst.py), which makes 100 attempts a window of about 100 s here,
against hours with infra/'s 10 s .. 600 s backoff in the cloud. bench/delivery_burst.py runs
the full 1,000 messages and prints the figures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.tools import emulators
from tests.probes.burst import Sizing, busy_function, run_burst

PROJECT = "ragbus-burst-test"
MESSAGES = 300
WORK_S = 0.03


@pytest.fixture(scope="module")
def function(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path, Path]]:
    missing = emulators.emulators_available().get(emulators.PUBSUB)
    if missing:
        pytest.skip(f"the Pub/Sub emulator is needed: {missing}")
    workdir = tmp_path_factory.mktemp("burst")
    pubsub = emulators.start_pubsub_emulator(workdir / "logs")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in pubsub.env.items():
            mp.setenv(name, value)
        try:
            with busy_function(workdir, WORK_S, threads=1) as (server, probe_log):
                yield server, probe_log, workdir
        finally:
            pubsub.stop()


def _burst(function: tuple[Any, Path, Path], attempts: int) -> Any:
    server, probe_log, workdir = function
    assert os.environ.get("PUBSUB_EMULATOR_HOST")
    return run_burst(PROJECT, Sizing(f"{attempts} attempts", attempts, slots=1), messages=MESSAGES,
                     work_s=WORK_S, workdir=workdir, deadline_s=150, function=(server, probe_log))


def test_with_100_attempts_a_burst_beyond_capacity_runs_whole(function):
    result = _burst(function, 100)
    assert result.finished, result.summary()
    assert result.refused > MESSAGES, "the front refused too little for the burst to test anything"
    assert (result.ran, result.dead_lettered) == (MESSAGES, 0), result.summary()
    # every message was refused at least once on the way, and none came near the limit
    assert result.most_deliveries < 100, result.summary()


def test_with_5_attempts_the_same_burst_dead_letters_work_that_never_ran(function):
    result = _burst(function, 5)
    assert result.finished, result.summary()
    assert result.dead_lettered_unrun > 0, result.summary()
    assert result.dead_lettered_unrun == result.dead_lettered  # what was dead-lettered never ran
    assert result.most_deliveries == 5  # refused five times, then dead-lettered
