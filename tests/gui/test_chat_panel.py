"""The Chat tab against a real llama-server (the tiny model): targets, a streamed answer, its figures, errors."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.workloads.workload_store import Endpoint

# The engine fixtures live in tests/engines/conftest.py; importing them makes them visible here.
from tests.engines.conftest import _tiny_models_dir, _tiny_tokenizer, llama_binaries, tiny_model  # noqa: F401
from tests.switchyard.llama import replicas

pytestmark = [pytest.mark.gui, pytest.mark.engine]
WAIT_MS = 60_000


def row(workload_id: str, port: int, state: str = "ready", node: str = LOCAL_NODE_NAME):
    """A Workloads-tab row as the panel reads it: a workload and its engine's endpoint."""
    endpoint = Endpoint(group="llamacpp-single", node=node, host="127.0.0.1", port=port)
    return NS(view=NS(state=state, workload_id=workload_id, record=NS(endpoints=[endpoint])))


@pytest.fixture
def panel(qtbot):
    from sparksync.core.workloads import TunnelReach
    from sparksync.gui.chat.chat_panel import ChatPanel

    # This computer's endpoints are on loopback: the reach needs no SSH transport for them.
    widget = ChatPanel(reach=lambda: TunnelReach(NS(transports=None)))
    qtbot.addWidget(widget)
    widget.resize(900, 600)
    widget.show()
    yield widget
    assert widget.shutdown(30)


@pytest.fixture(scope="module")
def engine(llama_binaries, tiny_model, tmp_path_factory):  # noqa: F811
    with replicas(llama_binaries, tiny_model, tmp_path_factory.mktemp("chat-gui"), 1) as (server,):
        yield server


def test_with_nothing_running_the_tab_says_how_to_get_a_model(panel):
    assert panel.hint.isVisible() and "Workloads tab" in panel.hint.text()
    assert not panel.send_button.isEnabled() and not panel.send()


def test_a_message_to_a_running_workload_streams_in_with_its_ttft_and_tokens_per_s(qtbot, panel, engine):
    panel.set_workload_rows([row("llamacpp-single-1", engine.port), row("old-1", 9, state="stopped")])
    assert [t.label for t in panel.targets] == ["llamacpp-single-1 · llamacpp-single on this computer"]
    assert not panel.hint.isVisible() and panel.send_button.isEnabled()
    pieces = []
    panel._pieces.arrived.connect(pieces.append)
    with qtbot.waitSignal(panel.answered, timeout=WAIT_MS) as done:
        panel.input.setPlainText("Tell me about the nodes.")
        panel.send_button.click()
        assert panel.busy() and panel.stop_button.isEnabled() and panel.input.toPlainText() == ""
    answer = done.args[0]
    assert len(pieces) > 1 and "".join(pieces) == answer.text  # it streamed in
    assert answer.ttft_s > 0 and answer.tokens_per_s > 0 and answer.tokens > 0
    text = panel.transcript_text()
    assert "You: Tell me about the nodes." in text and "TTFT " in text and " tok/s" in text
    assert not panel.busy() and panel.send_button.isEnabled()
    # A second question carries the first answer along.
    with qtbot.waitSignal(panel.answered, timeout=WAIT_MS):
        assert panel.send("And their memory?")
    assert len(panel.conversation.turns) == 2 and text.count("TTFT") == 1 < panel.transcript_text().count("TTFT")


def test_a_gateway_by_url_is_a_target_too(qtbot, panel, engine):
    reading = NS(key="local:1", label="on this computer", origin="local", url=engine.base_url, problem=None)
    workload_gateway = NS(key="w", label="w", origin="workload", url="http://127.0.0.1:1", problem=None)
    panel.set_gateways([reading, workload_gateway])  # one launched as a workload is listed as a workload
    assert [t.label for t in panel.targets] == ["Switchyard gateway on this computer"]
    with qtbot.waitSignal(panel.answered, timeout=WAIT_MS):
        assert panel.send("hello")


def test_an_engine_that_is_gone_is_said_in_the_tab(qtbot, panel, llama_binaries, tiny_model, tmp_path):  # noqa: F811
    with replicas(llama_binaries, tiny_model, tmp_path, 1) as (server,):
        panel.set_workload_rows([row("short-1", server.port)])
    with qtbot.waitSignal(panel.failed, timeout=WAIT_MS) as failed:
        assert panel.send("anyone there?")
    assert "does not answer" in failed.args[0] and "tunnel is down" in failed.args[0]
    assert "⚠" in panel.transcript_text() and "does not answer" in panel.transcript_text()
    assert panel.send_button.isEnabled()  # ready for the next try
