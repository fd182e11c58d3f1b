"""The Gemini language model (google-genai), on Vertex AI or with an API key.

Each operation is one ``generate_content`` call. The answer budgets
(:mod:`shared.query.prompts`) are sent according to the model's family, looked up
in :data:`FAMILIES` (:func:`model_family`): Gemini 3 models think before they
answer and count those thinking tokens inside ``max_output_tokens``, so they get
an explicit ``thinking_level`` and a limit of answer budget plus thinking
headroom, and no ``temperature``/``top_p``/``top_k`` (deprecated on Gemini 3);
Gemini 2.5 gets an explicit ``thinking_budget`` added to the limit; Gemini 2.0
and 1.5 get the sampling parameters. A model of no known family (a newer one,
say) gets the safe settings: no sampling parameters, thinking at the low level
with the headroom, and thinking left out if the service refuses it for that
model.

Vertex AI serves the model from ``RAGBUS_GEMINI_LOCATION`` (default ``global``,
``eu`` for a ``europe-*`` region), not from the functions' region. Where each model
is served is one table (:mod:`shared.contract.model_locations`); a location the
table says does not serve the model is refused at start-up, naming the model and
the locations it is served from; a model the table does not list is warned about
at a location other than ``global``.

An API refusal of the request itself (400, 401, 403, 404: unknown or retired
model, a model the location does not serve, invalid argument, no permission) is
:class:`~shared.contract.errors.ModelUnusable`, naming the model and the location:
the stages end the query ``failed`` instead of falling back. 429, 5xx, transport
failures and timeouts are retried by the SDK (:data:`ATTEMPTS` in all, each
limited to ``RAGBUS_GEMINI_TIMEOUT_S``; the whole must fit the function's timeout,
:func:`retry_budget_s`), then raised as :class:`~shared.contract.errors.RetryableError`
for the stage to fall back on.

The prompts, the context delimiters, the reply schemas and the reading of
replies are :mod:`shared.query.prompts`, shared with every provider that talks
to a real model; this module is the transport. Transform, grade and synthesis
ask for JSON with a response schema (``response_json_schema``: the schemas are
plain JSON Schema); replies are parsed robustly anyway
(:mod:`shared.query.grading`) because a model can still return fenced, wrapped
or truncated JSON.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.adapters.deadline_http import MAX_REPLY_BYTES, DeadlineTransport, one_deadline
from shared.contract.config import (
    DEFAULT_GEMINI_MODEL,
    Settings,
    require_provider_budget,
)
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.contract.model_locations import model_id, served
from shared.contract.providers import PROVIDER_BY_NAME
from shared.contract.redaction import redact
from shared.query.prompts import SYSTEM_INSTRUCTION, PromptedLanguageModel

log = logging.getLogger("ragbus.llm.gemini")

#: Gemini 3: how much the model may think. LOW is offered by every Gemini 3 Flash, Flash-Lite
#: and Pro model (MINIMAL is not, e.g. on gemini-3.8-flash or the Pro models; Vertex AI
#: "Thinking" page, thinking_level table); rewriting, grading and answering from given
#: contexts need little reasoning, and every level above costs latency and tokens.
GEMINI3_THINKING_LEVEL = "LOW"
#: Room for thinking tokens, added to each answer budget on models that think: thinking
#: counts against max_output_tokens, and a limit without this room ends the reply with
#: finishReason MAX_TOKENS before the answer starts.
THINKING_HEADROOM_TOKENS = 4096
#: Gemini 2.5: an explicit thinking budget (its Flash models accept 0..24576, Flash-Lite
#: 512..24576, Pro 128..32768 and cannot turn thinking off), the size of the room added for it.
GEMINI25_THINKING_BUDGET = 1024
#: Statuses that mean "try again later"; every other 4xx is a refusal of the request itself.
TRANSIENT_STATUS = frozenset({408, 429})
#: HTTP attempts per call (the SDK's HttpRetryOptions counts the first one), and the SDK's
#: backoff between them: initial_delay * 2**n plus up to JITTER_S, capped at MAX_DELAY_S.
ATTEMPTS = 3
INITIAL_DELAY_S = 1.0
MAX_DELAY_S = 4.0
JITTER_S = 1.0
RETRY_STATUS = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class ModelFamily:
    """What a family of Gemini models accepts: how to control thinking and sampling.

    ``thinking``: ``"level"`` (thinking_level, Gemini 3 and later), ``"budget"``
    (thinking_budget, Gemini 2.5) or ``"none"``. ``sampling``: whether
    temperature/top_p/top_k are sent. ``known`` is False for the safe settings given
    to a model of no listed family. Where a model is served is not a family's
    property: :mod:`shared.contract.model_locations` holds it per model.
    """

    name: str
    pattern: re.Pattern[str]
    thinking: str
    sampling: bool
    known: bool = True

    def matches(self, model_id: str) -> bool:
        return self.pattern.fullmatch(model_id) is not None


#: The families ragbus knows, from Google's model pages and the Vertex AI "Thinking" and
#: "Deployments and endpoints" pages (November 2026). Matched against the model id (a Vertex
#: resource name's last part), optionally with a -preview or version suffix.
FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily("Gemini 3", re.compile(r"gemini-3(?:\.\d+)?-(?:flash-lite|flash|pro)(?:-[a-z0-9-]+)?"),
                thinking="level", sampling=False),
    ModelFamily("Gemini 2.5", re.compile(r"gemini-2\.5-(?:flash-lite|flash|pro)(?:-[a-z0-9-]+)?"),
                thinking="budget", sampling=True),
    ModelFamily("Gemini 2.0 / 1.5", re.compile(r"gemini-(?:2\.0|1\.5)-(?:flash-lite|flash|pro)(?:-[a-z0-9-]+)?"),
                thinking="none", sampling=True),
)
#: Any other model: no sampling parameters (deprecated on thinking models), low thinking with
#: room for it in the output cap (dropped if the service says the model cannot take it).
UNKNOWN_FAMILY = ModelFamily("unknown", re.compile(r".*"), thinking="level", sampling=False, known=False)


def model_family(model: str) -> ModelFamily:
    name = model_id(model)
    return next((family for family in FAMILIES if family.matches(name)), UNKNOWN_FAMILY)


def _finish_reason(response: Any) -> str | None:
    candidates = getattr(response, "candidates", None) or []
    reason = getattr(candidates[0], "finish_reason", None) if candidates else None
    return getattr(reason, "value", None) or (str(reason) if reason else None)


def generation_settings(
    model: str, *, temperature: float, answer_tokens: int, thinking: bool = True,
    thinking_level: str = GEMINI3_THINKING_LEVEL,
) -> dict[str, Any]:
    """``GenerateContentConfig`` fields for ``model``: thinking, output limit, sampling.

    ``thinking=False`` leaves the thinking config out (a model of unknown family that
    refused it); the headroom stays, in case the model thinks anyway. ``thinking_level``
    is the cost lever of Gemini 3 (thinking tokens are billed as output; docs/capacity.md).
    """
    from google.genai import types

    family = model_family(model)
    settings: dict[str, Any] = {"max_output_tokens": answer_tokens}
    if family.thinking == "level":
        if thinking:
            settings["thinking_config"] = types.ThinkingConfig(thinking_level=thinking_level)
        settings["max_output_tokens"] = answer_tokens + THINKING_HEADROOM_TOKENS
    elif family.thinking == "budget":
        settings["thinking_config"] = types.ThinkingConfig(thinking_budget=GEMINI25_THINKING_BUDGET)
        settings["max_output_tokens"] = answer_tokens + GEMINI25_THINKING_BUDGET
    if family.sampling:
        settings.update(temperature=temperature, top_p=0.95)
        if family.thinking == "none":
            settings["top_k"] = 40
    return settings


def retry_budget_s(timeout_s: float) -> float:
    """The longest one call can take: every attempt timing out, plus the longest backoffs between them."""
    backoffs = sum(min(MAX_DELAY_S, INITIAL_DELAY_S * 2**n) + JITTER_S for n in range(ATTEMPTS - 1))
    return ATTEMPTS * timeout_s + backoffs


def check_settings(settings: Settings, env: Mapping[str, str] | None = None) -> None:
    """What :meth:`GeminiLanguageModel.from_settings` refuses, without a client (start-up checks):
    a retry budget the function cannot hold, a Vertex location that does not serve the model."""
    env = os.environ if env is None else env
    require_provider_budget(settings, PROVIDER_BY_NAME["gemini"])  # retry_budget_s, as its row states it
    if not (env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")):
        check_location(settings.gemini_model, settings.gemini_location)


def check_location(model: str, location: str) -> None:
    """Refuse a Vertex location the table says does not serve ``model``; warn for an unlisted model."""
    row = served(model)
    serves = row.serves(location)
    if serves is False:
        raise ConfigError(
            f"RAGBUS_GEMINI_LOCATION={location!r}: Vertex AI serves {row.model!r} only from "
            f"{row.described()} (elsewhere it answers 404; {row.source}); set RAGBUS_GEMINI_LOCATION to "
            f"{' or '.join(repr(loc) for loc in row.locations or ())}, or choose a model served from {location!r}"
        )
    if serves is None and location != "global":
        log.warning("Gemini model %r is not in ragbus's location table (shared/contract/gemini_locations.json), "
                    "so whether %r serves it is unchecked: a 404 will say so", model, location)


class GeminiLanguageModel(PromptedLanguageModel):
    """:class:`~shared.contract.ports.LanguageModel` backed by Gemini through ``google.genai``.

    ``location`` is where the model is served (a Vertex AI location, or "the Gemini API"),
    for messages.
    """

    check_settings = staticmethod(check_settings)  # the registry's start-up check (Provider.check_settings)

    provider = "gemini"
    label = "Gemini"

    def __init__(
        self, client: Any, model: str = DEFAULT_GEMINI_MODEL, *, max_sub_queries: int = 5,
        location: str | None = None, call_budget_s: float | None = None,
        thinking_level: str = GEMINI3_THINKING_LEVEL,
    ) -> None:
        super().__init__(model, max_sub_queries=max_sub_queries)
        self.client = client
        self.thinking_level = thinking_level
        # One deadline for a whole call, the SDK's retries included (its timeout is per socket read).
        self.call_budget_s = call_budget_s
        self.location = location or _client_location(client)
        self.family = model_family(model)
        # A model of unknown family that refuses thinking_level is asked without it from then on.
        self._send_thinking = True
        self._thinking_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, env: Mapping[str, str] | None = None) -> GeminiLanguageModel:
        """API-key mode when ``GOOGLE_API_KEY``/``GEMINI_API_KEY`` is set, else Vertex AI.

        Vertex AI needs ``GOOGLE_CLOUD_PROJECT``; the model is served from
        ``RAGBUS_GEMINI_LOCATION`` (default ``global``), checked against the model's
        family. The whole retry budget must fit the function's timeout
        (:func:`~shared.contract.config.require_call_budget`). A missing or wrong
        setting is a :class:`ConfigError` naming it. The key is read here, when the
        model is first needed, never at import.
        """
        from google import genai
        from google.genai import types

        env = os.environ if env is None else env
        check_settings(settings, env)
        http_options = types.HttpOptions(
            timeout=int(settings.gemini_timeout_s * 1000),  # milliseconds, per attempt
            client_args={"transport": DeadlineTransport()},  # a whole-call deadline (call_budget_s)
            retry_options=types.HttpRetryOptions(
                attempts=ATTEMPTS, initial_delay=INITIAL_DELAY_S, max_delay=MAX_DELAY_S, exp_base=2,
                jitter=JITTER_S, http_status_codes=list(RETRY_STATUS),
            ),
        )
        api_key = env.get("GOOGLE_API_KEY") or env.get("GEMINI_API_KEY")
        if api_key:
            client = genai.Client(api_key=api_key, http_options=http_options)
            location = "the Gemini API"
        else:
            if not settings.gcp_project:
                raise ConfigError(
                    "RAGBUS_LLM=gemini needs GOOGLE_CLOUD_PROJECT (Vertex AI) or GOOGLE_API_KEY / "
                    "GEMINI_API_KEY (API key mode); set one, or use RAGBUS_LLM=local"
                )
            location = settings.gemini_location
            # enterprise= is google-genai's current name for the legacy vertexai= flag
            client = genai.Client(
                enterprise=True, project=settings.gcp_project, location=location, http_options=http_options,
            )
        return cls(client, settings.gemini_model, max_sub_queries=settings.max_sub_queries, location=location,
                   # the sockets' share of retry_budget_s: the SDK's backoffs come on top
                   call_budget_s=ATTEMPTS * settings.gemini_timeout_s)

    # ------------------------------------------------------------ calls

    def _generate(
        self, operation: str, prompt: str, *, temperature: float, max_tokens: int, schema: dict[str, Any] | None
    ) -> str:
        from google.genai import errors

        started = time.monotonic()
        thinking = self._send_thinking
        settings = generation_settings(self.model, temperature=temperature, answer_tokens=max_tokens, thinking=thinking,
                                       thinking_level=self.thinking_level)
        try:
            response = self._call(prompt, schema, settings)
        except errors.APIError as exc:
            if not (thinking and self._refused_thinking(exc)):
                raise self._failure(operation, exc) from exc
            with self._thinking_lock:
                self._send_thinking = False
            log.warning("Gemini model %r refused thinking_level (%s); asking without it from now on",
                        self.model, redact(str(getattr(exc, "message", None) or exc)))
            settings = generation_settings(self.model, temperature=temperature, answer_tokens=max_tokens,
                                           thinking=False)
            try:
                response = self._call(prompt, schema, settings)
            except errors.APIError as again:
                raise self._failure(operation, again) from again
            except Exception as again:
                raise RetryableError(f"Gemini {operation} could not be reached: {redact(str(again))}") from again
        except Exception as exc:
            raise RetryableError(f"Gemini {operation} could not be reached: {redact(str(exc))}") from exc
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

    def _call(self, prompt: str, schema: dict[str, Any] | None, settings: dict[str, Any]) -> Any:
        if self.call_budget_s is not None:
            with one_deadline(self.call_budget_s, max_bytes=MAX_REPLY_BYTES):
                return self._request(prompt, schema, settings)
        return self._request(prompt, schema, settings)

    def _request(self, prompt: str, schema: dict[str, Any] | None, settings: dict[str, Any]) -> Any:
        from google.genai import types

        config = types.GenerateContentConfig(
            system_instruction=SYSTEM_INSTRUCTION,
            response_mime_type="application/json" if schema else None,
            # the SDK's current field for a plain JSON Schema (response_schema is its OpenAPI subset)
            response_json_schema=schema,
            **settings,
        )
        return self.client.models.generate_content(model=self.model, contents=prompt, config=config)

    def _refused_thinking(self, exc: Exception) -> bool:
        """A 400 about thinking, for a model whose family is not known to take it."""
        code = int(getattr(exc, "code", None) or 0)
        detail = str(getattr(exc, "message", None) or exc).lower()
        return not self.family.known and code == 400 and "thinking" in detail

    def _failure(self, operation: str, exc: Exception) -> Exception:
        code = int(getattr(exc, "code", None) or 0)
        if code in TRANSIENT_STATUS or code >= 500:
            return RetryableError(f"Gemini {operation} failed with {code}: {redact(str(exc))}; try again later")
        status = getattr(exc, "status", None) or ""
        detail = redact(str(getattr(exc, "message", None) or exc))  # a proxy may quote the key
        where = f"at {self.location}" if self.location == "the Gemini API" else f"at Vertex AI location {self.location!r}"
        hint = (f"check RAGBUS_GEMINI_MODEL (a current model such as {DEFAULT_GEMINI_MODEL})"
                + (", RAGBUS_GEMINI_LOCATION (Gemini 3 is served from global, us and eu only)"
                   if self.location != "the Gemini API" else "")
                + ", the credentials and the project's access to the model")
        return ModelUnusable(
            f"Gemini model {self.model!r} {where} is unusable: {operation} was refused with HTTP {code}"
            f"{' ' + status if status else ''} ({detail}); {hint}",
            model=self.model, status=code, operation=operation,
        )


def _client_location(client: Any) -> str:
    """The location a ready client calls (for messages): its Vertex location, or the Gemini API."""
    api = getattr(client, "_api_client", None)
    if getattr(client, "vertexai", False):
        return str(getattr(api, "location", None) or "unknown")
    return "the Gemini API"
