"""The capacity and cost model (bench/capacity.py): its arithmetic on fixed inputs, and docs/capacity.md in step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import capacity

pytestmark = pytest.mark.unit


def _fixed(tmp_path: Path, **prices: object) -> Path:
    """The repository's inputs with round prices (and any given), so every figure can be worked by hand."""
    for name in ("workload", "tokens", "bounds", "prices"):
        shutil.copy(capacity.DATA / f"{name}.json", tmp_path / f"{name}.json")
    table = json.loads((tmp_path / "prices.json").read_text())
    table["firestore_read_per_100k"]["value"] = 0.10
    table["firestore_write_per_100k"]["value"] = 0.20
    table["gemini_input_per_million"].update({"2026": 1.0, "2027": 2.0})
    table["gemini_output_per_million"].update({"2026": 4.0, "2027": 8.0})
    for key, value in prices.items():
        table[key]["value"] = value
    (tmp_path / "prices.json").write_text(json.dumps(table))
    return tmp_path


def test_firestore_bills_one_read_per_100_entries_of_the_whole_index(tmp_path):
    data = _fixed(tmp_path)
    workload, prices = capacity.load("workload", data), capacity.load("prices", data)
    assert capacity.firestore_reads_per_search(10_000_000, workload, prices) == 100_000 + 10
    assert capacity.firestore_reads_per_search(150, workload, prices) == 2 + 10  # a part batch is a read
    searches = 100_000 * 3 * 1.3
    assert capacity.searches_per_day(workload) == pytest.approx(searches)
    assert capacity.firestore_index_usd_per_day(10_000_000, workload, prices) == pytest.approx(
        searches * 100_010 * 0.10 / 100_000)


def test_the_index_cost_grows_with_the_corpus_on_firestore_and_only_by_shards_on_vector_search(tmp_path):
    data = _fixed(tmp_path, vertex_node_hour=1.0)
    workload, prices, tokens = (capacity.load(n, data) for n in ("workload", "prices", "tokens"))
    firestore = [capacity.configuration("firestore", n, workload, prices, tokens).priced_usd_per_day
                 for n in (100_000, 1_000_000, 10_000_000)]
    vertex = [capacity.configuration("vertex", n, workload, prices, tokens).priced_usd_per_day
              for n in (100_000, 1_000_000, 10_000_000)]
    assert firestore[0] < firestore[1] < firestore[2] and firestore[2] - firestore[0] > 10_000
    # one 2 GB SMALL shard (1.3M 384-dim vectors) of 2 replicas holds 1M chunks; 10M need 8 shards
    assert vertex[0] == vertex[1] and vertex[2] - vertex[1] == pytest.approx((8 - 1) * 2 * 24 * 1.0)

    def nodes(chunks: int, load: dict) -> capacity.Line:
        return next(line for line in capacity.configuration("vertex", chunks, load, prices, tokens).lines
                    if line.resource.startswith("Vector Search nodes"))

    assert (nodes(10_000_000, workload).quantity, nodes(10_000_000, workload).usd_per_day) == (384, 384.0)
    assert nodes(20_000_000, workload).quantity == 16 * 2 * 24
    busier = {**workload, "questions_per_day": {"value": 10 * workload["questions_per_day"]["value"]}}
    assert nodes(10_000_000, busier) == nodes(10_000_000, workload)  # the questions do not add nodes


def test_cloud_run_functions_are_billed_for_vcpu_memory_and_requests(tmp_path):
    data = _fixed(tmp_path, function_vcpu_second=1.0, function_gib_second=10.0, function_request_per_million=1e6)
    workload, prices = capacity.load("workload", data), capacity.load("prices", data)
    seconds, slots = workload["function_seconds_per_question"]["value"], workload["function_concurrency"]["value"]
    memory = workload["function_memory_gib"]["value"]
    runs = {stage: 100_000 * (1.3 if stage in ("transformer", "retriever", "grader") else 1) for stage in seconds}
    cpu, gib, requests = capacity.function_lines(workload, prices)
    assert cpu.quantity == pytest.approx(sum(runs[s] * seconds[s] / slots[s] for s in seconds))
    assert gib.quantity == pytest.approx(sum(runs[s] * seconds[s] / slots[s] * memory[s] for s in seconds))
    assert requests.quantity == pytest.approx(100_000 * (2 + 3 * 1.3))
    assert (cpu.usd_per_day, gib.usd_per_day, requests.usd_per_day) == pytest.approx(
        (cpu.quantity, 10 * gib.quantity, requests.quantity))


