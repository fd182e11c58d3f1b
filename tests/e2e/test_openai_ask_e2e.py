"""`ragbus ask` with RAGBUS_LLM=openai: the CLI's stages call an OpenAI-compatible server and answer.

The real CLI in a subprocess on a home holding the bundled corpus, and a real HTTP
server on 127.0.0.1 speaking the chat completions API (tests/integration/fake_openai.py)
that answers each prompt the shared prompts send with a well-formed reply. The real
llama.cpp server with a real model is exercised by tests/integration/test_openai_llama_cpp.py
and, through `ragbus ask`, by bench/openai_provider.py (a 270M model on two CPU cores
needs minutes for the loop's calls, too long for every CI run).
"""

from __future__ import annotations

import json
import re

from shared.corpus import CORPUS
from tests.integration.fake_openai import FakeOpenAI, Reply
from tests.support import run_cli


def _answer(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("Rewrite the user's question"):
        return Reply(json.dumps({"rewritten": "reciprocal rank fusion RRF combine rankings",
                                 "sub_queries": [], "reasoning": "expanded RRF"}))
    if prompt.startswith("Grade how well"):
        return Reply(json.dumps({"score": 0.9, "relevance": 0.9, "completeness": 0.85, "grounded": True,
                                 "answerable": True, "reasoning": "context 1 defines it"}))
    if prompt.startswith("Answer the question"):
        first = re.search(r'<context id="(\d+)"', prompt).group(1)
        return Reply(json.dumps({"abstained": False, "sentences": [
            {"text": "Reciprocal rank fusion adds 1/(k + rank) over the lists.", "citations": [int(first)]}]}))
    return Reply(status=400, raw=json.dumps({"error": {"message": f"unexpected prompt {prompt[:60]!r}"}}))


def test_ask_answers_through_an_openai_compatible_server(tmp_path):
    home = tmp_path / "home"
    run_cli(home, "ingest", str(CORPUS / "docs"))
    with FakeOpenAI(served=("llama3.2:latest",), responder=_answer) as server:
        # Ollama lists "llama3.2:latest" for a model pulled as "llama3.2"
        env = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": server.url, "RAGBUS_OPENAI_MODEL": "llama3.2"}
        proc = run_cli(home, "ask", "How does RRF combine rankings?", "--json", check=False, timeout=300, **env)
    record = json.loads(proc.stdout)
    assert record["outcome"] == "answered", (record, proc.stderr[-2000:])
    assert record["answer_provider"] == "openai" and not record.get("fallbacks")
    assert "Reciprocal rank fusion adds 1/(k + rank)" in record["answer"] and record["citations"]
    chats = server.chat_requests
    assert [r.body["model"] for r in chats] == ["llama3.2"] * len(chats) and len(chats) >= 3
    assert all(r.response_format["type"] == "json_schema" for r in chats)
