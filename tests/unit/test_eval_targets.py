"""Issue 11's targets: the verdict on each figure, which providers run, and the figures
of one provider's run computed from (hand-written) pipeline results."""

from __future__ import annotations

import pytest

from shared.contract.errors import ConfigError
from shared.contract.ports import Grade
from shared.contract.providers import PROVIDER_NAMES
from shared.tools.eval.dataset import EvalQuery
from shared.tools.eval.pipeline import QueryResult
from shared.tools.eval.retrieval import RetrievalRun
from shared.tools.eval.runner import provider_figures, targets_missed
from shared.tools.eval.targets import (
    TARGETS,
    all_met,
    parse_provider_samples,
    parse_providers,
    select_providers,
    verdicts,
)

PASSING = {"abstention_accuracy": 0.6, "false_abstention_rate": 0.05, "grader_auc": 0.8,
           "element_coverage": 0.4, "citation_precision": 0.6, "ndcg_gain_over_retrieval": 0.0}


def test_the_issue_targets_and_their_bounds():
    assert {t.figure: t.goal for t in TARGETS} == {
        "abstention_accuracy": ">= 0.6", "false_abstention_rate": "<= 0.05", "grader_auc": ">= 0.8",
        "element_coverage": ">= 0.4", "citation_precision": ">= 0.6", "ndcg_gain_over_retrieval": ">= 0"}


def test_a_figure_on_its_bound_meets_the_target():
    rows = verdicts(PASSING, {})
    assert [r["met"] for r in rows] == [True] * 6 and all_met(rows)


@pytest.mark.parametrize(("figure", "value"), [
    ("abstention_accuracy", 0.59), ("false_abstention_rate", 0.051), ("grader_auc", 0.79),
    ("element_coverage", 0.39), ("citation_precision", 0.59), ("ndcg_gain_over_retrieval", -0.001)])
def test_a_figure_past_its_bound_misses(figure, value):
    rows = verdicts({**PASSING, figure: value}, {})
    assert [r["figure"] for r in rows if not r["met"]] == [figure]
    assert not all_met(rows)


def test_a_figure_that_could_not_be_measured_is_not_met():
    rows = verdicts({**PASSING, "element_coverage": None}, {"grader_auc": (0.7, 0.9)})
    row = {r["figure"]: r for r in rows}
    assert row["element_coverage"]["met"] is None and row["element_coverage"]["value"] is None
    assert row["grader_auc"]["ci95"] == [0.7, 0.9]
    assert not all_met(rows)


def test_local_always_runs_and_unconfigured_providers_are_listed():
    run, skipped = select_providers(None, {})
    assert run == ["local"]
    assert skipped["openai"] == "not configured (RAGBUS_OPENAI_BASE_URL is not set)"
    assert skipped["gemini"].startswith("not configured (neither GOOGLE_API_KEY")


def test_auto_runs_every_configured_provider():
    env = {"RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:8081/v1", "GOOGLE_API_KEY": "k"}
    run, skipped = select_providers(None, env)
    assert run == ["local", "openai", "gemini"]
    assert set(skipped) == set(PROVIDER_NAMES) - set(run)  # any other registered provider, unconfigured here
    vertex = {"GOOGLE_CLOUD_PROJECT": "p"}  # Gemini's location defaults to global
    assert select_providers(None, vertex)[0] == ["local", "gemini"]
    assert "gemini" in select_providers(None, {"GOOGLE_CLOUD_LOCATION": "europe-west4"})[1]  # no project


def test_a_named_provider_that_cannot_run_is_an_error():
    with pytest.raises(ConfigError, match="openai was asked for but cannot run: RAGBUS_OPENAI_BASE_URL is not set"):
        select_providers(["local", "openai"], {})
    run, skipped = select_providers(["openai"], {"RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
                                                 "GEMINI_API_KEY": "k"})
    assert run == ["local", "openai"] and skipped["gemini"] == "not requested"
    assert set(skipped) == set(PROVIDER_NAMES) - set(run)


