"""``tritongen example tiny-llama``: a whole Hugging Face Llama directory, its tokenizer and chat template."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

from support.cli_output import error_line

runner = CliRunner()


def test_the_tiny_llama_is_a_model_directory_its_tokenizer_and_template_agree_with(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer, LlamaConfig

    folder = tmp_path / "models" / "tiny"
    result = runner.invoke(app, ["example", "tiny-llama", "--output", str(folder)])
    assert result.exit_code == 0, result.stderr
    assert "".join(result.stdout.split()) == f"wrote{folder}"  # and nothing else (no training bars)
    config = LlamaConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert config.vocab_size == len(tokenizer) and config.max_position_embeddings == 512
    assert (folder / "model.safetensors").stat().st_size > 0
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True)
    assert tokenizer.decode(ids).endswith("<s>assistant: ")
    assert not [p.name for p in folder.parent.iterdir() if p.name != "tiny"]  # no partial copy left
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = runner.invoke(app, ["example", "tiny-llama", "--output", str(folder)])
    assert again.exit_code != 0 and "already exists" in error_line(again.stderr)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before  # nothing overwritten


def test_an_unknown_example_names_every_one() -> None:
    result = runner.invoke(app, ["example", "gpt"])
    assert result.exit_code != 0
    line = error_line(result.stderr)
    assert "unknown example 'gpt'" in line and "minilm" in line and "tiny-llama" in line


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = runner.invoke(app, ["example", "tiny-llama", "--output", str(blocker / "tiny")])
    assert result.exit_code != 0 and "cannot write under" in error_line(result.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
