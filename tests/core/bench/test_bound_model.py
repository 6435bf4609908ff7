"""Every "% of bound" names the model it was computed under, in the history's listing too."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.bench.bounds import run_bounds
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.recording import with_headline_bound
from tests.core.bench.records import inference_run
from tests.core.test_planner_bounds import QWEN_27B


def bounded(size: int, split: str, engine: str):
    record = inference_run(size, 11.0, 900.0, engine=engine)
    bounds = run_bounds(QWEN_27B, record.profile, size, split=split)
    return record.model_copy(update={"bounds": bounds,
                                     "summary": with_headline_bound(record.summary, bounds, record.result)})


def test_the_listing_names_each_bounds_split_and_older_runs_read_as_tensor_parallel(tmp_path):
    history = HistoryStore(tmp_path / "bench.sqlite3")
    rpc = history.add(bounded(2, "layer", "llama.cpp"))
    old = history.add(bounded(2, "tensor", "vllm"))
    bare = history.add(inference_run(1, 11.0, 900.0))  # no model files: no bound, no model
    with sqlite3.connect(history.path) as conn:  # a run stored before bounds had a split
        raw = json.loads(conn.execute("SELECT bounds_json FROM runs WHERE id = ?", (old,)).fetchone()[0])
        raw.pop("split")
        conn.execute("UPDATE runs SET bounds_json = ? WHERE id = ?", (json.dumps(raw), old))
    labels = {item.id: item.bound_label for item in history.list_runs()}
    assert labels == {rpc: "layers×2", old: "TP×2", bare: None}
    assert history.get(old).bounds.bound_model.startswith("tensor parallel over 2 nodes")


def test_bench_list_prints_the_model_beside_the_percentage():
    history = HistoryStore()
    history.add(bounded(2, "layer", "llama.cpp"))
    text = CliRunner().invoke(cli, ["bench", "list"]).stdout
    assert "% (layers×2)" in text and "% bound (model)" in text
