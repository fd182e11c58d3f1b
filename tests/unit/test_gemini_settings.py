"""Gemini's own location, its settings by model family, and model retry budgets that fit the function."""

from __future__ import annotations

import logging

import pytest

from shared.adapters.gcp import gemini
from shared.adapters.gcp.gemini import (
    GEMINI25_THINKING_BUDGET,
    THINKING_HEADROOM_TOKENS,
    check_location,
    generation_settings,
    model_family,
    retry_budget_s,
)
from shared.contract import model_locations
from shared.contract.config import DEFAULT_GEMINI_MODEL, Settings, load_settings
from shared.contract.errors import ConfigError
from tests.unit.test_infra import _default, _local, _resource

pytestmark = pytest.mark.unit


# ------------------------------------------------------------ location


def test_gemini_has_its_own_location_default_global_and_eu_for_an_eu_region():
    settings = load_settings({"GOOGLE_CLOUD_LOCATION": "us-central1"})
    assert (settings.gemini_location, settings.gcp_location) == ("global", "us-central1")
    assert load_settings({}).gemini_location == "global"
    # an EU deployment keeps Gemini's processing in the EU multi-region unless told otherwise
    assert load_settings({"GOOGLE_CLOUD_LOCATION": "europe-west4"}).gemini_location == "eu"
    assert load_settings({"GOOGLE_CLOUD_LOCATION": "europe-west4", "RAGBUS_GEMINI_LOCATION": "global"}
                         ).gemini_location == "global"
    assert load_settings({"RAGBUS_GEMINI_LOCATION": " EU "}).gemini_location == "eu"
    assert load_settings({"RAGBUS_GEMINI_LOCATION": "us-central1"}).gemini_location == "us-central1"
    for bad in ("europe", "https://aiplatform.googleapis.com", "global/us"):
        with pytest.raises(ConfigError, match="RAGBUS_GEMINI_LOCATION=.*not a Vertex AI location"):
            load_settings({"RAGBUS_GEMINI_LOCATION": bad})


@pytest.mark.parametrize(("model", "location"), [
    ("gemini-3.1-pro-preview", "eu"),
    ("gemini-3.1-pro-preview", "us"),
    ("projects/p/locations/global/publishers/google/models/gemini-3-pro-preview", "eu"),
    ("gemini-3.9-flash-preview", "us"),  # an unlisted preview model: the preview rule
    (DEFAULT_GEMINI_MODEL, "europe-west4"),
])
def test_a_location_that_does_not_serve_the_model_is_refused_naming_the_model_and_its_locations(model, location):
    row = model_locations.served(model)
    with pytest.raises(ConfigError) as refused:
        check_location(model, location)
    message = str(refused.value)
    assert f"RAGBUS_GEMINI_LOCATION={location!r}" in message and repr(row.model) in message
    assert f"only from {', '.join(row.locations)}" in message


def test_the_locations_that_serve_a_model_pass_and_an_unlisted_model_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="ragbus.llm.gemini"):
        for location in ("global", "us", "eu"):
            check_location(DEFAULT_GEMINI_MODEL, location)
            check_location(f"{DEFAULT_GEMINI_MODEL}-001", location)  # a version suffix is the same model
        check_location("gemini-3.1-pro-preview", "global")
        check_location("gemini-4-argon", "global")
        assert not caplog.text
        check_location("gemini-2.5-flash", "europe-west4")  # unlisted (retired): let through, warned
    assert "not in ragbus's location table" in caplog.text


def test_the_location_table_names_its_sources_and_the_default_model():
    table = model_locations.TABLE
    assert table["default_model"] == DEFAULT_GEMINI_MODEL  # the plan's check reads it from here
    for model, row in table["models"].items():
        assert row["source"] and set(row["locations"]) <= {"global", "us", "eu"}, model
    assert model_locations.served(DEFAULT_GEMINI_MODEL).serves(model_locations.EU_DEFAULT_LOCATION)
    assert model_locations.default_location("europe-north1") == "eu"
    assert model_locations.default_location("us-east1") == model_locations.default_location(None) == "global"


