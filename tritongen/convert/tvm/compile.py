"""Compiling a Relax module: legalize and fuse, schedule its kernels, lower, export the library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.convert.tvm.cross import cross_compiler, cross_toolchain_hint, is_cross, target_arch
from tritongen.convert.tvm.options import CompileTarget, first_line
from tritongen.errors import ConversionError


def legalize(module: Any, target: Any, *, fast_math: bool = False) -> Any:
    """Dispatch library ops and legalize the rest of ``module`` to TIR for ``target`` (no fusion yet).

    ``fast_math`` first swaps ``erf``, ``exp`` and ``softmax`` for TVM's fast
    approximations; it must run before legalization, which removes those ops.
    """
    import tvm
    from tvm import relax

    module = clip_gathers(module)
    with target:
        passes = [
            *([relax.transform.FastMathTransform()] if fast_math else []),
            *relax.pipeline.library_dispatch_passes(target),
            relax.transform.LegalizeOps(),
        ]
        return tvm.transform.Sequential(passes)(module)


def clip_gathers(module: Any) -> Any:
    """``module`` with every ``take`` (ONNX Gather) clipping its indices instead of trusting them.

    TVM's ONNX frontend emits ``take`` in its "fast" mode, which reads out of bounds
    for an index outside the table: one bad token id in a request would crash the
    serving process. Clipped, such an index reads the table's edge row.
    """
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    @mutator
    class ClipTake(PyExprMutator):  # type: ignore[misc]
        def visit_call_(self, call: Any) -> Any:
            call = super().visit_call_(call)
            if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.take" and call.attrs.mode == "fast":
                return relax.op.take(call.args[0], call.args[1], call.attrs.axis, mode="clip")
            return call

    rewriter = ClipTake(module)
    for var, function in module.functions_items():
        if isinstance(function, relax.Function):
            rewriter.builder_.update_func(var, rewriter.visit_expr(function))
    return rewriter.builder_.get()


def fuse(module: Any, target: Any, bind: dict[str, int] | None = None) -> Any:
    """Fold constants and fuse a legalized ``module``; ``bind`` first fixes its dynamic dims.

    Binding after legalization (not before) keeps the kernels' names equal in every
    bucket, which lets tuning records move between buckets by name.
    """
    import tvm
    from tvm import relax

    t = relax.transform
    with target:
        passes = [
            *([t.BindSymbolicVars(bind), t.CanonicalizeBindings()] if bind else []),
            t.AnnotateTIROpPattern(),
            t.FoldConstant(),
            t.FuseOps(),
            t.FuseTIR(),
            t.DeadCodeElimination(),
        ]
        fused = tvm.transform.Sequential(passes)(module)
        if not bind:
            return fused
        # Kernels left unfused keep symbolic shapes after binding; give each call its own
        # static copy, so that every kernel of a bucket can be tuned. A kernel whose buffer
        # is an expression of a dim (an output of 2*seq) cannot be specialised by TVM: the
        # bucket then keeps those kernels symbolic, and they run untuned.
        try:
            return tvm.transform.Sequential([t.SpecializePrimFuncBasedOnCallSite(), t.DeadCodeElimination()])(
                fused
            )
        except (TypeError, ValueError, RuntimeError):  # what TVM raises for a check that fails
            return fused


def legalize_and_fuse(module: Any, target: Any, *, fast_math: bool = False) -> Any:
    """Legalize, fold constants and fuse ``module`` for ``target``."""
    return fuse(legalize(module, target, fast_math=fast_math), target)


def compile_module(
    module: Any,
    target: CompileTarget,
    database: Any,
    *,
    legalized: bool = False,
    applied: dict[str, int] | None = None,
    fast_math: bool = False,
) -> Any:
    """Legalize, fuse, apply tuned schedules where the database has them, dlight for the rest.

    ``legalized``: ``module`` was already legalized and fused (the module tuning ran on).
    It must not be fused again: a second fusion changes the kernels, so the tuning
    records would no longer match them. ``applied["kernels"]`` receives how many kernels
    the tuning records scheduled.
    """
    import tvm
    from tvm import relax
    from tvm.s_tir import dlight as dl

    rules = (
        [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()]
        if target.on_cuda
        else [dl.cpu.GEMV(), dl.cpu.Reduction(), _cpu_parallel_rule()]
    )
    tvm_target = target.tvm

    @tvm.transform.module_pass(opt_level=0)  # type: ignore[untyped-decorator]
    def pipeline(mod: Any, _ctx: Any) -> Any:
        if not legalized:
            mod = legalize_and_fuse(mod, tvm_target, fast_math=fast_math)
        with tvm_target:
            if database is not None:
                mod = relax.transform.MetaScheduleApplyDatabase()(mod)
                if applied is not None:
                    applied["kernels"] = _scheduled_kernels(mod)
            mod = dl.ApplyDefaultSchedule(*rules)(mod)
            return tvm.transform.Sequential(_lowering_passes(tvm_target))(mod)

    try:
        if database is not None:
            with tvm_target, database, tvm.transform.PassContext(opt_level=3):
                return tvm.compile(module, tvm_target, relax_pipeline=pipeline)
        return tvm.compile(module, tvm_target, relax_pipeline=pipeline)
    except Exception as e:
        raise ConversionError(
            f"TVM failed to compile the model: {first_line(str(e)) or type(e).__name__}",
            "try another target, or skip the tvm format",
        ) from e


def _cpu_parallel_rule() -> Any:
    """A last-resort CPU schedule: inline what can be inlined, run the spatial loops in parallel.

    Without it every kernel that no tuning record and no dlight rule covers (element-wise
    ops, layer norms, softmax, and the matmuls of a symbolic-shape library) runs on one
    core. Each block's spatial loops move outside its reduction loops and are fused into
    one parallel loop.
    """
    from tvm import s_tir
    from tvm.s_tir import dlight as dl
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    class CpuParallel(dl.ScheduleRule):  # type: ignore[misc]
        def apply(self, func: Any, target: Any, _tunable: bool) -> Any:
            if type(func).__name__ != "PrimFunc" or "cpu" not in target.keys:
                return None
            sch = s_tir.Schedule(func)
            infos = normalize_prim_func(sch)
            if infos is None:
                return None
            for info in dl.try_inline(sch, infos):
                spatial: list[Any] = []
                other: list[Any] = []
                for loop, kind in zip(sch.get_loops(info.block_rv), info.dom_kind(), strict=False):
                    (spatial if kind == "S" else other).append(loop)
                if not spatial:
                    continue
                sch.reorder(*spatial, *other)
                sch.parallel(sch.fuse(*spatial))
            return sch

    return CpuParallel()


def _scheduled_kernels(mod: Any) -> int:
    """How many TIR functions of ``mod`` carry a schedule already."""
    return sum(
        1
        for _, func in mod.functions.items()
        if type(func).__name__ == "PrimFunc"
        and func.attrs is not None
        and func.attrs.get("tirx.is_scheduled", False)
    )


def _lowering_passes(target: Any) -> list[Any]:
    """The target's dataflow-lowering and finalizing passes (a fixed list where TVM lacks them)."""
    from tvm import relax

    try:
        return [*relax.pipeline.dataflow_lower_passes(target), *relax.pipeline.finalize_passes(target)]
    except (AttributeError, ValueError):  # TVM 0.27's CPU backend does not export them
        pass
    t = relax.transform
    return [
        t.RewriteDataflowReshape(),
        t.ToNonDataflow(),
        t.RemovePurityChecking(),
        t.CallTIRRewrite(),
        t.StaticPlanBlockMemory(),
        t.LowerAllocTensor(),
        t.KillAfterLastUse(),
        t.LowerRuntimeBuiltin(),
        t.ComputePrimValue(),
        t.VMShapeLower(),
        t.AttachGlobalSymbol(),
    ]


def export_library(executable: Any, path: Path, target: CompileTarget) -> None:
    """Write the compiled ``executable`` to ``path`` as a shared library for ``target``'s machine.

    A target for another architecture is linked by its cross gcc (see :mod:`.cross`).

    Raises:
        ConversionError: no cross gcc for a cross target, or TVM cannot write the library
            (for a cuda target, usually no ``nvcc`` here).
    """
    arch = target_arch(target.spec)
    linker = {"cc": cross_compiler(arch)} if is_cross(target.spec) else {}
    try:
        executable.export_library(str(path), **linker)
    except Exception as e:
        hint = (
            cross_toolchain_hint(arch)
            if linker
            else "a cuda target needs the CUDA toolkit (nvcc) on this machine"
        )
        raise ConversionError(
            f"TVM failed to write {path.name}: {first_line(str(e)) or type(e).__name__}", hint
        ) from e
