"""A streamed chat answer from a real llama-server (the tiny model): text, TTFT, tokens/s, stop, errors."""

from __future__ import annotations

import threading

import pytest

from sparksync.core.chat.conversation import Conversation
from sparksync.core.chat.errors import ChatError
from sparksync.core.chat.stream import stream_answer
from sparksync.core.chat.targets import ChatTarget, opened, workload_targets
from sparksync.core.workloads.workload_store import Endpoint

# The engine fixtures live in tests/engines/conftest.py; importing them makes them visible here.
from tests.engines.conftest import _tiny_models_dir, _tiny_tokenizer, llama_binaries, tiny_model  # noqa: F401
from tests.engines.engine_procs import free_port
from tests.switchyard.llama import replicas

pytestmark = [pytest.mark.engine]


@pytest.fixture(scope="module")
def server(llama_binaries, tiny_model, tmp_path_factory):  # noqa: F811
    with replicas(llama_binaries, tiny_model, tmp_path_factory.mktemp("chat-logs"), 1, ignore_eos=True) as (engine,):
        yield engine


def test_an_answer_streams_in_piece_by_piece_with_its_ttft_and_tokens_per_s(server, tiny_model):  # noqa: F811
    pieces = []
    conversation = Conversation()
    answer = stream_answer(server.base_url, conversation.ask("Tell me about the nodes."), model=tiny_model.name,
                           max_tokens=48, on_text=pieces.append)  # fmt: skip
    assert len(pieces) > 1 and answer.text == "".join(pieces)  # it came in pieces, not at the end
    assert answer.tokens == 48 and answer.finish_reason == "length"
    assert answer.ttft_s is not None and 0 < answer.ttft_s < 30
    assert answer.tokens_per_s is not None and answer.tokens_per_s > 0
    assert answer.model == tiny_model.name
    figures = answer.figures()
    assert figures.startswith("TTFT ") and " tok/s · 48 tokens" in figures
    # The next question carries the conversation so far.
    conversation.answered(answer)
    messages = conversation.ask("And their memory?")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == answer.text


def test_stop_ends_the_answer_early_and_says_so(server, tiny_model):  # noqa: F811
    cancel = threading.Event()

    def on_text(_piece: str) -> None:
        cancel.set()  # stop at the first piece

    answer = stream_answer(server.base_url, [{"role": "user", "content": "hi"}], model=tiny_model.name,
                           max_tokens=400, on_text=on_text, cancel=cancel)  # fmt: skip
    assert answer.cancelled and answer.tokens < 400 and answer.figures().endswith("stopped")


def test_a_refused_request_and_a_gone_engine_are_chat_errors_in_words(server):
    with pytest.raises(ChatError, match="refused the message") as refused:
        stream_answer(server.base_url, [{"role": "nobody", "content": 5}], where="llama on spark-1")
    assert str(refused.value).startswith("llama on spark-1 refused the message: ")
    with pytest.raises(ChatError, match="does not answer.*stopped, or its tunnel is down"):
        stream_answer(f"http://127.0.0.1:{free_port()}", [{"role": "user", "content": "hi"}])


def test_a_gateway_target_is_its_url_and_a_workload_target_goes_through_the_reach():
    assert opened(ChatTarget("gateway:g", "g", url="http://127.0.0.1:9/"), None).__enter__() == "http://127.0.0.1:9"
    endpoint = Endpoint(group="g0", node="spark-2", host="127.0.0.1", port=8080)
    reached = []

    class Reach:
        def __call__(self, where):
            from contextlib import contextmanager

            @contextmanager
            def tunnel():
                reached.append(("open", where.node, where.port))
                yield "http://127.0.0.1:40001"
                reached.append(("closed", where.node))

            return tunnel()

    with opened(ChatTarget("workload:w:g0", "w", endpoint=endpoint), lambda: Reach()) as url:
        assert url == "http://127.0.0.1:40001" and reached == [("open", "spark-2", 8080)]
    assert reached[-1] == ("closed", "spark-2")
    with pytest.raises(ChatError, match="no way to reach it"):
        with opened(ChatTarget("workload:w:g0", "w", endpoint=endpoint), None):
            pass


def test_only_running_workloads_with_an_endpoint_are_targets():
    from types import SimpleNamespace as NS

    endpoint = Endpoint(group="g0", node="this computer", host="127.0.0.1", port=8080)
    rows = [NS(view=NS(state="ready", workload_id="w1", record=NS(endpoints=[endpoint]))),
            NS(view=NS(state="stopped", workload_id="w2", record=NS(endpoints=[endpoint]))),
            NS(view=NS(state="ready", workload_id="train", record=NS(endpoints=[])))]  # fmt: skip
    (target,) = workload_targets(rows)
    assert target.label == "w1 · g0 on this computer" and target.endpoint == endpoint
