"""The eval end to end against scripted replicas: scores, shares, gain, the stored report, the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.switchyard.eval.cases import CaseFile, example_cases_path, load_cases
from sparksync.switchyard.eval.play import play
from sparksync.switchyard.eval.report import save_report
from tests.switchyard.conftest import config_for
from tests.switchyard.fakes import Reply, call

CASES = load_cases(example_cases_path())
EASY = {c.id for c in CASES.cases if "easy" in c.tags}


def last_user_text(case) -> str:
    return [m["content"] for m in case.messages if m["role"] == "user"][-1]


def right_answer(case) -> Reply:
    expected = case.expect.tool_call
    if expected is None:
        return Reply(
            content={
                "no-tool-arithmetic": "144",
                "no-tool-thanks": "You're welcome!",
                "history-use-result": "It is 31 degrees.",
            }[case.id]
        )
    return Reply(
        content=None, tool_calls=[call(expected.name, expected.arguments)], finish_reason="tool_calls"
    )


def scripts(cases: CaseFile) -> tuple[dict, dict]:
    """Small knows the easy cases and botches the rest (arguments that break the schema); large knows all."""
    large = {last_user_text(c): right_answer(c) for c in cases.cases}
    small = {}
    for case in cases.cases:
        if case.id in EASY:
            small[last_user_text(case)] = right_answer(case)
        else:
            name = case.expect.tool_call.name if case.expect.tool_call else "get_weather"
            small[last_user_text(case)] = Reply(
                content=None, tool_calls=[call(name, {"nonsense": True, "city": 7})]
            )
    return small, large


def make_pools(fake, large_delay_s: float = 0.25):
    small_script, large_script = scripts(CASES)
    for reply in large_script.values():
        reply.delay_s = large_delay_s  # the large model is slower per request
    return fake("small", small_script), fake("large", large_script)


@pytest.fixture
def pools(fake):
    return make_pools(fake)


@pytest.fixture
def gain_pools(fake):
    # For the throughput gain: a second per large answer is by far more than a loaded machine
    # (another test building a package on the other core) stalls either run, so the gain
    # measured is the routing's and not the scheduler's.
    return make_pools(fake, large_delay_s=1.0)


def test_cascade_eval_keeps_the_score_and_raises_throughput(gain_pools, tmp_path):
    small, large = gain_pools
    config = config_for([small.url], [large.url], policy={"kind": "cascade"})
    report = play(config, CASES, example_cases_path(), concurrency=4, max_tokens=64)
    gateway, large_only, small_only = report.targets
    assert [t.label for t in report.targets] == ["gateway", "large only", "small only"]
    assert gateway.score == 100 and large_only.score == 100
    # Small gets the 12 easy cases; the partial rule gives its botched calls to the right tool 0.5 each
    # (flight-two-adults, calendar-event) and 0.6 to flight-business (its omitted passengers=1 is default).
    assert len(EASY) == 12
    assert small_only.score == pytest.approx(100 * (12 + 0.5 + 0.5 + 0.6) / 21, abs=0.01)
    assert gateway.share == pytest.approx({"small": len(EASY) / 21, "large": 1 - len(EASY) / 21})
    assert large_only.share == {"large": 1.0} and small_only.share == {"small": 1.0}
    assert all(t.errors == 0 and t.output_tokens == 21 * 7 for t in report.targets)
    assert report.gain.parity and report.gain.throughput_x > 1.1, report.gain
    assert (
        report.gain.summary == f"{report.gain.throughput_x:.2f}x throughput at score parity (100 against 100)"
    )
    # The max_tokens of the run reached the replicas, and the cases' tools went along.
    assert large.bodies[0]["max_tokens"] == 64 and large.bodies[0]["tools"]
    stored = save_report(report, tmp_path / "eval.json")
    assert json.loads(stored.read_text())["gain"]["summary"] == report.gain.summary


def test_a_lower_routed_score_is_reported_as_such(pools):
    small, large = pools
    config = config_for([small.url], [large.url], policy={"kind": "fixed_share", "large_share": 0})
    report = play(config, CASES, example_cases_path(), concurrency=8)
    assert not report.gain.parity
    assert "but a lower score" in report.gain.summary and "against 100" in report.gain.summary


def test_cli_eval_prints_the_summary_and_writes_the_report(pools, tmp_path):
    small, large = pools
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(
        json.dumps(
            {
                "pools": {"mini": {"urls": [small.url]}, "big": {"urls": [large.url]}},
                "policy": {"kind": "cascade", "small": "mini", "large": "big"},
            }
        )
    )
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        [
            "switchyard",
            "eval",
            "--cases",
            str(example_cases_path()),
            "--config",
            str(config_path),
            "--concurrency",
            "6",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "throughput at score parity (100 against 100)" in result.stdout
    assert "gateway" in result.stdout and "large only" in result.stdout
    document = json.loads(out.read_text())
    assert document["format"] == "switchyard-eval/2" and document["concurrency"] == 6
    assert small.bodies[0]["model"] == "mini"  # the pool's name is its model when none is configured


def test_cli_eval_with_an_unreachable_pool_fails_clearly(fake, tmp_path):
    small = fake("small")
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(
        json.dumps(
            {
                "pools": {"s": {"urls": [small.url]}, "l": {"urls": ["http://127.0.0.1:9"]}},
                "policy": {"kind": "fixed_share", "small": "s", "large": "l", "large_share": 0},
            }
        )
    )
    result = CliRunner().invoke(
        cli, ["switchyard", "eval", "--cases", str(example_cases_path()), "--config", str(config_path)]
    )
    assert result.exit_code == 24
    assert "every request to large only (model 'l') failed" in result.stderr


def test_evals_go_to_the_sqlite_history_beside_the_benchmarks(pools):
    from sparksync.core.bench.history import HistoryStore
    from sparksync.switchyard.eval.history import EvalHistory

    small, large = pools
    config = config_for([small.url], [large.url], policy={"kind": "cascade"})
    report = play(config, CASES, example_cases_path(), concurrency=4, max_tokens=64)
    history = EvalHistory()
    first, second = history.add(report), history.add(report)
    assert history.store.path == HistoryStore().path  # the benchmark history's own file
    items = history.list_evals()
    assert [i.id for i in items] == [second, first]  # newest first
    item = items[0]
    assert item.policy == "cascade" and item.cases == 21 and item.concurrency == 4
    assert item.score_gateway == 100 and item.score_large == 100 and item.parity is True
    assert item.summary == report.gain.summary and item.throughput_x == report.gain.throughput_x
    assert history.get(first) == report
    assert len(history.list_evals(limit=1)) == 1


def test_cli_lists_and_shows_stored_evals(pools, tmp_path):
    small, large = pools
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(
        json.dumps(
            {
                "pools": {"small": {"urls": [small.url]}, "large": {"urls": [large.url]}},
                "policy": {"kind": "cascade", "small": "small", "large": "large"},
            }
        )
    )
    runner = CliRunner()
    assert "no Switchyard evals stored yet" in runner.invoke(cli, ["switchyard", "history"]).stdout
    ran = runner.invoke(
        cli,
        [
            "switchyard",
            "eval",
            "--cases",
            str(example_cases_path()),
            "--config",
            str(config_path),
            "--concurrency",
            "4",
            "--out",
            str(tmp_path / "r.json"),
        ],
    )
    assert ran.exit_code == 0, ran.output
    assert "stored as eval 1 (sparksync switchyard show 1)" in ran.stderr
    listed = runner.invoke(cli, ["switchyard", "history"])
    assert listed.exit_code == 0
    (row,) = listed.stdout.splitlines()[1:]
    assert row.split()[0] == "1" and "cascade" in row and "at score parity (100 against 100)" in row
    assert json.loads(runner.invoke(cli, ["switchyard", "history", "--json"]).stdout)[0]["cases"] == 21
    shown = runner.invoke(cli, ["switchyard", "show", "1"])
    assert shown.exit_code == 0 and "large only" in shown.stdout and "score parity" in shown.stdout
    missing = runner.invoke(cli, ["switchyard", "show", "9"])
    assert missing.exit_code == 25 and "no stored Switchyard eval has id 9" in missing.stderr


# -- a public suite -----------------------------------------------------------------------------


def bfcl_pools(fake, cases):
    from tests.switchyard.suite_answers import bfcl_scripts

    small, large = bfcl_scripts(cases)
    return fake("small", small), fake("large", large)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_cli_eval_of_bfcl_prints_a_score_per_category(fake, tmp_path, stream):
    from sparksync.switchyard.eval.suites import load_suite

    cases = load_suite("bfcl", limit=9)
    small, large = bfcl_pools(fake, cases)
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(json.dumps({
        "pools": {"small": {"urls": [small.url]}, "large": {"urls": [large.url]}},
        "policy": {"kind": "cascade", "small": "small", "large": "large"},
    }))  # fmt: skip
    args = ["switchyard", "eval", "--suite", "bfcl", "--limit", "9", "--config", str(config_path),
            "--concurrency", "3", "--out", str(tmp_path / "r.json"), *(["--stream"] if stream else [])]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("9 cases from BFCL (bfcl-eval ") and ("streamed" if stream else "not streamed") in lines[0]
    # Per category: gateway, large only, small only. Small botches the 3 parallel cases (a text answer);
    # the cascade escalates those (no tool call where tools were offered is not an escalation trigger,
    # so they stay with small): the gateway's parallel score is small's.
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ") and len(line.split()) == 4}
    assert rows["simple"] == ["100.0", "100.0", "100.0"] and rows["multiple"] == ["100.0", "100.0", "100.0"]
    assert rows["parallel"] == ["0.0", "100.0", "0.0"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["suite"].startswith("BFCL (bfcl-eval ") and report["stream"] is stream
    gateway = report["targets"][0]
    assert gateway["categories"] == {"simple": 100.0, "multiple": 100.0, "parallel": 0.0}
    assert (gateway["ttft_p50_ms"] is not None) is stream
    assert large.bodies[0]["temperature"] == 0 and large.bodies[0]["tools"][0]["type"] == "function"
    assert "lower score (67 against 100" in result.stdout


def test_when_the_reference_scores_nothing_the_eval_says_so_instead_of_claiming_parity(fake, tmp_path):
    """Random tiny models answer nothing right: "1.75x at score parity (0 against 0)" would be a lie."""
    small, large = fake("small"), fake("large")  # text answers to everything: every call expected is missed
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(json.dumps({
        "pools": {"small": {"urls": [small.url]}, "large": {"urls": [large.url]}},
        "policy": {"kind": "fixed_share", "small": "small", "large": "large", "large_share": "1/4"},
    }))  # fmt: skip
    runner = CliRunner()
    ran = runner.invoke(cli, ["switchyard", "eval", "--cases", str(example_cases_path()), "--config",
                              str(config_path), "--out", str(tmp_path / "r.json")])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    summary = ran.stdout.splitlines()[-1]
    assert summary.startswith("no score: the models answered no case correctly (") and "parity" not in summary
    assert json.loads((tmp_path / "r.json").read_text())["gain"]["parity"] is None
    listed = json.loads(runner.invoke(cli, ["switchyard", "history", "--json"]).stdout)
    assert listed[0]["parity"] is None and listed[0]["summary"] == summary


def test_a_format_1_report_still_reads():
    from sparksync.switchyard.eval.report import EvalReport

    old = {
        "format": "switchyard-eval/1", "when": "2026-11-30T09:12:00+0000", "case_file": "cases.json", "cases": 1,
        "concurrency": 1, "max_tokens": 8, "policy": "cascade",
        "targets": [{"label": "gateway", "model": "switchyard", "score": 100.0, "cases": 1, "errors": 0,
                     "wall_s": 1.0, "requests_per_s": 1.0, "output_tokens": 7, "output_tokens_per_s": 7.0,
                     "share": {"small": 1.0},
                     "outcomes": [{"id": "a", "score": 1.0, "pool": "small", "output_tokens": 7, "latency_s": 1.0}]}],
        "gain": {"throughput_x": 1.5, "requests_x": 1.5, "score_gateway": 100, "score_large": 100, "parity": True,
                 "summary": "1.50x throughput at score parity (100 against 100)"},
    }  # fmt: skip
    report = EvalReport.model_validate(old)
    assert report.suite is None and report.stream is False and report.targets[0].categories == {}
