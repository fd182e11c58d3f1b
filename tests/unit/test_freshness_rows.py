"""The performance table's freshness rows: the embedded figure judged against 5 s, the
emulator topology's reported beside it without a verdict, or "not measured" with the reason."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import perf_suite  # noqa: E402


def _fresh(runtime: str, p50: float) -> dict:
    out = {"runtime": runtime, "rounds": 3, "chunks_before": 71, "indexed_p50_s": p50 / 2, "p50_s": p50,
           "max_s": p50 * 1.5}
    if runtime == "embedded":
        out["target_s"] = 5.0
    return out


def test_both_freshness_figures_are_printed_and_only_the_embedded_one_is_judged():
    rows = perf_suite.table({"freshness": _fresh("embedded", 0.3), "freshness_emulators": _fresh("emulators", 7.5)})
    embedded, emulators = rows
    assert embedded["met"] is True and embedded["target"] == "p50 <= 5 s"
    assert "emulator topology" in emulators["what"] and emulators["value"] == "7.50 / 11.25 s"
    assert emulators["met"] is None and emulators["target"].startswith("reported")


def test_emulators_not_installed_reads_not_measured_with_the_reason():
    rows = perf_suite.table({"freshness_emulators": {"runtime": "emulators", "not_measured": "pubsub: no java"}})
    assert rows == [{"what": "freshness, emulator topology", "value": "not measured (pubsub: no java)"}]
