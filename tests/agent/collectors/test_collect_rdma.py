from __future__ import annotations

from sparksync_agent.collectors.rdma import RdmaCollector


def by_port(samples):
    return {(s.device, s.port): s for s in samples}


def test_no_infiniband_class_means_no_rdma(tree):
    assert RdmaCollector(tree.sys).sample(0.0) is None


def test_counters_are_in_four_byte_units(tree):
    tree.rdma_port("rocep1s0f0", 1, rcv=1_000, xmit=2_000)
    collector = RdmaCollector(tree.sys)
    first = collector.sample(10.0)[0]
    assert (first.rx_bytes_per_s, first.tx_bytes_per_s) == (0.0, 0.0)
    assert (first.rx_bytes_total, first.tx_bytes_total) == (4_000, 8_000)

    tree.rdma_port("rocep1s0f0", 1, rcv=1_500, xmit=2_250)
    second = collector.sample(10.5)[0]
    assert second.rx_bytes_per_s == 500 * 4 / 0.5
    assert second.tx_bytes_per_s == 250 * 4 / 0.5
    assert second.rx_bytes_total == 6_000


def test_state_and_rate_as_sysfs_says_them(tree):
    tree.rdma_port("roceP2p1s0f1", 1, 0, 0, state="1: DOWN", rate="10 Gb/sec (4X SDR)")
    sample = RdmaCollector(tree.sys).sample(0.0)[0]
    assert (sample.device, sample.port, sample.state, sample.rate) == (
        "roceP2p1s0f1",
        1,
        "DOWN",
        "10 Gb/sec (4X SDR)",
    )


def test_every_device_and_port_is_reported(tree):
    for device in ("rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"):
        tree.rdma_port(device, 1, 0, 0)
    tree.rdma_port("rocep1s0f0", 2, 0, 0)
    keys = set(by_port(RdmaCollector(tree.sys).sample(0.0)))
    assert len(keys) == 5 and ("rocep1s0f0", 2) in keys


def test_32_bit_counter_wrap(tree):
    tree.rdma_port("mlx5_0", 1, rcv=2**32 - 10, xmit=7)
    collector = RdmaCollector(tree.sys)
    collector.sample(0.0)
    tree.rdma_port("mlx5_0", 1, rcv=5, xmit=7)
    sample = collector.sample(1.0)[0]
    assert sample.rx_bytes_per_s == 15 * 4  # 10 words to the wrap plus 5 after it
    assert sample.tx_bytes_per_s == 0.0


def test_64_bit_counter_going_back_is_a_reset(tree):
    tree.rdma_port("mlx5_0", 1, rcv=2**40, xmit=2**40)
    collector = RdmaCollector(tree.sys)
    collector.sample(0.0)
    tree.rdma_port("mlx5_0", 1, rcv=100, xmit=0)
    sample = collector.sample(2.0)[0]
    assert sample.rx_bytes_per_s == 100 * 4 / 2.0
    assert sample.tx_bytes_per_s == 0.0


def test_port_that_vanishes_is_skipped_then_rescanned(tree):
    tree.rdma_port("mlx5_0", 1, 0, 0)
    gone = tree.rdma_port("mlx5_1", 1, 0, 0)
    collector = RdmaCollector(tree.sys, refresh_s=3600)
    assert len(collector.sample(0.0)) == 2
    (gone / "counters" / "port_rcv_data").unlink()
    assert [s.device for s in collector.sample(1.0)] == ["mlx5_0"]
    tree.rdma_port("mlx5_2", 1, 0, 0)  # found by the rescan the vanished port triggered
    assert [s.device for s in collector.sample(2.0)] == ["mlx5_0", "mlx5_2"]


def test_state_is_refreshed_only_every_refresh_interval(tree):
    tree.rdma_port("mlx5_0", 1, 0, 0, state="4: ACTIVE")
    collector = RdmaCollector(tree.sys, refresh_s=5.0)
    collector.sample(0.0)
    tree.rdma_port("mlx5_0", 1, 0, 0, state="1: DOWN")
    assert collector.sample(1.0)[0].state == "ACTIVE"
    assert collector.sample(5.0)[0].state == "DOWN"
