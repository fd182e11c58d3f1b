"""Readiness tells the truth: a process that will grade with the local provider checks the grade model
before it takes work (the embedded runtime's commands, a grader function, the gateway's /readyz for the
stages its process runs) and reports a missing, stale or hostile grade_model.json with the message that
file's loader gives; processes that do not grade are not affected."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import shared.adapters.local.grade_model as grade_model_module
from services.gateway.app import create_app
from services.gateway.openapi import openapi_document
from shared.contract.config import Settings, load_settings
from shared.contract.deps import Deps
from shared.contract.errors import ConfigError
from shared.contract.messages import QueryGraded
from shared.runtime import readiness
from shared.runtime.dispatch import Disposition
from shared.runtime.functions import check_function_at_start
from shared.runtime.readiness import CHECKS, require_ready, unready_stages
from shared.runtime.stages import INGESTION_STAGES, STAGES
from shared.tools import cli
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, make_loop

OPENAI = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "RAGBUS_OPENAI_MODEL": "m"}
NON_GRADING = tuple(s.name for s in STAGES if "grade_model" not in s.needs)


def _write_stale(path):
    data = grade_model_module.shipped_model().to_json()
    data["feature_version"] = data["feature_version"] - 1
    path.write_text(json.dumps(data))


def _write_hostile(path):
    data = grade_model_module.shipped_model().to_json()
    data["weights"][0] = "1e999"  # a string where a number belongs
    path.write_text(json.dumps(data))


@pytest.fixture(params=["missing", "stale", "hostile"])
def broken_model(request, tmp_path, monkeypatch):
    """grade_model.json missing, fit on another feature version, or hostile; yields the loader's message."""
    grade_model_module.shipped_model()  # the real file's model, read before it is swapped
    path = tmp_path / "grade_model.json"
    if request.param == "stale":
        _write_stale(path)
    elif request.param == "hostile":
        _write_hostile(path)
    monkeypatch.setattr(grade_model_module, "MODEL_FILE", path)
    grade_model_module.shipped_model.cache_clear()
    with pytest.raises(ConfigError) as raised:
        grade_model_module.shipped_model()
    yield str(raised.value)
    grade_model_module.shipped_model.cache_clear()  # the next test reads the real file again


def test_the_registry_names_known_checks_and_only_the_grader_needs_the_grade_model():
    assert {need for s in STAGES for need in s.needs} <= set(CHECKS)
    assert [s.name for s in STAGES if "grade_model" in s.needs] == ["grader"]


def test_a_broken_grade_model_makes_the_local_grader_unready_with_the_loaders_message(broken_model):
    settings = Settings()
    assert unready_stages(settings, ("cleaner", "grader", "synthesizer")) == {"grader": broken_model}
    assert "fit_grader" in broken_model  # the message says how to refit
    with pytest.raises(ConfigError) as raised:
        require_ready(settings, [s.name for s in STAGES])
    assert str(raised.value) == broken_model  # the same one line as the loader's, nothing added


def test_a_broken_sentence_score_makes_the_local_grader_unready_with_the_loaders_message(tmp_path, monkeypatch):
    import shared.query.reading.sentence_score as score_module

    data = score_module.shipped_sentence_score().to_json()
    data["columns"] = data["columns"][::-1]  # fit on the columns in another order
    path = tmp_path / "sentence_score.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(score_module, "SCORE_FILE", path)
    score_module.shipped_sentence_score.cache_clear()
    try:
        (message,) = unready_stages(Settings(), ("grader",)).values()
        assert "sentence_score.json" in message and "fit_scorer" in message
    finally:
        score_module.shipped_sentence_score.cache_clear()  # the next test reads the real file again


def test_processes_that_do_not_grade_are_not_affected(broken_model):
    assert unready_stages(Settings(), NON_GRADING) == {}
    require_ready(Settings(), NON_GRADING)  # no error


@pytest.mark.parametrize("env", [OPENAI, {"RAGBUS_LLM": "gemini", "GOOGLE_CLOUD_PROJECT": "p"}])
def test_a_grader_that_grades_with_another_provider_does_not_need_the_file(broken_model, env):
    assert unready_stages(load_settings(env), ("grader",)) == {}


def test_with_the_shipped_file_every_stage_is_ready():
    grade_model_module.shipped_model.cache_clear()
    assert unready_stages(Settings(), [s.name for s in STAGES]) == {}
    with pytest.raises(ValueError, match="unknown stage 'grading'"):
        unready_stages(Settings(), ("grading",))


