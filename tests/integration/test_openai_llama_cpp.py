"""The OpenAI-compatible provider against a real llama.cpp server process with a real model.

llama-cpp-python's server (``python -m llama_cpp.server``) with Gemma 3 270M (Q4_K_M)
on 127.0.0.1, started once for this module and stopped by its pid
(tests/integration/llama_server.py). What this server really does, and this
provider relies on:

- it refuses ``response_format: {"type": "json_schema"}`` with a 500 whose message is
  the validation error naming ``response_format`` (not a 400 or 422), and accepts
  ``{"type": "json_object", "schema": ...}``, which it turns into a grammar: the provider
  steps down to that once, without retrying the 500, and keeps it;
- it answers a chat completion naming a model it does not serve with the model it
  has (HTTP 200), so an unknown model is caught by the provider's check of
  ``GET /v1/models``; the OpenAI-shaped 404 of servers that do refuse (Ollama, vLLM,
  OpenAI) is tested against a local server speaking that shape
  (test_openai_provider.py).
"""

from __future__ import annotations

from datetime import date

import httpx
import pytest

from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
from shared.contract.errors import ModelUnusable, RetryableError
from shared.contract.ports import ConversationTurn, NumberedContext
from shared.query.prompts import GRADE_MAX_TOKENS, SYNTHESIS_MAX_TOKENS, TRANSFORM_MAX_TOKENS
from tests.integration.llama_server import MODEL_ALIAS, gguf_model, start_llama_server

TODAY = date(2026, 11, 1)
CONTEXTS = [
    NumberedContext(1, "https://example.org/rrf",
                   "Reciprocal rank fusion (RRF) merges ranked lists by summing 1/(k + rank) for each "
                   "document, with k usually 60."),
    NumberedContext(2, "https://example.org/bm25",
                   "BM25 scores a document by term frequency, inverse document frequency and length."),
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    server = start_llama_server(gguf_model(), tmp_path_factory.mktemp("llama"))
    yield server
    server.stop()


@pytest.fixture
def llm(llama):
    model = OpenAICompatibleLanguageModel(llama.url, MODEL_ALIAS, timeout_s=120)
    yield model
    model.close()


def test_transform_grade_and_synthesize_through_a_real_model(llama, llm):
    """Each reply is used, or, when the model ran out of tokens inside it, counted as unusable.

    A 270M model can loop inside a JSON string until max_tokens (e.g. "rewritten": "1000...");
    the grammar keeps every other reply valid JSON, so "cut" is the only excuse accepted here.
    """
    def cut(budget: int) -> bool:
        return llm.last_call.output_tokens >= budget

    transformed = llm.transform("How does RRF combine rankings?", today=TODAY)
    assert transformed.rewritten.strip() or cut(TRANSFORM_MAX_TOKENS), transformed
    assert len(transformed.sub_queries) <= llm.max_sub_queries
    # the server refused json_schema (a 500 naming response_format) and took json_object
    assert llm.json_mode == "json_object"
    assert llm.last_call.input_tokens > 100 and llm.last_call.output_tokens > 0

    grade = llm.grade("How does RRF combine rankings?", CONTEXTS)
    assert not grade.fallback or cut(GRADE_MAX_TOKENS), grade.reasoning
    assert all(0.0 <= v <= 1.0 for v in (grade.score, grade.relevance, grade.completeness))

    try:
        answer = llm.synthesize("How does RRF combine rankings?", CONTEXTS, language="en")
    except RetryableError as refused:
        # the designed refusals, after which the synthesizer answers by itself: JSON cut off inside a
        # string, or sentences that cite no source (a tiny model's wording varies with the build pip made)
        assert cut(SYNTHESIS_MAX_TOKENS) or "none citing a source" in str(refused), refused
    else:
        assert answer.abstained or answer.sentences, answer
        for sentence in answer.sentences:
            assert sentence.text and all(isinstance(c, int) for c in sentence.citations)
    assert llama.process.poll() is None


def test_the_server_answers_an_unknown_model_so_the_provider_checks_the_list(llama):
    body = {"model": "no-such-model", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}
    reply = httpx.post(f"{llama.url}/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200  # the server substitutes the model it has: no 404 to rely on
    listed = [m["id"] for m in httpx.get(f"{llama.url}/models", timeout=10).json()["data"]]
    assert listed == [MODEL_ALIAS]

    llm = OpenAICompatibleLanguageModel(llama.url, "no-such-model", timeout_s=120)
    with pytest.raises(ModelUnusable) as caught:
        llm.grade("How does RRF combine rankings?", CONTEXTS)
    assert caught.value.status == 404 and caught.value.model == "no-such-model"
    assert repr(MODEL_ALIAS) in str(caught.value)


def test_a_follow_up_made_standalone_through_a_real_model(llm):
    """The standalone prompt through the server's JSON grammar: the reply is read as a question, or,
    cut inside its JSON at max_tokens, counted as unusable (the transformer then uses the offline rule)."""
    history = [ConversationTurn("What is BM25?", "BM25 scores a document by term frequency, inverse document "
                                                 "frequency and length [2].")]
    before = llm.malformed_replies
    text = llm.standalone("Who developed it?", history, today=TODAY)
    assert (isinstance(text, str) and text.strip()) or llm.malformed_replies == before + 1
    call = llm.last_call
    assert call.operation == "standalone" and call.output_tokens <= TRANSFORM_MAX_TOKENS and call.input_tokens > 0
