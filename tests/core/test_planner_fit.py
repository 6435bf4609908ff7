"""Will it fit? Published model sizes against 128 GB and 64 GB nodes, worked by hand.

Stated nodes below keep 4 GB for the OS (124 GB free of 128) and every plan
adds 4 GB of runtime overhead per node, unless a test says otherwise.
"""

from __future__ import annotations

import pytest

from sparksync.core.planner.errors import PlanInputError
from sparksync.core.planner.fit import GB, FitOptions, NodeMemory, plan_fit, stated_cluster
from sparksync.core.planner.model import ModelSpec
from sparksync_agent.protocol import MemorySample

RESERVE_GB = 4.0

# GLM 5.3 as published: 753 B parameters, "about 470 GB in NVFP4".
GLM_53 = ModelSpec(name="GLM 5.3", params=753e9, quant="nvfp4", weight_bytes=470 * 10**9)
# Llama-3-70B in BF16 (config.json shape).
LLAMA_70B = ModelSpec(
    params=70e9, quant="bf16", layers=80, kv_heads=8, head_dim=128, hidden=8192, attention_heads=64
)


def cluster(count: int = 8, memory_gb: float = 128) -> list[NodeMemory]:
    return stated_cluster(count, memory_gb, RESERVE_GB)


def test_glm_fits_on_8_nodes_of_128_gb():
    # 470 GB / 8 = 58.75 GB + 4 GB overhead = 62.75 GB per node, of 124 GB free:
    # a margin of 61.25 GB on every node.
    report = plan_fit(GLM_53, cluster(8), nodes=8)
    assert report.fits
    assert report.checked.needed_bytes_per_node == pytest.approx(62.75 * GB)
    assert report.checked.margin_bytes == pytest.approx(61.25 * GB)


def test_glm_does_not_fit_on_3_nodes_of_128_gb():
    # 470 GB / 3 = 156.7 GB per node: more than a whole 128 GB node before any overhead.
    report = plan_fit(GLM_53, cluster(8), nodes=3)
    assert not report.fits
    assert report.checked.margin_bytes == pytest.approx((124 - 470 / 3 - 4) * GB)


def test_glm_needs_4_nodes_at_the_least():
    # 4 nodes: 117.5 + 4 = 121.5 GB of 124 GB (margin 2.5 GB); 3 nodes are short (above).
    report = plan_fit(GLM_53, cluster(8))
    assert report.nodes_needed == 4
    assert report.checked.nodes == 4 and report.checked.margin_bytes == pytest.approx(2.5 * GB)


def test_glm_from_its_parameter_count_gives_the_same_verdicts():
    # Without the published size: 753e9 x 0.5625 B (NVFP4 + scales) = 423.6 GB. The published
    # ~470 GB is larger because some tensors stay in BF16; the verdicts do not change:
    # 423.6 / 3 = 141.2 GB > 128 GB, and 423.6 / 8 = 52.9 GB fits.
    model = ModelSpec(params=753e9, quant="nvfp4")
    assert model.total_weight_bytes == pytest.approx(423.5625e9)
    assert not plan_fit(model, cluster(8), nodes=3).fits
    assert plan_fit(model, cluster(8), nodes=8).fits


def test_glm_does_not_fit_on_8_nodes_of_64_gb():
    # The 64 GB variant: 8 x (64 - 4 - 4) = 448 GB usable < 470 GB; 470 / 8 + 4 = 62.75 > 60.
    report = plan_fit(GLM_53, cluster(8, 64))
    assert report.nodes_needed is None and not report.fits
    assert report.checked.nodes == 8  # the report shows the best it could do: all nodes


def test_70b_bf16_needs_2_nodes_of_128_gb():
    # 70e9 x 2 B = 140 GB: more than one node. KV at 8,192 tokens = 2.68 GB (80x8x128x2x2 B
    # per token); on 2 nodes: 70 + 1.34 + 4 = 75.3 GB of 124: fits.
    report = plan_fit(LLAMA_70B, cluster(8))
    assert report.nodes_needed == 2
    assert report.checked.kv_bytes_per_node == pytest.approx(2_684_354_560 / 2)
    assert report.checked.needed_bytes_per_node == pytest.approx(70e9 + 2_684_354_560 / 2 + 4e9)
    assert report.tensor_parallel_nodes == 2


