"""The real app on a real X server (Xvfb): it reaches live plots and a screenshot of them is not blank.

With SPARKSYNC_SCREENSHOTS_DIR set, the Switchyard test also saves its shot
there (switchyard.png), as docs/screenshots/switchyard.png is made.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest

# The engine fixtures live in tests/engines/conftest.py; importing them makes them visible here.
from tests.engines.conftest import (  # noqa: F401
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model,
    tiny_model_large,
)
from tests.engines.engine_procs import free_port
from tests.switchyard.llama import replicas

pytestmark = pytest.mark.gui

XVFB_RUN = shutil.which("xvfb-run")


@pytest.mark.skipif(XVFB_RUN is None, reason="needs xvfb-run (apt-get install xvfb xauth)")
def test_screenshot_of_live_plots_under_xvfb(tmp_path):
    shot = tmp_path / "dashboard.png"
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        SPARKSYNC_HOME=str(tmp_path / "home"),
        SPARKSYNC_GUI_SCREENSHOT=str(shot),
        SPARKSYNC_GUI_SCREENSHOT_AFTER_S="3",
    )
    done = subprocess.run(
        [XVFB_RUN, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "sparksync.gui.app", "--sample-hz", "5"],
        check=False, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_Grayscale8)
    assert (image.width(), image.height()) == (1280, 800)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes()).reshape(800, -1)[
        :, :1280
    ]
    plots = pixels[60:780, 300:1270]  # right of the side panel, below the controls
    assert plots.std() > 10 and (plots < 40).mean() > 0.3  # dark plot backgrounds carrying lines and text


# --- the Switchyard tab with a gateway routing real traffic (docs/screenshots/switchyard.png) ---------------

LARGE_POOL_COLOUR = (0xE6, 0x9F, 0x00)  # palette.NODE_COLOURS[1]: the second pool's segment of the split bar


def switchyard_config(small, large, models, port: int) -> dict:
    """Two pools over the two tiny llama-servers (``models``: their names); every fourth request to the large one."""
    return {
        "listen": {"host": "127.0.0.1", "port": port},
        "pools": {"small": {"urls": [small.base_url], "model": models[0]},
                  "large": {"urls": [large.base_url], "model": models[1]}},
        "policy": {"kind": "fixed_share", "large_share": "1/4", "small": "small", "large": "large"},
        "health": {"interval_s": 1, "timeout_s": 5},
    }  # fmt: skip


@contextmanager
def serving(config: dict, env: dict[str, str], log: Path) -> Iterator[str]:
    """``sparksync switchyard serve`` as its own process (it announces itself in env's SPARKSYNC_HOME)."""
    argv = [sys.executable, "-m", "sparksync", "switchyard", "serve", "--config-json", json.dumps(config)]
    url = f"http://127.0.0.1:{config['listen']['port']}"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)  # as Ctrl-C: it stops listening and withdraws its announcement
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=5, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def traffic(url: str) -> Iterator[list[int]]:
    """Streamed chat requests one after another until the block ends; yields [answered]."""
    answered, stop = [0], threading.Event()
    body = {"model": "switchyard", "messages": [{"role": "user", "content": "Tell me about Sparks."}],
            "max_tokens": 24, "ignore_eos": True, "stream": True}  # fmt: skip

    def ask() -> None:
        with httpx.Client(timeout=120, trust_env=False) as client:
            while not stop.is_set():
                with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
                    assert response.status_code == 200
                    for _ in response.iter_lines():
                        pass
                answered[0] += 1

    thread = threading.Thread(target=ask, name="switchyard-traffic")
    thread.start()
    try:
        yield answered
    finally:
        stop.set()
        thread.join()


def large_pool_bar_rows(image) -> int:
    """Rows holding a run of 40+ pixels of the large pool's colour: the split bar's segment (lines are thin)."""
    from PySide6.QtGui import QImage

    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height = rgb.width(), rgb.height()
    pixels = np.frombuffer(rgb.constBits(), dtype=np.uint8, count=rgb.sizeInBytes())
    pixels = pixels.reshape(height, rgb.bytesPerLine())[:, : width * 3].reshape(height, width, 3)
    mask = np.all(pixels == LARGE_POOL_COLOUR, axis=2)
    rows = 0
    for row in mask:
        run = best = 0
        for hit in row:
            run = run + 1 if hit else 0
            best = max(best, run)
        rows += best >= 40
    return rows


@pytest.mark.engine
@pytest.mark.skipif(XVFB_RUN is None, reason="needs xvfb-run (apt-get install xvfb xauth)")
def test_screenshot_of_the_switchyard_tab_with_a_gateway_routing_traffic(
    tmp_path,
    llama_binaries,  # noqa: F811
    tiny_model,  # noqa: F811
    tiny_model_large,  # noqa: F811
):
    """A local gateway over two tiny llama-servers, as its tab shows it; SPARKSYNC_SCREENSHOTS_DIR keeps it."""
    shot = tmp_path / "switchyard.png"
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(SPARKSYNC_HOME=str(tmp_path / "home"), SPARKSYNC_GUI_SCREENSHOT=str(shot),
               SPARKSYNC_GUI_SCREENSHOT_AFTER_S="25", SPARKSYNC_DISCOVERY="0",
               SPARKSYNC_GUI_SCREENSHOT_TAB="Switchyard")  # fmt: skip
    with (
        replicas(llama_binaries, tiny_model, tmp_path, 1) as (small,),
        replicas(llama_binaries, tiny_model_large, tmp_path, 1) as (large,),
        serving(
            switchyard_config(small, large, (tiny_model.name, tiny_model_large.name), free_port()),
            env,
            tmp_path / "gateway.log",
        ) as url,
        traffic(url) as answered,
    ):
        done = subprocess.run(
            [XVFB_RUN, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "sparksync.gui.app",
             "--sample-hz", "2"],
            check=False, env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert answered[0] > 0
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1280, 800)
    # The tab drew the gateway: the split bar's large-pool segment is a solid block of its colour.
    assert large_pool_bar_rows(image) >= 6
    target = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
    if target:
        shutil.copyfile(shot, Path(target) / "switchyard.png")


# --- the first run: a model on this computer (docs/screenshots/local_model.png) -----------------------------


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.skipif(XVFB_RUN is None, reason="needs xvfb-run (apt-get install xvfb xauth)")
def test_screenshot_of_running_the_demo_model_on_this_computer(tmp_path, llama_binaries):  # noqa: F811
    """The dashboard's "Run a model on this computer", pressed as a newcomer would; the tokens/s plot moves."""
    shot = tmp_path / "local_model.png"
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(SPARKSYNC_HOME=str(tmp_path / "home"), SPARKSYNC_DISCOVERY="0")
    done = subprocess.run(
        [XVFB_RUN, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "tests.gui.local_model_shot", str(shot)],
        check=False, env=env, capture_output=True, text=True, timeout=240, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_Grayscale8)
    assert (image.width(), image.height()) == (1280, 800)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes()).reshape(800, -1)[:, :1280]
    tokens = pixels[580:720, 330:1270]  # the tokens/s plot, full width at the bottom
    assert (tokens < 40).mean() > 0.5 and (tokens > 150).sum() > 200  # a dark plot with a bright curve in it
    target = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
    if target:
        shutil.copyfile(shot, Path(target) / "local_model.png")
