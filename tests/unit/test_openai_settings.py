"""RAGBUS_LLM=openai's settings: each missing or malformed one is named."""

from __future__ import annotations

import pytest

from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
from shared.contract.config import Settings, load_settings
from shared.contract.errors import ConfigError


def test_settings_name_what_is_missing():
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_BASE_URL.*RAGBUS_OPENAI_MODEL"):
        load_settings({"RAGBUS_LLM": "openai"})
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_MODEL"):
        load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    with pytest.raises(ConfigError, match="not an http"):
        load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "127.0.0.1:11434",
                       "RAGBUS_OPENAI_MODEL": "m"})
    with pytest.raises(ConfigError, match="'local' \\(default\\), 'gemini' or 'openai'"):
        load_settings({"RAGBUS_LLM": "ollama"})
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_BASE_URL"):
        OpenAICompatibleLanguageModel.from_settings(Settings(llm_provider="openai"))


def test_the_model_the_gateway_reports_is_the_configured_providers():
    base = {"RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "RAGBUS_OPENAI_MODEL": "llama3.2"}
    assert load_settings({"RAGBUS_LLM": "openai", **base}).llm_model == "llama3.2"
    assert load_settings({"RAGBUS_LLM": "gemini", **base}).llm_model == Settings().gemini_model
    assert load_settings(base).llm_model is None  # the local provider calls no model
    assert load_settings({"RAGBUS_LLM": "openai", **base, "RAGBUS_OPENAI_TIMEOUT_S": "300"}).openai_timeout_s == 300
