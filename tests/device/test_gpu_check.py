"""The device check runs here too, on the CPU build, so it cannot rot between GPU machines.

Same script, same steps as on a GPU machine (find the engine, write a model, start it under
this computer's agent, one long answer, the readings, the bound); only the flavour and a
smaller model differ. Its own pass mark is what is asserted: live tokens/s followed the
answer (most samples above zero, mean within 20 % of the server's figure).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.engines.conftest import llama_binaries  # noqa: F401  (the cached build, or a skip)

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.timeout(540)]

SCRIPT = Path(__file__).resolve().parent / "gpu_check.sh"


def test_the_gpu_check_script_passes_on_the_cpu_path(llama_binaries, tmp_path):  # noqa: F811
    env = {**os.environ, "GPU_CHECK_FLAVOUR": "cpu", "OUT": str(tmp_path), "GPU_CHECK_BUDGET_S": "400",
           "SPARKSYNC_HOME": str(tmp_path / "home")}  # fmt: skip
    done = subprocess.run([str(SCRIPT), "--embd", "256", "--layers", "4", "--tokens", "3000"], env=env,
                          capture_output=True, text=True, timeout=500, check=False)  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "gpu_check: flavour cpu" in out and f"llama-server {llama_binaries.llama_server}" in out
    assert "GPU readings: none (the agent found no NVML GPU on this machine)" in out
    assert "live tokens/s:" in out and "(ok)" in out and "bound:" in out
    summary = json.loads(out.strip().splitlines()[-1])
    live = summary["live_tokens"]
    assert live["ok"] and live["answer_tokens"] == 3000 and live["above_zero"] > 0
    assert live["mean"] == pytest.approx(live["server_tps"], rel=0.2)
    assert summary["bound"]["tokens_per_second"] > live["server_tps"]  # a bound is above what was measured
    written = json.loads((tmp_path / "gpu_check.json").read_text())
    assert len(written["live_tokens"]["samples"]) >= live["above_zero"]
