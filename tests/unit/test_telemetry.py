"""Metrics of the loop, and logs that carry their trace."""

import io
import json
import logging

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from shared.contract.messages import QuerySubmitted
from shared.observability.logs import JsonFormatter, TextFormatter, TraceContextFilter
from shared.observability.tracing import tracer, tracer_provider
from tests.unit.loop_fakes import CORPUS, ScriptedLLM, good_grade, make_loop, weak_grade

tracer_provider()  # an SDK provider, so spans have real ids
READER = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


def _points(name):
    data = READER.get_metrics_data()
    out = []
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    out.extend(metric.data.data_points)
    return out


def test_a_refined_query_counts_its_outcome_refinements_iterations_and_grades():
    llm = ScriptedLLM(grades=[weak_grade(0.4), good_grade(0.9)], refines=["dense retrieval vectors"])
    loop = make_loop(CORPUS, llm)
    loop.submit("how does BM25 work", top_k=1)
    loop.pump(QuerySubmitted(query_id="q1"))
    assert loop.record()["outcome"] == "answered"
    (answered,) = [p for p in _points("ragbus.queries") if p.attributes == {"outcome": "answered"}]
    assert answered.value >= 1
    assert sum(p.value for p in _points("ragbus.refinements")) >= 1
    iterations = [p for p in _points("ragbus.query.iterations") if p.attributes == {"outcome": "answered"}]
    assert iterations and iterations[0].max >= 2
    decisions = {p.attributes["decision"] for p in _points("ragbus.grade.score")}
    assert {"refine", "accept"} <= decisions


def _log_line(formatter, message):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(TraceContextFilter())
    logger = logging.getLogger("ragbus.test.telemetry")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.warning(message)
    return stream.getvalue().strip()


def test_json_logs_carry_the_trace_in_cloud_loggings_fields():
    with tracer().start_as_current_span("work") as span:
        entry = json.loads(_log_line(JsonFormatter("proj-1"), "inside"))
        ctx = span.get_span_context()
    assert entry["message"] == "inside" and entry["severity"] == "WARNING"
    assert entry["logging.googleapis.com/trace"] == f"projects/proj-1/traces/{ctx.trace_id:032x}"
    assert entry["logging.googleapis.com/spanId"] == f"{ctx.span_id:016x}"
    outside = json.loads(_log_line(JsonFormatter("proj-1"), "outside"))
    assert "logging.googleapis.com/trace" not in outside


def test_text_logs_name_the_trace():
    with tracer().start_as_current_span("work") as span:
        line = _log_line(TextFormatter(), "inside")
    assert line.endswith(f"trace={span.get_span_context().trace_id:032x}")
