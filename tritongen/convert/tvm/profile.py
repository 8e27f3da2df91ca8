"""Where a compiled library spends its time: each kernel's share of one run, measured."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import numpy as np


def kernel_times(
    executable: Any,
    shapes: dict[str, list[int]],
    dtypes: dict[str, str],
    runs: int = 2,
    *,
    warmup: bool = True,
) -> dict[str, Any]:
    """Run ``executable`` (a compiled Relax module) on this CPU; per kernel: calls and seconds per run.

    Integer inputs are zeros (a valid token id and index everywhere), float inputs are
    random. A first run warms up (unless ``warmup`` is off); the next ``runs`` are timed
    kernel by kernel.
    Returns ``{"total_s": float, "kernels": {name: {"calls": n, "seconds": s}}}``.
    """
    import tvm
    import tvm_ffi
    from tvm import relax

    device = tvm.cpu(0)
    vm = relax.VirtualMachine(executable, device)
    rng = np.random.default_rng(0)
    args = []
    for name, shape in shapes.items():
        dtype = np.dtype(dtypes[name])
        array = (
            rng.standard_normal(shape).astype(dtype) if dtype.kind == "f" else np.zeros(shape, dtype=dtype)
        )
        args.append(tvm.runtime.tensor(array, device=device))
    if warmup:
        vm["main"](*args)
    seconds: defaultdict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    started: dict[str, float] = {}

    def instrument(_func: Any, symbol: Any, before: bool, _ret: Any, *_args: Any) -> int:
        name = str(symbol)
        if before:
            started[name] = time.perf_counter()
        else:
            seconds[name] += time.perf_counter() - started.pop(name, time.perf_counter())
            calls[name] += 1
        return 0

    vm.set_instrument(tvm_ffi.convert(instrument))
    begin = time.perf_counter()
    for _ in range(runs):
        vm["main"](*args)
    total = (time.perf_counter() - begin) / runs
    return {
        "total_s": total,
        "kernels": {k: {"calls": calls[k] // runs, "seconds": seconds[k] / runs} for k in seconds},
    }
