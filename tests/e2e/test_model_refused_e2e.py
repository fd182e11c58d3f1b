"""`ragbus ask` against a Gemini endpoint that refuses the model ends `failed`, loudly.

The real CLI in a subprocess with a fresh RAGBUS_HOME, the real google-genai SDK,
and a real HTTP server on 127.0.0.1 that answers 404 NOT_FOUND (Google's error
shape) for every model, as the service does for a retired model id. Before the
fix the 404 was replaced by the offline fallbacks and the query ended
`answered_with_caveat`; now it ends `failed` naming the model and the status, and
the gateway's /readyz reports the model unusable.
"""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from services.gateway.app import create_app
from shared.contract.config import DEFAULT_GEMINI_MODEL, load_settings
from shared.runtime.bootstrap import build_local
from tests.integration.fake_gemini import FakeGemini
from tests.support import run_cli, topic_paragraphs


@pytest.fixture
def home(tmp_path):
    """A home with three small documents ingested through the real CLI."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for n, topic in enumerate(["volcano", "glacier", "harbor"]):
        (docs / f"{topic}.md").write_text(f"# {topic.title()} notes\n\n" + "\n\n".join(topic_paragraphs(topic, seed=n)))
    home = tmp_path / "home"
    run_cli(home, "ingest", str(docs))
    return home


def gateway_health(home, env):
    """/healthz and /readyz of a gateway (another process than the CLI's) over ``home``."""
    settings = load_settings({"RAGBUS_HOME": str(home), **env})
    with TestClient(create_app(build_local(settings).deps), base_url="http://127.0.0.1") as client:
        return client.get("/healthz"), client.get("/readyz")


def test_ask_with_a_refused_model_fails_naming_the_model_and_404(home):
    with FakeGemini(refuse_every_model=True) as gemini:
        env = {"RAGBUS_LLM": "gemini", "GOOGLE_API_KEY": "x", "GOOGLE_GEMINI_BASE_URL": gemini.url}
        proc = run_cli(home, "ask", "how do glaciers change?", "--json", check=False, timeout=120, **env)
        record = json.loads(proc.stdout)
        assert record["outcome"] == "failed", record
        assert DEFAULT_GEMINI_MODEL in record["error"] and "404" in record["error"]
        assert proc.returncode != 0  # the work did not finish
        # the model asked for is the current default, and it was asked once: no retries, no fallback
        assert [r.model for r in gemini.requests] == [DEFAULT_GEMINI_MODEL]
        assert not record.get("fallbacks")
        assert "ERROR" in proc.stderr and "trace" in proc.stderr and DEFAULT_GEMINI_MODEL in proc.stderr

        # the gateway (another process) learns it from the record the stage wrote
        health, ready = gateway_health(home, {"RAGBUS_LLM": "gemini"})
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert health.json()["model"]["usable"] is False
        assert ready.status_code == 503
        model = ready.json()["model"]
        assert (model["model"], model["status"], model["usable"]) == (DEFAULT_GEMINI_MODEL, 404, False)


def test_ask_with_a_model_an_openai_compatible_server_does_not_serve_fails_the_same_way(home):
    """RAGBUS_LLM=openai: OpenAI's 404 (model_not_found) is the same failed query and unready gateway."""
    from tests.integration.fake_openai import FakeOpenAI

    # the server lists no models, so the 404 comes from the chat completion itself, as Ollama's does
    with FakeOpenAI(served=("llama3.2",), list_models=False) as server:
        env = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": server.url, "RAGBUS_OPENAI_MODEL": "llama9"}
        proc = run_cli(home, "ask", "how do glaciers change?", "--json", check=False, timeout=120, **env)
        record = json.loads(proc.stdout)
        assert record["outcome"] == "failed", record
        assert "llama9" in record["error"] and "404" in record["error"] and "does not exist" in record["error"]
        assert proc.returncode != 0 and not record.get("fallbacks")
        assert len(server.chat_requests) == 1  # asked once: no retry, no fallback

        health, ready = gateway_health(home, env)
        assert health.json()["model"]["model"] == "llama9"
        assert ready.status_code == 503
        model = ready.json()["model"]
        assert (model["model"], model["status"], model["usable"]) == ("llama9", 404, False)
