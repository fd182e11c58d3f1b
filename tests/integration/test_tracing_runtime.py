"""One trace per query and per ingested item, on the embedded runtime, read back by `ragbus trace`."""

from __future__ import annotations

import json
import os

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from shared.contract.config import load_settings
from shared.ingest.files import ingest_path
from shared.observability.tracing import TracingLanguageModel, add_exporter
from shared.query.api import submit_query, wait_for_query
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from tests.support import run_cli, topic_paragraphs
from tests.unit.loop_fakes import ScriptedLLM, good_grade, weak_grade

EXPORTER = InMemorySpanExporter()
add_exporter(EXPORTER, batch=False)


@pytest.fixture
def system(tmp_path):
    EXPORTER.clear()
    docs = tmp_path / "docs"
    docs.mkdir()
    for n, topic in enumerate(["volcano", "glacier", "harbor"]):
        (docs / f"{topic}.md").write_text(f"# {topic.title()} notes\n\n" + "\n\n".join(topic_paragraphs(topic, seed=n)))
        # a file's published date is its modification time (issue 31): years old, so "latest" is widened
        os.utime(docs / f"{topic}.md", (1_500_000_000, 1_500_000_000))
    scripted = ScriptedLLM(grades=[weak_grade(0.4), weak_grade(0.5, missing=("glacier",)), good_grade(0.9)],
                           refines=["glacier report", "harbor report"])
    settings = load_settings({"RAGBUS_HOME": str(tmp_path / "home")})
    local = build_local(settings, llm=TracingLanguageModel(scripted))
    with LocalRuntime(local.deps, local.bus) as runtime:
        ingest_path(docs, state=local.deps.state, blobs=local.deps.blobs, publisher=local.deps.publisher,
                    clock=local.deps.clock)
        assert runtime.wait_idle(120)
        yield local, tmp_path / "home", runtime
    trace.get_tracer_provider().force_flush()


def _asked(system, question: str, **kwargs) -> dict:
    """The query's record once it ended, every span of its trace ended and exported: the synthesizer writes
    the answer before its delivery's span ends (it publishes AnswerReady in between), so a test that read the
    spans as soon as the record said answered could miss the synthesizer's (the run's workers are idle once
    every delivery is acknowledged, after its span)."""
    local, _, runtime = system
    record = wait_for_query(local.deps, submit_query(local.deps, question, **kwargs).id, 60).to_doc()
    assert runtime.wait_idle(60)
    trace.get_tracer_provider().force_flush()
    return record


def _tree(spans):
    by_id = {s.context.span_id: s for s in spans}
    return {s.context.span_id: by_id.get(s.parent.span_id) if s.parent else None for s in spans}


def test_a_query_refined_twice_is_one_trace_with_every_stage_of_every_iteration(system):
    EXPORTER.clear()
    record = _asked(system, "volcano report", top_k=2)
    assert record["status"] == "answered" and len(record["iterations"]) == 3
    spans = [s for s in EXPORTER.get_finished_spans() if s.context.trace_id == int(record["trace_id"], 16)]
    names = [s.name for s in spans]
    assert len({s.context.trace_id for s in spans}) == 1
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "gateway submit"
    grader = sorted((s for s in spans if s.name == "grader.contexts-retrieved process"),
                    key=lambda s: s.attributes["rag.iteration"])
    assert [s.attributes["rag.iteration"] for s in grader] == [0, 1, 2]
    assert [s.attributes["rag.decision"] for s in grader] == ["refine", "refine", "accept"]
    assert [s.attributes["rag.grade.score"] for s in grader] == [0.4, 0.5, 0.9]
    refinements = [s for s in spans if s.name == "transformer.query-graded process"
                   and s.attributes.get("rag.refined_from") is not None]
    assert len(refinements) == 2
    assert names.count("retriever.query-transformed process") == 3
    (answer,) = [s for s in spans if s.name == "synthesizer.query-graded process"
                 and "rag.answered_from_iteration" in s.attributes]
    assert answer.attributes["rag.outcome"] == "answered"
    # every CONSUMER span hangs from the PRODUCER span of the message it handled
    parent_of = _tree(spans)
    for span in spans:
        if span.kind is SpanKind.CONSUMER:
            assert parent_of[span.context.span_id].kind is SpanKind.PRODUCER
    # the chain from the answer back to the request passes through every stage of every iteration
    chain, node = [], answer
    while node is not None:
        chain.append(node.name)
        node = parent_of[node.context.span_id]
    stages = [n for n in chain if n.endswith(" process")]
    assert stages[::-1] == [
        "transformer.query-submitted process", "retriever.query-transformed process",
        "grader.contexts-retrieved process", "transformer.query-graded process",
        "retriever.query-transformed process", "grader.contexts-retrieved process",
        "transformer.query-graded process", "retriever.query-transformed process",
        "grader.contexts-retrieved process", "synthesizer.query-graded process",
    ]
    model_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name")]
    assert {s.attributes["gen_ai.operation.name"] for s in model_spans} >= {"transform", "grade", "refine"}


