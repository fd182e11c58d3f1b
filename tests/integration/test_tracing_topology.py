"""One trace per query across processes: the emulator topology, one OS process per stage."""

from __future__ import annotations

import json
import time

import pytest

from shared.adapters.local.spans import SqliteSpanStore
from shared.tools import emulators, topology
from shared.tools.demo import CORPUS
from tests.support import run_cli

pytestmark = pytest.mark.skipif(
    any(emulators.emulators_available().values()),
    reason=f"emulators not installed: {emulators.emulators_available()}",
)


def test_a_refined_query_is_one_trace_across_the_stage_processes(tmp_path):
    home = tmp_path / "home"
    # a grader this strict refines whatever it finds, until out of iterations or until a
    # refinement finds the same contexts ("refining cannot help"). --top-k 20: the question's
    # own ranking leads every iteration's first half and every ranking is searched top_k deep,
    # so with 5 or 10 contexts the first refinement found the same chunks. Whether the second
    # one does depends on ties broken by chunk id, and a file's document id is a hash of its
    # absolute path: the same code refines twice in one checkout and once in another. The
    # trace is checked over whatever iterations ran, at least one refinement.
    strict = {"RAGBUS_MIN_SCORE": "0.999", "RAGBUS_MIN_RELEVANCE": "0.999", "RAGBUS_MIN_COMPLETENESS": "0.999"}
    topology.up(home, stage_env=strict)
    try:
        run_cli(home, "ingest", str(CORPUS / "docs"), str(CORPUS / "site" / "articles"), timeout=300)
        record = json.loads(run_cli(home, "ask", "How do retries work?",
                                    "--json", "--top-k", "20", "--max-iterations", "2", check=False,
                                    timeout=300).stdout)
        assert record["status"] == "answered", record.get("error")
        store = SqliteSpanStore(topology.data_home(home) / "traces.db")
        deadline = time.monotonic() + 30  # each process exports its spans in batches
        spans: list[dict] = []
        while time.monotonic() < deadline:  # the answer's span, and every span's parent: each process's spans
            spans = store.spans_of_trace(record["trace_id"])  # reach the store when its own handler ends, in any
            ids = {s["span_id"] for s in spans}  # order (a transformer's publish may be stored after the answer)
            if any(s["name"] == "synthesizer.query-graded process"
                   and "rag.answered_from_iteration" in s["attributes"] for s in spans) \
                    and [s["name"] for s in spans if s["parent_id"] not in ids] == ["gateway submit"]:
                break
            time.sleep(0.5)
    finally:
        topology.down(home)

    services = {s["attributes"].get("service.name") for s in spans}
    assert {"ragbus-transformer", "ragbus-retriever", "ragbus-grader", "ragbus-synthesizer"} <= services
    by_id = {s["span_id"]: s for s in spans}
    roots = [s for s in spans if s["parent_id"] not in by_id]
    assert [r["name"] for r in roots] == ["gateway submit"]  # one tree, rooted at the request
    for span in spans:
        if span["kind"] == "CONSUMER":  # received in one process, parented by a publish in another
            parent = by_id[span["parent_id"]]
            assert parent["kind"] == "PRODUCER"
            if parent["attributes"]["service.name"] == span["attributes"]["service.name"]:
                # the transformer consumes query-graded and publishes it when a refinement ends the loop:
                # its own message comes back to it too (and is left to the synthesizer)
                assert span["attributes"]["service.name"] == "ragbus-transformer" and "query-graded" in span["name"], span
                continue
    graded = sorted((s for s in spans if s["name"] == "grader.contexts-retrieved process"),
                    key=lambda s: s["attributes"]["rag.iteration"])
    decisions = [it.get("decision") for it in record["iterations"]]
    assert decisions == ["refine"] * (len(decisions) - 1) + ["exhausted"], decisions
    assert [s["attributes"]["rag.iteration"] for s in graded] == list(range(len(decisions))), decisions
    said = [s["attributes"]["rag.decision"] for s in graded]
    assert said[:-1] == decisions[:-1], (said, decisions)
    if said[-1] == "refine":
        # the offline model's refinement brought nothing new: the transformer ended the loop in its own process
        # and sent the graded iteration on to the synthesizer's, in the same trace
        ended = [s for s in spans if s["name"] == "transformer.query-graded process"
                 and s["attributes"].get("rag.decision") == "exhausted"]
        assert len(ended) == 1 and ended[0]["attributes"]["rag.iteration"] == len(decisions) - 1, ended
    else:
        assert said == decisions
