"""LLM load-test inputs: token counts and limits parsed, tokenizers read locally, prompts made and read."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tritongen.errors import ConfigError, SourceError
from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.loadtest.llm.prompts import read_prompts, synthetic_prompts
from tritongen.loadtest.llm.spec import Slo, TokenCount, parse_api, parse_slo, parse_token_count
from tritongen.loadtest.llm.tokenizer import count_tokens, load_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> object:
    return load_tokenizer(write_tokenizer(tmp_path_factory.mktemp("model")))


def test_token_counts_and_their_draws() -> None:
    assert parse_token_count("512", "--input-tokens") == TokenCount(512)
    assert parse_token_count("512:64", "--input-tokens") == TokenCount(512, 64.0)
    rng = random.Random(0)
    draws = [TokenCount(100, 10).draw(rng) for _ in range(2000)]
    assert 98 < sum(draws) / len(draws) < 102 and min(draws) >= 1
    assert {TokenCount(7).draw(rng) for _ in range(10)} == {7}
    assert TokenCount(1, 50).draw(random.Random(3)) >= 1  # never below one token


@pytest.mark.parametrize("text", ["0", "-5", "abc", "5:", "5:x", ""])
def test_bad_token_counts_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="is not MEAN\\[:SD\\]"):
        parse_token_count(text, "--output-tokens")


def test_limits_and_whether_a_request_meets_them() -> None:
    slo = parse_slo("ttft=200,itl=50,e2e=5000")
    assert slo == Slo(200.0, 50.0, 5000.0) and slo.text() == "ttft=200,itl=50,e2e=5000"
    assert slo.met(ttft_us=150_000, max_gap_us=40_000, e2e_us=4_000_000)
    assert not slo.met(ttft_us=250_000, max_gap_us=40_000, e2e_us=4_000_000)
    assert not slo.met(ttft_us=None, max_gap_us=40_000, e2e_us=4_000_000)  # no first token: missed
    assert parse_slo("e2e=100").met(ttft_us=None, max_gap_us=None, e2e_us=90_000)


@pytest.mark.parametrize("text", ["ttft=0", "tpot=5", "ttft=5,ttft=6", "ttft", "itl=fast"])
def test_bad_limits_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="is not ttft=MS, itl=MS or e2e=MS"):
        parse_slo(text)


def test_apis() -> None:
    assert parse_api("openai-chat") == "openai-chat"
    with pytest.raises(ConfigError, match="--api 'openai' is not one of openai-chat, openai-completions"):
        parse_api("openai")


def test_a_tokenizer_is_read_from_its_directory_or_file_and_never_fetched(tmp_path: Path) -> None:
    model = write_tokenizer(tmp_path / "model")
    assert count_tokens(load_tokenizer(model), "the quick brown fox") > 0
    assert count_tokens(load_tokenizer(model / "tokenizer.json"), "the quick brown fox") > 0
    with pytest.raises(ConfigError, match="does not exist"):
        load_tokenizer(tmp_path / "meta-llama/Llama-3-8B")  # a hub name is not fetched
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"holds no tokenizer\.json"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="is not a tokenizer"):
        load_tokenizer(tmp_path / "bad.json")


def test_synthetic_prompts_have_the_drawn_lengths_and_no_shared_prefix(tokenizer: object) -> None:
    prompts = synthetic_prompts(tokenizer, 40, TokenCount(64, 8), TokenCount(32, 4), seed=1)
    again = synthetic_prompts(tokenizer, 40, TokenCount(64, 8), TokenCount(32, 4), seed=1)
    assert prompts == again  # seeded
    for prompt in prompts:
        assert prompt.text is not None and prompt.input_tokens == count_tokens(tokenizer, prompt.text)
        assert prompt.max_tokens is not None and prompt.max_tokens >= 1
    lengths = [p.input_tokens or 0 for p in prompts]
    assert 56 < sum(lengths) / len(lengths) < 72 and len(set(lengths)) > 5  # drawn around 64
    firsts = {p.text.split()[0] for p in prompts if p.text}
    assert len(firsts) == len(prompts)  # each opened by its own number


def test_exact_lengths_without_a_spread(tokenizer: object) -> None:
    prompts = synthetic_prompts(tokenizer, 20, TokenCount(50), TokenCount(16), seed=2)
    assert all(abs((p.input_tokens or 0) - 50) <= 1 for p in prompts)  # as near as the tokenizer allows
    assert {p.max_tokens for p in prompts} == {16}


def test_a_jsonl_file_of_prompts_and_chats(tmp_path: Path, tokenizer: object) -> None:
    path = tmp_path / "prompts.jsonl"
    lines = [
        {"text": "the quick brown fox", "max_tokens": 12},
        {"prompt": "every river runs"},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "paint walls"}]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    prompts = read_prompts(path, tokenizer)
    assert [p.text for p in prompts] == ["the quick brown fox", "every river runs", None]
    assert prompts[2].messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "paint walls"},
    ]
    assert [p.max_tokens for p in prompts] == [12, None, None]
    assert prompts[0].input_tokens == count_tokens(tokenizer, "the quick brown fox")
    assert read_prompts(path)[0].input_tokens is None  # no tokenizer: not counted


def test_a_sharegpt_file(tmp_path: Path, tokenizer: object) -> None:
    path = tmp_path / "sharegpt.json"

    def turn(who: str, text: str) -> dict[str, str]:
        return {"from": who, "value": text}

    conversations = [
        {
            "id": "a",
            "conversations": [turn("human", "plant trees"), turn("gpt", "for the years after")],
        },
        {"id": "b", "conversations": [turn("gpt", "hello"), turn("human", "old stories")]},
        {"id": "c", "conversations": []},
    ]
    path.write_text(json.dumps(conversations))
    prompts = read_prompts(path, tokenizer)
    assert [p.text for p in prompts] == ["plant trees", "old stories"]
    assert prompts[0].max_tokens == count_tokens(tokenizer, "for the years after")
    assert prompts[1].max_tokens is None  # no reply after the human turn


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "holds no prompt"),
        ('{"text": "a"}\nnot json\n', "prompts.jsonl:2 is not JSON"),
        ('{"text": "a", "max_tokens": 0}\n', "prompts.jsonl:1: max_tokens must be a positive whole number"),
        ('{"image": "x"}\n', "prompts.jsonl:1 has neither text, prompt nor messages"),
        ("[1, 2", "is not JSON"),
    ],
)
def test_bad_prompt_files_are_refused_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(content)
    with pytest.raises(SourceError) as raised:
        read_prompts(path)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(SourceError, match="No such file"):
        read_prompts(tmp_path / "missing.jsonl")


def test_each_api_gets_its_request_body(tmp_path: Path, tokenizer: object) -> None:
    from tritongen.loadtest.llm.load import LlmLoad, payload, prepare_llm_requests
    from tritongen.loadtest.llm.prompts import Prompt

    chat = Prompt(messages=[{"role": "user", "content": "hi"}])
    assert payload("triton-generate", "m", Prompt(text="hi"), 5, stream=True) == {
        "text_input": "hi",
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
    }
    assert payload("triton-generate", "m", Prompt(text="hi"), 5, stream=False)["stream"] is False
    body = payload("openai-chat", "m", chat, 5, stream=True)
    assert body["messages"] == chat.messages and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == body["min_tokens"] == 5 and body["ignore_eos"] is True
    whole = payload("openai-completions", "m", Prompt(text="hi"), 5, stream=False)
    assert whole["prompt"] == "hi" and "stream" not in whole
    model = write_tokenizer(tmp_path / "model")
    load = LlmLoad(
        "triton-generate", tokenizer=model, input_tokens=TokenCount(20), output_tokens=TokenCount(7)
    )
    path = tmp_path / "requests.jsonl"
    prepared = prepare_llm_requests(load, "m", path, seed=3)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert prepared.longest in [e["payload"] for e in entries] and prepared.longest_output == 7
    assert len(entries) == prepared.count > 100 and {e["payload"]["max_tokens"] for e in entries} == {7}
    assert all(abs(e["input_tokens"] - 20) <= 1 for e in entries)


def test_the_llm_load_refuses_what_it_cannot_measure() -> None:
    from tritongen.loadtest.llm.load import LlmLoad

    with pytest.raises(ConfigError, match="--api triton-grpc streams"):
        LlmLoad("triton-grpc", prompts=Path("p.jsonl"), stream=False).check()
    LlmLoad("triton-grpc", prompts=Path("p.jsonl")).check()
    LlmLoad("openai-chat", prompts=Path("p.jsonl")).check()
    assert LlmLoad("openai-completions").openai and not LlmLoad("triton-generate").openai
    with pytest.raises(ConfigError, match="need the model's tokenizer"):
        LlmLoad("triton-generate").check()
    assert LlmLoad("triton-generate", slo=Slo(ttft_ms=200)).slo_option() == "200,0,0"
    assert LlmLoad("triton-generate").slo_option() == ""