def test_70b_bf16_on_64_gb_nodes_needs_3_but_tensor_parallel_needs_4():
    # Per node 140/N + KV/N + 4 <= 60 GB -> N >= 2.55, so 3 nodes hold it. But 3 does not
    # divide Llama's 64 query heads (nor its 8 KV heads): a tensor-parallel engine needs 4.
    report = plan_fit(LLAMA_70B, cluster(8, 64))
    assert report.nodes_needed == 3
    assert report.tensor_parallel_nodes == 4
    assert any("do not split the model's 64 attention heads" in w for w in report.warnings)


def test_27b_nvfp4_fits_one_64_gb_node():
    # 15.19 GB of weights + 4 GB overhead on 60 GB free: a margin of 40.8 GB.
    model = ModelSpec(params=27e9, quant="nvfp4")
    report = plan_fit(model, cluster(1, 64))
    assert report.nodes_needed == 1
    assert report.checked.margin_bytes == pytest.approx((60 - 15.1875 - 4) * GB)


def test_long_context_and_concurrency_can_need_another_node():
    # 70B BF16 with 128k context x 8 sequences: KV = 327,680 B x 131,072 x 8 = 343.6 GB.
    # On N nodes: (140 + 343.6) / N + 4 <= 124 -> N >= 4.03, so 5 nodes.
    options = FitOptions(context=131072, concurrency=8)
    report = plan_fit(LLAMA_70B, cluster(8), options)
    assert report.kv_cache_bytes == pytest.approx(327_680 * 131_072 * 8)
    assert report.nodes_needed == 5
    assert report.tensor_parallel_nodes == 8


def test_telemetry_nodes_use_their_real_free_memory():
    # Three real nodes with different free memory (MemAvailable): 100, 60 and 120 GB.
    # 70B BF16 (140 GB + 2.68 GB KV) on 2 nodes needs 75.3 GB each: the planner takes the
    # two roomiest (120 and 100 GB), and the margin is the tighter one's: 100 - 75.3.
    nodes = [
        NodeMemory.from_sample(name, _sample(total=128, available=free))
        for name, free in (("a", 100), ("b", 60), ("c", 120))
    ]
    report = plan_fit(LLAMA_70B, nodes, FitOptions(), nodes=2)
    assert [p.name for p in report.checked.placement] == ["c", "a"]
    needed = 70e9 + 2_684_354_560 / 2 + 4e9
    assert report.checked.margin_bytes == pytest.approx(100 * GB - needed)
    assert report.fits and report.nodes_needed == 2


def test_node_memory_reads_mem_available_not_mem_free():
    node = NodeMemory.from_sample("n", _sample(total=128, available=90, free=10))
    assert node.free_bytes == 90 * GB and node.total_bytes == 128 * GB and node.source == "telemetry"


def test_no_kv_shape_is_a_warning_not_a_silent_zero():
    report = plan_fit(GLM_53, cluster(8))
    assert report.kv_cache_bytes is None
    assert any("KV cache not counted" in w for w in report.warnings)


def test_context_beyond_the_model_maximum_warns():
    model = LLAMA_70B.model_copy(update={"max_context": 8192})
    report = plan_fit(model, cluster(8), FitOptions(context=32768))
    assert any("exceeds the model's maximum of 8192" in w for w in report.warnings)


def test_asking_for_more_nodes_than_the_cluster_has():
    with pytest.raises(PlanInputError, match="cannot plan on 4 nodes: the cluster has 3"):
        plan_fit(GLM_53, cluster(3), nodes=4)


@pytest.mark.parametrize(("total", "reserve"), [(0, 0), (-128, 0), (64, 64), (128, -1)])
def test_bad_node_memory(total, reserve):
    with pytest.raises(PlanInputError, match="node memory must be positive"):
        NodeMemory.stated("n", total, reserve)


def test_cluster_size_is_1_to_8():
    with pytest.raises(PlanInputError, match="1 to 8 nodes"):
        stated_cluster(9, 128)
    with pytest.raises(PlanInputError, match="no nodes"):
        plan_fit(GLM_53, [])


def _sample(total: float, available: float, free: float | None = None) -> MemorySample:
    free = available if free is None else free
    return MemorySample(
        total_bytes=int(total * GB),
        used_bytes=int((total - available) * GB),
        available_bytes=int(available * GB),
        free_bytes=int(free * GB),
        cached_bytes=0,
        buffers_bytes=0,
        swap_total_bytes=0,
        swap_used_bytes=0,
    )
