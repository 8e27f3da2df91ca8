"""Every option of ``tritongen convert``, over each source kind: it acts, or it is refused in one line.

The options are read from the command itself, so an option added without a row here fails
the walk. Each row gives the option's words and, per source kind (an ONNX file, a TorchScript
file, a PyTorch factory), what must come of them: a refusal naming the option (exit 1, nothing
written), or a check of what the written models show (config, metadata, the convert JSON).
Each source is a text encoder with a dynamic sequence dim, built in code; the base command
builds ONNX only, so every option of another format is expected refused here (each format's
own tests show it acting).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer.main
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.examples.models import write_example

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

KINDS = ("onnx", "torchscript", "pytorch")
SPECS = ["--input-spec", "input_ids:INT64:-1,-1", "--input-spec", "attention_mask:INT64:-1,-1"]
NAME = "walk"


@dataclass
class Built:
    """What one convert run left: exit code, output, the convert JSON, the repository."""

    code: int
    output: str
    document: dict[str, Any]
    repo: Path

    def config(self, fmt: str = "onnx") -> str:
        return (self.repo / f"{NAME}_{fmt}" / "config.pbtxt").read_text()

    def metadata(self, fmt: str = "onnx") -> dict[str, Any]:
        return json.loads((self.repo / f"{NAME}_{fmt}" / "tritongen.json").read_text())

    def outcome(self, label: str = "onnx") -> dict[str, Any]:
        return next(o for o in self.document["outcomes"] if o["label"] == label)


Check = Callable[[Built], bool]


@dataclass(frozen=True)
class Refused:
    """A refusal whose one line holds ``words``."""

    words: str


@dataclass(frozen=True)
class Row:
    """An option's words (per kind where they differ) and what must come of them."""

    args: list[str]
    expect: dict[str, Check | Refused]
    args_for: dict[str, list[str]] = field(default_factory=dict)

    def words(self, kind: str) -> list[str]:
        return self.args_for.get(kind, self.args)


def _all(check: Check | Refused) -> dict[str, Check | Refused]:
    return dict.fromkeys(KINDS, check)