def test_a_refit_file_is_seen_by_the_next_check_without_a_restart(tmp_path, monkeypatch):
    good = grade_model_module.shipped_model().to_json()
    path = tmp_path / "grade_model.json"
    _write_stale(path)
    monkeypatch.setattr(grade_model_module, "MODEL_FILE", path)
    grade_model_module.shipped_model.cache_clear()
    try:
        assert "grader" in readiness.unready_stages(Settings(), ("grader",))
        path.write_text(json.dumps(good))
        assert readiness.unready_stages(Settings(), ("grader",)) == {}
    finally:
        grade_model_module.shipped_model.cache_clear()


# ------------------------------------------------------------------ functions


def test_a_grader_function_refuses_to_start_with_the_message(broken_model):
    with pytest.raises(SystemExit) as exited:
        check_function_at_start("grader", {"FUNCTION_TARGET": "grader"})
    assert str(exited.value) == f"ragbus grader function is not ready: {broken_model}"


def test_a_grader_function_with_an_invalid_setting_refuses_to_start_with_it():
    with pytest.raises(SystemExit, match="not ready: RAGBUS_LLM='nope'"):
        check_function_at_start("grader", {"FUNCTION_TARGET": "grader", "RAGBUS_LLM": "nope"})
    check_function_at_start("cleaner", {"FUNCTION_TARGET": "cleaner", "RAGBUS_LLM": "nope"})  # needs nothing


@pytest.mark.parametrize("stage, env", [
    ("indexer", {"FUNCTION_TARGET": "indexer"}),  # an ingestion function
    ("cleaner", {"FUNCTION_TARGET": "cleaner"}),
    ("transformer", {"FUNCTION_TARGET": "transformer"}),
    ("grader", {"FUNCTION_TARGET": "indexer"}),  # main.py imports the grader's entry point in every function
    ("grader", {}),  # not started by functions-framework (an import in a test, a tool)
    ("grader", {"FUNCTION_TARGET": "grader", **OPENAI}),  # grades with a served model
])
def test_functions_that_do_not_grade_locally_start(broken_model, stage, env):
    check_function_at_start(stage, env)  # no SystemExit


# ------------------------------------------------------------------ gateway


def _gateway(stages=()):
    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    return TestClient(create_app(deps, stages=stages), base_url="http://127.0.0.1")


def test_readyz_reports_an_unready_stage_of_its_process(broken_model):
    with _gateway(stages=[s.name for s in STAGES]) as client:
        ready = client.get("/readyz")
        health = client.get("/healthz")
    assert ready.status_code == 503
    assert ready.json() == {"status": "unready", "model": {"model": None, "usable": True},
                            "stages": {"grader": broken_model}}
    assert health.status_code == 200 and health.json()["stages"] == {"grader": broken_model}  # live all the same


def test_a_question_is_refused_while_a_stage_of_the_process_is_unready(broken_model):
    with _gateway(stages=[s.name for s in STAGES]) as client:
        refused = client.post("/v1/queries", json={"question": "what is BM25?"})
        invalid = client.post("/v1/queries", json={"nonsense": 1})
    assert refused.status_code == 503
    assert refused.json()["error"].startswith(f"not ready, so no question is taken: grader: {broken_model}")
    assert invalid.status_code == 400  # a bad request is still told what is wrong with it
    with _gateway(stages=INGESTION_STAGES) as client:  # no grading here: the question goes to the bus
        assert client.post("/v1/queries", json={"question": "what is BM25?"}).status_code == 202


def test_readyz_of_a_gateway_without_grading_stages_stays_ready(broken_model):
    for stages in ((), INGESTION_STAGES):  # a gateway function; a process that only ingests
        with _gateway(stages=stages) as client:
            ready = client.get("/readyz")
            health = client.get("/healthz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready",
                                                             "model": {"model": None, "usable": True}}
        assert health.json() == {"status": "ok", "runtime": "local"}


def _served_gateway(answer):
    """A gateway whose OpenAI-compatible server is ``answer`` (a reply, or the error reaching it raises)."""
    import httpx

    from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel

    def server(request):
        return answer(request)

    settings = load_settings({**OPENAI, "RAGBUS_OPENAI_BASE_URL": "http://bob:s3cret@127.0.0.1:9/v1"})
    llm = OpenAICompatibleLanguageModel(settings.openai_base_url, "m", transport=httpx.MockTransport(server))
    deps = Deps(settings, publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock(), llm=llm)
    return TestClient(create_app(deps), base_url="http://127.0.0.1")


