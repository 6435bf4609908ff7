"""A gateway running in a background thread on its own event loop.

The eval runs one beside its client, and the tests run many; each binds its
socket before uvicorn starts (port 0 picks a free one), so ``url`` is known
at once and two gateways never race for a port.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Literal

import uvicorn

from sparksync.switchyard.config import SwitchyardConfig
from sparksync.switchyard.errors import SwitchyardError
from sparksync.switchyard.gateway import Gateway, build_app
from sparksync.switchyard.sources import PoolSource

START_TIMEOUT_S = 30.0


class GatewayThread:
    """``with GatewayThread(config) as gw: httpx.get(gw.url + "/v1/models")``"""

    def __init__(
        self,
        config: SwitchyardConfig,
        source: PoolSource | None = None,
        port: int | None = None,
        http: Literal["auto", "httptools", "h11"] = "auto",
    ):
        self.gateway = Gateway(config, source, config.check_bind())
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((config.listen.host, config.listen.port if port is None else port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{config.listen.host}:{self.port}"
        uv_config = uvicorn.Config(
            build_app(self.gateway),
            log_level="warning",
            access_log=False,
            lifespan="on",
            proxy_headers=False,
            http=http,  # (uvicorn's HTTP protocol: "auto" is httptools where installed, as serve runs)
        )
        self._server = uvicorn.Server(uv_config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"switchyard-{self.port}",
            daemon=True,
        )

    def start(self) -> GatewayThread:
        self._thread.start()
        pause = threading.Event()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            pause.wait(0.01)
        if not self._server.started:
            self.stop()
            raise SwitchyardError(f"the gateway on port {self.port} did not start; see the log above")
        return self

    def request_stop(self) -> None:
        """Ask the server to stop without waiting (several can then wind down together)."""
        self._server.should_exit = True

    def stop(self) -> None:
        self.request_stop()
        if self._thread.is_alive():
            self._thread.join(START_TIMEOUT_S)
        self._sock.close()

    def __enter__(self) -> GatewayThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
