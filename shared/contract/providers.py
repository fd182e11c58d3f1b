"""The registry of language-model providers: the one list ``RAGBUS_LLM`` accepts.

Each :class:`Provider` names its adapter (a module with ``check_settings(settings)`` and a
class with ``from_settings(settings)``, imported only when the provider is chosen), the
setting naming its model, what the eval needs set to run it, the variables it reads, and
what a deploy gives the functions that call it. Derived from it: config's accepted values
and README's row, the runtime's model (bootstrap), the start-up check (readiness),
``ragbus eval``'s providers, and infra/'s generated ``registry.tf``.
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
class Provider:
    name: str
    summary: str  # Markdown, for README's RAGBUS_LLM row and infra's llm_provider description
    adapter: str = ""  # "package.module:Class"; "" for the local model, which the runtime builds itself
    model_setting: str | None = None  # the Settings field naming the model it calls
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
            importlib.import_module(self.adapter.partition(":")[0]).check_settings(settings)


PROVIDERS: tuple[Provider, ...] = (
    Provider("local", "offline, deterministic", deploy_summary="the deterministic stand-in"),
    Provider("openai",
             "any OpenAI-compatible server: Ollama, llama.cpp, vLLM, LM Studio; see "
             "[A local model](#a-local-model-ollama-llamacpp-vllm-lm-studio)",
             adapter="shared.adapters.openai_compatible:OpenAICompatibleLanguageModel", model_setting="openai_model",
             needs_one_of=("RAGBUS_OPENAI_BASE_URL",), unconfigured="RAGBUS_OPENAI_BASE_URL is not set",
             variable_prefixes=("RAGBUS_OPENAI_", "OPENAI_"),
             deploy_variables=(("RAGBUS_OPENAI_BASE_URL", "var.openai_base_url"),
                               ("RAGBUS_OPENAI_MODEL", "var.openai_model"),
                               ("RAGBUS_OPENAI_TIMEOUT_S", "tostring(var.openai_timeout_s)")),
             deploy_secrets=(("RAGBUS_OPENAI_API_KEY", "var.openai_api_key_secret"),),
             deploy_summary="an OpenAI-compatible server the functions can reach (openai_base_url, openai_model, "
                            "openai_api_key_secret, openai_timeout_s)"),
    Provider("gemini",
             "google-genai; `GOOGLE_API_KEY`/`GEMINI_API_KEY`, else Vertex AI with `GOOGLE_CLOUD_PROJECT`, served "
             "from `RAGBUS_GEMINI_LOCATION`",
             adapter="shared.adapters.gcp.gemini:GeminiLanguageModel", model_setting="gemini_model",
             needs_one_of=("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_CLOUD_PROJECT"),
             unconfigured="neither GOOGLE_API_KEY / GEMINI_API_KEY nor GOOGLE_CLOUD_PROJECT is set",
             variable_prefixes=("RAGBUS_GEMINI_", "GOOGLE_", "GEMINI_"),
             # its RAGBUS_GEMINI_* are common to every function (the genai embedder reads the location)
             deploy_roles=("roles/aiplatform.user",),
             deploy_summary="Vertex AI, with the functions' own identities (gemini_model, gemini_location, "
                            "gemini_timeout_s)"),
)

PROVIDER_BY_NAME: dict[str, Provider] = {p.name: p for p in PROVIDERS}
#: The order the eval runs and reports them in: local, the reference, first.
PROVIDER_NAMES: tuple[str, ...] = tuple(PROVIDER_BY_NAME)
