"""RAGBUS_LLM=openai's settings: each missing or malformed one is named."""

from __future__ import annotations

import pytest

from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel
from shared.contract.config import Settings, load_settings
from shared.contract.errors import ConfigError
from shared.contract.providers import PROVIDER_NAMES


def test_settings_name_what_is_missing():
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_BASE_URL.*RAGBUS_OPENAI_MODEL"):
        load_settings({"RAGBUS_LLM": "openai"})
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_MODEL"):
        load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})
    with pytest.raises(ConfigError, match="not an http"):
        load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "127.0.0.1:11434",
                       "RAGBUS_OPENAI_MODEL": "m"})
    with pytest.raises(ConfigError, match="RAGBUS_LLM='ollama': use 'local' \\(default\\), ") as refused:
        load_settings({"RAGBUS_LLM": "ollama"})
    assert all(f"'{name}'" in str(refused.value) for name in PROVIDER_NAMES)  # every registered provider
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_BASE_URL"):
        OpenAICompatibleLanguageModel.from_settings(Settings(llm_provider="openai"))


def test_the_model_the_gateway_reports_is_the_configured_providers():
    base = {"RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "RAGBUS_OPENAI_MODEL": "llama3.2"}
    assert load_settings({"RAGBUS_LLM": "openai", **base}).llm_model == "llama3.2"
    assert load_settings({"RAGBUS_LLM": "gemini", **base}).llm_model == Settings().gemini_model
    assert load_settings(base).llm_model is None  # the local provider calls no model
    assert load_settings({"RAGBUS_LLM": "openai", **base, "RAGBUS_OPENAI_TIMEOUT_S": "300"}).openai_timeout_s == 300


def test_a_base_url_with_a_query_or_fragment_is_refused_without_echoing_it():
    # httpx appends the request path after the query (".../v1?key=SECRET/chat/completions"), and a key
    # in the query would be named in every message and log line that shows the server.
    for url in ("https://llm.example.com/v1?key=SECRET", "https://llm.example.com/v1#SECRET"):
        with pytest.raises(ConfigError, match="query or fragment") as refused:
            load_settings({"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": url, "RAGBUS_OPENAI_MODEL": "m"})
        assert "SECRET" not in str(refused.value)


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_the_call_time_limit_must_be_a_positive_number_of_seconds(value):
    base = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "RAGBUS_OPENAI_MODEL": "m"}
    with pytest.raises(ConfigError, match="RAGBUS_OPENAI_TIMEOUT_S"):
        load_settings({**base, "RAGBUS_OPENAI_TIMEOUT_S": value})
