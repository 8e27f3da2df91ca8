"""TVM target: ONNX -> Relax -> compiled libraries, served by the Python backend.

The ONNX graph is imported with its dynamic dims kept symbolic, so one ``tvm_model.so``
serves every batch size and sequence length; the ``dlight`` rules schedule its kernels.
Untuned kernels are slow on real models, so the model is also compiled for shape buckets
(``tvm_bucket_8x128.so``, one per static shape): MetaSchedule tunes them in one budget
with records moved between buckets, and the wrapper pads each request up to the smallest
bucket that holds it. Tuning records are cached per model, target and TVM version, so a
rebuild reuses them instead of tuning again.

The libraries are not called ``model.so``: the Python backend imports ``model`` by module
name from the version directory, and an extension module ``model.so`` would shadow
``model.py``.

The modules, one job each:

- :mod:`.options`: :class:`TvmOptions`, their checks, the target, and whether TVM imports;
- :mod:`.frontend`: the ONNX graph's ops checked and imported into Relax, its dims;
- :mod:`.buckets`: the bucket plan (values per dim, padded dims) and its checks;
- :mod:`.compile`: legalizing, fusing, scheduling and lowering a module into a library;
- :mod:`.cross`: which machine a library is for, and the cross gcc that links one for another;
- :mod:`.tuning`: MetaSchedule tuning of every bucket in one budget, and its record cache;
- :mod:`.budget`: the tuning budget and per-kernel progress;
- :mod:`.measure`: building and timing single kernels as tuning does;
- :mod:`.transfer`: moving tuned schedules from one bucket to another;
- :mod:`.profile`: each kernel's share of a library's measured run time;
- :mod:`.artifact`: the libraries, ``tvm_metadata.json`` and the Python-backend wrapper.
"""

from tritongen.convert.tvm.artifact import (
    LIBRARY,
    METADATA,
    METADATA_VERSION,
    bucket_library,
    write_tvm_artifact,
)
from tritongen.convert.tvm.buckets import DEFAULT_DIM_VALUE
from tritongen.convert.tvm.cross import elf_arch, foreign_arch, host_arch
from tritongen.convert.tvm.frontend import check_supported_ops, import_onnx
from tritongen.convert.tvm.measure import BUILD_TIMEOUT_S
from tritongen.convert.tvm.options import (
    TARGET_PRESETS,
    TvmOptions,
    resolve_target,
    tvm_requirements,
    tvm_unavailable_reason,
)
from tritongen.convert.tvm.tuning import CACHE_ENV

__all__ = [
    "BUILD_TIMEOUT_S",
    "CACHE_ENV",
    "DEFAULT_DIM_VALUE",
    "LIBRARY",
    "METADATA",
    "METADATA_VERSION",
    "TARGET_PRESETS",
    "TvmOptions",
    "bucket_library",
    "check_supported_ops",
    "elf_arch",
    "foreign_arch",
    "host_arch",
    "import_onnx",
    "resolve_target",
    "tvm_requirements",
    "tvm_unavailable_reason",
    "write_tvm_artifact",
]
