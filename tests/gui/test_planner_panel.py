"""The Planner tab offscreen: the published GLM fit, the 27 B speed bounds, a model read from its files."""

from __future__ import annotations

import pytest

from sparksync.core.planner import Hardware, ModelSpec, decode_bound
from tests.core.test_planner_readers import LLAMA_PARAMS, llama_tensors, write_config, write_safetensors

pytestmark = pytest.mark.gui

WAIT_MS = 20_000


@pytest.fixture
def planner(qtbot):
    from sparksync.gui.planner.planner_panel import PlannerPanel

    widget = PlannerPanel()
    qtbot.addWidget(widget)
    widget.show()
    yield widget
    assert widget.jobs.wait(10)


def planned(qtbot, panel):
    with qtbot.waitSignal(panel.answered, timeout=WAIT_MS) as done:
        panel.plan()
    return done.args[0]


def cell(panel, row: int, column: str) -> str:
    from sparksync.gui.planner.planner_panel import COLUMNS

    return panel.table.item(row, COLUMNS.index(column)).text()


def glm(panel, nodes: int) -> None:
    """GLM 5.3: 753 B parameters, about 470 GB in NVFP4, on Sparks of 128 GB (4 GB kept for the OS)."""
    panel.name.setText("GLM 5.3")
    panel.params.setText("753B")
    panel.quant.setCurrentText("nvfp4")
    panel.weights_gb.setValue(470)
    panel.nodes.setValue(nodes)


def test_glm_fits_on_eight_sparks(qtbot, planner):
    glm(planner, 8)
    result = planned(qtbot, planner)
    # 470 GB + 4 GB runtime per node: 4 nodes need 121.5 GB each of 124 GB free (2.5 GB to spare).
    assert result.report.nodes_needed == 4
    assert "GLM 5.3 fits on 4 of 8 node(s)" in planner.verdict.text() and "2.5 GB to spare" in planner.verdict.text()
    assert planner.table.rowCount() == 8
    assert cell(planner, 2, "fits") == "no" and cell(planner, 7, "fits") == "yes"
    assert "layers and hidden size" in planner.notes.text()  # no shape given: no multi-node speed bound


def test_glm_does_not_fit_on_three(qtbot, planner):
    glm(planner, 3)
    result = planned(qtbot, planner)
    assert result.report.nodes_needed is None
    # 3 nodes: 470/3 + 4 = 160.7 GB needed per node against 124 GB free: 36.7 GB short.
    assert "does not fit on these 3 node(s)" in planner.verdict.text() and "36.7 GB more" in planner.verdict.text()


def test_the_27b_speed_bounds_are_the_planners(qtbot, planner):
    planner.name.setText("Qwen 27B")
    planner.params.setText("27e9")
    for field, value in ((planner.layers, 64), (planner.kv_heads, 8), (planner.head_dim, 128), (planner.hidden, 5120)):
        field.setValue(value)
    result = planned(qtbot, planner)
    spec = ModelSpec(name="Qwen 27B", params=27e9, quant="nvfp4", layers=64, kv_heads=8, head_dim=128, hidden=5120)
    for nodes in (1, 8):
        bound = decode_bound(spec, nodes, Hardware(), context=8192).tokens_per_second
        assert result.rows[nodes - 1].decode_tps == pytest.approx(bound)
        assert cell(planner, nodes - 1, "decode bound") == f"{bound:,.1f} tok/s"
    assert result.rows[7].decode_tps > result.rows[0].decode_tps
    assert result.report.nodes_needed == 1


def test_a_model_read_from_its_files(qtbot, planner, tmp_path):
    write_config(tmp_path)
    write_safetensors(tmp_path / "model.safetensors", llama_tensors())
    planner.model_file.setText(str(tmp_path))
    result = planned(qtbot, planner)
    assert result.model.params == LLAMA_PARAMS and result.model.layers == 2
    assert result.report.nodes_needed == 1 and all(r.decode_tps for r in result.rows)


def test_bad_input_is_said_in_plain_words(qtbot, planner, tmp_path):
    planner.params.setText("lots")
    with qtbot.waitSignal(planner.error_raised, timeout=WAIT_MS) as error:
        planner.plan()
    assert "27B" in error.args[0]
    planner.params.setText("27B")
    planner.model_file.setText(str(tmp_path / "missing.gguf"))
    with qtbot.waitSignal(planner.error_raised, timeout=WAIT_MS) as error:
        planner.plan()
    assert "missing.gguf" in error.args[0]


def test_the_split_chooses_the_bounds_model_and_each_row_names_it(qtbot, planner):
    planner.name.setText("Qwen3.8-27B-NVFP4")
    planner.params.setText("27e9")
    planner.quant.setCurrentText("nvfp4")
    planner.layers.setValue(64)
    planner.kv_heads.setValue(8)
    planner.head_dim.setValue(128)
    planner.hidden.setValue(5120)
    planner.nodes.setValue(2)
    planner.split.setCurrentText("layer split (llama.cpp RPC)")
    result = planned(qtbot, planner)
    # docs/planner.md: a 2-node layer split reads everything in turn, plus one 20.41 us transfer.
    assert result.rows[1].decode_tps == pytest.approx(1 / ((15.1875e9 + 2147483648) / 273e9 + 20.41e-6), rel=1e-4)
    assert cell(planner, 0, "bound model") == "1 node" and cell(planner, 1, "bound model") == "layers×2"
    planner.split.setCurrentText("tensor parallel (vLLM, SGLang, TRT-LLM)")
    tensor = planned(qtbot, planner)
    assert cell(planner, 1, "bound model") == "TP×2" and tensor.rows[1].decode_tps > 1.5 * result.rows[1].decode_tps
