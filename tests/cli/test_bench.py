"""``sparksync bench ...`` through click's runner, and as a real process for Ctrl-C."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.bench.history import HistoryStore
from tests.core.bench.records import inference_run
from tests.engines.engine_procs import free_port

PREFLIGHT_STREAMS = 2


def bench(*args: str):
    return CliRunner().invoke(cli, ["bench", *args])


def run_args(server, tokenizer, *extra: str) -> list[str]:
    return ["run", "--endpoint", server.base_url, "--model", server.settings.model,
            "--tokenizer", str(tokenizer), *extra]


@pytest.fixture
def stored_runs():
    history = HistoryStore()
    runs = [inference_run(1, 11.86, 1000.0, topology="single", collective_backend="nccl", sweep_id="sw1"),
            inference_run(8, 52.58, 1940.0, minutes=1, topology="switch", collective_backend="roceante",
                          sweep_id="sw1", label="roce"),
            inference_run(8, 36.17, 1800.0, minutes=2, topology="switch", collective_backend="nccl")]
    return [history.add(run) for run in runs]


@pytest.mark.slow
def test_run_stores_the_result_and_prints_it_as_json(fake_server, tokenizer_json):
    result = bench(*run_args(fake_server, tokenizer_json, "--pp", "128", "--tg", "8", "--runs", "2",
                             "--nodes", "2", "--node", "spark-a", "--node", "spark-b", "--topology", "direct",
                             "--backend", "nccl", "--label", "cli test", "--json"))
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["status"] == "complete" and record["id"] == 1
    assert record["context"]["nodes"] == ["spark-a", "spark-b"] and record["context"]["topology"] == "direct"
    assert record["context"]["engine"] == "fake" and record["context"]["engine_version"] == "fake-1"
    assert record["profile"]["name"] == "custom" and record["profile"]["runs"] == 2
    assert record["details"]["tokenizer"] == str(tokenizer_json) and record["details"]["prompt_file"] is None
    assert record["result"]["benchmarks"][0]["response_size"] == 8
    (item,) = HistoryStore().list_runs()
    assert item.label == "cli test" and item.decode_tps == record["summary"]["decode_tps"]
    # Not on a terminal, --json progress is one JSON object per line on stderr.
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    progress = [p for p in lines if p["event"] == "progress"]
    assert progress and {p["event"] for p in lines} <= {"progress", "warning"}, result.stderr
    assert progress[-1]["finished"] and progress[-1]["requests_done"] == progress[-1]["requests_total"] > 0
    assert any(p["tokens_generated"] > 0 for p in progress)


def test_an_unreachable_endpoint_is_a_clear_error_and_stores_nothing(tokenizer_json):
    result = bench("run", "--endpoint", f"http://127.0.0.1:{free_port()}", "--model", "m",
                   "--tokenizer", str(tokenizer_json))
    assert result.exit_code == 32
    assert "sparksync: error: nothing answers at" in result.stderr
    assert "start the model's server" in result.stderr
    assert HistoryStore().count() == 0


def test_the_published_profile_cannot_take_custom_values(tokenizer_json):
    result = bench("run", "--endpoint", "http://127.0.0.1:1", "--model", "m",
                   "--tokenizer", str(tokenizer_json), "--profile", "published", "--pp", "512", "--exact-tg")
    assert result.exit_code == 2
    assert "the published profile is fixed, so --pp, --exact-tg cannot change it" in result.stderr


def test_node_names_must_match_the_node_count(tokenizer_json):
    result = bench("run", "--endpoint", "http://127.0.0.1:1", "--model", "m",
                   "--tokenizer", str(tokenizer_json), "--nodes", "2", "--node", "spark-a")
    assert result.exit_code == 2 and "1 --node names given for --nodes 2" in result.stderr


def test_a_missing_tokenizer_is_bad_input(fake_server, tmp_path):
    result = bench(*run_args(fake_server, tmp_path / "nope.json"))
    assert result.exit_code == 2 and "does not exist; give the tokenizer.json" in result.stderr


@pytest.mark.slow
def test_a_failed_benchmark_is_stored_and_exits_non_zero(make_fake, tokenizer_json):
    server = make_fake(fail_streams=True)
    result = bench(*run_args(server, tokenizer_json, "--pp", "64", "--tg", "4", "--runs", "1"))
    assert result.exit_code == 36
    assert "the benchmark produced no figures" in result.stderr
    assert "stored as run 1 (failed)" in result.stderr
    record = HistoryStore().get(1)
    assert record.status == "failed" and "HTTP 500" in record.details.log_tail


def test_list_shows_the_newest_first(stored_runs):
    result = bench("list")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["id", "when", "(UTC)"]
    assert [line.split()[0] for line in lines[1:]] == ["3", "2", "1"]
    assert "52.58" in lines[2] and "[roce]" in lines[2]
    as_json = json.loads(bench("list", "--json", "--sweep", "sw1").stdout)
    assert [item["id"] for item in as_json] == [2, 1]


def test_list_of_an_empty_history_says_how_to_start():
    assert "run one with `sparksync bench run`" in bench("list").stdout


def test_show_prints_settings_and_tests(stored_runs):
    result = bench("show", "2")
    assert result.exit_code == 0
    assert "| 8192 | 256 | 0 | 1 | 52.58 |" in result.stdout
    assert "| collective backend | roceante |" in result.stdout
    assert json.loads(bench("show", "2", "--json").stdout)["context"]["label"] == "roce"
    missing = bench("show", "99")
    assert missing.exit_code == 38 and "no stored benchmark run has id 99" in missing.stderr


def test_compare_nccl_with_roceante(stored_runs):
    result = bench("compare", "3", "2")
    assert result.exit_code == 0
    assert "| collective backend | nccl | roceante | — |" in result.stdout
    assert f"| decode tok/s | 36.17 | 52.58 | {52.58 / 36.17:.2f}x |" in result.stdout


def test_export_writes_each_format(stored_runs, tmp_path):
    rows = list(csv.DictReader(io.StringIO(bench("export", "2", "--format", "csv").stdout)))
    assert rows[0]["decode tok/s"] == "52.58"
    assert json.loads(bench("export", "2").stdout)["result"]["version"] == "0.4.0"
    out = tmp_path / "run.md"
    assert bench("export", "2", "--format", "md", "--output", str(out)).stdout == f"wrote {out}\n"
    assert out.read_text().startswith("## Run 2: qwen")
    png = tmp_path / "run.png"
    assert bench("export", "2", "--format", "png", "-o", str(png)).exit_code == 0
    assert png.read_bytes().startswith(b"\x89PNG")


def test_report_of_a_sweep(stored_runs):
    result = bench("report", "--sweep", "sw1", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["nodes"], r["speed-up"]) for r in rows] == [("1", "1.0"), ("8", str(round(52.58 / 11.86, 4)))]
    assert bench("report").exit_code == 2


def test_a_report_png_defaults_to_a_file_here(stored_runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = bench("report", "1", "2", "--format", "png")
    assert result.stdout == "wrote bench-scaling-1-2.png\n"
    assert (tmp_path / "bench-scaling-1-2.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_ctrl_c_stops_the_run_and_keeps_the_finished_test(make_fake, tokenizer_json):
    server = make_fake(token_delay_s=0.02)
    cmd = [sys.executable, "-m", "sparksync", "bench",
           *run_args(server, tokenizer_json, "--pp", "128", "--tg", "16", "--tg", "32", "--runs", "3")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        # tg 16's warmup and 3 runs, then tg 32's warmup: press Ctrl-C during tg 32's first run.
        assert server.wait_streams_finished(PREFLIGHT_STREAMS + 5, timeout=60)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "sparksync: error: benchmark cancelled after 3 of 6 measured requests" in stderr
    assert "stored as run 1 (partial)" in stderr
    record = HistoryStore().get(1)
    assert record.status == "partial"
    assert [b["response_size"] for b in record.result["benchmarks"]] == [16]