def test_one_ingested_item_is_one_trace_from_fetch_to_index(system):
    spans = EXPORTER.get_finished_spans()
    items = [s for s in spans if s.name == "file item"]
    assert len(items) == 3 and len({s.context.trace_id for s in items}) == 3
    for item in items:
        in_trace = [s for s in spans if s.context.trace_id == item.context.trace_id]
        names = {s.name for s in in_trace}
        assert {"document-fetched publish", "cleaner.document-fetched process", "document-cleaned publish",
                "indexer.document-cleaned process", "document-indexed publish"} <= names
        (indexer,) = [s for s in in_trace if s.name == "indexer.document-cleaned process"]
        assert indexer.attributes["rag.document_id"] == item.attributes["rag.document_id"]
        assert indexer.attributes["rag.chunk_count"] >= 1


def test_ragbus_trace_prints_the_waterfall_of_a_query(system):
    home = system[1]
    record = _asked(system, "volcano report", top_k=2)
    out = run_cli(home, "trace", record["id"]).stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"trace {record['trace_id']}")
    assert any("gateway submit" in line for line in lines)
    graded = [line for line in lines if "grader.contexts-retrieved process" in line]
    assert len(graded) == 3
    assert "iter 1" in graded[0] and "refine" in graded[0] and "score 0.40" in graded[0]
    assert "accept" in graded[2] and "score 0.90" in graded[2]
    assert all(" ms " in line for line in lines[1:])
    slow = run_cli(home, "traces", "--slow", "--json").stdout
    assert record["id"] in slow
    # the listing: newest first, with the question (or [redacted]), and ids a prefix finds
    listed = json.loads(run_cli(home, "traces", "--json").stdout)
    assert [(r["query_id"], r["question"], r["iterations"]) for r in listed] == [(record["id"], "volcano report", 3)]
    assert listed[0]["outcome"] == record["outcome"] and listed[0]["duration_ms"] > 0
    assert json.loads(run_cli(home, "traces", "--json", RAGBUS_REDACT_QUERY_TEXT="1").stdout)[0]["question"] == "[redacted]"
    assert json.loads(run_cli(home, "traces", "--failed", "--json").stdout) == []
    table = run_cli(home, "traces", COLUMNS="200").stdout
    assert record["id"][:8] in table and "volcano report" in table and record["id"] not in table
    assert run_cli(home, "trace", record["id"][:8]).stdout.splitlines()[0] == lines[0]
    # a rating: the text form prints it under the waterfall, and --json carries it on the root span
    run_cli(home, "feedback", record["id"][:8], "down", "--comment", "wrong year", "--wrong-citation", "1")
    spans = json.loads(run_cli(home, "trace", record["id"], "--json").stdout)
    (root,) = [span for span in spans if span["parent_id"] is None]
    assert root["name"] == "gateway submit" and len(spans) == len(lines) - 1
    assert [(f["rating"], f["comment"], f["wrong_citations"]) for f in root["feedback"]] == [("down", "wrong year", [1])]
    assert all("feedback" not in span for span in spans if span is not root)


def test_the_trace_shows_the_filters_and_the_time_read_from_the_question(system, tmp_path):
    home = system[1]
    folder = str(tmp_path / "docs")
    record = _asked(system, "What is the latest volcano report?", top_k=2, filters={"source": folder})
    lines = run_cli(home, "trace", record["id"]).stdout.splitlines()
    (transformed,) = [line for line in lines if "transformer.query-submitted process" in line]
    assert "time 'latest'" in transformed
    retrieved = [line for line in lines if "retriever.query-transformed process" in line]
    assert len(retrieved) == len(record["iterations"])
    # The files are years old: the 90 days "latest" reads leave nothing, and the trace says how the
    # range was widened before the search that found the contexts.
    # (dated by their modification time, years ago: widened step by step to any date)
    assert record["time_filter"]["widened"][-1] == "any date"
    widened = " -> ".join(record["time_filter"]["widened"])
    assert f"filters: source {folder}, widened: {widened}" in retrieved[0], retrieved[0]
