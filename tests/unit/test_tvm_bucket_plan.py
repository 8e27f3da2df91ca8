"""The bucket plan (plain Python): values per dim, padded dims, defaults and every refusal."""

from __future__ import annotations

import pytest

from tritongen.convert.tvm.buckets import (
    MAX_BUCKETS,
    BucketRequest,
    default_batch_values,
    parse_pads,
    plan_buckets,
)
from tritongen.convert.tvm.transfer import refit_tiles
from tritongen.errors import ConversionError

TEXT = {"input_ids": ("batch", "seq"), "attention_mask": ("batch", "seq")}
IMAGE = {"image": ("n", 3, "h", "w")}


def _request(text: str | None = None, pads: tuple[str, ...] = (), **overrides: object) -> BucketRequest:
    fields: dict[str, object] = {
        "text": text,
        "pads": pads,
        "strict": False,
        "max_batch_size": 32,
        "preferred_batch_sizes": (),
        "dim_values": {},
    }
    fields.update(overrides)
    return BucketRequest(**fields)  # type: ignore[arg-type]


def test_given_buckets_with_an_alias_and_a_padded_dim() -> None:
    plan = plan_buckets(_request("batch=32,1,8;seq=128,64", ("seq=attention_mask:1",)), TEXT, batched=True)
    assert plan.values == {"batch": (1, 8, 32), "seq": (64, 128)}
    assert plan.batch_dim == "batch"
    assert plan.padded["seq"].input == "attention_mask" and plan.padded["seq"].axis == 1
    assert plan.exact_dims() == []
    buckets = plan.buckets()
    assert [plan.label(b) for b in buckets] == ["1x64", "1x128", "8x64", "8x128", "32x64", "32x128"]
    assert plan.describe() == "batch 1,8,32 × seq 64,128 (padded)"
    assert plan.as_json()["padded"] == {"seq": {"input": "attention_mask", "axis": 1, "alias": "seq"}}


def test_defaults_come_from_the_max_and_preferred_batch_sizes() -> None:
    assert default_batch_values(32, ()) == (1, 8, 32)
    assert default_batch_values(128, ()) == (1, 8, 64, 128)
    assert default_batch_values(32, (4, 16)) == (1, 4, 16, 32)
    assert default_batch_values(0, ()) == (1,)
    plan = plan_buckets(_request(preferred_batch_sizes=(16,), dim_values={"seq": 64}), TEXT, batched=True)
    assert plan.values == {"batch": (1, 16, 32), "seq": (64,)}
    assert plan.exact_dims() == ["seq"]  # not declared paddable: matched exactly, never padded
    assert "seq 64 (exact)" in plan.describe()


def test_a_dim_may_be_named_by_its_graph_name_and_the_batch_dim_by_batch() -> None:
    plan = plan_buckets(_request("batch=2;h=224;w=224"), IMAGE, batched=True)
    assert plan.batch_dim == "n"
    assert plan.values == {"n": (2,), "h": (224,), "w": (224,)}
    assert plan.label(plan.buckets()[0]) == "2x224x224"


@pytest.mark.parametrize(
    ("text", "pads", "message"),
    [
        ("batch=1,64", (), "batch 64 is above the max batch size 32"),
        ("batch=1;len=8", (), "names dim 'len', which the model does not have"),
        ("batch=0,4", (), "values must be >= 1"),
        ("batch", (), "is not DIM=V1,V2"),
        ("batch=1;batch=2", (), "gives dim 'batch' twice"),
        ("batch=a", (), "is not DIM=V1,V2"),
        (None, ("seq=mask:1",), "names input 'mask', which the model does not have"),
        (None, ("seq=attention_mask:2",), "has no axis 2"),
        (None, ("seq=attention_mask:0",), "is the batch dim, which is always padded"),
        (None, ("attention_mask",), "is not ALIAS=INPUT:AXIS"),
    ],
)
def test_refusals_are_one_line(text: str | None, pads: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConversionError, match=message) as info:
        plan_buckets(_request(text, pads), TEXT, batched=True)
    assert "\n" not in str(info.value) and info.value.hint


def test_a_static_axis_cannot_be_padded() -> None:
    with pytest.raises(ConversionError, match="axis 1 of 'image' is fixed at 3, so there is nothing to pad"):
        parse_pads(("image:1",), IMAGE, "n")


def test_too_many_buckets_are_refused() -> None:
    text = "batch=1,2,4,8,16;seq=16,32,64,128"
    with pytest.raises(ConversionError, match=f"20 libraries .* at most {MAX_BUCKETS}"):
        plan_buckets(_request(text, ("seq=attention_mask:1",)), TEXT, batched=True)


@pytest.mark.parametrize(
    ("factors", "extent"),
    [([4, 8, 1, 16], 512), ([32, 1, 1, 16], 8), ([3, 5], 7), ([1, 1], 1), ([2, 64], 96)],
)
def test_tile_factors_refit_to_a_new_extent(factors: list[int], extent: int) -> None:
    refit = refit_tiles(factors, extent)
    assert len(refit) == len(factors)
    product = 1
    for factor in refit:
        assert factor >= 1
        product *= factor
    assert product == extent
    for old, new in zip(factors[1:], refit[1:], strict=True):
        assert old % new == 0  # inner tiles never grow past the tuned ones


def test_dims_named_differently_per_input_are_one_dim() -> None:
    inputs = {"a": ("unk__0", "sequence"), "b": ("unk__1", "seq")}
    plan = plan_buckets(_request("batch=1,8;seq=16,32", ("seq=b:1", "seq=a:1")), inputs, batched=True)
    assert plan.values == {"unk__0": (1, 8), "seq": (16, 32)}
    bucket = plan.buckets()[-1]
    assert plan.bind(bucket) == {"unk__0": 8, "unk__1": 8, "seq": 32, "sequence": 32}
    facts = plan.as_json()
    assert facts["batch_dims"] == ["unk__0", "unk__1"]
    assert facts["padded_dims"] == ["seq", "sequence"]
    assert plan.label(bucket) == "8x32"


@pytest.mark.parametrize(
    ("pads", "message"),
    [
        (("batch=attention_mask:1",), "alias 'batch' is already the name of another dim"),
        (("seq=attention_mask:1", "len=input_ids:1"), "declares dim 'seq' twice"),
    ],
)
def test_pad_declarations_that_contradict_each_other_are_refused(pads: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        plan_buckets(_request(None, pads), TEXT, batched=True)


def test_an_alias_may_not_take_another_dims_name() -> None:
    inputs = {"ids": ("batch", "seq"), "mask": ("batch", "len")}
    with pytest.raises(ConversionError, match="alias 'seq' is already the name of another dim"):
        plan_buckets(_request(None, ("seq=mask:1",)), inputs, batched=True)


def test_a_model_without_dynamic_dims_has_one_static_bucket() -> None:
    plan = plan_buckets(_request(), {"x": (4, 16)}, batched=False)
    assert plan.buckets() == [{}]
    assert plan.label({}) == "static"
