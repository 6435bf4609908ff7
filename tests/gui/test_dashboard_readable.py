"""The dashboard reads honestly: the same time ticks on every plot, "no GPU" said, legends, a readable memory axis."""

from __future__ import annotations

import pytest

from tests.core.dashboard_samples import memory_sample, spark_sample
from tests.gui.dashboard_fixtures import NOW, drawn, feed

pytestmark = pytest.mark.gui


def ticks(plot) -> list[tuple[float, list[float]]]:
    """The time ticks the plot's bottom axis draws now, and their texts."""
    axis = plot.getPlotItem().getAxis("bottom")
    t0, t1 = plot.view_box.viewRange()[0]
    levels = axis.tickValues(t0, t1, axis.width())
    return [(spacing, [round(v, 3) for v in values]) for spacing, values in levels]


def tick_texts(plot) -> list[str]:
    axis = plot.getPlotItem().getAxis("bottom")
    texts = []
    for spacing, values in ticks(plot):
        texts += axis.tickStrings(values, 1.0, spacing)
    return texts


def test_tokens_plot_has_the_same_ticks_and_format_as_the_others_from_the_first_seconds(qtbot, model, view):
    # A few seconds of data: the tokens plot (alone on its row, twice as wide) used to read "03.000, 04.000".
    drawn(qtbot, view, lambda: [model.add_sample("laptop", memory_sample(i + 1, NOW - 4 + i / 2, 8)) for i in range(8)])
    memory, tokens = view.plots["memory"], view.plots["tokens"]
    assert tokens.width() > memory.width() * 1.5  # it does take the whole row
    assert ticks(tokens) == ticks(memory) and ticks(memory)
    texts = tick_texts(tokens)
    assert texts and all(len(t) == 8 and t.count(":") == 2 for t in texts), texts  # HH:MM:SS, no ".000"


def test_the_utilisation_plot_says_no_gpu_when_no_node_has_one(qtbot, model, view):
    laptop = spark_sample(1, NOW).model_copy(update={"gpu": None})  # a computer without a GPU
    drawn(qtbot, view, lambda: model.add_sample("laptop", laptop))
    assert view.plots["utilisation"].title() == "CPU utilisation (no GPU)"
    drawn(qtbot, view, lambda: feed(model, ["spark-1"], 2, end=NOW + 2))  # a Spark: GB10 readings
    assert view.plots["utilisation"].title().startswith("CPU and GPU utilisation")


def test_plots_name_their_nodes_in_a_legend(qtbot, model, view):
    drawn(qtbot, view, lambda: feed(model, ["spark-1", "spark-2"], 3))
    assert view.plots["memory"].legend_names == ["spark-1", "spark-2"]
    assert view.plots["network"].legend_names == ["spark-1", "spark-2"]
    assert view.plots["cluster_memory"].legend_names == ["Cluster"]
    assert "rx solid, tx dashed" in view.plots["network"].title()


def test_the_memory_axis_fits_the_used_line_and_the_title_gives_the_total(qtbot, model, view):
    # 2 GB used of 128 GB: on a 0-128 GB axis the used line would be a flat line at the bottom.
    drawn(qtbot, view, lambda: [model.add_sample("laptop", memory_sample(i + 1, NOW - 5 + i, 2)) for i in range(5)])
    plot = view.plots["memory"]
    low, high = plot.view_box.viewRange()[1]
    assert low == 0 and 2 < high < 3  # GB: the used line sits high on the axis
    assert plot.title().startswith("Unified memory used per node, of 128 GB")
