"""One registry of stages: main.py, infra/, the runtimes, the topology, the eval and the docs follow it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from shared.contract import topics
from shared.contract.messages import QuerySubmitted, encode
from shared.runtime.dispatch import handle_delivery
from shared.runtime.stages import (
    CONSUMERS,
    ENTRY_POINTS,
    PUBLISHED_OUTSIDE,
    QUERY_EVENT_SOURCES,
    QUERY_STAGES,
    SERVED_STAGES,
    STAGE_BY_NAME,
    STAGES,
    stage_table,
)
from shared.tools import topology
from shared.tools.eval import pipeline
from tests.support import root_main
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, good_grade, make_loop, weak_grade
from tests.unit.test_infra import _local

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "architecture.md"
TABLE_START, TABLE_END = "<!-- stage-table:start -->", "<!-- stage-table:end -->"


def test_the_root_main_exposes_exactly_the_registered_entry_points():
    assert sorted(root_main().__all__) == sorted(ENTRY_POINTS)


def test_a_pubsub_stage_needs_no_entry_module_of_its_own():
    for stage in STAGES:
        if stage.generated_entry_point:
            assert stage.trigger == "pubsub" and stage.handler and stage.targets == (stage.name,), stage.name
            assert not (ROOT / "services" / stage.name / "main.py").exists(), f"{stage.name}: main.py is generated"
        else:
            module = importlib.import_module(stage.entry_module)
            assert all(callable(getattr(module, t)) for t in stage.targets), stage.name


def test_infra_deploys_each_registered_entry_point_with_its_trigger_and_publishers():
    functions = _local("functions")
    assert {(f["stage"], f["entry_point"]) for f in functions.values()} == {
        (s.name, t) for s in STAGES for t in s.targets}
    for name, function in functions.items():
        stage = STAGE_BY_NAME[function["stage"]]
        trigger = "gcs" if function["trigger"].startswith("google.cloud.storage.") else function["trigger"]
        assert trigger == stage.trigger, name
        assert set(function["publishes"]) <= set(stage.publishes), name
    for stage in STAGES:
        published = {t for f in functions.values() if f["stage"] == stage.name for t in f["publishes"]}
        assert published == set(stage.publishes), stage.name
    assert set(_local("consumers")) == {c.subscription for c in CONSUMERS}


def test_the_topology_and_the_eval_run_the_registered_stages():
    assert topology.ALL_STAGES == SERVED_STAGES
    assert set(SERVED_STAGES) == {c.stage for c in CONSUMERS} | {"gateway", topology.DEAD_LETTERS}
    assert STAGE_BY_NAME[topology.DEAD_LETTERS].records_dead_letters
    assert {c.stage for c in pipeline.CONSUMERS if c.stage in QUERY_STAGES} == set(QUERY_STAGES)
    # the query stages carry a question from the gateway's query-submitted to answer-ready
    reached, frontier = set(), {topics.QUERY_SUBMITTED}
    while frontier:
        reached |= frontier
        frontier = {t for c in CONSUMERS if c.topic in frontier and c.stage in QUERY_STAGES
                    for t in STAGE_BY_NAME[c.stage].publishes} - reached
    assert topics.ANSWER_READY in reached
    assert {c.stage for c in CONSUMERS if c.topic in reached} == set(QUERY_STAGES)


def test_every_consumed_topic_is_published_by_a_stage():
    published = {t for s in STAGES for t in s.publishes}
    assert {c.topic for c in CONSUMERS} <= published | set(PUBLISHED_OUTSIDE)

    assert published <= set(topics.ALL_TOPICS)


def test_the_docs_table_is_the_registry():
    text = DOCS.read_text()
    assert TABLE_START in text and TABLE_END in text, f"{DOCS} lost its stage-table markers"
    embedded = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert embedded == stage_table().strip(), (
        "docs/architecture.md's stage table is stale; paste shared.runtime.stages.stage_table() between the markers")


def test_a_query_stage_publishes_only_what_the_registry_says():
    loop = make_loop(CORPUS, ScriptedLLM(grades=[weak_grade(0.4, missing=["saturation"]), good_grade(0.8)]))
    loop.submit("how does BM25 work")
    queue, seen = [QuerySubmitted(query_id="q1")], 0
    published_by: dict[str, set[str]] = {}
    while queue:
        message = queue.pop(0)
        data, attributes = encode(message)
        for consumer in CONSUMERS:
            if consumer.topic != type(message).TOPIC:
                continue
            handle_delivery(consumer, data, attributes, loop.deps)
            new = loop.publisher.messages[seen:]
            seen = len(loop.publisher.messages)
            published_by.setdefault(consumer.stage, set()).update(type(m).TOPIC for m in new)
            queue.extend(new)
    assert loop.record()["status"] == "answered"
    assert set(published_by) == set(QUERY_STAGES)
    for stage, published in published_by.items():
        assert published <= set(STAGE_BY_NAME[stage].publishes), stage


def test_the_page_listens_for_every_query_stage_the_registry_has():
    from services.gateway.page import page_html

    page = page_html()
    (listed,) = re.findall(r'<meta name="ragbus-stage-events" content="([^"]*)">', page)
    assert listed.split(",") == list(QUERY_EVENT_SOURCES)
    assert set(QUERY_STAGES) <= set(listed.split(","))
    script = (ROOT / "services" / "gateway" / "web" / "app.js").read_text()
    assert 'meta[name="ragbus-stage-events"]' in script
    assert not re.search(r'"transformer"|"retriever"|"grader"|"synthesizer"', script), "app.js names stages again"


def test_a_new_stage_is_deployed_from_its_registry_entry_alone():
    """infra/registry.tf's function for a stage declared with no Function entries: the defaults."""
    import hcl2

    from shared.runtime.stages import Stage
    from shared.tools import infra_registry

    reranker = Stage("reranker", "query", "pubsub", "reorders the contexts", publishes=(topics.CONTEXTS_RETRIEVED,),
                     consumes=((topics.CONTEXTS_RETRIEVED, 2),), handler="services.reranker.handler:handle")
    (function,) = reranker.functions
    block = "locals {\n  functions = {\n" + "\n".join(infra_registry._function_block(reranker, function)) + "\n  }\n}\n"
    parsed = hcl2.loads(block)["locals"][0]["functions"]['"reranker"']
    assert (parsed["stage"], parsed["entry_point"], parsed["trigger"]) == ('"reranker"', '"reranker"', '"pubsub"')
    assert parsed["publishes"] == ['"contexts-retrieved"'] and parsed["timeout"] == 120
