"""TVM target: ONNX -> Relax -> one compiled library, served by the Python backend.

The ONNX graph is imported with its dynamic dims kept symbolic, so one ``tvm_model.so``
serves every batch size and sequence length; the ``dlight`` rules schedule its kernels.
Untuned kernels are slow on real models, so MetaSchedule can tune one static shape
(``tune_batch_size`` rows, ``dim_values`` for the other dynamic dims) into
``tvm_model_tuned.so``; the wrapper runs it for requests of exactly that shape and the
symbolic library for all others. Tuning records are cached per model, target and shape,
so rebuilding the same model reuses them instead of tuning again.

The library is not called ``model.so``: the Python backend imports ``model`` by module
name from the version directory, and an extension module ``model.so`` would shadow
``model.py``.

The modules, one job each:

- :mod:`.options`: :class:`TvmOptions`, their checks, the target, and whether TVM imports;
- :mod:`.frontend`: the ONNX graph's ops checked and imported into Relax, its inputs' dims;
- :mod:`.compile`: legalizing, fusing, scheduling and lowering a module into a library;
- :mod:`.tuning`: MetaSchedule tuning of one static shape and its record cache;
- :mod:`.artifact`: the libraries, ``tvm_metadata.json`` and the Python-backend wrapper.
"""

from tritongen.convert.tvm.artifact import (
    LIBRARY,
    METADATA,
    METADATA_VERSION,
    TUNED_LIBRARY,
    write_tvm_artifact,
)
from tritongen.convert.tvm.frontend import DEFAULT_DIM_VALUE, check_supported_ops, import_onnx
from tritongen.convert.tvm.options import (
    TvmOptions,
    resolve_target,
    tvm_requirements,
    tvm_unavailable_reason,
)
from tritongen.convert.tvm.tuning import BUILD_TIMEOUT_S, CACHE_ENV

__all__ = [
    "BUILD_TIMEOUT_S",
    "CACHE_ENV",
    "DEFAULT_DIM_VALUE",
    "LIBRARY",
    "METADATA",
    "METADATA_VERSION",
    "TUNED_LIBRARY",
    "TvmOptions",
    "check_supported_ops",
    "import_onnx",
    "resolve_target",
    "tvm_requirements",
    "tvm_unavailable_reason",
    "write_tvm_artifact",
]
