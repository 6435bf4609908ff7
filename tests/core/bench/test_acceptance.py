"""The published numbers through the benchmarks' own code, against docs/acceptance.md's hand-worked table.

Each published figure becomes a stored-run record as ``bench run`` makes it (its
summary from llama-benchy's JSON, its bounds from the planner, the headline bound
beside it), and the scaling report, the percentages of the bound and the flags are
read from the same code every view uses. The expected values are parsed from the
table in docs/acceptance.md, which works them out by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparksync.core.bench import published
from sparksync.core.bench.bounds import run_bounds
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.recording import training_record, with_headline_bound
from sparksync.core.bench.report import scaling_report
from tests.core.bench.records import inference_run
from tests.core.test_planner_bounds import QWEN_27B

TABLE = Path(__file__).resolve().parents[3] / "docs" / "acceptance.md"
NCCL_8 = published.NCCL_DECODE_SCALING_8 * published.DECODE_TPS[1]  # only the scaling is published


def hand_table() -> dict[str, dict[str, str]]:
    lines = [ln for ln in TABLE.read_text(encoding="utf-8").splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:] if not ln.startswith("|---")]
    return {row[0]: dict(zip(header, row)) for row in rows}


def number(cell: str) -> float:
    """The figure a cell ends with: '52.58 / 11.86 = 4.43' -> 4.43; '55.4 %' -> 55.4."""
    return float(re.findall(r"[0-9][0-9,]*\.?[0-9]*", cell)[-1].replace(",", ""))


def bench_record(size: int, decode: float, prefill: float, **context):
    """A run as `bench run` stores it: llama-benchy's figures, the planner's bounds, the headline bound."""
    record = inference_run(size, decode, prefill, model=published.INFERENCE_MODEL, **context)
    bounds = run_bounds(QWEN_27B, record.profile, size)
    return record.model_copy(update={"bounds": bounds,
                                     "summary": with_headline_bound(record.summary, bounds, record.result)})


def rounded(cell: str, value: float) -> bool:
    """``value`` as the table writes it: to the cell's own number of decimals."""
    shown = re.findall(r"[0-9][0-9,]*\.?[0-9]*", cell)[-1]
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(value - number(cell)) <= 0.5 * 10**-decimals + 1e-9


def figures(report, size: int):
    return next(r for r in report.rows if r.cluster_size == size)


@pytest.fixture(scope="module")
def reports():
    one = bench_record(1, published.DECODE_TPS[1], 1000.0).model_copy(update={"id": 1})
    setups = {
        "switch + RoCEnante": bench_record(8, published.DECODE_TPS[8], 1940.0, topology="switch",
                                           collective_backend="roceante"),
        "switch, NCCL": bench_record(8, NCCL_8, 1500.0, topology="switch", collective_backend="nccl"),
        "physical ring": bench_record(8, published.RING_DECODE_TPS_8, 1500.0, topology="ring"),
    }  # fmt: skip
    found = {name: scaling_report([one, run.model_copy(update={"id": 2})]) for name, run in setups.items()}
    train = [training_record("nanochat", tps, RunContext(cluster_size=n)).model_copy(update={"id": n})
             for n, tps in published.TRAINING_TPS.items()]  # fmt: skip
    found["nanochat training"] = scaling_report(train)
    return found


@pytest.mark.parametrize("setup", ["switch + RoCEnante", "switch, NCCL", "physical ring"])
def test_each_eight_node_setup_matches_the_hand_worked_row(reports, setup):
    row, hand = figures(reports[setup], 8), hand_table()[setup]
    assert row.throughput == pytest.approx(number(hand["decode tok/s"]), abs=5e-4)
    assert rounded(hand["speed-up"], row.speedup)
    assert rounded(hand["efficiency"], 100 * row.efficiency)
    assert rounded(hand["decode bound"], row.decode_bound_tps)
    assert rounded(hand["% of bound"], row.decode_percent_of_bound)
    assert row.bound_model == "TP×8"
    assert (row.flags != []) == (hand["flagged"] != "no"), row.flags


def test_one_node_matches_the_hand_worked_row(reports):
    row, hand = figures(reports["switch + RoCEnante"], 1), hand_table()["1 node"]
    assert row.throughput == number(hand["decode tok/s"]) and row.speedup == 1.0
    assert rounded(hand["decode bound"], row.decode_bound_tps)
    assert rounded(hand["% of bound"], row.decode_percent_of_bound)
    assert row.flags == []


def test_prefill_scaling_and_training_efficiency_match_the_hand_worked_rows(reports):
    table = hand_table()
    prefill = figures(reports["switch + RoCEnante"], 8)
    assert rounded(table["prefill, switch + RoCEnante"]["speed-up"], prefill.prefill_speedup)
    assert rounded(table["prefill, switch + RoCEnante"]["efficiency"], 100 * prefill.prefill_efficiency)
    train, hand = figures(reports["nanochat training"], 8), table["nanochat training"]
    assert train.throughput == number(hand["decode tok/s"])
    assert rounded(hand["speed-up"], train.speedup) and number(hand["speed-up"]) == published.TRAINING_SPEEDUP_8
    assert rounded(hand["efficiency"], 100 * train.efficiency)
    assert number(hand["efficiency"]) == pytest.approx(100 * published.TRAINING_EFFICIENCY_8)
    assert train.flags == []


def test_the_published_scalings_are_what_the_report_derives(reports):
    assert round(figures(reports["switch + RoCEnante"], 8).speedup, 2) == published.DECODE_SCALING_8
    assert round(figures(reports["switch, NCCL"], 8).speedup, 2) == published.NCCL_DECODE_SCALING_8
    assert round(figures(reports["switch + RoCEnante"], 8).prefill_speedup, 2) == published.PREFILL_SCALING_8
