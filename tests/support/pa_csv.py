"""perf_analyzer's CSV read as Model Analyzer reads it, to hold tritongen's CSV to a real reader's rules.

:func:`ma_gpu_records` follows Model Analyzer's reading of a perf_analyzer CSV row
(``model_analyzer/perf_analyzer/perf_analyzer.py``, ``_extract_gpu_records_from_row``): a column
is picked by its exact name; an empty cell means perf_analyzer gave no data; a trailing ``;`` is
dropped; the cell splits on ``;`` into ``UUID:value`` pairs, each split on ``:``; the value is
divided by the column's reduction factor.
"""

from __future__ import annotations

MA_GPU_TABLE = (
    ("Avg GPU Utilization", 0.01),
    ("Avg GPU Power Usage", 1.0),
    ("Max GPU Memory Usage", 1_000_000.0),
    ("Total GPU Memory", 1_000_000.0),
)
"""Model Analyzer's GPU columns and the factors it divides their values by (util to %, bytes to MB)."""


def ma_gpu_records(row: dict[str, str]) -> dict[str, dict[str, float]]:
    """Model Analyzer's reading of a row's GPU columns: column → {UUID: value after its factor}."""
    records: dict[str, dict[str, float]] = {}
    for column, factor in MA_GPU_TABLE:
        if column not in row:
            continue
        cell = row[column]
        if not cell:  # perf_analyzer gave no data
            continue
        if cell[-1] == ";":
            cell = cell[:-1]
        for pair in cell.split(";"):
            uuid, value = pair.split(":")[0], pair.split(":")[1]
            records.setdefault(column, {})[uuid] = float(value) / factor
    return records
