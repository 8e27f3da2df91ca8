"""Edge targets for TVM: presets, which machine a library is for, cross-compiling for aarch64, refusals.

The cross-compiled library is checked here only as a file (its ELF header, the metadata,
the wrapper's refusal); running it on an aarch64 board is not tested here.
"""

from __future__ import annotations

import glob
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.convert.tvm import (
    LIBRARY,
    METADATA,
    TARGET_PRESETS,
    TvmOptions,
    cross,
    resolve_target,
    tvm_unavailable_reason,
)
from tritongen.convert.tvm.compile import export_library
from tritongen.convert.tvm.options import CompileTarget, check_options, make_target
from tritongen.convert.wrappers import wrapper_runner
from tritongen.errors import ConversionError
from tritongen.sources.onnx_source import load_onnx

pytestmark = pytest.mark.skipif(tvm_unavailable_reason() is not None, reason=str(tvm_unavailable_reason()))

AARCH64 = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}
ON_AARCH64 = cross.host_arch() == "aarch64"


def _cross_missing() -> str | None:
    """Why nothing can be cross-compiled for aarch64 here, or ``None`` when it can."""
    if ON_AARCH64:
        return "this machine is aarch64: there is nothing to cross-compile"
    try:
        cross.cross_compiler("aarch64")
    except ConversionError as e:
        return e.message
    return None


@pytest.fixture
def cross_gcc() -> None:
    """Skip (or, with ``TRITONGEN_REQUIRE_CROSS=1``, fail) without the aarch64 cross gcc."""
    missing = _cross_missing()
    if missing is None:
        return
    if os.environ.get("TRITONGEN_REQUIRE_CROSS") and not ON_AARCH64:
        pytest.fail(f"{missing}: run `make cross-aarch64`")
    pytest.skip(f"{missing} (`make cross-aarch64` installs Debian's)")


needs_x86_host = pytest.mark.skipif(ON_AARCH64, reason="aarch64 is this machine's own architecture")


@pytest.mark.parametrize(
    ("name", "mcpu"), [("aarch64", None), ("rpi4", "cortex-a72"), ("rk3588", "cortex-a76")]
)
def test_presets(name: str, mcpu: str | None) -> None:
    spec = resolve_target(name)
    assert spec == ({**AARCH64, "mcpu": mcpu} if mcpu else AARCH64)
    assert TARGET_PRESETS[name][0]  # a description
    target = make_target(spec)  # TVM's LLVM takes the triple and the core
    assert bool(target.attrs["feature.is_aarch64"]) and bool(target.attrs["feature.has_asimd"])
    spec["mattr"].append("+sve")
    assert resolve_target(name)["mattr"] == ["+neon"]  # each call gets its own copy


def test_rk3588_core_features() -> None:
    """LLVM knows the Cortex-A76: its dot-product and FP16 SIMD features are on."""
    target = make_target(resolve_target("rk3588"))
    assert bool(target.attrs["feature.has_dotprod"]) and bool(target.attrs["feature.has_fp16_simd"])


def test_unknown_target_lists_the_presets() -> None:
    with pytest.raises(ConversionError) as caught:
        resolve_target("raspberry")
    assert caught.value.message == "unknown TVM target 'raspberry'"
    assert caught.value.hint is not None
    for name in ("llvm", "cuda", *TARGET_PRESETS):
        assert name in caught.value.hint


def test_architecture_names() -> None:
    assert cross.normalise_arch("AMD64") == "x86_64"
    assert cross.normalise_arch("arm64") == "aarch64"
    assert cross.normalise_arch("armv7l") == "arm"
    assert cross.target_arch(AARCH64) == "aarch64"
    assert cross.target_arch({"kind": "llvm", "mtriple": "riscv64-unknown-linux-gnu"}) == "riscv64"
    assert cross.target_arch({"kind": "llvm", "mcpu": "znver3"}) == cross.host_arch()
    assert cross.target_arch({"kind": "cuda"}) == cross.host_arch()
    assert cross.is_cross(AARCH64) == (not ON_AARCH64)
    assert not cross.is_cross(resolve_target("llvm"))
    assert cross.foreign_arch({"arch": cross.host_arch(), "target": AARCH64}) is None  # "arch" decides
    assert cross.foreign_arch({"target": {"kind": "llvm"}}) is None
    if not ON_AARCH64:
        assert cross.foreign_arch({"target": AARCH64}) == "aarch64"


def test_elf_arch_of_this_machines_library() -> None:
    import tvm

    libraries = sorted(glob.glob(os.path.join(os.path.dirname(tvm.__file__), "**", "*.so"), recursive=True))
    assert libraries, "TVM ships no shared library"
    assert cross.elf_arch(libraries[0]) == cross.host_arch()