def test_the_plan_reads_the_same_table_and_defaults_eu_for_an_eu_region():
    functions = _local("gemini_table")
    assert "shared/contract/gemini_locations.json" in functions
    assert 'startswith(var.region, "europe-")' in _local("gemini_location")
    assert "local.gemini_table.eu_default.location" in _local("gemini_location")
    body = _resource("google_cloudfunctions2_function", "function")
    conditions = " ".join(p["condition"] for p in body["lifecycle"][0]["precondition"])
    assert "local.gemini_location_served" in conditions
    assert _default("gemini_location") == ""


# ------------------------------------------------------------ families


@pytest.mark.parametrize(("model", "family"), [
    ("gemini-3.8-flash", "Gemini 3"),
    ("gemini-3.5-flash-lite", "Gemini 3"),
    ("gemini-3.1-pro-preview", "Gemini 3"),
    ("projects/p/locations/eu/publishers/google/models/gemini-3.7-flash", "Gemini 3"),
    ("gemini-2.5-pro", "Gemini 2.5"),
    ("gemini-2.5-flash-lite", "Gemini 2.5"),
    ("gemini-2.0-flash-001", "Gemini 2.0 / 1.5"),
    ("gemini-4-argon", "unknown"),
    ("gemini-30-flash", "unknown"),  # not a Gemini 3 model, whatever its prefix
    ("gemma-4-26b-it", "unknown"),
])
def test_the_family_comes_from_the_table_not_a_name_prefix(model, family):
    assert model_family(model).name == family


def test_each_family_gets_the_settings_it_understands():
    g3 = generation_settings("gemini-3.8-flash", temperature=0.2, answer_tokens=300)
    assert g3["thinking_config"].thinking_level.value == "LOW"
    assert g3["max_output_tokens"] == 300 + THINKING_HEADROOM_TOKENS and "temperature" not in g3
    g25 = generation_settings("gemini-2.5-pro", temperature=0.2, answer_tokens=300)
    assert g25["thinking_config"].thinking_budget == GEMINI25_THINKING_BUDGET
    assert (g25["max_output_tokens"], g25["temperature"], g25["top_p"]) == (300 + GEMINI25_THINKING_BUDGET, 0.2, 0.95)
    assert "top_k" not in g25
    old = generation_settings("gemini-2.0-flash", temperature=0.2, answer_tokens=300)
    assert old == {"max_output_tokens": 300, "temperature": 0.2, "top_p": 0.95, "top_k": 40}
    unknown = generation_settings("gemini-4-argon", temperature=0.2, answer_tokens=300)
    assert not {"temperature", "top_p", "top_k"} & set(unknown)
    assert unknown["thinking_config"].thinking_level.value == "LOW"
    assert unknown["max_output_tokens"] == 300 + THINKING_HEADROOM_TOKENS
    without = generation_settings("gemini-4-argon", temperature=0.2, answer_tokens=300, thinking=False)
    assert without == {"max_output_tokens": 300 + THINKING_HEADROOM_TOKENS}


# ------------------------------------------------------------ retry budgets


def test_the_gemini_budget_counts_every_attempt_and_backoff():
    assert gemini.ATTEMPTS == 3
    # two backoffs: 1 s and 2 s, each plus up to 1 s of jitter
    assert retry_budget_s(40.0) == 3 * 40.0 + (1 + 1) + (2 + 1) == 125.0
    assert retry_budget_s(60.0) > 150.0  # the old 60 s timeout outlasted the transformer and grader