def _npz(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    path = folder / "verify.npz"
    ids = rng.integers(0, 50, size=(2, 5)).astype(np.int64)
    np.savez(path, input_ids=ids, attention_mask=np.ones((2, 5), dtype=np.int64))
    return path


def _templates(folder: Path) -> Path:
    from tritongen.triton.templates import builtin_templates_dir

    target = folder / "templates"
    target.mkdir(exist_ok=True)
    text = (builtin_templates_dir() / "config.pbtxt.j2").read_text()
    (target / "config.pbtxt.j2").write_text("# walked\n" + text)
    return target


def rows(folder: Path) -> dict[str, Row]:
    """The table: one row per option of ``convert``."""
    other = "input_ids:INT64:-1,12"
    return {
        "--name": Row(
            ["--name", "other"], _all(lambda b: (b.repo / "other_onnx" / "config.pbtxt").is_file())
        ),
        "--repo": Row(["--repo", str(folder / "elsewhere")], _all(lambda b: (folder / "elsewhere").is_dir())),
        "--target": Row(["--target", "container"], _all(lambda b: 'backend: "onnxruntime"' in b.config())),
        "--formats": Row(
            ["--formats", "onnx,torchscript"],
            {
                "onnx": lambda b: (
                    b.code == 1 and "torchscript unavailable: TorchScript is made from" in b.output
                ),
                "torchscript": lambda b: b.outcome("torchscript")["status"] == "built",
                "pytorch": lambda b: b.outcome("torchscript")["status"] == "built",
            },
        ),
        "--templates": Row(
            ["--templates", str(_templates(folder))], _all(lambda b: b.config().startswith("# walked"))
        ),
        "--force": Row(["--force"], _all(lambda b: b.code == 0 and b.outcome()["status"] == "built")),
        "--shape": Row(
            ["--shape", "input_ids=1,24"],
            _all(lambda b: b.document["verified_shapes"]["inputs"]["attention_mask"] == [1, 24]),
        ),
        "--fixed-shape": Row(
            ["--shape", "input_ids=24", "--fixed-shape"], _all(lambda b: "dims: [ 24 ]" in b.config())
        ),
        "--constant": Row(
            ["--constant", "attention_mask=1"],
            {
                "onnx": Refused("--constant attention_mask: the input has dynamic dims [-1,-1]"),
                "torchscript": Refused("--input-spec and --constant both name 'attention_mask'"),
                "pytorch": Refused("--input-spec and --constant both name 'attention_mask'"),
            },
        ),
        "--max-batch-size": Row(["--max-batch-size", "8"], _all(lambda b: "max_batch_size: 8" in b.config())),
        "--preferred-batch-sizes": Row(
            ["--preferred-batch-sizes", "2,4"], _all(lambda b: "preferred_batch_size: [ 2, 4 ]" in b.config())
        ),
        "--max-queue-delay-us": Row(
            ["--max-queue-delay-us", "700"], _all(lambda b: "max_queue_delay_microseconds: 700" in b.config())
        ),
        "--dynamic-batching": Row(
            ["--no-dynamic-batching"], _all(lambda b: "dynamic_batching" not in b.config())
        ),
        "--instances": Row(["--instances", "2"], _all(lambda b: "count: 2" in b.config())),
        "--kind": Row(
            ["--kind", "gpu"], _all(Refused("--kind gpu: ONNX Runtime in the embedded server runs on CPU"))
        ),
        "--input-spec": Row(
            ["--input-spec", other, "--input-spec", "attention_mask:INT64:-1,12"],
            _all(lambda b: "dims: [ 12 ]" in b.config()),
        ),
        "--output-names": Row(
            ["--output-names", "renamed"],
            {
                "onnx": Refused("--output-names renamed differ from"),
                "torchscript": lambda b: 'name: "renamed"' in b.config(),
                "pytorch": lambda b: 'name: "renamed"' in b.config(),
            },
            args_for={k: ["--output-names", "renamed,other"] for k in ("torchscript", "pytorch")},
        ),
        "--script": Row(
            ["--script"],
            {
                "onnx": Refused(
                    "--script would do nothing: --script makes TorchScript from a PyTorch factory"
                ),
                "torchscript": Refused(
                    "--script would do nothing: --script makes TorchScript from a PyTorch"
                ),
                "pytorch": lambda b: b.metadata("torchscript")["engine"]["torchscript"] == "script",
            },
            args_for={"pytorch": ["--script", "--formats", "onnx,torchscript"]},
        ),
        **{
            flag: Row(args, _all(Refused(f"{flag} would do nothing: it applies to the {fmt} format")))
            for flag, args, fmt in (
                ("--tvm-target", ["--tvm-target", "llvm"], "tvm"),
                ("--tvm-tune-trials", ["--tvm-tune-trials", "4"], "tvm"),
                ("--tvm-tune-minutes", ["--tvm-tune-minutes", "1"], "tvm"),
                ("--tvm-buckets", ["--tvm-buckets", "batch=1"], "tvm"),
                ("--tvm-pad", ["--tvm-pad", "attention_mask:1"], "tvm"),
                ("--tvm-strict-buckets", ["--tvm-strict-buckets"], "tvm"),
                ("--tvm-exact-math", ["--tvm-exact-math"], "tvm"),
                ("--opt-batch-size", ["--opt-batch-size", "4"], "tensorrt"),
                ("--workspace-mb", ["--workspace-mb", "64"], "tensorrt"),
                ("--timing-cache", ["--timing-cache", str(folder / "cache")], "tensorrt"),
                ("--cuda-graphs", ["--cuda-graphs"], "tensorrt"),
                ("--dims", ["--dims", "seq=1,8,16"], "tensorrt"),
                ("--tensorrt-version", ["--tensorrt-version", "10.3"], "tensorrt"),
                ("--dry-run", ["--dry-run"], "tensorrt"),
            )
        },
        **{
            args[0]: Row(args, _all(Refused(f"{args[0]} sets a language model's engine")))
            for args in (
                ["--max-model-len", "64"],
                ["--max-num-seqs", "4"],
                ["--max-num-batched-tokens", "64"],
                ["--chunked-prefill"],
                ["--prefix-caching"],
                ["--kv-cache-fraction", "0.5"],
                ["--kv-cache-gib", "1"],
                ["--vllm-env", str(folder)],
            )
        },
        "--precision": Row(
            ["--precision", "fp16"], _all(lambda b: b.outcome("onnx fp16")["status"] == "built")
        ),
        "--int8-mode": Row(["--int8-mode", "dynamic"], _all(Refused("--int8-mode dynamic would do nothing"))),
        "--calibration-data": Row(
            ["--calibration-data", "random"], _all(Refused("--calibration-data applies to static INT8 only"))
        ),
        "--calibration-method": Row(
            ["--calibration-method", "entropy"], _all(Refused("--calibration-method would do nothing"))
        ),
        "--calibration-samples": Row(
            ["--calibration-samples", "4"], _all(Refused("--calibration-samples would do nothing"))
        ),
        "--calibration-cache": Row(
            ["--calibration-cache", str(folder / "calib")],
            _all(Refused("--calibration-cache is a TensorRT cache")),
        ),
        "--keep-fp32": Row(
            ["--keep-fp32", "op:Tanh"], _all(Refused("--keep-fp32 needs a reduced precision"))
        ),
        "--auto-mixed-precision": Row(
            ["--auto-mixed-precision"], _all(Refused("--auto-mixed-precision needs a reduced precision"))
        ),
        "--max-error": Row(
            ["--max-error", "0.1"], _all(Refused("--max-error is the budget of --auto-mixed"))
        ),
        "--error-metric": Row(["--error-metric", "cosine"], _all(Refused("--error-metric would do nothing"))),
        "--verify-data": Row(
            ["--verify-data", str(_npz(folder))],
            _all(lambda b: b.outcome()["verification"]["samples"] == 12 + 2),
        ),
        "--atol": Row(["--atol", "0.5"], _all(lambda b: b.outcome()["verification"]["atol"] == 0.5)),
        "--rtol": Row(["--rtol", "0.5"], _all(lambda b: b.outcome()["verification"]["rtol"] == 0.5)),
        "--keep-failed": Row(  # FP16 fails a zero tolerance: kept, marked
            ["--keep-failed", "--precision", "fp16", "--atol", "0", "--rtol", "0"],
            _all(
                lambda b: (
                    b.outcome("onnx fp16")["status"] == "kept" and (b.repo / f"{NAME}_onnx_fp16").is_dir()
                )
            ),
        ),
        "--no-verify": Row(["--no-verify"], _all(lambda b: b.outcome()["verification"] is None)),
        "--json": Row(
            ["--json", str(folder / "other.json")], _all(lambda b: (folder / "other.json").is_file())
        ),
        "--html": Row(
            ["--html", str(folder / "report.html")], _all(lambda b: (folder / "report.html").is_file())
        ),
    }


def convert_options() -> list[str]:
    """Every option of ``convert`` (its first spelling)."""
    command = typer.main.get_command(app).commands["convert"]  # type: ignore[attr-defined]
    return [p.opts[0] for p in command.params if p.opts[0].startswith("--")]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The text encoder as each kind of source."""
    from support.torch_factories import pooled_pair

    folder = tmp_path_factory.mktemp("sources")
    onnx_path = write_example("text", folder / "walk.onnx")
    ids = torch.randint(0, 50, (2, 7))
    traced = torch.jit.trace(pooled_pair(), (ids, torch.ones(2, 7, dtype=torch.int64)))
    traced.save(str(folder / "walk.pt"))
    return {
        "onnx": str(onnx_path),
        "torchscript": str(folder / "walk.pt"),
        "pytorch": "support.torch_factories:pooled_pair",
    }


def _run(source: str, kind: str, words: list[str], folder: Path) -> Built:
    repo = folder / "repo"
    out = folder / "convert.json"
    specs = [] if kind == "onnx" else SPECS
    if "--input-spec" in words:
        specs = []
    base = ["convert", source, "--name", NAME, "--repo", str(repo), "--json", str(out)]
    if "--force" in words:  # something to replace
        assert CliRunner().invoke(app, [*base, *specs]).exit_code == 0
    result = CliRunner().invoke(app, [*base, *specs, *words])
    document = json.loads(out.read_text()) if out.is_file() else {}
    if "--repo" in words:
        repo = Path(words[words.index("--repo") + 1])
    return Built(result.exit_code, result.stdout + result.stderr, document, repo)


def test_the_table_has_a_row_for_every_option(tmp_path: Path) -> None:
    assert sorted(rows(tmp_path)) == sorted(convert_options())


@pytest.mark.parametrize("kind", KINDS)
def test_every_option_acts_or_is_refused_in_one_line(
    kind: str, sources: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    table = rows(tmp_path_factory.mktemp("rows"))
    failures = []
    for flag in convert_options():
        folder = tmp_path_factory.mktemp(flag.strip("-"))
        row = table[flag]
        built = _run(sources[kind], kind, row.words(kind), folder)
        expect = row.expect[kind]
        if isinstance(expect, Refused):
            lines = [line for line in built.output.splitlines() if line.startswith("error:")]
            ok = built.code == 1 and len(lines) == 1 and expect.words in lines[0]
            ok = ok and not any(p.name.startswith(NAME) for p in built.repo.glob("*"))
        else:
            try:
                ok = expect(built)
            except (OSError, KeyError, StopIteration, ValueError):
                ok = False
        if not ok:
            failures.append(f"{flag} ({kind}): exit {built.code}: {built.output.strip()[-400:]}")
    assert not failures, "\n".join(failures)
