"""Vertex AI embeddings of one large document: one request after another vs. bounded parallel.

gemini-embedding-001 on Vertex AI takes one text per online request, so a document cut into
2,000 chunks is 2,000 requests inside the indexer's 300 s timeout. This drives GenAiEmbedder
(the real google-genai client) against the loopback stand-in of the Vertex AI endpoint
(tests/integration/fake_genai_embed.py), which holds each answer ``--latency-ms`` to stand for
the service's own time, and prints the wall time per concurrency and what that projects to at
a given real per-request latency.

    .venv/bin/python bench/genai_embed_parallel.py [--chunks 2000] [--latency-ms 50] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from google import genai  # noqa: E402
from google.genai import types  # noqa: E402
from google.oauth2.credentials import Credentials  # noqa: E402

from shared.adapters.gcp.genai_embedder import GenAiEmbedder  # noqa: E402
from tests.integration.fake_genai_embed import FakeEmbeddingServer  # noqa: E402

INDEXER_TIMEOUT_S = 300  # infra/stages.tf, indexer-document-cleaned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="held per request by the stand-in")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated bounds to compare")
    args = parser.parse_args()
    if not 0 < args.chunks <= 20_000 or not 0 <= args.latency_ms <= 2000:
        parser.error("--chunks 1..20000 and --latency-ms 0..2000 keep the run bounded")
    texts = [f"chunk {i}: glaciers retreat as the climate warms, and feeds are polled." for i in range(args.chunks)]
    print(f"{args.chunks} chunks, gemini-embedding-001 on Vertex AI (one text per request), "
          f"{args.latency_ms:g} ms held per request by the stand-in")
    print(f"{'concurrency':>11} {'wall s':>8} {'requests':>8} {'in flight':>9} {'req/s':>7}")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        with FakeEmbeddingServer(delay_s=args.latency_ms / 1000) as server:
            client = genai.Client(enterprise=True, project="bench", location="europe-west4",
                                  credentials=Credentials(token="bench"),
                                  http_options=types.HttpOptions(base_url=server.url))
            embedder = GenAiEmbedder(client, dimension=768, concurrency=concurrency)
            started = time.perf_counter()
            vectors = embedder.embed(texts)
            wall = time.perf_counter() - started
            assert vectors.shape == (args.chunks, 768)
            print(f"{concurrency:>11} {wall:>8.1f} {len(server.requests):>8} {server.max_in_flight:>9} "
                  f"{len(server.requests) / wall:>7.0f}")
            per_request = wall / len(server.requests) * concurrency  # service time + client overhead
            client_overhead = max(0.0, per_request - args.latency_ms / 1000)
            for real_ms in (150, 300):
                projected = args.chunks * (real_ms / 1000 + client_overhead) / concurrency
                fits = "fits" if projected < INDEXER_TIMEOUT_S else "does NOT fit"
                print(f"{'':>11} at {real_ms} ms a request: ~{projected:.0f} s, {fits} the indexer's "
                      f"{INDEXER_TIMEOUT_S} s")


if __name__ == "__main__":
    main()