def test_the_workloads_function_sizes_are_the_deployed_ones():
    from tests.unit.test_infra import _functions

    deployed = _functions()
    names = {"gateway": "gateway", "transformer": "transformer-query-submitted", "retriever": "retriever",
             "grader": "grader", "synthesizer": "synthesizer"}
    gib = {"512Mi": 0.5, "1Gi": 1.0, "2Gi": 2.0}
    workload = capacity.load("workload")
    for stage, name in names.items():
        (service,) = deployed[name]["service_config"]
        assert workload["function_concurrency"]["value"][stage] == int(service["max_instance_request_concurrency"])
        assert workload["function_memory_gib"]["value"][stage] == gib[service["available_memory"]], stage
        assert service["available_cpu"] == "1", stage


def test_gemini_is_costed_with_thinking_tokens_as_output_at_the_2027_price(tmp_path):
    data = _fixed(tmp_path)
    workload, prices, tokens = (capacity.load(n, data) for n in ("workload", "prices", "tokens"))
    low = tokens["levels"]["LOW"]
    expect_in = 1.3 * (low["transform"]["input"] + low["grade"]["input"]) + low["synthesize"]["input"]
    expect_out = 1.3 * (low["transform"]["output"] + low["grade"]["output"]) + low["synthesize"]["output"]
    assert capacity.tokens_per_question(tokens, workload, "LOW") == pytest.approx((expect_in, expect_out))
    assert capacity.gemini_usd_per_question(expect_in, expect_out, prices, "2027") == pytest.approx(
        (expect_in * 2.0 + expect_out * 8.0) / 1e6)
    # thinking is output: a higher level costs more for the same prompts
    medium_in, medium_out = capacity.tokens_per_question(tokens, workload, "MEDIUM")
    assert medium_in == pytest.approx(expect_in) and medium_out > expect_out + 3000


def test_a_price_not_found_is_reported_as_a_quantity_never_as_a_cost(tmp_path):
    data = _fixed(tmp_path, vertex_node_hour=None, function_vcpu_second=None)
    workload, prices, tokens = (capacity.load(n, data) for n in ("workload", "prices", "tokens"))
    config = capacity.configuration("vertex", 1_000_000, workload, prices, tokens)
    assert {line.unit for line in config.unpriced} == {"node-hours", "vCPU-seconds"}
    table = capacity.cost_table(workload, prices, tokens)
    assert "48.0 node-hours (Vector Search nodes)" in table and "vCPU-seconds (Cloud Run functions vCPU)" in table


def test_every_price_names_its_page_or_says_it_was_not_found():
    for key, row in capacity.load("prices").items():
        if key == "about":
            continue
        assert row["source"], key
        if row.get("value", 0) is None:
            assert row["source"].startswith("not found"), key


def test_the_largest_firestore_corpus_under_the_bound(tmp_path):
    data = _fixed(tmp_path)
    workload, prices = capacity.load("workload", data), capacity.load("prices", data)
    limit = capacity.firestore_max_chunks(20.0, 100_000, workload, prices)
    assert capacity.firestore_index_usd_per_day(limit, workload, prices) <= 20.0
    assert capacity.firestore_index_usd_per_day(limit + 200, workload, prices) > 20.0
    assert capacity.firestore_max_chunks(20.0, 1_000, workload, prices) > 100 * limit  # a hundredth of the questions


