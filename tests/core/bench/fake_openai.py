"""A small OpenAI-style server for driving the real llama-benchy without an engine.

It answers what llama-benchy and the preflight ask: ``/v1/models``,
llama.cpp-style ``/props``, and ``/v1/chat/completions`` (plain, and streamed
as server-sent events with a usage chunk at the end). Prompt tokens are
counted with a real tokenizer plus a ChatML-like template, so a tokenizer
check has something true to compare with; every generated token is one
chunk, ``token_delay_s`` apart, so decode speed is set by the test.

    with FakeOpenAI(tokenizer, model="tiny", n_ctx=1024, token_delay_s=0.002) as server:
        server.base_url  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEMPLATE_TOKENS_PER_MESSAGE = 4  # <|im_start|>role\n ... <|im_end|>\n
GENERATION_PROMPT_TOKENS = 3  # <|im_start|>assistant\n
WORDS = ["tide", " clock", " keeper", " float", " chain", " harbour", " bell", " wire"]


@dataclass
class FakeSettings:
    model: str = "tiny-fake"
    n_ctx: int | None = 2048
    n_vocab: int | None = None
    token_delay_s: float = 0.001
    # llama-benchy takes its network latency from the model list's round trip and subtracts it
    # from the first token's time; on a loaded machine that round trip reaches several ms, so a
    # faster "prefill" would leave no prefill speed to measure.
    prefill_delay_s: float = 0.02
    speculative: str = "none"
    with_props: bool = True
    with_usage: bool = True
    api_key: str | None = None
    fail_streams: bool = False
    fail_after_streams: int | None = None  # streams answered normally before the failures start
    # llama.cpp's server closes the connection after each stream (a moment later) while
    # promising keep-alive.
    close_after_stream: bool = False
    # Every token of a stream in one write, as a server (or proxy) that buffers its stream would
    # send them: the client reads them all at once and cannot time them apart.
    burst: bool = False
    # A model list slower than the first token: llama-benchy times it as the network latency.
    models_delay_s: float = 0.0


@dataclass
class FakeCounters:
    streams_started: int = 0
    streams_finished: int = 0
    requests: list[dict] = field(default_factory=list)
    authorizations: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeOpenAI:
    def __init__(self, tokenizer, **settings):
        self.settings = FakeSettings(**settings)
        self.counters = FakeCounters()
        self._tokenizer = tokenizer
        self._stopping = threading.Event()
        self._streams_changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai",
                                        kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def wait_streams_finished(self, count: int, timeout: float = 30.0) -> bool:
        """Block until ``count`` streamed completions have ended (no polling)."""
        with self._streams_changed:
            return self._streams_changed.wait_for(lambda: self.counters.streams_finished >= count, timeout)

    def count_prompt(self, messages: list[dict]) -> int:
        text_tokens = sum(len(self._tokenizer.encode(m.get("content") or "", add_special_tokens=False).ids)
                          for m in messages)
        return text_tokens + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + GENERATION_PROMPT_TOKENS

    def _stream_done(self) -> None:
        with self._streams_changed:
            self.counters.streams_finished += 1
            self._streams_changed.notify_all()


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    s = fake.settings

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        disable_nagle_algorithm = True  # as real servers do: each token leaves at once

        def do_GET(self) -> None:  # noqa: N802
            if not self._authorized():
                return
            if self.path == "/v1/models":
                time.sleep(s.models_delay_s)
                meta = {k: v for k, v in (("n_ctx", s.n_ctx), ("n_vocab", s.n_vocab)) if v is not None}
                self._json({"object": "list", "data": [{"id": s.model, "object": "model", "owned_by": "fake",
                                                        "meta": meta}]})
            elif self.path == "/props" and s.with_props:
                self._json({"default_generation_settings": {"n_ctx": s.n_ctx,
                                                            "params": {"speculative.types": s.speculative}},
                            "build_info": "fake-1"})
            else:
                self.send_error(HTTPStatus.NOT_FOUND)

        def do_POST(self) -> None:  # noqa: N802
            if not self._authorized():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with fake.counters.lock:
                fake.counters.requests.append(body)
            if self.path != "/v1/chat/completions":
                self.send_error(HTTPStatus.NOT_FOUND)
            elif body.get("model") != s.model:
                error = {"error": {"message": f"model {body.get('model')} not found"}}
                self._json(error, HTTPStatus.NOT_FOUND)
            elif body.get("stream"):
                self._stream(body)
            else:
                self._complete(body)

        def _complete(self, body: dict) -> None:
            prompt = fake.count_prompt(body["messages"])
            if s.n_ctx and prompt > s.n_ctx:
                self._json({"error": {"message": "context exceeded"}}, HTTPStatus.BAD_REQUEST)
                return
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": WORDS[0]},
                                  "finish_reason": "length"}]}
            if s.with_usage:
                reply["usage"] = {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}
            self._json(reply)

        def _stream(self, body: dict) -> None:
            with fake.counters.lock:
                fake.counters.streams_started += 1
                number = fake.counters.streams_started
            failing = s.fail_streams or (s.fail_after_streams is not None and number > s.fail_after_streams)
            if failing:
                error = {"error": {"message": "the fake engine is broken"}}
                self._json(error, HTTPStatus.INTERNAL_SERVER_ERROR)
                fake._stream_done()
                return
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                self._stream_tokens(body)
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away (a cancelled benchmark)
            finally:
                fake._stream_done()
            if s.close_after_stream:
                # Like llama-server: the close comes a moment after the last chunk, so a quick
                # client has already sent its next request on this connection, which is then lost.
                time.sleep(0.05)
                self.close_connection = True

        def _stream_tokens(self, body: dict) -> None:
            n = int(body.get("max_tokens") or 16)
            time.sleep(s.prefill_delay_s)
            held = []
            for i in range(n):
                if fake._stopping.is_set():
                    return
                token = {"choices": [{"index": 0, "delta": {"content": WORDS[i % len(WORDS)]}}]}
                if s.burst:
                    held.append(_event_bytes(token))
                    continue
                self._event(token)
                time.sleep(s.token_delay_s)
            if held:
                self._chunk(b"".join(held))
            prompt = fake.count_prompt(body["messages"])
            usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
            self._event({"choices": [], "usage": usage} if s.with_usage else {"choices": []})
            self._chunk(b"data: [DONE]\n\n")

        def _event(self, data: dict) -> None:
            self._chunk(_event_bytes(data))

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _authorized(self) -> bool:
            given = self.headers.get("Authorization", "")
            fake.counters.authorizations.add(given)
            if s.api_key and given != f"Bearer {s.api_key}":
                self._json({"error": {"message": "bad key"}}, HTTPStatus.UNAUTHORIZED)
                return False
            return True

        def _json(self, data: dict, status: HTTPStatus = HTTPStatus.OK) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, fmt: str, *args) -> None:
            pass  # the tests assert on counters, not on a log

    return Handler


def _event_bytes(data: dict) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"
