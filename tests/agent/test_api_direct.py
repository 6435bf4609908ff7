"""Samples written to stream clients straight from the sampling tick (api/direct.py).

The framing and the hand-over are checked on their own, then through uvicorn
itself in this process, where a test can press on a connection's flow
control the way a client that stops reading does.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from httpx_sse import connect_sse

from sparksync_agent.api.app import create_app
from sparksync_agent.api.direct import DirectWriter, SampleFanout, ServerSendKeeper
from sparksync_agent.collectors import Collector, CollectorSet
from sparksync_agent.daemon import bind_loopback
from sparksync_agent.protocol import MemorySample, NodeInfo, Sample
from sparksync_agent.runtime import AgentOptions, AgentRuntime
from sparksync_agent.sampler import Sampler

TOKEN = "direct-test-token"


class Memory(Collector):
    name, field = "memory", "memory"

    def sample(self, now: float) -> MemorySample:
        return MemorySample(total_bytes=100, used_bytes=40, available_bytes=60, free_bytes=10, cached_bytes=5,
                            buffers_bytes=1, swap_total_bytes=0, swap_used_bytes=0)  # fmt: skip


class FakeTransport:
    def __init__(self, fail: bool = False):
        self.chunks: list[bytes] = []
        self.closing = False
        self.fail = fail

    def write(self, data: bytes) -> None:
        if self.fail:
            raise ConnectionResetError("peer gone")
        self.chunks.append(data)

    def is_closing(self) -> bool:
        return self.closing


class FakeFlow:
    write_paused = False


def _unchunk(chunk: bytes) -> bytes:
    """One HTTP/1.1 chunk back to its payload, checking its size line."""
    size, _, rest = chunk.partition(b"\r\n")
    assert rest.endswith(b"\r\n")
    payload = rest[:-2]
    assert int(size, 16) == len(payload)
    return payload


def test_the_tick_frames_each_sample_once_and_hands_over_a_client_that_backs_up():
    async def scenario() -> None:
        sampler = Sampler(CollectorSet([Memory()]), sample_hz=10)
        fanout = SampleFanout(sampler)
        steady, paused, broken = FakeTransport(), FakeTransport(), FakeTransport(fail=True)
        paused_flow = FakeFlow()
        writers = [DirectWriter(steady, FakeFlow(), 0), DirectWriter(paused, paused_flow, 0),
                   DirectWriter(broken, FakeFlow(), 0)]  # fmt: skip
        for writer in writers:
            fanout.add(writer)
        sampler.take_sample()
        paused_flow.write_paused = True
        sampler.take_sample()
        sampler.take_sample()

        events = [_unchunk(c) for c in steady.chunks]
        seqs = [int(e.split(b"\n", 1)[0].removeprefix(b"id: ")) for e in events]
        assert seqs == [1, 2, 3]
        for seq, event in zip(seqs, events, strict=True):
            head, data = event.split(b"data: ", 1)
            assert head == b"id: %d\nevent: sample\n" % seq and data.endswith(b"\n\n")
            assert Sample.model_validate_json(data).seq == seq
        assert paused.chunks == steady.chunks[:1]  # nothing more once its socket backed up
        assert writers[1].detached.done() and writers[1].last == 1  # its task resumes after seq 1
        assert writers[2].detached.done() and writers[2].last == 0  # a failing socket costs only itself
        assert not writers[0].detached.done() and writers[0].last == 3
        assert fanout.attached == 1
        fanout.remove(writers[0])
        assert sampler._listeners == ()  # the tick does no fan-out work once nobody is attached

    asyncio.run(scenario())


def test_a_closing_transport_is_handed_back_without_a_write():
    async def scenario() -> None:
        sampler = Sampler(CollectorSet([Memory()]), sample_hz=10)
        fanout = SampleFanout(sampler)
        transport = FakeTransport()
        writer = DirectWriter(transport, FakeFlow(), 0)
        fanout.add(writer)
        transport.closing = True
        sampler.take_sample()
        assert transport.chunks == [] and writer.detached.done() and fanout.attached == 0

    asyncio.run(scenario())


# --- through uvicorn ---------------------------------------------------------------------


class InProcessAgent:
    """The agent's app under uvicorn (httptools, as the daemon runs it) on a thread of this process."""

    def __init__(self, tmp_path: Path):
        info = NodeInfo(node_id="n1", hostname="h", arch="x86_64", os="Debian", kernel="6", cpu_count=2,
                        boot_time=0)  # fmt: skip
        self.runtime = AgentRuntime(AgentOptions(state_dir=tmp_path, sample_hz=10), "n1", info,
                                    CollectorSet([Memory()]))  # fmt: skip
        self.app = create_app(self.runtime, TOKEN)
        config = uvicorn.Config(ServerSendKeeper(self.app), http="httptools", log_config=None, lifespan="on")
        self.server = uvicorn.Server(config)
        self.sock = bind_loopback(0)
        self.port = self.sock.getsockname()[1]
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="in-process-agent", daemon=True)

    def _run(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        asyncio.run(serve())

    def start(self) -> InProcessAgent:
        self._thread.start()
        _until(lambda: self.server.started, "uvicorn did not start")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.runtime.stopping.set)
            self.loop.call_soon_threadsafe(self.runtime.sampler.wake)
        self._thread.join(10)
        self.sock.close()

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=10.0)

    def on_loop(self, fn) -> None:
        """Run ``fn`` on the server's loop and wait for it."""
        assert self.loop is not None
        done = threading.Event()

        def call() -> None:
            try:
                fn()
            finally:
                done.set()

        self.loop.call_soon_threadsafe(call)
        assert done.wait(5)

    @property
    def attached(self) -> int:
        return self.app.state.sample_fanout.attached


