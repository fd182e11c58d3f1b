"""The own-contexts measurement: the grader stage's code on each case's own passages."""

from __future__ import annotations

import dataclasses

import pytest

from shared.contract.config import load_settings
from shared.contract.ports import Grade
from shared.tools.eval.dataset import EvalQuery
from shared.tools.eval.own_contexts import grade_on_own_contexts, own_contexts

pytestmark = pytest.mark.unit

PASSAGES = {
    "p1": "Title: Boiling points\nWater boils at 100 degrees Celsius at sea level.",
    "p2": "Ethanol is a primary alcohol with the formula C2H5OH.",
    "p3": "The tournament has been held at the club since 1877.",
}


def _case(qid: str, text: str, contexts: set[str], answerable: bool) -> EvalQuery:
    return EvalQuery(query_id=qid, text=text, relevant=frozenset(contexts if answerable else ()),
                     expected_mode="trustworthy" if answerable else "abstain", category="c",
                     contexts=frozenset(contexts))


class ScriptedGrader:
    """Grades by whether the question's scripted fact is in the contexts; records what it was shown."""

    def __init__(self, facts: dict[str, str]) -> None:
        self.facts = facts
        self.seen: list[tuple[str, list[str]]] = []

    def grade(self, query, contexts):
        self.seen.append((query, [c.text for c in contexts]))
        found = any(self.facts[query] in c.text for c in contexts)
        score = 0.9 if found else 0.3
        return Grade(score=score, relevance=score, completeness=score, grounded=found, answerable=found,
                     reasoning="scripted")


def test_cases_are_graded_on_their_own_passages_and_decided_by_the_stage_rule():
    answerable = [_case("a1", "water?", {"p1"}, True), _case("a2", "ethanol?", {"p2"}, True)]
    abstain = [_case("b1", "prize money?", {"p3"}, False), _case("b2", "ethanol boiling point?", {"p2"}, False)]
    llm = ScriptedGrader({"water?": "100 degrees", "ethanol?": "C2H5OH", "prize money?": "£",
                          "ethanol boiling point?": "78.37"})
    out = grade_on_own_contexts(answerable, abstain, PASSAGES, llm, load_settings({}))
    assert out["abstention_accuracy"] == 1.0 and out["false_abstention"] == 0.0
    assert out["grader_auc"] == 1.0
    assert out["decisions"] == {"answerable": {"accept": 2}, "abstain": {"abstain": 2}}
    # each case saw only its own passage, without the metadata header
    shown = dict(llm.seen)
    assert shown["prize money?"] == ["The tournament has been held at the club since 1877."]
    assert not any("Title:" in text for texts in shown.values() for text in texts)


def test_an_abstain_case_graded_answerable_counts_against_abstention_and_auc():
    answerable = [_case("a1", "water?", {"p1"}, True)]
    abstain = [_case("b1", "ethanol boiling point?", {"p2"}, False)]
    llm = ScriptedGrader({"water?": "nothing like this", "ethanol?": "", "ethanol boiling point?": "C2H5OH"})
    out = grade_on_own_contexts(answerable, abstain, PASSAGES, llm, load_settings({}))
    assert out["abstention_accuracy"] == 0.0 and out["false_abstention"] == 1.0
    assert out["grader_auc"] == 0.0
    assert 0.0 <= out["abstention_accuracy_ci95"][0] <= out["abstention_accuracy_ci95"][1] <= 1.0


def test_abstention_is_broken_down_by_kind_of_case():
    from shared.tools.eval.report import subcategory_markdown

    answerable = [_case("a1", "water?", {"p1"}, True)]
    abstain = [dataclasses.replace(_case("b1", "prize money?", {"p3"}, False), subcategory="missing_data"),
               dataclasses.replace(_case("b2", "ethanol boiling point?", {"p2"}, False), subcategory="wrong_entity"),
               dataclasses.replace(_case("b3", "ethanol?", {"p2"}, False), subcategory="wrong_entity")]
    llm = ScriptedGrader({"water?": "100 degrees", "prize money?": "£", "ethanol boiling point?": "78.37",
                          "ethanol?": "C2H5OH"})
    out = grade_on_own_contexts(answerable, abstain, PASSAGES, llm, load_settings({}))
    # the largest kind first; "ethanol?" finds its fact, so one wrong-entity case is answered
    assert out["abstained_by_subcategory"] == {"wrong_entity": [1, 2], "missing_data": [1, 1]}
    table = subcategory_markdown(out["abstained_by_subcategory"], {"wrong_entity": [0, 2]})
    assert "| wrong_entity | 0.00 (0/2) | 0.50 (1/2) |" in table
    assert "| missing_data | – | 1.00 (1/1) |" in table
    assert subcategory_markdown({}, {}) == []


def test_contexts_are_clipped_as_the_stage_clips_them():
    settings = dataclasses.replace(load_settings({}), grade_context_chars=60)
    long = {"p1": "word " * 100}
    ctx = own_contexts(_case("a", "q", {"p1"}, True), long, settings)
    assert len(ctx) == 1 and len(ctx[0].text) <= settings.grade_context_chars


def test_both_kinds_of_case_are_needed():
    with pytest.raises(ValueError, match="both kinds"):
        grade_on_own_contexts([], [_case("b", "q", {"p1"}, False)], PASSAGES, ScriptedGrader({}), load_settings({}))
