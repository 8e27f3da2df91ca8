"""Result files read once into the typed report of the workflow that wrote them.

Each document says what it is in its ``schema``: a load test (``tritongen.loadtest/1``), a
tune (``tritongen.tune/2``, ``/1``), a comparison (``tritongen.compare/1``) or a conversion
(``tritongen.convert/1``). The renderers take what :func:`read_result` returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritongen.compare.result import SCHEMA as COMPARE_SCHEMA
from tritongen.compare.result import CompareReport
from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import SCHEMA as LOADTEST_SCHEMA
from tritongen.loadtest.result import LoadTestReport
from tritongen.pipeline.document import CONVERT_SCHEMA, ConvertDocument
from tritongen.tune.document import READABLE_SCHEMAS as TUNE_SCHEMAS
from tritongen.tune.document import TuneDocument

ResultReport = LoadTestReport | CompareReport | TuneDocument | ConvertDocument
"""What a result file holds, typed: the report of the workflow that wrote it."""

SCHEMAS = (LOADTEST_SCHEMA, *TUNE_SCHEMAS, COMPARE_SCHEMA, CONVERT_SCHEMA)
"""The documents the report reads."""


def result_from_json(document: dict[str, Any]) -> ResultReport:
    """The typed report of a result document, by its ``schema`` (one of :data:`SCHEMAS`).

    Raises:
        KeyError: a figure the schema requires is missing.
        ValueError: another schema.
    """
    schema = document.get("schema")
    if schema == LOADTEST_SCHEMA:
        return LoadTestReport.from_json(document)
    if schema in TUNE_SCHEMAS:
        return TuneDocument.from_json(document)
    if schema == COMPARE_SCHEMA:
        return CompareReport.from_json(document)
    if schema == CONVERT_SCHEMA:
        return ConvertDocument.from_json(document)
    raise ValueError(f"not a tritongen result (schema {schema!r})")


def read_result(path: Path) -> ResultReport:
    """Read a result JSON written by tritongen into its typed report.

    Raises:
        ConfigError: the file is missing, not JSON, not a convert, loadtest, tune or compare result,
            or one that lacks what its schema requires.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(
            f"{path} does not exist", "pass a JSON written by convert, loadtest, tune or compare"
        ) from e
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path} is not a JSON document: {e}", "pass the file written by --json") from e
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema not in SCHEMAS:
        raise ConfigError(
            f"{path} is not a tritongen result (schema {schema!r})",
            f"report reads {', '.join(SCHEMAS)}",
        )
    try:
        return result_from_json(document)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(
            f"{path} is a {schema} document that cannot be read ({type(e).__name__}: {e})",
            "pass the file as tritongen wrote it",
        ) from e