def test_provider_lists_and_samples_are_parsed_strictly():
    assert parse_providers("auto") is None and parse_providers(None) is None
    assert parse_providers(" Local, openai,openai ") == ["local", "openai"]
    with pytest.raises(ConfigError, match="unknown provider 'ollama'"):
        parse_providers("local,ollama")
    assert parse_provider_samples(["openai=40/20", "gemini=100"]) == {"openai": (40, 20), "gemini": (100, None)}
    for bad in ("openai", "openai=", "openai=x", "openai=0", "vllm=4", "openai=4/-1"):
        with pytest.raises(ConfigError, match="PROVIDER=ANSWERABLE"):
            parse_provider_samples([bad])


def _q(qid: str, relevant: set[str], elements: tuple[str, ...] = ()) -> EvalQuery:
    mode = "abstain" if not relevant else "trustworthy"
    return EvalQuery(qid, f"{qid}?", frozenset(relevant), mode, "c", frozenset(relevant or {"decoy"}), elements)


def _r(qid: str, outcome: str, ranking: list[str], score: float, *, answer: str = "", cited=(),
       fallbacks=()) -> QueryResult:
    grade = Grade(score=score, relevance=score, completeness=score, grounded=True, answerable=True)
    return QueryResult(qid, "answered", outcome, ranking, ranking, grade, 1, answer, list(cited), {}, 10.0,
                       list(fallbacks))


def test_figures_of_one_provider_run():
    queries = [_q("a", {"p1"}, ("Paris",)), _q("b", {"p2"}), _q("c", {"p3"})]
    abstain = [_q("x", set()), _q("y", set())]
    answerable = [
        _r("a", "answered", ["p1", "p9"], 0.9, answer="It is Paris.", cited=["p1"]),
        _r("b", "answered", ["p9", "p2"], 0.8, answer="b", cited=["p2", "p9"]),
        _r("c", "not_answerable", ["p9"], 0.3, fallbacks=["grader", "grader", "synthesizer"]),
    ]
    abstained = [_r("x", "not_answerable", ["p7"], 0.2), _r("y", "answered", ["p8"], 0.85, cited=["p8"])]
    # The default retrieval row ranks the relevant passage first for all three queries (positions 0, 1, 2).
    default = RetrievalRun("hybrid [default]", [["p1"], ["p2"], ["p3"]], {}, 0.0)
    out = provider_figures(answerable, abstained, queries, abstain, [0, 1, 2], default)
    f = out["figures"]
    assert f["abstention_accuracy"] == 0.5 and f["false_abstention_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert f["element_coverage"] == 1.0
    assert f["citation_precision"] == pytest.approx(2 / 3, abs=1e-4)
    # Grader: positives a (0.9), b (0.8); negatives c (0.3), x (0.2), y (0.85): 5 of 6 pairs ordered.
    assert f["grader_auc"] == pytest.approx(5 / 6, abs=1e-4)
    # nDCG: pipeline 1, 1/log2(3), 0 against retrieval 1, 1, 1.
    assert f["ndcg_gain_over_retrieval"] == pytest.approx((1 + 0.63093 + 0) / 3 - 1, abs=1e-4)
    assert out["ndcg@10"]["queries"] == 3 and out["ndcg@10"]["retrieval"] == 1.0
    met = {r["figure"]: r["met"] for r in out["verdicts"]}
    assert met == {"abstention_accuracy": False, "false_abstention_rate": False, "grader_auc": True,
                   "element_coverage": True, "citation_precision": True, "ndcg_gain_over_retrieval": False}
    assert out["all_met"] is False
    # Stage fallbacks (a model call failed or its reply was unusable) are counted, not hidden.
    assert out["model_fallbacks"] == {"questions": 5, "questions_with_a_fallback": 1,
                                      "by_stage": {"grader": 2, "synthesizer": 1}}


def test_check_lists_every_missed_target_and_a_run_that_judged_nothing():
    rows = verdicts({**PASSING, "citation_precision": 0.5}, {})
    results = {"targets": {"providers": {"local": {"status": "ran", "verdicts": rows},
                                         "openai": {"status": "not configured (...)"}}}}
    assert targets_missed(results) == ["local: citation precision 0.500 (goal >= 0.6)"]
    results["targets"]["providers"]["local"]["verdicts"] = verdicts(PASSING, {})
    assert targets_missed(results) == []
    assert targets_missed({"retrieval": []}) == [
        "no provider's full pipeline ran (--sample 0?): no target was judged"]
