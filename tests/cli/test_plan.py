"""``sparksync plan fit`` and ``plan speed`` through click's runner and as a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest
from click.testing import CliRunner

from sparksync.cli import plan as plan_cli
from sparksync.cli.main import cli
from sparksync.core.base.errors import AgentUnreachableError
from tests.engines.tinymodel import SMALL, write_tiny_model
from tests.machine import mem_total_bytes

GLM = ["--params", "753B", "--quant", "nvfp4", "--weights-gb", "470", "--node-memory-gb", "128"]
QWEN_27B = [
    "--params",
    "27e9",
    "--quant",
    "nvfp4",
    "--layers",
    "64",
    "--kv-heads",
    "8",
    "--head-dim",
    "128",
    "--hidden",
    "5120",
    "--attention-heads",
    "64",
]


def run(*args: str):
    return CliRunner().invoke(cli, ["plan", *args])


def test_glm_does_not_fit_on_3_nodes():
    result = run("fit", *GLM, "--nodes", "3")
    assert result.exit_code == 1, result.output  # scripts rely on it: "does not fit" is not success
    assert "on 3 nodes it does NOT fit" in result.stdout
    assert "needs 4 nodes (the fewest that fit)" in result.stdout
    assert "cluster: up to 8 nodes of 128.0 GB (124.0 GB free after the OS reserve)" in result.stdout


def test_glm_fits_on_8_nodes_json():
    result = run("fit", *GLM, "--nodes", "8", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["fits"] is True and report["checked"]["nodes"] == 8
    # 470 / 8 + 4 GB overhead = 62.75 GB per node, of 124 GB: 61.25 GB margin.
    assert report["checked"]["margin_bytes"] == pytest.approx(61.25e9)
    assert report["model"]["weight_bytes"] == 470_000_000_000


def test_64_gb_nodes_change_the_answer():
    # 470 GB on 64 GB nodes: 8 x 56 GB usable = 448 GB: not even the whole cluster holds it.
    result = run("fit", *GLM[:-1], "64", "--json")
    report = json.loads(result.stdout)
    assert report["fits"] is False and report["nodes_needed"] is None
    assert result.exit_code == 1
    assert "does NOT fit on all 8 nodes" in run("fit", *GLM[:-1], "64").stdout


def test_fit_reads_a_gguf(tmp_path):
    model = write_tiny_model(tmp_path, SMALL)
    args = ["fit", "--model-file", str(model.gguf), "--node-memory-gb", "64", "--json"]
    report = json.loads(run(*args, "--context", "4096").stdout)
    assert report["model"]["layers"] == SMALL.n_layer and report["model"]["quant"] == "fp32"
    # The shape came from the file, so the KV cache is counted: 2 layers x 4 heads x 16 x 2 x 2 B x 4,096.
    assert report["kv_cache_bytes"] == 2 * 4 * 16 * 2 * 2 * 4096
    assert report["warnings"] == []
    # The file also gives the model's maximum context (4,096), so a longer one is flagged.
    longer = json.loads(run(*args, "--context", "8192").stdout)
    assert longer["warnings"] == ["context 8192 exceeds the model's maximum of 4096 tokens."]


def test_options_override_the_model_file(tmp_path):
    # The file says F32 (4 B/param); asking "what if it were Q8_0" drops the file's exact
    # byte count and prices the same parameters at 34/32 B, keeping the file's shape.
    model = write_tiny_model(tmp_path, SMALL)
    args = ["fit", "--model-file", str(model.gguf), "--node-memory-gb", "64", "--json"]
    as_file = json.loads(run(*args).stdout)["model"]
    as_q8 = json.loads(run(*args, "--quant", "Q8_0", "--layers", "3").stdout)["model"]
    assert as_q8["quant"] == "q8_0" and as_q8["weight_bytes"] is None
    assert as_q8["params"] == as_file["params"] and as_q8["layers"] == 3
    assert as_q8["kv_heads"] == as_file["kv_heads"] == SMALL.n_head_kv


def test_fit_defaults_to_the_nodes_real_memory():
    # No --node-memory-gb: the planner asks every known node's agent (here: this computer).
    result = run("fit", "--params", "1B", "--quant", "q8_0", "--json")
    assert result.exit_code == 0, result.output
    [node] = json.loads(result.stdout)["cluster"]
    assert node["source"] == "telemetry" and node["total_bytes"] == mem_total_bytes()
    assert 0 < node["free_bytes"] <= node["total_bytes"]
    assert not psutil.Process().children(recursive=True)  # the local agent it started is gone


def test_speed_reproduces_the_worked_example():
    result = run(
        "speed",
        *QWEN_27B,
        "--nodes",
        "1",
        "--nodes",
        "8",
        "--measured-decode",
        "11.86",
        "--measured-decode",
        "52.58",
        "--json",
    )
    assert result.exit_code == 0, result.output
    one, eight = json.loads(result.stdout)["rows"]
    # docs/planner.md: 15.75 and 94.4 tok/s bounds; 75 % and 56 % of them reached.
    assert one["decode"]["tokens_per_second"] == pytest.approx(15.75, abs=0.01)
    assert eight["decode"]["tokens_per_second"] == pytest.approx(94.4, abs=0.1)
    assert one["decode_percent_of_bound"] == pytest.approx(75.3, abs=0.1)
    assert eight["decode_percent_of_bound"] == pytest.approx(55.7, abs=0.1)
    assert one["prefill_percent_of_bound"] is None


def test_speed_table_names_its_assumptions():
    result = run("speed", *QWEN_27B, "--nodes", "8", "--allreduce-latency-us", "5", "--peak-tflops", "400")
    assert result.exit_code == 0, result.output
    assert "5 us per all-reduce (assumed)" in result.stdout
    assert "FP4 peak 400 TFLOP/s" in result.stdout


class _DeadFleet:
    """A cluster of one paired node whose agent does not answer."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def cluster(self):
        return ["spark-dead"]

    def call(self, node, action):
        raise AgentUnreachableError("no answer from spark-dead's agent.")


