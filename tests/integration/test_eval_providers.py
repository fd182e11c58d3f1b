"""`ragbus eval` with a second provider: RAGBUS_LLM=openai against an OpenAI-compatible
server on 127.0.0.1 (a small deterministic stand-in that answers each operation by the
JSON schema it is asked for; the provider's own behaviour against real servers is
tests/integration/test_openai_provider.py's). What is checked here is the evaluation's
side: the provider is found from its variables, wired as RAGBUS_LLM wires it, given its
own (smaller) sample, reported in its own column beside local on the same queries, and
refused loudly when it cannot answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("fitz_gov", reason="fitz-gov is not installed: pip install fitz-gov==4.1.0")

from tests.integration.fake_openai import FakeOpenAI, Reply  # noqa: E402
from tests.support import REPO  # noqa: E402

MODEL = "rule-model"
QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.S)


def _reply(body: dict) -> str:
    """What a compliant model would send for the operation the schema names."""
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    required = set(schema.get("required", []))
    prompt = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
    question = (QUESTION.search(prompt) or re.search(r"(.*)", prompt)).group(1).strip().strip('"')
    if "rewritten" in required:
        return json.dumps({"rewritten": question, "sub_queries": [], "reasoning": "kept"})
    if "query" in required:
        return json.dumps({"query": question})
    if "score" in required:
        return json.dumps({"score": 0.8, "relevance": 0.8, "completeness": 0.8, "grounded": True,
                           "answerable": True, "reasoning": "on topic", "missing_aspects": []})
    return json.dumps({"abstained": False, "sentences": [{"text": "The first source answers it.", "citations": [1]}]})


def rule_server(*, failing: bool = False) -> FakeOpenAI:
    """The stand-in: every operation answered as its schema asks; ``failing``: every chat
    completion is a 503 (told to retry at once), as an overloaded or broken server answers,
    while the model list still names the model."""
    overloaded = Reply(status=503, headers={"Retry-After": "0"})
    return FakeOpenAI(served=(MODEL,), responder=lambda body: overloaded if failing else Reply(text=_reply(body)))


def _eval(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("RAGBUS_OPENAI_", "OPENAI_", "RAGBUS_GEMINI_", "GOOGLE_", "GEMINI_", "RAGBUS_LLM"))}
    clean.update({"RAGBUS_HOME": str(tmp_path / "home"), "COLUMNS": "250", **env})
    return subprocess.run([sys.executable, "-m", "shared.tools.cli", "eval", "--slice", "40", "--no-ablations",
                           "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "r.json"), *args],
                          cwd=REPO, env=clean, capture_output=True, text=True, timeout=600)


def test_a_configured_openai_server_gets_its_own_column_beside_local(tmp_path):
    with rule_server() as server:
        proc = _eval(tmp_path, "--sample", "8", "--abstain-sample", "4", "--provider-sample", "openai=4/2",
                     RAGBUS_OPENAI_BASE_URL=server.url, RAGBUS_OPENAI_MODEL=MODEL)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    providers = results["targets"]["providers"]
    openai = providers["openai"]
    assert openai["status"] == "ran" and openai["model"] == f"openai/{MODEL}"
    assert (openai["answerable"], openai["abstain"]) == (4, 2)
    assert providers["local"]["status"] == "ran" and providers["local"]["answerable"] == 8
    assert set(openai["local_on_the_same_queries"]) == set(openai["figures"])
    # The stand-in never abstains: its abstention accuracy is 0 and that target is not met.
    assert openai["figures"]["abstention_accuracy"] == 0.0 and openai["all_met"] is False
    assert [row["name"] for row in results["pipeline"]["rows"]] == ["full pipeline", "full pipeline (openai)"]
    assert len(server.chat_requests) >= 3 * (1 + 4 + 2)  # warm-ups, then transform + grade + synthesis per question
    assert openai["model_fallbacks"] == {"questions": 6, "questions_with_a_fallback": 0, "by_stage": {}}
    assert f"openai (openai/{MODEL}; 4 + 2 abstain)" in proc.stdout
    assert "- gemini: not configured" in proc.stdout


def test_a_provider_that_cannot_answer_stops_the_run_before_the_pipeline(tmp_path):
    with rule_server() as server:
        proc = _eval(tmp_path, "--sample", "8", "--abstain-sample", "4", "--providers", "local,openai",
                     RAGBUS_OPENAI_BASE_URL=server.url, RAGBUS_OPENAI_MODEL="no-such-model")
    assert proc.returncode == 2
    err = " ".join(proc.stderr.split())
    assert "the openai provider could not answer a first question" in err and "no-such-model" in err
    assert "pipeline: full pipeline" not in err and not (tmp_path / "r.json").exists()


def test_a_provider_whose_every_call_fails_is_not_measured_under_its_name(tmp_path):
    # The stages would answer anyway, from their local fallbacks: figures of that run would be
    # the fallbacks' reported as the provider's. The eval refuses, naming what failed.
    with rule_server(failing=True) as server:
        proc = _eval(tmp_path, "--sample", "8", "--abstain-sample", "4",
                     RAGBUS_OPENAI_BASE_URL=server.url, RAGBUS_OPENAI_MODEL=MODEL)
    assert proc.returncode == 2
    err = " ".join(proc.stderr.split())
    assert "every model call of the openai provider failed on a first question" in err
    assert "grader:" in err and "503" in err and not (tmp_path / "r.json").exists()
