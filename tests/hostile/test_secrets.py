"""A model server or proxy on 127.0.0.1 that echoes the API key it was sent (some put it in their
401 text): the key reaches no query record, model-health record, span, log line, CLI output or
health page. And the gateway's own token: too weak or unmatchable ones are refused at start-up,
and the health checks of a gateway other machines reach show their detail only to token holders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

import pytest
from starlette.testclient import TestClient

from services.gateway.app import create_app
from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
from shared.contract import redaction, state_collections
from shared.contract.config import ConfigError, load_settings
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.ports import NumberedContext
from shared.contract.redaction import redact, remember_secret
from shared.runtime.bootstrap import build_local
from tests.hostile.model_server import MODEL, answer, model_server, send
from tests.support import REPO, ragbus_env, run_cli, topic_paragraphs

KEY = "sk-hostile-0123456789abcdefXYZ"
TOKEN = "gw-token-0123456789abcdefghij"
CONTEXTS = [NumberedContext(1, "https://example.org/rrf", "Reciprocal rank fusion sums 1/(k + rank).")]


@pytest.fixture(autouse=True)
def secrets_remembered_for_this_test_only(monkeypatch):
    """remember_secret (called here, and by the adapters this file builds in-process) keeps a value for the rest of
    the process: every later test in the worker would have it redacted. Each test gets a copy to add to."""
    monkeypatch.setattr(redaction, "_known", set(redaction._known))


def echo_key(status: int):
    """Answer ``status`` quoting the Authorization header back, as some proxies do."""
    def behave(h, body):
        sent = h.headers.get("Authorization", "")
        send(h, status, {"error": {"message": f"Incorrect API key provided: {sent.removeprefix('Bearer ')} "
                                              f"(header was {sent!r})"}}, Retry_After="0")
    return behave


@pytest.mark.parametrize("status,error", [(401, ModelUnusable), (403, ModelUnusable), (500, RetryableError),
                                          (429, RetryableError)])
def test_an_echoed_key_is_redacted_from_the_error(status, error):
    with model_server(default=echo_key(status)) as server:
        llm = OpenAICompatibleLanguageModel(server.url, MODEL, api_key=KEY, timeout_s=10)
        with pytest.raises(error) as caught:
            llm.grade("q", CONTEXTS)
        llm.close()
    assert KEY not in str(caught.value) and "[redacted]" in str(caught.value)
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"  # the key itself was still sent


def test_an_echoed_key_in_a_body_that_is_no_completion_is_redacted():
    with model_server(default=lambda h, b: send(h, 200, f"<html>proxy error for key {KEY}</html>")) as server:
        llm = OpenAICompatibleLanguageModel(server.url, MODEL, api_key=KEY, timeout_s=10)
        with pytest.raises(RetryableError, match="not a chat completion") as caught:
            llm.grade("q", CONTEXTS)
        llm.close()
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("text", [
    "Authorization: Bearer abcdef0123456789 was refused",
    "invalid key AIzaSyA-1234567890abcdefghijklmnopq",
    "token ya29.a0AfH6SMBx-1234567890abcdef expired",
    '{"api_key": "k-123456789"}',
    "https://proxy.example/v1?api_key=s3cr3t-value&x=1",
])
def test_credential_shaped_strings_are_redacted_whatever_their_value(text):
    shown = redact(text)
    assert "[redacted]" in shown
    assert not any(secret in shown for secret in ("abcdef0123456789", "AIzaSyA", "ya29.a0", "k-123456789", "s3cr3t"))


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    docs = tmp_path_factory.mktemp("docs")
    (docs / "volcano.md").write_text("# Volcano notes\n\n" + "\n\n".join(topic_paragraphs("volcano")))
    home = tmp_path_factory.mktemp("home")
    run_cli(home, "ingest", str(docs))
    return home


def test_an_echoed_key_reaches_no_record_log_span_output_or_health_page(home):
    with model_server(default=echo_key(401)) as server:
        env = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": server.url, "RAGBUS_OPENAI_MODEL": MODEL,
               "RAGBUS_OPENAI_API_KEY": KEY, "RAGBUS_LOG_LEVEL": "debug"}
        proc = run_cli(home, "ask", "what erupts from a volcano?", "--json", check=False, timeout=180, **env)
        assert server.prompts, "the model was never asked"
    record = json.loads(proc.stdout)
    assert record["outcome"] == "failed" and "401" in record["error"] and "[redacted]" in record["error"]
    assert KEY not in proc.stdout and KEY not in proc.stderr
    plain = run_cli(home, "ask", "what erupts from a volcano?", check=False, timeout=180, **env)
    assert KEY not in plain.stdout and KEY not in plain.stderr
    for name in ("ragbus.db", "traces.db", "bus.db"):
        path = home / name
        if path.exists():
            assert KEY.encode() not in path.read_bytes(), name
    settings = load_settings({"RAGBUS_HOME": str(home), **env})
    with TestClient(create_app(build_local(settings).deps), base_url="http://127.0.0.1") as client:
        health, ready = client.get("/healthz"), client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["model"]["usable"] is False
    assert KEY not in health.text and KEY not in ready.text and "[redacted]" in ready.text


def test_a_key_in_a_model_health_record_written_before_is_not_served(tmp_path):
    settings = load_settings({"RAGBUS_HOME": str(tmp_path), "RAGBUS_LLM": "openai",
                              "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "RAGBUS_OPENAI_MODEL": MODEL,
                              "RAGBUS_OPENAI_API_KEY": KEY})
    deps = build_local(settings).deps
    deps.state.put(state_collections.MODEL_HEALTH, MODEL, {
        "model": MODEL, "usable": False, "status": 401, "reason": f"refused: bad key {KEY}", "stage": "transformer"})
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        assert KEY not in client.get("/readyz").text and KEY not in client.get("/healthz").text


def test_health_detail_on_a_reachable_bind_is_for_token_holders_only(tmp_path):
    deps = build_local(load_settings({"RAGBUS_HOME": str(tmp_path), "RAGBUS_LLM": "openai",
                                      "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                                      "RAGBUS_OPENAI_MODEL": MODEL})).deps
    deps.state.put(state_collections.MODEL_HEALTH, MODEL, {
        "model": MODEL, "usable": False, "status": 404, "reason": "model gone at http://10.0.0.7/v1",
        "stage": "transformer"})
    with TestClient(create_app(deps, host="0.0.0.0", api_token=TOKEN), base_url="http://ragbus.example") as client:
        bare_ready, bare_health = client.get("/readyz"), client.get("/healthz")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        full_ready, full_health = client.get("/readyz", headers=auth), client.get("/healthz", headers=auth)
        wrong = client.get("/readyz", headers={"Authorization": "Bearer nope"})
    assert bare_ready.status_code == 503 and bare_ready.json() == {
        "status": "unready", "model": {"model": MODEL, "usable": False}}
    assert bare_health.status_code == 200 and "model" not in bare_health.json()
    assert "10.0.0.7" not in bare_ready.text + bare_health.text + wrong.text
    assert full_ready.json()["model"]["reason"].startswith("model gone") and "model" in full_health.json()


@pytest.mark.parametrize("token", ["a", "secret", "aaaaaaaaaaaaaaaaaaaaaaaa", "0123456789abcde"])
def test_a_weak_token_is_refused_for_a_reachable_bind(tmp_path, token):
    deps = build_local(load_settings({"RAGBUS_HOME": str(tmp_path)})).deps
    with pytest.raises(ConfigError, match="RAGBUS_API_TOKEN is too weak"):
        create_app(deps, host="0.0.0.0", api_token=token)
    create_app(deps, host="127.0.0.1", api_token=token)  # loopback: the user's choice


@pytest.mark.parametrize("token,named", [("pässwörd-0123456789abc", "'ä'"), ("two words-0123456789abc", "a space"),
                                         ("tab\there-0123456789abc", "a space"), ("nul\x01-0123456789abc", "U+0001")])
def test_a_token_no_client_could_send_is_refused_at_start_up(token, named):
    with pytest.raises(ConfigError, match="RAGBUS_API_TOKEN holds") as caught:
        load_settings({"RAGBUS_API_TOKEN": token})
    assert named in str(caught.value)


def test_serve_refuses_a_weak_token_on_a_reachable_bind_before_starting(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "shared.tools.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
                          cwd=REPO, env=ragbus_env(tmp_path / "home", RAGBUS_API_TOKEN="a"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "too weak" in proc.stderr and "Not starting" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_basic_credential_from_the_base_url_is_redacted_when_echoed(tmp_path):
    # http://user:password@host/v1: httpx sends it as "Authorization: Basic base64(user:password)",
    # which a proxy may quote back in its 401 like a Bearer key
    with model_server(default=echo_key(401)) as server:
        base = server.url.replace("http://", "http://admin:hunter2pass@")
        settings = load_settings({"RAGBUS_HOME": str(tmp_path), "RAGBUS_LLM": "openai",
                                  "RAGBUS_OPENAI_BASE_URL": base, "RAGBUS_OPENAI_MODEL": MODEL})
        llm = OpenAICompatibleLanguageModel.from_settings(settings)
        with pytest.raises(ModelUnusable) as caught:
            llm.grade("q", CONTEXTS)
        llm.close()
    sent = server.headers[0]["authorization"]
    assert sent.startswith("Basic ")  # the credential really travelled as Basic
    shown = str(caught.value)
    assert "hunter2pass" not in shown and sent.removeprefix("Basic ") not in shown, shown
    assert "YWRtaW46aHVudGVyMnBhc3M=" not in redact("header was 'Basic YWRtaW46aHVudGVyMnBhc3M='")


def test_a_configured_key_a_model_writes_into_a_successful_reply_is_not_kept():
    reply = json.dumps({"sentences": [{"text": f"The key in use is {KEY} as configured.", "citations": [1]},
                                      {"text": "Reciprocal rank fusion sums 1/(k + rank).", "citations": [1]}]})
    rewrite = json.dumps({"rewritten": f"rrf {KEY}", "sub_queries": [f"what is {KEY}"]})
    with model_server(default=answer(reply)) as server:
        llm = OpenAICompatibleLanguageModel(server.url, MODEL, api_key=KEY, timeout_s=10)
        answered = llm.synthesize("how does rrf work?", CONTEXTS, language="en")
        server.default = answer(rewrite)
        transformed = llm.transform("how does rrf work?", today=date(2026, 11, 26))
        llm.close()
    shown = json.dumps([s.text for s in answered.sentences]) + transformed.rewritten + " ".join(transformed.sub_queries)
    assert KEY not in shown and "[redacted]" in shown, shown


def test_a_configured_key_echoed_percent_encoded_is_redacted_whole():
    """A key with / + = echoed in a URL's query: the key-shaped pattern took only its head ("sk-nc16-Q"),
    and the rest ("%2FRAGBUS%2BKEY%3D...") was kept (newcomer16, a hostile upstream's 401 text)."""
    key = "sk-nc16-Q/RAGBUS+KEY=zyxw9876"
    remember_secret(key)
    text = redact("retry at https://proxy.example/v1?key=sk-nc16-Q%2FRAGBUS%2BKEY%3Dzyxw9876 or "
                  "form key=sk-nc16-Q%2FRAGBUS%2BKEY%3Dzyxw9876 with " + key)
    assert "zyxw9876" not in text and "RAGBUS" not in text, text


def test_a_configured_key_echoed_percent_encoded_in_lower_case_is_redacted_whole():
    # only '%2F' was remembered, not '%2f' as a client writing lower-case hex sends it (review of eef6f83)
    key = "sk-nc16-L/RAGBUS+KEY=zyxw9876"
    remember_secret(key)
    text = redact("form key=sk-nc16-L%2fRAGBUS%2bKEY%3dzyxw9876 or key=sk-nc16-L%2fRAGBUS%2BKEY%3Dzyxw9876 again")
    assert text == "form key=[redacted] or key=[redacted] again", text


FEED_TOKEN = "feedtok-0123456789abcdef"


def test_a_token_in_a_feeds_address_reaches_no_log_dead_letter_span_or_listing_error(tmp_path):
    # private feeds carry their credential in the query (GitLab's ?feed_token=, Jira's &os_authkey=, a
    # signed URL's &sig=): a poll that failed wrote it into every log line, dead letter, span and error
    from tests.hostile.servers import hostile_server

    home = tmp_path / "home"
    with hostile_server() as site:  # every path is a 404
        url = f"{site.base}/private.atom?feed_token={FEED_TOKEN}&format=atom"
        run_cli(home, "feeds", "add", url, "--allow-loopback")
        proc = run_cli(home, "poll", check=False, timeout=120, RAGBUS_LOG_LEVEL="debug")
        assert site.hits, "the feed was never fetched"
    assert "404" in proc.stderr and "feed_token=[redacted]" in proc.stderr, proc.stderr
    assert FEED_TOKEN not in proc.stdout + proc.stderr
    listed = run_cli(home, "feeds", "list", "--json")
    # the registration keeps it (polls fetch it), but what lists it shows it [redacted]: a terminal's scrollback
    assert FEED_TOKEN not in listed.stdout and "feed_token=[redacted]" in listed.stdout, listed.stdout
    assert FEED_TOKEN not in run_cli(home, "dead-letters", "--json").stdout
    assert FEED_TOKEN.encode() not in (home / "traces.db").read_bytes()
    errors = [feed.get("last_error") or "" for feed in json.loads(listed.stdout)]
    assert any("[redacted]" in error for error in errors) and not any(FEED_TOKEN in error for error in errors)
