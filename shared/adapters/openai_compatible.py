"""A language model behind the OpenAI-compatible chat completions API.

Ollama, llama.cpp's ``llama-server``, llama-cpp-python's server, vLLM and LM Studio
all serve ``POST {base}/chat/completions``; ``RAGBUS_OPENAI_BASE_URL`` is that
``{base}`` as the OpenAI SDK takes it (usually ending in ``/v1``), and
``RAGBUS_OPENAI_MODEL`` the model name the server serves. The prompts, the
context delimiters and the reply schemas are :mod:`shared.query.prompts`, the
same as the Gemini provider's; this module is the transport (``httpx``).

Structured output, negotiated once per process: each call first asks for
``response_format: {"type": "json_schema", ...}`` (OpenAI, Ollama, vLLM, LM
Studio, llama.cpp's server). A server that refuses that field (a 400 or 422
naming ``response_format``; llama-cpp-python's server accepts only
``json_object``, with an optional ``schema`` it turns into a grammar, and
answers ``json_schema`` with a 500 naming the field) is asked for
``json_object`` with the schema, and then for no format at all; the step it
accepted is kept for later calls. Every reply is parsed robustly anyway
(:mod:`shared.query.grading`).

The deadline, retries, ``Retry-After``, bounded reads, redaction and the shaping of
errors are :class:`~shared.adapters.http_model.HttpModelAPI`'s, which this adapter
extends (the same loud-failure rules as the Gemini provider). Some servers
(llama-cpp-python's, llama.cpp's) answer a request for a model they do not serve with the model they have, so on first use ``GET {base}/models`` is
read: a model not in that list is a 404 :class:`ModelUnusable` naming the ones
that are, rather than answers from a model nobody chose.

Bounds: ``RAGBUS_OPENAI_TIMEOUT_S`` is one deadline for the whole call, the base's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import httpx

from shared.adapters.http_model import HttpModelAPI, Reply, error_detail, token_count
from shared.query.prompts import SYSTEM_INSTRUCTION

log = logging.getLogger("ragbus.llm.openai")

#: The structured-output requests tried in order until the server accepts one.
JSON_MODES = ("json_schema", "json_object", "none")


def _response_format(mode: str, operation: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": f"ragbus_{operation}", "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def _message_text(content: Any) -> str:
    """The assistant message's content: a string, or OpenAI's list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TypeError(f"message content is {type(content).__name__}, not text")


def _refuses_format(response: httpx.Response) -> bool:
    """A refusal of the ``response_format`` asked for: 400 or 422, or the 500 llama-cpp-python's
    server answers for a request that fails its validation, naming the field."""
    return response.status_code in (400, 422, 500) and "response_format" in error_detail(response)


def serves(model: str, ids: Sequence[str]) -> bool:
    """Whether ``model`` is one of the served ``ids`` (Ollama also answers ``name`` for ``name:latest``)."""
    return model in ids or f"{model}:latest" in ids


class OpenAICompatibleLanguageModel(HttpModelAPI):
    """:class:`~shared.contract.ports.LanguageModel` over any OpenAI-compatible chat completions server."""

    provider = "openai"
    label = "OpenAI-compatible"
    reply_kind = "chat completion"
    probe_path = "/models"

    def __init__(self, base_url: str, model: str, **options: Any) -> None:
        super().__init__(base_url, model, **options)
        self.json_mode = JSON_MODES[0]
        self._checked_model = False

    def hint(self, status: int) -> str:
        if status in (401, 403):
            return "check RAGBUS_OPENAI_API_KEY (or OPENAI_API_KEY) and the key's access to the model"
        if status == 404:
            return (f"check RAGBUS_OPENAI_MODEL (GET {self.shown_url}/models lists what the server serves) "
                    "and that RAGBUS_OPENAI_BASE_URL is the API's base, usually ending in /v1")
        return ("check RAGBUS_OPENAI_MODEL and the server's settings (a prompt beyond its context size "
                "is refused: give it a context of at least 8192 tokens)")

    def _check_model(self) -> None:
        """Once: is the model among those ``GET /models`` lists? (See the module docstring.)"""
        with self.setup_lock:
            if self._checked_model:
                return
            response = self.send("models", "GET", "/models")
            if response.status_code in (401, 403):
                raise self.unusable("models", response.status_code, error_detail(response),
                                    self.hint(response.status_code))
            ids: list[str] = []
            if response.status_code == 200:
                try:
                    ids = [str(m["id"]) for m in response.json().get("data") or [] if isinstance(m, dict)]
                except (ValueError, AttributeError, KeyError, TypeError, RecursionError):
                    ids = []
            # A server without a model list (404, 405, an odd body) is judged by its chat replies alone.
            if ids and not serves(self.model, ids):
                raise self.unusable(
                    "models", 404, f"the server serves {', '.join(map(repr, ids[:10]))}",
                    "set RAGBUS_OPENAI_MODEL to one of them",
                )
            self._checked_model = True

    def read_reply(self, data: Any) -> Reply:
        choice = data["choices"][0]
        text = _message_text(choice["message"].get("content"))
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        finish = finish if isinstance(finish, str) else None
        return Reply(text, input_tokens=token_count(data.get("usage"), "prompt_tokens"),
                     output_tokens=token_count(data.get("usage"), "completion_tokens"), finish=finish,
                     model=data.get("model") if isinstance(data.get("model"), str) else None,
                     cut=finish == "length")

    def call(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        """The model check, then the call, stepping down the structured-output modes the server refuses."""
        self._check_model()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_INSTRUCTION}, {"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        started = time.monotonic()
        while True:
            mode = self.json_mode
            response_format = _response_format(mode, operation, schema) if schema else None
            if response_format:
                body["response_format"] = response_format
            else:
                body.pop("response_format", None)
            response = self.send(operation, "POST", "/chat/completions", body,
                                 final=_refuses_format if response_format else None)
            status = response.status_code
            if status < 400:
                return self.record_reply(operation, response, started=started, temperature=temperature,
                                         max_tokens=max_tokens)
            detail = error_detail(response)
            if not (response_format and _refuses_format(response)):
                raise self.unusable(operation, status, detail, self.hint(status))
            with self.setup_lock:
                if self.json_mode == mode:  # another thread may have stepped down already
                    self.json_mode = JSON_MODES[JSON_MODES.index(mode) + 1]
                    log.warning("%s server at %s refused response_format %s (%s); asking for %s from now on",
                                self.label, self.shown_url, mode, detail, self.json_mode)