def test_readyz_says_the_model_is_unreachable_while_its_server_is_down_and_names_no_secret():
    import httpx

    def down(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with _served_gateway(down) as client:
        ready, health = client.get("/readyz"), client.get("/healthz")
    assert ready.status_code == 503 and ready.json()["status"] == "unready"
    model = ready.json()["model"]
    assert model["usable"] is False and model["reachable"] is False
    assert "cannot be reached" in model["reason"] and "RAGBUS_OPENAI_BASE_URL" in model["reason"]
    assert "s3cret" not in ready.text and "bob" not in ready.text and "s3cret" not in health.text
    assert health.status_code == 200 and health.json()["model"]["reachable"] is False  # live all the same
    # a server that answers, even refusing the request (the stages record a refusal when they meet it), is up
    with _served_gateway(lambda request: httpx.Response(401, json={"error": "no key"})) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["model"] == {"model": "m", "usable": True}


def test_the_openapi_document_describes_the_stages_entry():
    schemas = openapi_document(Settings())["components"]["schemas"]
    assert schemas["Readiness"]["properties"]["stages"] == {"$ref": "#/components/schemas/UnreadyStages"}
    assert schemas["UnreadyStages"]["additionalProperties"] == {"type": "string"}


# ------------------------------------------------------------------ the grader stage


def test_a_broken_model_file_fails_the_query_instead_of_a_fallback_grade(broken_model):
    loop = make_loop(CORPUS, real_local_llm=True)  # built, and it transforms: only grading reads the file
    loop.submit("what is BM25 ranking")
    (outcome,) = loop.deliver(loop.run_up_to("grader", loop.transformed("what is BM25 ranking")))
    assert outcome is Disposition.DEAD  # permanent: dead-lettered with the reason, and the query fails
    assert not loop.publisher.of_type(QueryGraded)
    assert loop.record()["iterations"][0].get("grade") is None


def test_other_model_failures_still_become_the_fallback_grade():
    loop = make_loop(CORPUS, ScriptedLLM(grades=[ValueError("reply was not JSON")]))
    loop.submit("what is BM25")
    (outcome,) = loop.deliver(loop.run_up_to("grader", loop.transformed("what is BM25")))
    assert outcome is Disposition.ACK and loop.publisher.of_type(QueryGraded)[-1].decision == "refine"


# ------------------------------------------------------------------ the CLI and the eval


def test_the_eval_refuses_before_any_work(broken_model, monkeypatch, tmp_path):
    from shared.tools.eval import runner

    def no_work():
        raise AssertionError("the dataset was loaded before the check")

    monkeypatch.setattr(runner, "build_fitz_gov", no_work)
    with pytest.raises(ConfigError) as raised:
        runner.run_eval(runner.EvalOptions(cache_dir=tmp_path, environ={}))
    assert str(raised.value) == broken_model


@pytest.fixture
def restored_logging():
    """cli.main() configures the root logger; give the next tests theirs back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level


def _run(monkeypatch, capsys, tmp_path, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "argv", ["ragbus", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    return exit_info.value.code, capsys.readouterr().err


def test_ask_refuses_to_start_the_stages_with_the_message(broken_model, monkeypatch, capsys, tmp_path,
                                                          restored_logging):
    code, err = _run(monkeypatch, capsys, tmp_path, "ask", "what is BM25?")
    assert code == 1
    assert " ".join(err.split()).count(" ".join(broken_model.split())) == 1


def test_a_command_that_only_ingests_starts_its_stages(broken_model, tmp_path):
    session = cli.Session(load_settings({"RAGBUS_HOME": str(tmp_path)}), *_local(tmp_path))
    with session.stages(INGESTION_STAGES) as runtime:
        assert {c.stage for c in runtime.consumers} == set(INGESTION_STAGES)
    with pytest.raises(ConfigError, match="fit_grader"), session.stages():
        pass


def _local(tmp_path):
    from shared.runtime.bootstrap import build_local

    system = build_local(load_settings({"RAGBUS_HOME": str(tmp_path), "RAGBUS_TRACING": "0"}))
    return system.deps, system


def test_the_suite_runs_in_a_home_of_its_own():
    # conftest points RAGBUS_HOME at a temporary folder: nothing a test records without a home
    # of its own (spans, the default store) reaches ./.ragbus or the user's RAGBUS_HOME
    from shared.contract.config import load_settings
    home = load_settings().home.resolve()
    assert home.name.startswith("ragbus-tests-home-")
    assert home != (Path.cwd() / ".ragbus").resolve()