def test_the_default_budgets_fit_every_model_function_and_plan_checks_the_same():
    from shared.contract.providers import PROVIDER_BY_NAME

    functions = _local("functions")
    model_timeouts = [int(f["timeout"]) for f in functions.values() if f["model"]]
    assert model_timeouts and min(model_timeouts) == 150
    gemini_default = _default("gemini_timeout_s")
    assert gemini_default == Settings().gemini_timeout_s
    assert all(retry_budget_s(gemini_default) < t for t in model_timeouts)
    openai_budget = PROVIDER_BY_NAME["openai"].call_budget
    assert all(openai_budget.seconds(_default("openai_timeout_s")) < t for t in model_timeouts)
    body = _resource("google_cloudfunctions2_function", "function")
    conditions = " ".join(p["condition"] for p in body["lifecycle"][0]["precondition"])
    assert "local.provider_checks[var.llm_provider].budget_s < each.value.timeout" in conditions
    assert _local("provider_checks")["gemini"]["budget_s"] == "${3 * var.gemini_timeout_s + 5}"
    for timeout in (10.0, 40.0, 47.0):  # the plan's formula is the code's
        assert PROVIDER_BY_NAME["gemini"].call_budget.seconds(timeout) == 3 * timeout + 5 == retry_budget_s(timeout)


def test_the_functions_get_the_gemini_location_and_timeout():
    env = str(_local("common_env"))
    assert "RAGBUS_GEMINI_LOCATION = local.gemini_location" in " ".join(env.split())
    assert "RAGBUS_GEMINI_TIMEOUT_S = tostring(var.gemini_timeout_s)" in " ".join(env.split())


@pytest.mark.parametrize(("timeout", "ok"), [(60.0, True), (66.0, False)])
def test_the_openai_budget_is_checked_at_start_up_in_the_cloud(timeout, ok):
    from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel

    settings = Settings(runtime="gcp", function_timeout_s=150.0, llm_provider="openai",
                        openai_base_url="https://llm.example.com/v1", openai_model="m", openai_timeout_s=timeout)
    if ok:
        OpenAICompatibleLanguageModel.from_settings(settings).close()
        return
    with pytest.raises(ConfigError, match=r"152 s .*RAGBUS_OPENAI_TIMEOUT_S=66.*150 s"):
        OpenAICompatibleLanguageModel.from_settings(settings)
    OpenAICompatibleLanguageModel.from_settings(settings.with_(function_timeout_s=None)).close()  # no function


def test_the_default_embedding_budget_fits_every_function_that_embeds():
    from shared.adapters.gcp.genai_embedder import DEFAULT_TIMEOUT_S, GenAiEmbedder

    timeouts = {name: int(f["timeout"]) for name, f in _local("functions").items() if f["embeds"]}
    assert {"retriever", "synthesizer"} <= set(timeouts)
    budget = GenAiEmbedder(None).retry_budget_s(DEFAULT_TIMEOUT_S)
    assert all(budget < t for t in timeouts.values()), (budget, timeouts)