def _elf_header(machine: int, *, big_endian: bool) -> bytes:
    ident = b"\x7fELF" + bytes([2, 2 if big_endian else 1, 1, 0]) + bytes(8)
    return ident + struct.pack(">HH" if big_endian else "<HH", 3, machine) + bytes(44)


def test_elf_arch_of_handcrafted_headers(tmp_path: Path) -> None:
    cases = {
        "aarch64.so": (_elf_header(183, big_endian=False), "aarch64"),
        "aarch64_be.so": (_elf_header(183, big_endian=True), "aarch64"),  # read in its own byte order
        "riscv.so": (_elf_header(243, big_endian=False), "riscv64"),
        "odd.so": (_elf_header(999, big_endian=True), "e_machine 999"),
        "text.so": (b"#!/bin/sh\necho not a library\n", None),
        "short.so": (b"\x7fELF\x02\x01", None),
    }
    for name, (data, arch) in cases.items():
        (tmp_path / name).write_bytes(data)
        assert cross.elf_arch(tmp_path / name) == arch, name


def test_no_cross_compiler_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no cross gcc on it
    with pytest.raises(ConversionError) as caught:
        cross.cross_compiler("aarch64")
    assert caught.value.message == "cross-compiling for aarch64 needs aarch64-linux-gnu-gcc"
    assert caught.value.hint is not None and "make cross-aarch64" in caught.value.hint
    if not ON_AARCH64:  # the library writer asks for it before linking anything
        with pytest.raises(ConversionError, match="needs aarch64-linux-gnu-gcc"):
            export_library(object(), tmp_path / LIBRARY, CompileTarget(AARCH64, None))


@needs_x86_host
def test_tuning_a_cross_target_is_refused() -> None:
    with pytest.raises(ConversionError) as caught:
        check_options(TvmOptions(target="rk3588", tune_trials=16))
    assert "\n" not in caught.value.message
    assert "cannot tune for aarch64" in caught.value.message
    assert "needs the board itself" in caught.value.message


def test_compare_refuses_an_engine_built_for_another_machine(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        app,
        ["compare", str(example_models["mlp"]), "--formats", "onnx,tvm", "--tvm-target", "rpi4",
         "--out", str(tmp_path / "cmp")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "compare measures engines on this machine" in result.stderr
    assert "--tvm-target rpi4 builds for aarch64" in result.stderr
    assert not (tmp_path / "cmp").exists()


@pytest.fixture(scope="module")
def cross_built(example_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``tritongen convert`` of the example MLP for ``--tvm-target aarch64``: exit code, output, model."""
    if _cross_missing() is not None:
        return {}
    repo = tmp_path_factory.mktemp("cross") / "repo"
    result = CliRunner().invoke(
        app,
        ["convert", str(example_models["mlp"]), "--name", "mlp", "--repo", str(repo),
         "--formats", "tvm", "--tvm-target", "aarch64", "--max-batch-size", "8"],
    )  # fmt: skip
    return {"code": result.exit_code, "out": result.stdout, "err": result.stderr, "model": repo / "mlp_tvm"}


@pytest.mark.usefixtures("cross_gcc")
def test_cross_compiled_mlp_is_built_for_aarch64(cross_built: dict[str, Any]) -> None:
    assert cross_built["code"] == 0, cross_built["err"] + cross_built["out"]
    version = cross_built["model"] / "1"
    assert cross.elf_arch(version / LIBRARY) == "aarch64"
    facts = json.loads((version / METADATA).read_text())
    assert facts["target"]["mtriple"] == "aarch64-linux-gnu"
    assert facts.get("arch", "aarch64") == "aarch64"
    model = json.loads((cross_built["model"] / "tritongen.json").read_text())
    assert model["verification"] is None  # built, not verified


@pytest.mark.usefixtures("cross_gcc")
def test_cross_compiled_mlp_says_it_is_not_verified(cross_built: dict[str, Any]) -> None:
    lines = [line for line in cross_built["out"].splitlines() if "cross-compiled" in line]
    assert lines == ["mlp_tvm: cross-compiled for aarch64, not verified here"]


@pytest.mark.usefixtures("cross_gcc")
def test_the_wrapper_refuses_a_library_for_another_machine(
    cross_built: dict[str, Any], example_models: dict[str, Path]
) -> None:
    signature = load_onnx(example_models["mlp"]).signature
    with pytest.raises(RuntimeError) as caught:
        wrapper_runner(cross_built["model"] / "1", signature, 8)
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"{LIBRARY} is built for aarch64 but this machine is {cross.host_arch()}: convert again "
        "with --tvm-target llvm here, or serve it on an aarch64 machine"
    )
