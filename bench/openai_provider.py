"""RAGBUS_LLM=openai on a real local model: per-call latency, tokens/s, and `ragbus ask` (a benchmark).

In one run, against llama-cpp-python's server with Gemma 3 270M Q4_K_M on 127.0.0.1
(the model and server the integration tests use, tests/integration/llama_server.py):

1. the server's raw speeds: prompt processing (a long prompt, one output token) and
   generation (a plain completion of exactly 128 tokens, no grammar), in tokens/s from the
   server's own usage counts and the client's wall time;
2. each provider operation (transform, grade with 10 contexts, synthesize with 5) through
   ``OpenAICompatibleLanguageModel``, ``--calls`` times: wall time per call, tokens in and
   out, and whether the reply parsed;
3. ``ragbus ask`` in a subprocess on a home holding the bundled corpus, once with
   ``RAGBUS_LLM=local`` and once with ``RAGBUS_LLM=openai``, for the same questions:
   wall time, outcome, model calls and fallbacks.

The load average is printed at the start and the end: the machine is shared.

    python bench/openai_provider.py                 # about five minutes on two busy cores
    python bench/openai_provider.py --calls 2 --questions 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.adapters.openai_compatible import OpenAICompatibleLanguageModel  # noqa: E402
from shared.contract.ports import NumberedContext  # noqa: E402
from shared.corpus import CORPUS  # noqa: E402
from tests.integration.llama_server import MODEL_ALIAS, gguf_model, start_llama_server  # noqa: E402
from tests.support import run_cli  # noqa: E402

QUESTIONS = [
    "How does reciprocal rank fusion combine rankings?",
    "Why do consumers need idempotency keys?",
    "What does a 304 response mean for feed polling?",
]


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def raw_speeds(url: str, repeats: int) -> dict[str, float]:
    """Prompt processing (a long prompt, one token out) and plain generation (``/completions``,
    no chat template, no grammar, exactly 128 tokens out: ``min_tokens`` = ``max_tokens``)."""
    long_prompt = " ".join(f"Sentence {n} says that retrieval quality depends on chunking." for n in range(150))
    prompt_rates, gen_rates = [], []
    for _ in range(repeats):
        started = time.monotonic()
        reply = httpx.post(f"{url}/chat/completions", timeout=300, json={
            "model": MODEL_ALIAS, "max_tokens": 1, "messages": [{"role": "user", "content": long_prompt}]}).json()
        prompt_rates.append(reply["usage"]["prompt_tokens"] / (time.monotonic() - started))
        started = time.monotonic()
        reply = httpx.post(f"{url}/completions", timeout=300, json={
            "model": MODEL_ALIAS, "prompt": "The lighthouse keeper", "max_tokens": 128, "min_tokens": 128,
            "temperature": 0.7}).json()
        gen_rates.append(reply["usage"]["completion_tokens"] / (time.monotonic() - started))
    return {"prompt_tokens_per_s": statistics.median(prompt_rates),
            "generated_tokens_per_s": statistics.median(gen_rates)}


def provider_calls(url: str, calls: int) -> dict[str, dict[str, float]]:
    docs = sorted((CORPUS / "docs").glob("*"))
    paragraphs = [p.strip() for d in docs for p in d.read_text().split("\n\n") if len(p.strip()) > 200]
    contexts = [NumberedContext(n, f"https://example.org/{n}", p[:500]) for n, p in enumerate(paragraphs[:10], 1)]
    llm = OpenAICompatibleLanguageModel(url, MODEL_ALIAS, timeout_s=300)
    question = QUESTIONS[0]
    operations = {
        "transform": lambda: llm.transform(question, today=date.today()),
        "grade (10 contexts)": lambda: llm.grade(question, contexts),
        "synthesize (5 contexts)": lambda: llm.synthesize(question, contexts[:5], language="en"),
    }
    out = {}
    for name, call in operations.items():
        seconds, tokens_in, tokens_out = [], [], []
        malformed_before = llm.malformed_replies
        for _ in range(calls):
            call()
            seconds.append(llm.last_call.seconds)
            tokens_in.append(llm.last_call.input_tokens)
            tokens_out.append(llm.last_call.output_tokens)
        out[name] = {
            "calls": calls, "p50_s": statistics.median(seconds), "max_s": max(seconds),
            "input_tokens": statistics.median(tokens_in), "output_tokens": statistics.median(tokens_out),
            "output_tokens_per_s": sum(tokens_out) / sum(seconds),
            "unusable_replies": llm.malformed_replies - malformed_before,
        }
    out["json_mode"] = llm.json_mode  # type: ignore[assignment]
    llm.close()
    return out


def asks(url: str, questions: list[str], workdir: Path) -> dict[str, list[dict]]:
    home = workdir / "home"
    run_cli(home, "ingest", str(CORPUS / "docs"), timeout=900)
    results: dict[str, list[dict]] = {}
    for provider in ("local", "openai"):
        env = {"RAGBUS_LLM": provider, "RAGBUS_QUERY_TIMEOUT_S": "600"}
        if provider == "openai":
            env |= {"RAGBUS_OPENAI_BASE_URL": url, "RAGBUS_OPENAI_MODEL": MODEL_ALIAS, "RAGBUS_OPENAI_TIMEOUT_S": "300"}
        rows = []
        for question in questions:
            started = time.monotonic()
            proc = run_cli(home, "ask", question, "--json", check=False, timeout=900, **env)
            wall = time.monotonic() - started
            record = json.loads(proc.stdout)
            rows.append({"question": question, "wall_s": wall, "outcome": record.get("outcome"),
                         "model_calls": record.get("model_calls"),
                         "fallbacks": [f"{f.get('stage')}: {f.get('reason')}" for f in record.get("fallbacks") or []],
                         "answer_provider": record.get("answer_provider"),
                         "answer": (record.get("answer") or "")[:300]})
        results[provider] = rows
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3, help="calls per provider operation")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="questions asked with `ragbus ask`")
    parser.add_argument("--threads", type=int, help="the server's threads (default: its own choice)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    results: dict = {"load_start": load(), "cpus": os.cpu_count(), "threads": args.threads or "server default"}
    with tempfile.TemporaryDirectory() as tmp:
        model = gguf_model()
        started = time.monotonic()
        server = start_llama_server(model, Path(tmp), threads=args.threads)
        results["server_start_s"] = time.monotonic() - started
        try:
            results["raw"] = raw_speeds(server.url, repeats=2)
            results["operations"] = provider_calls(server.url, args.calls)
            results["ask"] = asks(server.url, QUESTIONS[: args.questions], Path(tmp))
        finally:
            server.stop()
    results["load_end"] = load()
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
