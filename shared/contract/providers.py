"""The registry of language-model providers: the one list ``RAGBUS_LLM`` accepts.

Each :class:`Provider` names its adapter (a class with ``from_settings(settings)`` and
``check_settings(settings)``, imported only when the provider is chosen), the setting naming
its model, the settings it requires and its call budget, what the eval needs set to run it,
the variables it reads, and what a deploy gives the functions that call it. Derived from it:
config's accepted values, docs/configuration.md's row and ``load_settings``' checks (required settings, an
http(s) API base, no key in clear text), the runtime's model (bootstrap), the start-up check
(readiness: the call budget against the function's timeout), ``ragbus eval``'s providers,
and infra/'s generated ``registry.tf`` (per provider its variables, secrets, roles and the
plan-time checks ``functions.tf`` applies) and ``terraform.tfvars.example``'s models section.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TerraformVariable:
    """A variable infra/registry.tf declares for a provider (its model, its key's secret id)."""

    name: str
    description: str
    type: str = "string"
    default: str = '""'  # a Terraform expression


@dataclass(frozen=True)
class Required:
    """A setting the provider cannot run without: ``load_settings`` names it when it is unset,
    and the plan refuses the deploy when its Terraform variable is empty."""

    setting: str  # the Settings field
    hint: str  # what to set it to, e.g. "the server's API base, e.g. http://127.0.0.1:11434/v1"
    terraform: str = ""  # the Terraform variable holding it for a deploy ("var.openai_model"); "" when none


@dataclass(frozen=True)
class CallBudget:
    """The longest one invocation's model use can take: ``timeouts`` times the call time limit
    (the setting ``setting``, Terraform's ``terraform``) plus ``waits_s`` of retry waits. It must
    end before the function calling the model does (readiness and the plan check it)."""

    setting: str  # the Settings field of the time limit, in seconds
    terraform: str  # the Terraform variable holding it ("var.openai_timeout_s")
    timeouts: int
    waits_s: float
    formula: str  # what the timeouts and waits are, for the error ("GET /models and the call, ...")

    def seconds(self, timeout_s: float) -> float:
        return self.timeouts * timeout_s + self.waits_s

    def terraform_seconds(self) -> str:
        return f"{self.timeouts} * {self.terraform} + {self.waits_s:g}"


@dataclass(frozen=True)
class Provider:
    name: str
    summary: str  # Markdown, for docs/configuration.md's RAGBUS_LLM row and infra's llm_provider description
    adapter: str = ""  # "package.module:Class"; "" for the local model, which the runtime builds itself
    model_setting: str | None = None  # the Settings field naming the model it calls
    required: tuple[Required, ...] = ()
    call_budget: CallBudget | None = None
    # an HTTP API: the Settings fields of its base URL (must be http(s), no query; a key goes
    # only over https or to loopback) and of its key (redacted from whatever a server echoes)
    base_url_setting: str | None = None
    key_setting: str | None = None
    # the vendor's standard key variable and the one host it is sent to ("OPENAI_API_KEY", "api.openai.com")
    standard_key: tuple[str, str] | None = None
    # the eval runs it when one of these variables is set; otherwise it says ``unconfigured``
    needs_one_of: tuple[str, ...] = ()
    unconfigured: str = ""
    # the variables it reads, by prefix (the eval hands them to its runs, nothing else)
    variable_prefixes: tuple[str, ...] = ()
    # a deploy (infra/registry.tf): variables of the model-calling functions, as Terraform
    # expressions; secrets (variable -> Terraform expression naming the Secret Manager id);
    # project roles the model-calling functions need
    deploy_variables: tuple[tuple[str, str], ...] = ()
    deploy_secrets: tuple[tuple[str, str], ...] = ()
    deploy_roles: tuple[str, ...] = ()
    deploy_summary: str = ""  # plain text, for infra's llm_provider description
    terraform_variables: tuple[TerraformVariable, ...] = ()  # declared in infra/registry.tf
    # terraform.tfvars.example's lines for it (variable, example value as HCL, a comment), commented
    # out unless it is the deploy's default provider
    tfvars: tuple[tuple[str, str, str], ...] = ()

    @property
    def served(self) -> bool:
        """A model behind an API (not the offline one)."""
        return bool(self.adapter)

    def model_class(self) -> Any:
        module, _, name = self.adapter.partition(":")
        return getattr(importlib.import_module(module), name)

    def check_settings(self, settings: Any) -> None:
        """What the adapter would refuse at its first call, without building a client."""
        if self.served:
            self.model_class().check_settings(settings)

    def key_setting_variable(self) -> str | None:
        """The deploy's variable carrying its key (the secret's environment variable), if any."""
        return next((variable for variable, _ in self.deploy_secrets), None)


PROVIDERS: tuple[Provider, ...] = (
    Provider("local", "offline, deterministic", deploy_summary="the deterministic stand-in"),
    Provider("openai",
             "any OpenAI-compatible server: Ollama, llama.cpp, vLLM, LM Studio; see "
             "[A local model](models.md#a-local-model-ollama-llamacpp-vllm-lm-studio)",
             adapter="shared.adapters.openai_compatible:OpenAICompatibleLanguageModel", model_setting="openai_model",
             required=(Required("openai_base_url", "the server's API base, e.g. http://127.0.0.1:11434/v1 for Ollama, "
                                "http://127.0.0.1:8080/v1 for llama.cpp's llama-server", "var.openai_base_url"),
                       Required("openai_model", "a model the server serves, e.g. llama3.2 for Ollama",
                                "var.openai_model")),
             # a cold start's GET /models and the call, each up to the time limit, and two backoffs
             # of at most 10 s (shared/adapters/http_model.py: ATTEMPTS, MAX_RETRY_AFTER_S)
             call_budget=CallBudget("openai_timeout_s", "var.openai_timeout_s", 2, 20.0,
                                    "GET /models and the call, each up to the time limit, plus 2 backoffs of up "
                                    "to 10 s"),
             base_url_setting="openai_base_url", key_setting="openai_api_key",
             standard_key=("OPENAI_API_KEY", "api.openai.com"),
             needs_one_of=("RAGBUS_OPENAI_BASE_URL",), unconfigured="RAGBUS_OPENAI_BASE_URL is not set",
             variable_prefixes=("RAGBUS_OPENAI_", "OPENAI_"),
             deploy_variables=(("RAGBUS_OPENAI_BASE_URL", "var.openai_base_url"),
                               ("RAGBUS_OPENAI_MODEL", "var.openai_model"),
                               ("RAGBUS_OPENAI_TIMEOUT_S", "tostring(var.openai_timeout_s)")),
             deploy_secrets=(("RAGBUS_OPENAI_API_KEY", "var.openai_api_key_secret"),),
             deploy_summary="an OpenAI-compatible server the functions can reach (openai_base_url, openai_model, "
                            "openai_api_key_secret, openai_timeout_s)",
             tfvars=(("openai_base_url", '"https://llm.example.com/v1"', "reachable from the functions"),
                     ("openai_model", '"llama3.2"', "a model it serves"),
                     ("openai_api_key_secret", '"ragbus-openai-key"', "Secret Manager id of its key, if it wants one"),
                     ("openai_timeout_s", "60", ""))),
    Provider("gemini",
             "google-genai; `GOOGLE_API_KEY`/`GEMINI_API_KEY`, else Vertex AI with `GOOGLE_CLOUD_PROJECT`, served "
             "from `RAGBUS_GEMINI_LOCATION`",
             adapter="shared.adapters.gcp.gemini:GeminiLanguageModel", model_setting="gemini_model",
             # google-genai's 3 attempts of the time limit and its backoffs (at most 2 + 3 s;
             # shared/adapters/gcp/gemini.py: retry_budget_s)
             call_budget=CallBudget("gemini_timeout_s", "var.gemini_timeout_s", 3, 5.0,
                                    "3 attempts of the time limit plus backoffs"),
             needs_one_of=("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT"),
             unconfigured="neither GOOGLE_API_KEY / GEMINI_API_KEY nor GOOGLE_CLOUD_PROJECT is set",
             variable_prefixes=("RAGBUS_GEMINI_", "GOOGLE_", "GEMINI_"),
             # its RAGBUS_GEMINI_* are common to every function (the genai embedder reads the location)
             deploy_roles=("roles/aiplatform.user",),
             deploy_summary="Vertex AI, with the functions' own identities (gemini_model, gemini_location, "
                            "gemini_timeout_s)",
             tfvars=(("gemini_model", '""', "empty: the code's default (DEFAULT_GEMINI_MODEL), kept current there"),
                     ("gemini_location", '""', 'empty: "eu" for a europe-* region, else "global"; per model: '
                                              "shared/contract/gemini_locations.json"))),
)

PROVIDER_BY_NAME: dict[str, Provider] = {p.name: p for p in PROVIDERS}
#: The order the eval runs and reports them in: local, the reference, first.
PROVIDER_NAMES: tuple[str, ...] = tuple(PROVIDER_BY_NAME)
