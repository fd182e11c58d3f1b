import threading
import time

import numpy as np
import pytest

from shared.adapters.local.coalescing import CoalescingEmbedder


class SlowEmbedder:
    model_name, dimension, max_tokens = "slow", 4, 10

    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def embed(self, texts):
        self.calls.append(list(texts))
        time.sleep(0.05)
        if self.fail_on and self.fail_on in texts:
            raise RuntimeError("model crashed")
        return np.array([[len(t), 1, 0, 0] for t in texts], dtype=np.float32)

    def token_spans(self, text):
        return [(0, len(text))]


def _run_concurrently(embedder, inputs):
    results, errors = {}, {}

    def call(key, texts):
        try:
            results[key] = embedder.embed(texts)
        except Exception as exc:  # noqa: BLE001
            errors[key] = exc

    threads = [threading.Thread(target=call, args=(k, v)) for k, v in inputs.items()]
    for t in threads:
        t.start()
        time.sleep(0.005)
    for t in threads:
        t.join()
    return results, errors


def test_concurrent_calls_share_batches_and_each_gets_its_own_rows():
    inner = SlowEmbedder()
    embedder = CoalescingEmbedder(inner)
    inputs = {n: [f"text {n}-{i}" + "x" * n for i in range(3)] for n in range(6)}
    results, errors = _run_concurrently(embedder, inputs)
    assert not errors
    for n, texts in inputs.items():
        assert results[n].shape == (3, 4) and list(results[n][:, 0]) == [len(t) for t in texts]
    assert len(inner.calls) < 6  # coalesced: fewer model calls than callers
    assert sorted(t for call in inner.calls for t in call) == sorted(t for v in inputs.values() for t in v)


def test_a_lone_call_runs_at_once_and_empty_input_works():
    inner = SlowEmbedder()
    embedder = CoalescingEmbedder(inner)
    assert embedder.embed(["a", "bb"]).shape == (2, 4)
    assert inner.calls == [["a", "bb"]]
    assert embedder.embed([]).shape == (0, 4)


def test_a_failure_reaches_every_caller_of_that_batch_and_the_next_batch_runs():
    inner = SlowEmbedder(fail_on="poison")
    embedder = CoalescingEmbedder(inner)
    results, errors = _run_concurrently(embedder, {"first": ["ok"], "a": ["poison"], "b": ["fine"]})
    assert "a" in errors and isinstance(errors["a"], RuntimeError)
    assert "first" in results
    with pytest.raises(RuntimeError):
        embedder.embed(["poison"])
    assert embedder.embed(["after"]).shape == (1, 4)


def test_a_caller_whose_request_did_not_fit_the_batch_it_ran_still_gets_its_rows():
    """The race of issue 10: a caller that found the model idle ran the queue's head, and
    when its own request did not fit in that batch it returned without rows (AssertionError).
    Three threads, 30 calls, batches that cannot hold two requests."""
    class QuickEmbedder(SlowEmbedder):
        def embed(self, texts):
            time.sleep(0.002)
            return np.array([[len(t), 1, 0, 0] for t in texts], dtype=np.float32)

    embedder = CoalescingEmbedder(QuickEmbedder(), max_texts=5)
    errors, wrong = [], []

    def caller(n):
        for i in range(10):
            texts = [f"t{n}-{i}-{j}" + "x" * (n + j) for j in range(3)]
            try:
                rows = embedder.embed(texts)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
                continue
            if list(rows[:, 0]) != [len(t) for t in texts]:
                wrong.append(texts)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong
