"""ragbus's traces in an OpenTelemetry backend people who build RAG already run: Arize Phoenix
(from PyPI, the dev extra), served on loopback, receiving OTLP/HTTP from `ragbus ask`. Phoenix's
own REST API must show the query as one trace: a span per stage and iteration, and the model
calls with their GenAI attributes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support import interrupt, run_cli, topic_paragraphs

# Phoenix runs as its own server process: its `phoenix` command beside this interpreter (the dev
# extra installs it), else on PATH (a venv of its own). Never imported here: that costs seconds.
PHOENIX = next((str(c) for c in (Path(sys.executable).with_name("phoenix"), shutil.which("phoenix"))
                if c and os.access(c, os.X_OK)), None)
if PHOENIX is None:
    pytest.skip("Arize Phoenix is not installed (pip install -e '.[dev]')", allow_module_level=True)

STAGE_SPANS = {"transformer.query-submitted process", "retriever.query-transformed process",
               "grader.contexts-retrieved process", "synthesizer.query-graded process"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_query_is_one_trace_in_phoenix_with_stage_and_model_spans(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "volcano.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    run_cli(home, "ingest", str(docs))

    port = _free_port()
    phoenix_env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"), "PHOENIX_HOST": "127.0.0.1",
                   "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port())}
    log = (tmp_path / "phoenix.log").open("w")
    phoenix = subprocess.Popen([PHOENIX, "serve"], env=phoenix_env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # a first start migrates its database: 40-70 s here
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert phoenix.poll() is None, (tmp_path / "phoenix.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Phoenix did not start within 240 s"
            time.sleep(1)

        asked = run_cli(home, "ask", "volcano report", check=False,
                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{base}/v1/traces")
        assert "outcome: answered" in asked.stdout, asked.stdout + asked.stderr
        assert "Failed to export" not in asked.stderr  # traces only: no metrics sent to a traces backend

        deadline = time.monotonic() + 60
        while True:
            spans = httpx.get(f"{base}/v1/projects/default/spans", params={"limit": 1000}, timeout=10).json()["data"]
            if {s["name"] for s in spans} >= STAGE_SPANS | {"answer-ready publish"}:
                break
            assert time.monotonic() < deadline, sorted({s["name"] for s in spans})
            time.sleep(1)
    finally:
        interrupt(phoenix)
        log.close()

    assert len({s["context"]["trace_id"] for s in spans}) == 1, "one query, one trace"
    names = [s["name"] for s in spans]
    assert names.count("gateway submit") == 1
    for span in (s for s in spans if s["name"] in STAGE_SPANS):
        assert span["attributes"].get("rag.query_id") and span["attributes"].get("rag.stage"), span
        # the first transform comes before any iteration; every later stage names its own
        if span["name"] != "transformer.query-submitted process":
            assert isinstance(span["attributes"].get("rag.iteration"), int), span
    models = [s for s in spans if "gen_ai.operation.name" in s["attributes"]]
    assert {m["attributes"]["gen_ai.operation.name"] for m in models} >= {"transform", "grade", "synthesize"}
    for model in models:
        assert model["attributes"]["gen_ai.request.model"] and model["attributes"]["gen_ai.provider.name"]
    # the tree is whole: every span but the root has its parent in the trace
    ids = {s["context"]["span_id"] for s in spans}
    roots = [s for s in spans if s["parent_id"] not in ids]
    assert [r["name"] for r in roots] == ["gateway submit"], [r["name"] for r in roots]
