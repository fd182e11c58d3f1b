"""The capacity and cost model of docs/capacity.md, computed from its inputs.

Three files in bench/data/capacity/ are the inputs: ``workload.json`` (this project's
assumptions, each with its reason), ``prices.json`` (Google's prices, each with the page it
was read from; a price not found is null and its resource is reported as a quantity, never
given an invented cost) and ``tokens.json`` (the Gemini tokens of each call at each
``thinking_level``, measured by ``--measure`` on the Gemini stand-in's usage fields). The
output is the tables between the ``capacity-*`` markers of docs/capacity.md; a unit test
fails when the document and this computation disagree.

    .venv/bin/python bench/capacity.py            # rewrite docs/capacity.md's tables
    .venv/bin/python bench/capacity.py --check    # exit 1 when they are stale
    .venv/bin/python bench/capacity.py --measure  # re-measure tokens.json on the stand-in

The index's cost is what decides the backend: Firestore's vector query reads every index
entry its pre-filter leaves and is billed one read per 100 of them, so its cost grows with the
corpus times the questions; Vector Search is billed per node-hour, whatever the questions.
:func:`firestore_max_chunks` is the corpus size past which Firestore's index reads cost more
than a stated bound a day; infra/ reads the same files and refuses Firestore past it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "capacity"
DOC = ROOT / "docs" / "capacity.md"
OPERATIONS = ("transform", "grade", "synthesize")
LEVELS = ("LOW", "MEDIUM", "HIGH")
PERIODS = ("2026", "2027")
BACKENDS = ("firestore", "vertex")


def load(name: str, data: Path = DATA) -> dict[str, Any]:
    with (data / f"{name}.json").open(encoding="utf-8") as handle:
        return json.load(handle)


def _value(table: Mapping[str, Any], key: str) -> Any:
    return table[key]["value"]


# ------------------------------------------------------------ the model

@dataclass(frozen=True)
class Line:
    """One resource of one configuration: its quantity a day and, when its price is known, its cost."""

    resource: str
    quantity: float
    unit: str
    usd_per_day: float | None


@dataclass(frozen=True)
class Configuration:
    backend: str
    chunks: int
    lines: tuple[Line, ...]

    @property
    def priced_usd_per_day(self) -> float:
        return sum(line.usd_per_day or 0.0 for line in self.lines)

    @property
    def unpriced(self) -> tuple[Line, ...]:
        return tuple(line for line in self.lines if line.usd_per_day is None)


def searches_per_day(workload: Mapping[str, Any]) -> float:
    refine = 1 + _value(workload, "refinements_per_question")
    return _value(workload, "questions_per_day") * _value(workload, "vector_searches_per_question") * refine


def firestore_reads_per_search(chunks: int, workload: Mapping[str, Any], prices: Mapping[str, Any]) -> float:
    """Billed reads of one unfiltered Firestore vector query: every entry of the flat index, one read
    per 100 (rounded up), plus the documents it returns."""
    per_read = _value(prices, "firestore_vector_entries_per_read")
    return math.ceil(chunks / per_read) + _value(workload, "results_per_search")


def firestore_index_usd_per_day(chunks: int, workload: Mapping[str, Any], prices: Mapping[str, Any]) -> float:
    reads = searches_per_day(workload) * firestore_reads_per_search(chunks, workload, prices)
    return reads * _value(prices, "firestore_read_per_100k") / 100_000


def firestore_max_chunks(bound_usd_per_day: float, questions_per_day: float, workload: Mapping[str, Any],
                         prices: Mapping[str, Any]) -> int:
    """The largest corpus whose Firestore index reads cost at most ``bound_usd_per_day`` at
    ``questions_per_day`` (infra/variables.tf: max_index_read_usd_per_day, the same formula)."""
    scaled = {**workload, "questions_per_day": {"value": questions_per_day}}
    reads_allowed = bound_usd_per_day / _value(prices, "firestore_read_per_100k") * 100_000
    per_search = reads_allowed / searches_per_day(scaled) - _value(workload, "results_per_search")
    return max(0, int(per_search) * _value(prices, "firestore_vector_entries_per_read"))


def tokens_per_question(tokens: Mapping[str, Any], workload: Mapping[str, Any], level: str) -> tuple[float, float]:
    """(input, output incl. thinking) tokens of one question at ``level``: a transform, a grade and a
    synthesis, and a transform and a grade more per refinement."""
    refine = _value(workload, "refinements_per_question")
    calls = {"transform": 1 + refine, "grade": 1 + refine, "synthesize": 1}
    measured = tokens["levels"][level]
    return (sum(calls[op] * measured[op]["input"] for op in OPERATIONS),
            sum(calls[op] * measured[op]["output"] for op in OPERATIONS))


def gemini_usd_per_question(tokens_in: float, tokens_out: float, prices: Mapping[str, Any], period: str) -> float:
    return (tokens_in * prices["gemini_input_per_million"][period]
            + tokens_out * prices["gemini_output_per_million"][period]) / 1e6


def configuration(backend: str, chunks: int, workload: Mapping[str, Any], prices: Mapping[str, Any],
                  tokens: Mapping[str, Any], *, period: str = "2027") -> Configuration:
    questions = _value(workload, "questions_per_day")
    level = _value(workload, "thinking_level")
    tokens_in, tokens_out = tokens_per_question(tokens, workload, level)
    read_price = _value(prices, "firestore_read_per_100k") / 100_000
    write_price = _value(prices, "firestore_write_per_100k") / 100_000
    lines = [
        Line(f"Gemini input ({level} thinking, {period} price)", questions * tokens_in, "tokens",
             questions * tokens_in * prices["gemini_input_per_million"][period] / 1e6),
        Line(f"Gemini output incl. thinking ({level}, {period} price)", questions * tokens_out, "tokens",
             questions * tokens_out * prices["gemini_output_per_million"][period] / 1e6),
    ]
    record_reads = questions * _value(workload, "record_reads_per_question")
    record_writes = questions * _value(workload, "record_writes_per_question")
    lines.append(Line("Firestore record reads and writes", record_reads + record_writes, "operations",
                      record_reads * read_price + record_writes * write_price))
    if backend == "firestore":
        reads = searches_per_day(workload) * firestore_reads_per_search(chunks, workload, prices)
        lines.append(Line("Firestore vector query reads (1 per 100 entries read)", reads, "reads",
                          reads * read_price))
    else:
        # the returned chunks' texts are read from Firestore, and the query terms' document
        # frequencies counted there; the nodes serve whatever the questions
        reads = searches_per_day(workload) * (_value(workload, "results_per_search")
                                              + _value(workload, "statistics_count_reads_per_search"))
        lines.append(Line("Firestore reads of returned chunks and term counts", reads, "reads", reads * read_price))
        shards = math.ceil(chunks / _value(workload, "vertex_shard_vectors"))
        node_hours = shards * _value(workload, "vertex_replicas") * 24
        node_price = _value(prices, "vertex_node_hour")
        lines.append(Line(f"Vector Search nodes ({shards} shard(s) x {_value(workload, 'vertex_replicas')} replicas)",
                          node_hours, "node-hours", _priced(node_hours, node_price)))
        ingested = _value(workload, "chunks_updated_per_day") * _value(workload, "vertex_bytes_per_datapoint") / 2**30
        lines.append(Line("Vector Search index updates (daily churn)", ingested, "GiB",
                          _priced(ingested, _value(prices, "vertex_index_build_per_gib"))))
    tib = questions * _value(workload, "pubsub_bytes_per_question") / 2**40
    lines.append(Line("Pub/Sub throughput", tib * 2**40 / 1e9, "GB",
                      tib * _value(prices, "pubsub_per_tib")))
    lines += function_lines(workload, prices)
    return Configuration(backend, chunks, tuple(lines))


#: The stages a refined question runs again (workload.json: refinements_per_question).
REFINED_STAGES = ("transformer", "retriever", "grader")


def _priced(quantity: float, price: float | None, scale: float = 1.0) -> float | None:
    return None if price is None else quantity * price / scale


def function_lines(workload: Mapping[str, Any], prices: Mapping[str, Any]) -> list[Line]:
    """Cloud Run functions under request-based billing: each stage's instances are billed for their
    vCPU and memory while they serve (the time a request holds a slot, shared by ``concurrency``
    requests), and per request."""
    questions = _value(workload, "questions_per_day")
    refine = 1 + _value(workload, "refinements_per_question")
    seconds = _value(workload, "function_seconds_per_question")
    concurrency = _value(workload, "function_concurrency")
    memory = _value(workload, "function_memory_gib")
    runs = {stage: questions * (refine if stage in REFINED_STAGES else 1) for stage in seconds}
    cpu = sum(runs[s] * seconds[s] / concurrency[s] for s in seconds)
    gib = sum(runs[s] * seconds[s] / concurrency[s] * memory[s] for s in seconds)
    requests = sum(runs.values())
    return [
        Line("Cloud Run functions vCPU (1 vCPU instances)", cpu, "vCPU-seconds",
             _priced(cpu, _value(prices, "function_vcpu_second"))),
        Line("Cloud Run functions memory", gib, "GiB-seconds", _priced(gib, _value(prices, "function_gib_second"))),
        Line("Cloud Run functions requests", requests, "requests",
             _priced(requests, _value(prices, "function_request_per_million"), 1e6)),
    ]


# ------------------------------------------------------------ the document

def _money(usd: float | None) -> str:
    if usd is None:
        return "unpriced"
    return f"${usd:,.2f}" if usd < 100 else f"${usd:,.0f}"


def _quantity(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:,.1f}{suffix}"
    return f"{value:,.1f}"


def cost_table(workload: Mapping[str, Any], prices: Mapping[str, Any], tokens: Mapping[str, Any]) -> str:
    questions = _value(workload, "questions_per_day")
    rows = ["| backend | chunks | priced cost a day | per 1,000 questions | of which the index | "
            "not priced (quantity a day) |", "|---|---|---|---|---|---|"]
    for backend in BACKENDS:
        for chunks in _value(workload, "chunk_counts"):
            config = configuration(backend, chunks, workload, prices, tokens)
            index = next(line for line in config.lines
                         if line.resource.startswith(("Firestore vector", "Vector Search")))
            unpriced = "; ".join(f"{_quantity(line.quantity)} {line.unit} ({line.resource.split(' (')[0]})"
                                 for line in config.unpriced) or "—"
            index_cost = (_money(index.usd_per_day) if index.usd_per_day is not None
                          else f"{_quantity(index.quantity)} {index.unit}")
            rows.append(f"| {backend} | {chunks:,} | {_money(config.priced_usd_per_day)} | "
                        f"{_money(config.priced_usd_per_day / questions * 1000)} | {index_cost} | {unpriced} |")
    return "\n".join(rows)


def lines_table(workload: Mapping[str, Any], prices: Mapping[str, Any], tokens: Mapping[str, Any]) -> str:
    chunks = max(_value(workload, "chunk_counts"))
    rows = [f"| resource (at {chunks:,} chunks) | firestore: a day | firestore: cost | vertex: a day | vertex: cost |",
            "|---|---|---|---|---|"]
    firestore = configuration("firestore", chunks, workload, prices, tokens)
    vertex = configuration("vertex", chunks, workload, prices, tokens)
    by_resource: dict[str, dict[str, Line]] = {}
    for config in (firestore, vertex):
        for line in config.lines:
            by_resource.setdefault(line.resource, {})[config.backend] = line
    for resource, lines in by_resource.items():
        cells = []
        for backend in BACKENDS:
            line = lines.get(backend)
            cells += ["—", "—"] if line is None else [f"{_quantity(line.quantity)} {line.unit}", _money(line.usd_per_day)]
        rows.append(f"| {resource} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def thinking_table(workload: Mapping[str, Any], prices: Mapping[str, Any], tokens: Mapping[str, Any]) -> str:
    questions = _value(workload, "questions_per_day")
    rows = ["| thinking_level | input tokens / question | output tokens incl. thinking / question | "
            "Gemini per 1,000 questions (2026 / 2027 price) | Gemini a day at 100k questions (2026 / 2027) |",
            "|---|---|---|---|---|"]
    for level in LEVELS:
        tokens_in, tokens_out = tokens_per_question(tokens, workload, level)
        per_q = {p: gemini_usd_per_question(tokens_in, tokens_out, prices, p) for p in PERIODS}
        lost = [op for op in OPERATIONS if not tokens["levels"][level][op].get("usable", True)]
        note = f" (no answer: thinking used the whole limit in {', '.join(lost)})" if lost else ""
        rows.append(f"| {level}{note} | {tokens_in:,.0f} | {tokens_out:,.0f} | "
                    f"{_money(per_q['2026'] * 1000)} / {_money(per_q['2027'] * 1000)} | "
                    f"{_money(per_q['2026'] * questions)} / {_money(per_q['2027'] * questions)} |")
    return "\n".join(rows)


def bound_table(workload: Mapping[str, Any], prices: Mapping[str, Any], bounds: Mapping[str, Any]) -> str:
    bound = bounds["max_index_read_usd_per_day"]
    rows = [f"| questions a day | largest corpus for Firestore (index reads <= ${bound:g} a day) |", "|---|---|"]
    for questions in (1_000, 10_000, 100_000):
        rows.append(f"| {questions:,} | {firestore_max_chunks(bound, questions, workload, prices):,} chunks |")
    return "\n".join(rows)


def sections(data: Path = DATA) -> dict[str, str]:
    workload, prices, tokens = load("workload", data), load("prices", data), load("tokens", data)
    bounds = load("bounds", data)
    return {
        "capacity-costs": cost_table(workload, prices, tokens),
        "capacity-lines": lines_table(workload, prices, tokens),
        "capacity-thinking": thinking_table(workload, prices, tokens),
        "capacity-bound": bound_table(workload, prices, bounds),
    }


def embedded(text: str, name: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise ValueError(f"docs/capacity.md lost its {name} markers")
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def rewrite(text: str, parts: Mapping[str, str]) -> str:
    for name, body in parts.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        before, rest = text.split(start, 1)
        text = f"{before}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


# ------------------------------------------------------------ measuring tokens on the stand-in

def measure(levels: tuple[str, ...] = LEVELS) -> dict[str, Any]:
    """Each call's tokens (usageMetadata) at each thinking level, on the Gemini stand-in, with the
    prompts the stages send: a question, 15 graded passages of 500 characters, 10 whole passages."""
    from google import genai
    from google.genai import types

    from shared.adapters.gcp.gemini import GeminiLanguageModel
    from shared.contract.ports import NumberedContext
    from tests.integration.fake_gemini import FakeGemini

    passages = _passages(15)
    question = "How does the feed poller avoid fetching an unchanged feed again?"
    graded = [NumberedContext(i + 1, f"doc-{i}", text[:500]) for i, text in enumerate(passages)]
    answered = [NumberedContext(i + 1, f"doc-{i}", text) for i, text in enumerate(passages[:10])]
    replies = {
        "transform": json.dumps({"rewritten": "feed poller conditional HTTP requests ETag Last-Modified",
                                 "sub_queries": ["conditional GET feed polling", "HTTP 304 Not Modified"]}),
        "grade": json.dumps({"score": 0.8, "relevance": 0.85, "completeness": 0.7, "grounded": True,
                             "answerable": True, "reasoning": "Context 1 states the conditional request.",
                             "missing_aspects": []}),
        "synthesize": json.dumps({"abstained": False, "sentences": [
            {"text": "The poller sends the feed's ETag and Last-Modified back, and a 304 answer means "
                     "nothing changed.", "citations": [1]}]}),
    }
    result: dict[str, Any] = {}
    with FakeGemini() as server:
        client = genai.Client(api_key="measure", http_options=types.HttpOptions(base_url=server.url))
        for level in levels:
            llm = GeminiLanguageModel(client, "gemini-3.8-flash", thinking_level=level)
            calls = {
                "transform": lambda llm=llm: llm.transform(question, today=date(2026, 11, 28)),
                "grade": lambda llm=llm: llm.grade(question, graded),
                "synthesize": lambda llm=llm: llm.synthesize(question, answered, language="en"),
            }
            result[level] = {}
            for operation in OPERATIONS:
                server.reply(replies[operation])
                malformed = llm.malformed_replies
                try:
                    calls[operation]()
                    usable = llm.malformed_replies == malformed
                except Exception:  # noqa: BLE001 - a reply thinking used up is part of what is measured
                    usable = False
                call = llm.last_call
                result[level][operation] = {"input": call.input_tokens, "output": call.output_tokens,
                                            "usable": usable}
    return {"about": "Tokens of one call (usageMetadata: promptTokenCount; candidatesTokenCount + "
                     "thoughtsTokenCount) measured by `bench/capacity.py --measure` on the Gemini stand-in "
                     "(tests/integration/fake_gemini.py): its prompt tokens are characters / 4, its thinking "
                     "tokens a fixed size per level; re-measure on the service before relying on the figure.",
            "model": "gemini-3.8-flash", "levels": result}


def _passages(count: int) -> list[str]:
    """Passages of ~1,000 characters (a chunk of ~250 tokens) from the packaged corpus."""
    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "shared" / "corpus" / "docs").iterdir())]
    words = " ".join(" ".join(texts).split()).split(" ")
    passages, current = [], []
    for word in words * (1 + count * 200 // max(1, len(words))):
        current.append(word)
        if len(" ".join(current)) >= 1000:
            passages.append(" ".join(current))
            current = []
            if len(passages) == count:
                break
    return passages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/capacity.md is stale")
    parser.add_argument("--measure", action="store_true", help="re-measure tokens.json on the Gemini stand-in")
    args = parser.parse_args(argv)
    if args.measure:
        (DATA / "tokens.json").write_text(json.dumps(measure(), indent=2) + "\n", encoding="utf-8")
    parts = sections()
    text = DOC.read_text(encoding="utf-8")
    stale = [name for name, body in parts.items() if embedded(text, name) != body.strip()]
    if args.check:
        print("stale: " + ", ".join(stale) if stale else "docs/capacity.md is current")
        return 1 if stale else 0
    DOC.write_text(rewrite(text, parts), encoding="utf-8")
    for body in parts.values():
        print(body, end="\n\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