def test_an_unreachable_node_says_how_to_plan_without_it(monkeypatch):
    monkeypatch.setattr(plan_cli, "Fleet", _DeadFleet)
    result = run("fit", "--params", "7B", "--quant", "bf16")
    assert result.exit_code == AgentUnreachableError.exit_code
    assert "could not read spark-dead's free memory: no answer" in result.output
    assert "--node-memory-gb" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["fit", "--params", "7B", "--quant", "q7_z", "--node-memory-gb", "128"],
            "unknown quantisation 'q7_z'",
        ),
        (["fit", "--params", "-7B", "--quant", "bf16", "--node-memory-gb", "128"], "is not a count"),
        (["fit", "--params", "0", "--quant", "bf16", "--node-memory-gb", "128"], "must be more than 0"),
        (["fit", "--quant", "bf16", "--node-memory-gb", "128"], "needs --params"),
        (["fit", *GLM, "--nodes", "9"], "is not in the range 1<=x<=8"),
        (["fit", *GLM, "--node-memory-gb", "-1"], "-1"),
        (
            ["speed", *QWEN_27B, "--nodes", "1", "--nodes", "8", "--measured-decode", "11.86"],
            "give one --measured-decode per --nodes",
        ),
        (
            ["speed", "--params", "27e9", "--quant", "nvfp4", "--nodes", "2"],
            "needs the model's layers and hidden",
        ),
    ],
)
def test_bad_input_is_a_clear_error(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output


def test_a_model_file_that_is_not_a_model(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    result = run("fit", "--model-file", str(path), "--node-memory-gb", "128")
    assert result.exit_code == 2
    assert "sparksync: error:" in result.output and "neither a GGUF file" in result.output


def test_plan_fit_as_a_process():
    completed = subprocess.run(
        [sys.executable, "-m", "sparksync", "plan", "fit", *GLM, "--nodes", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr  # a script's `if sparksync plan fit ...` reads "no"
    report = json.loads(completed.stdout)
    assert report["fits"] is False and report["nodes_needed"] == 4
    fits = subprocess.run([sys.executable, "-m", "sparksync", "plan", "fit", *GLM, "--nodes", "8"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert fits.returncode == 0 and "it fits" in fits.stdout, fits.stderr