@pytest.fixture
def in_process(tmp_path) -> Iterator[InProcessAgent]:
    agent = InProcessAgent(tmp_path).start()
    try:
        yield agent
    finally:
        agent.stop()


def _until(condition, message: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.02)


class Reader:
    """An SSE client on a thread, keeping every sample's seq and any 'lost' event."""

    def __init__(self, agent: InProcessAgent, stop_after: int | None = None):
        self.seqs: list[int] = []
        self.lost: list[str] = []
        self.error: BaseException | None = None
        self._agent, self._stop_after = agent, stop_after
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sse-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._agent.client() as client, connect_sse(client, "GET", "/v1/telemetry/stream") as source:
                for event in source.iter_sse():
                    if event.event == "lost":
                        self.lost.append(event.data)
                    elif event.event == "sample":
                        sample = Sample.model_validate_json(event.data)
                        assert event.id == str(sample.seq)
                        self.seqs.append(sample.seq)
                    if self._done.is_set() or (self._stop_after and len(self.seqs) >= self._stop_after):
                        return  # leaves: the connection closes under the agent
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            if not self._done.is_set():
                self.error = exc

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)


def _in_order(seqs: list[int]) -> bool:
    return seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_a_client_whose_socket_backs_up_is_served_from_the_ring_and_comes_back(in_process):
    slow = Reader(in_process)
    _until(lambda: in_process.attached == 1, "a caught-up client is not written to from the tick")
    (slow_protocol,) = in_process.server.server_state.connections  # uvicorn's protocol of that connection
    steady = Reader(in_process)
    _until(lambda: len(steady.seqs) >= 3 and len(slow.seqs) >= 3, "the streams did not start")
    _until(lambda: in_process.attached == 2, "the second client is not written to from the tick")

    in_process.on_loop(slow_protocol.pause_writing)  # what the transport does once its buffer is full
    paused_from = in_process.runtime.sampler.ring.last_seq
    _until(lambda: in_process.attached == 1, "the backed-up client was not handed back to its task")
    time.sleep(0.5)  # samples land meanwhile; only the ring holds them for the slow client
    assert slow.seqs[-1] <= paused_from + 1  # nothing went past uvicorn's flow control
    paused_to = in_process.runtime.sampler.ring.last_seq
    in_process.on_loop(slow_protocol.resume_writing)
    _until(lambda: in_process.attached == 2, "the slow client did not come back to the tick's writes")

    leaver = Reader(in_process, stop_after=3)
    _until(lambda: len(leaver.seqs) >= 3, "the leaving client got nothing")
    _until(lambda: in_process.attached == 2 and in_process.runtime.stream_clients == 2,
           "the client that left is still attached")  # fmt: skip
    newest = in_process.runtime.sampler.ring.last_seq
    _until(lambda: min(steady.seqs[-1], slow.seqs[-1]) >= newest + 3, "the streams stopped after one left")
    steady.stop()
    slow.stop()
    for reader in (steady, slow, leaver):
        assert reader.error is None, reader.error
        assert reader.lost == []
        assert _in_order(reader.seqs), reader.seqs
    # In order from before the pause to after it: the samples of the pause came from the ring.
    assert slow.seqs[0] <= paused_from and slow.seqs[-1] > paused_to >= paused_from + 3
