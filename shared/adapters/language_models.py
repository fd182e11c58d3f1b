"""The language model ``RAGBUS_LLM`` names: a provider's adapter from its registry row, or the
offline one over the runtime's own index and embedder; traced when tracing is on."""

from __future__ import annotations

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.ports import LanguageModel
from shared.contract.providers import PROVIDER_BY_NAME
from shared.observability.tracing import TracingLanguageModel


def language_model(settings: Settings, deps: Deps) -> LanguageModel:
    """A served provider's model (its adapter's ``from_settings``), else the local one reading
    ``deps``' index and embedder when first used."""
    provider = PROVIDER_BY_NAME[settings.llm_provider]
    if provider.served:
        model = provider.model_class().from_settings(settings)
    else:
        from shared.adapters.local.llm import LocalLanguageModel

        model = LocalLanguageModel(index=deps.index, embedder=deps.embedder)
    return TracingLanguageModel(model) if settings.tracing else model
