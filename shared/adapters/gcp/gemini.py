"""The Gemini language model (google-genai), on Vertex AI or with an API key.

Each operation is one ``generate_content`` call. The answer budgets
(:mod:`shared.query.prompts`) are sent according to the
model family (:func:`generation_settings`): Gemini 3 models think before they
answer and count those thinking tokens inside ``max_output_tokens``, so they get
an explicit ``thinking_level`` and a limit of answer budget plus thinking
headroom, and no ``temperature``/``top_p``/``top_k`` (deprecated on Gemini 3);
Gemini 2.5 gets an explicit ``thinking_budget`` added to the limit; older
models get the sampling parameters as before.

An API refusal of the request itself (400, 401, 403, 404: unknown or retired
model, invalid argument, no permission) is :class:`~shared.contract.errors.ModelUnusable`:
the stages end the query ``failed`` instead of falling back. 429, 5xx and
transport failures are retried by the SDK, then raised as
:class:`~shared.contract.errors.RetryableError` for the stage to fall back on.

The prompts, the context delimiters, the reply schemas and the reading of
replies are :mod:`shared.query.prompts`, shared with every provider that talks
to a real model; this module is the transport. Transform, grade and synthesis
ask for JSON with a response schema; replies are parsed robustly anyway
(:mod:`shared.query.grading`) because a model can still return fenced, wrapped
or truncated JSON.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from shared.contract.config import DEFAULT_GEMINI_MODEL, Settings
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.query.prompts import SYSTEM_INSTRUCTION, PromptedLanguageModel

log = logging.getLogger("ragbus.llm.gemini")

#: Gemini 3: how much the model may think. LOW is offered by every Gemini 3 Flash and Pro
#: model (MINIMAL is not, e.g. on gemini-3.8-flash); rewriting, grading and answering from
#: given contexts need little reasoning, and every level above costs latency and tokens.
GEMINI3_THINKING_LEVEL = "LOW"
#: Room for thinking tokens, added to each answer budget on models that think: thinking
#: counts against max_output_tokens, and a limit without this room ends the reply with
#: finishReason MAX_TOKENS before the answer starts.
THINKING_HEADROOM_TOKENS = 4096
#: Gemini 2.5: an explicit thinking budget (its Flash models accept 0..24576; Pro cannot turn
#: thinking off), the same size as the headroom it is added to.
GEMINI25_THINKING_BUDGET = 1024
#: Statuses that mean "try again later"; every other 4xx is a refusal of the request itself.
TRANSIENT_STATUS = frozenset({408, 429})


def _finish_reason(response: Any) -> str | None:
    candidates = getattr(response, "candidates", None) or []
    reason = getattr(candidates[0], "finish_reason", None) if candidates else None
    return getattr(reason, "value", None) or (str(reason) if reason else None)


def generation_settings(model: str, *, temperature: float, answer_tokens: int) -> dict[str, Any]:
    """``GenerateContentConfig`` fields for ``model``: thinking, output limit, sampling."""
    from google.genai import types

    name = model.rsplit("/", 1)[-1].lower()  # a Vertex resource name ends with the model id
    if name.startswith("gemini-3"):
        return {
            "thinking_config": types.ThinkingConfig(thinking_level=GEMINI3_THINKING_LEVEL),
            "max_output_tokens": answer_tokens + THINKING_HEADROOM_TOKENS,
        }
    if name.startswith("gemini-2.5"):
        return {
            "thinking_config": types.ThinkingConfig(thinking_budget=GEMINI25_THINKING_BUDGET),
            "max_output_tokens": answer_tokens + GEMINI25_THINKING_BUDGET,
            "temperature": temperature,
            "top_p": 0.95,
        }
    return {"max_output_tokens": answer_tokens, "temperature": temperature, "top_p": 0.95, "top_k": 40}


class GeminiLanguageModel(PromptedLanguageModel):
    """:class:`~shared.contract.ports.LanguageModel` backed by Gemini through ``google.genai``."""

    provider = "gemini"
    label = "Gemini"

    def __init__(self, client: Any, model: str = DEFAULT_GEMINI_MODEL, *, max_sub_queries: int = 5) -> None:
        super().__init__(model, max_sub_queries=max_sub_queries)
        self.client = client

    @classmethod
    def from_settings(cls, settings: Settings, env: Mapping[str, str] | None = None) -> GeminiLanguageModel:
        """API-key mode when ``GOOGLE_API_KEY``/``GEMINI_API_KEY`` is set, else Vertex AI.

        Vertex AI needs ``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION``;
        a missing one is a :class:`ConfigError` naming it. The key is read here,
        when the model is first needed, never at import.
        """
        from google import genai
        from google.genai import types

        env = os.environ if env is None else env
        http_options = types.HttpOptions(
            timeout=60_000,
            retry_options=types.HttpRetryOptions(attempts=3, http_status_codes=[429, 500, 502, 503, 504]),
        )
        api_key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")
        if api_key:
            client = genai.Client(api_key=api_key, http_options=http_options)
        else:
            if not settings.gcp_project:
                raise ConfigError(
                    "RAGBUS_LLM=gemini needs GOOGLE_CLOUD_PROJECT (Vertex AI) or GOOGLE_API_KEY / "
                    "GEMINI_API_KEY (API key mode); set one, or use RAGBUS_LLM=local"
                )
            if not settings.gcp_location:
                raise ConfigError(
                    "RAGBUS_LLM=gemini on Vertex AI needs GOOGLE_CLOUD_LOCATION (e.g. europe-west4); "
                    "set it, or set GOOGLE_API_KEY for API key mode"
                )
            client = genai.Client(
                vertexai=True, project=settings.gcp_project, location=settings.gcp_location,
                http_options=http_options,
            )
        return cls(client, settings.gemini_model, max_sub_queries=settings.max_sub_queries)

    # ------------------------------------------------------------ calls

    def _generate(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        from google.genai import errors, types

        settings = generation_settings(self.model, temperature=temperature, answer_tokens=max_tokens)
        config = types.GenerateContentConfig(
            system_instruction=SYSTEM_INSTRUCTION,
            response_mime_type="application/json" if schema else None,
            response_schema=schema,
            **settings,
        )
        started = time.monotonic()
        try:
            response = self.client.models.generate_content(model=self.model, contents=prompt, config=config)
        except errors.APIError as exc:
            code = int(getattr(exc, "code", None) or 0)
            if code in TRANSIENT_STATUS or code >= 500:
                raise RetryableError(f"Gemini {operation} failed with {code}: {exc}; try again later") from exc
            status = getattr(exc, "status", None) or ""
            detail = getattr(exc, "message", None) or str(exc)
            raise ModelUnusable(
                f"Gemini model {self.model!r} is unusable: {operation} was refused with HTTP {code}"
                f"{' ' + status if status else ''} ({detail}); check RAGBUS_GEMINI_MODEL (a current model "
                f"such as {DEFAULT_GEMINI_MODEL}), the credentials and the project's access to the model",
                model=self.model, status=code, operation=operation,
            ) from exc
        except Exception as exc:
            raise RetryableError(f"Gemini {operation} could not be reached: {exc}") from exc
        usage = getattr(response, "usage_metadata", None)
        finish = _finish_reason(response)
        try:
            text = response.text or ""
        except Exception:  # noqa: BLE001 - a blocked or empty candidate has no text
            text = ""
        self._record_call(
            operation, started=started,
            input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
            # thinking tokens are output tokens: billed, and counted against the limit
            output_tokens=int(getattr(usage, "candidates_token_count", 0) or 0)
            + int(getattr(usage, "thoughts_token_count", 0) or 0),
            temperature=settings.get("temperature"), max_tokens=settings["max_output_tokens"], finish=finish,
            response_model=getattr(response, "model_version", None), cut=finish == "MAX_TOKENS", text=text,
        )
        return text
