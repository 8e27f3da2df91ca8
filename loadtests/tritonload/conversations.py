"""Conversations, a shape of the LLM kinds' load: each user holds sessions, every turn sending the history.

A session draws its number of turns (``--triton-llm-turns MEAN[:SD]``, seeded by the worker and
the user). Each turn takes the next prepared request's new user message, sends the history (the
earlier messages and answers) with it, records the answer as any LLM request's (:func:`record_answer`)
and its time to first token as the session's first turn's or a later one's, adds the answer's text
to the history, and waits the think time (``--triton-llm-think-ms``) before the next turn. A
failed turn ends its session. Over OpenAI's chat API the history is the messages; over a text
API (completions, Triton's generate) it is the turns' texts joined by lines. A server's prefix
cache can serve a later turn's history from memory: the first and later turns' TTFT tell.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

import gevent

from .llm_http import Answer, LlmHttpClient
from .llm_transport import LlmTransport, record_answer
from .loops import schedule_seed, worker_key
from .shared import CONVERSATION_TTFT
from .transports import error_kind

if TYPE_CHECKING:
    from .options import TritonOptions
    from .recording import Recorder
    from .state import ProcessState

FIRST_TURN, LATER_TURNS = CONVERSATION_TTFT


def parse_turns(text: str) -> tuple[float, float]:
    """``MEAN[:SD]`` -> (mean, sd) of a session's turns."""
    mean, _, sd = text.partition(":")
    return float(mean), float(sd or 0)


class Conversation:
    """One session's history, in the shape its API takes."""

    def __init__(self, api: str) -> None:
        self.chat = api == "openai-chat"
        self.messages: list[dict[str, str]] = []

    def ask(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` (a prepared request) sent with the history before its new user message."""
        if self.chat:
            new = payload["messages"][-1]
            self.messages.append({"role": "user", "content": str(new.get("content", ""))})
            return {**payload, "messages": list(self.messages)}
        key = "text_input" if "text_input" in payload else "prompt"
        self.messages.append({"role": "user", "content": str(payload[key])})
        return {**payload, key: "\n".join(m["content"] for m in self.messages)}

    def answered(self, answer: Answer) -> None:
        """The answer's text joins the history."""
        self.messages.append({"role": "assistant", "content": "".join(answer.texts)})


class ConversationLoad:
    """One user's sessions, one after another, each turn waiting for the answer before it."""

    def __init__(
        self, transport: LlmTransport, options: TritonOptions, recorder: Recorder, seed: int
    ) -> None:
        self.transport = transport
        self.options = options
        self.recorder = recorder
        self.rng = random.Random(seed)
        self.turns = parse_turns(options.llm_turns)
        self.think_s = options.llm_think_ms / 1000.0

    def session_turns(self) -> int:
        """A session's number of turns: drawn, at least 1, at most the most the test was checked for."""
        mean, sd = self.turns
        drawn = round(self.rng.gauss(mean, sd)) if sd > 0 else round(mean)
        return max(1, min(drawn, self.options.llm_max_turns or drawn))

    def run(self) -> None:
        """Hold sessions until Locust stops the user."""
        client = self.transport.new_connection()
        while True:
            client = self._session(client, self.session_turns())

    def _session(self, client: LlmHttpClient, turns: int) -> LlmHttpClient:
        conversation = Conversation(self.options.llm_api)
        transport, recorder, clock = self.transport, self.recorder, time.perf_counter
        for turn in range(turns):
            payload, input_tokens = transport.requests[transport.step]
            transport.step = transport.step + 1 if transport.step + 1 < len(transport.requests) else 0
            body = conversation.ask(payload)
            start = clock()
            try:
                answer = client.send(body, transport.stream)
            except Exception as e:  # every failure is counted by kind, never raised
                recorder.record(start, clock(), error_kind(e, self.options.timeout))
                return transport.new_connection()
            if answer.error is None:
                record_answer(recorder, answer, input_tokens, transport.limits, transport.tokenizer)
                if answer.first_token_s is not None:
                    recorder.record_extra(
                        FIRST_TURN if turn == 0 else LATER_TURNS, answer.end, answer.first_token_s
                    )
            recorder.record(start, clock(), answer.error)
            if answer.error is not None:
                return client  # a failed turn ends its session
            conversation.answered(answer)
            if self.think_s > 0 and turn + 1 < turns:
                gevent.sleep(self.think_s)
        return client


def conversation_load(
    host: str, options: TritonOptions, process: ProcessState, environment: Any
) -> ConversationLoad:
    """One user's chat sessions over HTTP: OpenAI's chat or completions API, or Triton's generate."""
    recorder = process.recorder
    assert recorder is not None
    transport = LlmTransport(host, options, process.step_starts, recorder)
    seed = schedule_seed(options.seed, worker_key(environment), next(process.user_numbers))
    return ConversationLoad(transport, options, recorder, seed)