def test_docs_capacity_is_what_the_script_computes():
    text = capacity.DOC.read_text(encoding="utf-8")
    for name, body in capacity.sections().items():
        assert capacity.embedded(text, name) == body.strip(), f"{name} is stale: run python bench/capacity.py"
    assert capacity.main(["--check"]) == 0


def test_the_measured_tokens_come_from_the_stand_in_at_every_level():
    tokens = capacity.load("tokens")
    assert set(tokens["levels"]) == set(capacity.LEVELS)
    for level, calls in tokens["levels"].items():
        assert set(calls) == set(capacity.OPERATIONS), level
    outputs = [tokens["levels"][level]["grade"]["output"] for level in capacity.LEVELS]
    assert outputs == sorted(outputs) and outputs[0] < outputs[-1]


# ------------------------------------------------------------ the plan's index choice


def _plan_cost(chunks: int, questions: int) -> float:
    """infra/vertex.tf's firestore_index_read_usd_per_day, evaluated with the same input files."""
    import math
    import re

    from tests.unit.test_infra import _local

    expression = _local("firestore_index_read_usd_per_day").strip()
    searches = _local("index_searches_per_day").strip()
    assert "bench/data/capacity/workload.json" in _local("capacity_workload")
    assert "bench/data/capacity/prices.json" in _local("capacity_prices")
    workload, prices = capacity.load("workload"), capacity.load("prices")

    def python(text: str) -> str:
        text = text.removeprefix("${").removesuffix("}")
        text = re.sub(r"local\.capacity_workload\.(\w+)\.value", r'workload["\1"]["value"]', text)
        text = re.sub(r"local\.capacity_prices\.(\w+)\.value", r'prices["\1"]["value"]', text)
        return text.replace("var.expected_chunks", "chunks").replace(
            "var.expected_questions_per_day", "questions").replace("ceil(", "math.ceil(")

    names = {"math": math, "workload": workload, "prices": prices, "chunks": chunks, "questions": questions}
    names["local"] = type("Local", (), {"index_searches_per_day": eval(python(searches), names)})  # noqa: S307
    return eval(python(expression), names)  # noqa: S307 - the repository's own Terraform expression


@pytest.mark.parametrize(("chunks", "questions"), [(100_000, 1_000), (1_000_000, 100_000), (10_000_000, 100_000)])
def test_the_plan_computes_firestores_index_cost_as_the_script_does(chunks, questions):
    workload, prices = capacity.load("workload"), capacity.load("prices")
    scaled = {**workload, "questions_per_day": {"value": questions}}
    assert _plan_cost(chunks, questions) == pytest.approx(capacity.firestore_index_usd_per_day(chunks, scaled, prices))


def test_the_default_backend_follows_the_cost_and_naming_firestore_past_the_bound_is_refused():
    from tests.unit.test_infra import _default, _local, _resource

    assert _default("index_backend") == "" and _default("max_index_read_usd_per_day") == capacity.load(
        "bounds")["max_index_read_usd_per_day"]
    choice = _local("index_backend")
    assert 'var.index_backend != ""' in choice
    assert 'local.firestore_index_read_usd_per_day <= var.max_index_read_usd_per_day ? "firestore" : "vertex"' in choice
    body = _resource("google_cloudfunctions2_function", "function")
    (refusal,) = [p for p in body["lifecycle"][0]["precondition"] if "max_index_read_usd_per_day" in p["condition"]]
    assert refusal["condition"] == ('${var.index_backend != "firestore" || '
                                    'local.firestore_index_read_usd_per_day <= var.max_index_read_usd_per_day}')
    # the defaults (100k chunks, 1,000 questions a day) stay on Firestore; the capacity plan's
    # 10M chunks at 100k questions a day goes to Vector Search
    bound = _default("max_index_read_usd_per_day")
    assert _plan_cost(_default("expected_chunks"), _default("expected_questions_per_day")) <= bound
    assert _plan_cost(10_000_000, 100_000) > 1000 * bound
