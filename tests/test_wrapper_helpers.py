"""The request grouping and splitting inside the ONNX Runtime Python-backend wrapper."""

from __future__ import annotations

import numpy as np
import pytest

from tritongen.convert.wrappers.onnxruntime_model import group_by_shape, split_rows


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