def test_gemini_alone_no_longer_needs_the_functions_region():
    from shared.contract.config import require_gcp

    base = {"RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "p", "RAGBUS_BUCKET": "b"}
    require_gcp(load_settings({**base, "RAGBUS_LLM": "gemini"}))  # served from global by default
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_LOCATION \\(the region of the Vector Search index\\)"):
        require_gcp(load_settings({**base, "RAGBUS_INDEX": "vertex", "RAGBUS_VERTEX_INDEX": "i",
                                   "RAGBUS_VERTEX_ENDPOINT": "e", "RAGBUS_VERTEX_DEPLOYED_INDEX": "d"}))


# ------------------------------------------------- refused when the function starts


CLOUD = {"RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "p", "RAGBUS_BUCKET": "b", "RAGBUS_LLM": "gemini",
         "GOOGLE_CLOUD_LOCATION": "europe-west4", "K_SERVICE": "ragbus-stage"}


@pytest.fixture
def vertex(monkeypatch):
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # a function reaches Vertex AI with its identity


@pytest.mark.parametrize(("stage", "env", "reason"), [
    ("transformer", {"RAGBUS_GEMINI_LOCATION": "europe-west4", "RAGBUS_ACK_DEADLINE_S": "150"},
     "RAGBUS_GEMINI_LOCATION='europe-west4'"),
    ("grader", {"RAGBUS_GEMINI_TIMEOUT_S": "60", "RAGBUS_ACK_DEADLINE_S": "150"}, "185 s"),
    ("synthesizer", {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "https://llm.example.com/v1",
                     "RAGBUS_OPENAI_MODEL": "m", "RAGBUS_OPENAI_TIMEOUT_S": "90", "RAGBUS_ACK_DEADLINE_S": "180"},
     "RAGBUS_LLM=openai: .*200 s"),
    ("retriever", {"RAGBUS_EMBEDDER": "genai", "RAGBUS_EMBED_TIMEOUT_S": "60", "RAGBUS_ACK_DEADLINE_S": "120"},
     "RAGBUS_EMBEDDER=genai: .*247 s"),
    ("indexer", {"RAGBUS_EMBEDDER": "genai", "RAGBUS_EMBED_MODEL": "gemini-embedding-2",
                 "RAGBUS_EMBED_LOCATION": "europe-west4", "RAGBUS_ACK_DEADLINE_S": "300"},
     "gemini-embedding-2 only from eu, global, us"),
])
def test_a_function_whose_model_cannot_work_refuses_to_start(vertex, monkeypatch, stage, env, reason):
    from shared.runtime.functions import check_function_at_start

    for name, value in env.items():  # the embedder reads its own variables from the process
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=f"ragbus {stage} function is not ready: .*{reason}"):
        check_function_at_start(stage, {**CLOUD, **env, "FUNCTION_TARGET": stage})


@pytest.mark.parametrize(("stage", "timeout"), [("transformer", "150"), ("grader", "150"), ("synthesizer", "180"),
                                                ("retriever", "120"), ("indexer", "300")])
def test_the_defaults_start_every_model_function(vertex, monkeypatch, stage, timeout):
    from shared.runtime.functions import check_function_at_start

    monkeypatch.delenv("RAGBUS_EMBED_TIMEOUT_S", raising=False)
    env = {**CLOUD, "RAGBUS_EMBEDDER": "genai", "RAGBUS_ACK_DEADLINE_S": timeout, "FUNCTION_TARGET": stage}
    check_function_at_start(stage, env)  # no SystemExit


def test_plan_accepts_the_locations_the_code_accepts():
    import re

    from shared.contract import config
    from tests.unit.test_infra import _tf

    (rule,) = [v["condition"] for v in _tf()["variable"]["gemini_location"]["validation"]]
    assert 'var.gemini_location == "" || contains(["global", "us", "eu"], var.gemini_location)' in rule
    (pattern,) = re.findall(r'regex\("([^"]+)"', rule)
    assert pattern.replace("\\\\", "\\") == f"^{config._REGION.pattern}$"
    assert tuple(config.MULTI_REGIONAL_LOCATIONS) == ("global", "us", "eu")


def test_the_function_timeout_is_known_only_where_a_function_runs():
    """Cloud Run sets K_SERVICE; the emulator topology (RAGBUS_RUNTIME=gcp on this machine) does not,
    and its 60 s ack deadline is no function timeout: a served model still starts there."""
    cloud = load_settings({"RAGBUS_RUNTIME": "gcp", "K_SERVICE": "ragbus-grader", "RAGBUS_ACK_DEADLINE_S": "150"})
    assert cloud.function_timeout_s == 150.0
    emulators = load_settings({"RAGBUS_RUNTIME": "gcp", "RAGBUS_ACK_DEADLINE_S": "60"})
    assert emulators.function_timeout_s is None and emulators.ack_deadline_s == 60.0
    gemini.check_settings(emulators.with_(gemini_timeout_s=60.0), env={"GOOGLE_API_KEY": "k"})
    with pytest.raises(ConfigError, match="185 s"):
        gemini.check_settings(cloud.with_(gemini_timeout_s=60.0), env={"GOOGLE_API_KEY": "k"})
