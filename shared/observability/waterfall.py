"""A trace as a tree a person can read: stages and iterations, durations, grades."""

from __future__ import annotations

from typing import Any

_SHOWN = (
    ("rag.iteration", "iter {}"),
    ("rag.decision", "{}"),
    ("rag.grade.score", "score {:.2f}"),
    ("rag.grade.relevance", "rel {:.2f}"),
    ("rag.grade.completeness", "comp {:.2f}"),
    ("rag.time_filter", "time '{}'"),
    ("rag.filters", "filters: {}"),
    ("rag.time_widened", "widened: {}"),
    ("rag.context_count", "{} contexts"),
    ("rag.chunk_count", "{} chunks"),
    ("rag.outcome", "{}"),
    ("rag.delivery", "delivery {}"),
    ("gen_ai.usage.input_tokens", "in {} tok"),
    ("gen_ai.usage.output_tokens", "out {} tok"),
)


def build_tree(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Roots of the span forest, each with ``children`` sorted by start time."""
    by_id = {s["span_id"]: {**s, "children": []} for s in spans}
    roots = []
    for span in sorted(by_id.values(), key=lambda s: s["start_ns"]):
        parent = by_id.get(span["parent_id"] or "")
        (parent["children"] if parent else roots).append(span)
    return roots


def _label(span: dict[str, Any]) -> str:
    attrs = span["attributes"]
    bits = []
    for key, fmt in _SHOWN:
        if key == "rag.iteration" and isinstance(attrs.get(key), int):
            bits.append(fmt.format(attrs[key] + 1))  # numbered from 1, as the page and `ragbus ask` do
            continue
        if key in attrs and attrs[key] is not None and not (key == "rag.delivery" and attrs[key] == "ack"):
            try:
                bits.append(fmt.format(attrs[key]))
            except (ValueError, TypeError):
                bits.append(f"{key}={attrs[key]}")
    if attrs.get("rag.retry"):
        bits.append(f"RETRY attempt {attrs.get('messaging.gcp_pubsub.message.delivery_attempt')}")
    if span["status"] == "ERROR":
        bits.append(f"ERROR {span.get('status_message') or ''}".strip())
    return f"{span['name']}" + (f"  [{', '.join(bits)}]" if bits else "")


def rows(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The waterfall as data, depth-first: what the web page draws and ``render`` prints."""
    if not spans:
        return []
    start = min(s["start_ns"] for s in spans)
    out: list[dict[str, Any]] = []

    def walk(span: dict[str, Any], depth: int) -> None:
        out.append({
            "span_id": span["span_id"], "parent_id": span["parent_id"], "depth": depth,
            "name": span["name"], "label": _label(span), "status": span["status"],
            "offset_ms": round((span["start_ns"] - start) / 1e6, 3),
            "duration_ms": round(span["duration_ms"], 3),
        })
        for child in span["children"]:
            walk(child, depth + 1)

    for root in build_tree(spans):
        walk(root, 0)
    return out


def render(spans: list[dict[str, Any]], width: int = 30) -> list[str]:
    """Lines of the waterfall: tree, offset from the trace start, duration, a bar."""
    if not spans:
        return []
    start = min(s["start_ns"] for s in spans)
    total = max(max(s["end_ns"] for s in spans) - start, 1)
    lines: list[str] = []

    def walk(span: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        offset = (span["start_ns"] - start) / 1e6
        a = int((span["start_ns"] - start) / total * width)
        b = max(a + 1, int((span["end_ns"] - start) / total * width))
        bar = " " * a + "█" * (b - a) + " " * (width - b)
        lines.append(f"{bar} {offset:9.1f} ms {span['duration_ms']:9.1f} ms  {prefix}{branch}{_label(span)}")
        child_prefix = prefix + ("" if top else ("   " if last else "│  "))
        for n, child in enumerate(span["children"]):
            walk(child, child_prefix, n == len(span["children"]) - 1, False)

    for root in build_tree(spans):
        walk(root, "", True, True)
    return lines
