"""Model name rules."""

from __future__ import annotations

import pytest

from tritongen.errors import ConfigError
from tritongen.triton.names import check_model_name


@pytest.mark.parametrize("name", ["bert", "bert_onnx", "m-1", "v1.2", "_x", "A" * 128])
def test_legal_names(name: str) -> None:
    assert check_model_name(name) == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        ("a/b", "path separator"),
        ("..", "'..'"),
        ("../etc", "path separator"),
        ("a..b", "'..'"),
        ("/abs", "path separator"),
        ("a\\b", "path separator"),
        (".hidden", "starts with '.'"),
        ("-flag", "starts with '-'"),
        ("a b", "' '"),
        ("x;rm -rf", "';'"),
        ("$(id)", "'$'"),
        ("A" * 129, "longer than 128"),
    ],
)
def test_illegal_names(name: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_model_name(name)
    assert problem in info.value.message
    assert "--name" in (info.value.hint or "")
