"""The request grouping and splitting inside the ONNX Runtime Python-backend wrapper."""

from __future__ import annotations

import numpy as np
import pytest

from tritongen.convert.wrappers.tritongen_runtime import group_by_shape, intra_op_threads, split_rows


def test_groups_keep_order_and_separate_shapes() -> None:
    keys = [((5,),), ((7,),), ((5,),), ((5,), None), ((7,),)]
    assert group_by_shape(keys) == [[0, 2], [1, 4], [3]]


def test_split_rows_round_trips_concatenation() -> None:
    parts = [np.full((n, 3), n, dtype=np.float32) for n in (1, 4, 2)]
    out = split_rows(np.concatenate(parts), [1, 4, 2])
    assert [p.shape[0] for p in out] == [1, 4, 2]
    for got, want in zip(out, parts, strict=True):
        np.testing.assert_array_equal(got, want)


def test_split_rows_refuses_a_wrong_total() -> None:
    with pytest.raises(ValueError, match="5 rows"):
        split_rows(np.zeros((5, 2)), [2, 2])


def _config(counts: list[int], threads: str | None = None) -> dict[str, object]:
    config: dict[str, object] = {"instance_group": [{"count": c, "kind": "KIND_CPU"} for c in counts]}
    if threads is not None:
        config["parameters"] = {"intra_op_thread_count": {"string_value": threads}}
    return config


@pytest.mark.parametrize(
    ("counts", "cpus", "expected"),
    [([1], 8, 8), ([2], 8, 4), ([3], 8, 2), ([4], 2, 1), ([2, 2], 8, 2), ([], 4, 4)],
)
def test_threads_share_the_cpus_between_instances(counts: list[int], cpus: int, expected: int) -> None:
    assert intra_op_threads(_config(counts), cpus=cpus) == expected


def test_threads_parameter_wins() -> None:
    assert intra_op_threads(_config([4], threads="3"), cpus=2) == 3
    assert intra_op_threads(_config([2], threads="0"), cpus=8) == 4
