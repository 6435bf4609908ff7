"""Reading a gateway's /metrics back: parsing recorded expositions, and the live maths by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sparksync.switchyard.live_metrics import NotAGatewayError, live_figures, parse_metrics, quantile

FIXTURES = Path(__file__).parent / "fixtures"
THEN = (FIXTURES / "metrics_then.txt").read_text()  # written by hand in the gateway's format
NOW = (FIXTURES / "metrics_now.txt").read_text()  # the same gateway 10 s later


def test_parse_takes_every_pool_figure():
    scrape = parse_metrics(THEN, at=100.0)
    small, large = scrape.pools["small"], scrape.pools["large"]
    assert (small.requests, small.failed, small.errors, small.output_tokens) == (6, 0, 0, 60)
    assert (large.requests, large.failed, large.errors, large.output_tokens) == (3, 1, 2, 40)
    assert small.share == pytest.approx(2 / 3) and large.tokens_per_s == 4.0
    assert (small.replicas_up, small.replicas, large.replicas_up, large.replicas) == (2, 2, 1, 2)
    assert large.ttft_buckets == {0.1: 0, 0.25: 1, 0.5: 2, 1.0: 2, math.inf: 2}


def test_quantile_interpolates_inside_the_bucket():
    # 12 observations: 2 <= 10 ms, 2 more <= 25 ms, 6 more <= 50 ms, 2 more <= 100 ms.
    buckets = {0.01: 2, 0.025: 4, 0.05: 10, 0.1: 12, math.inf: 12}
    # rank 6 lies 2 of 6 into the (25, 50] ms bucket: 25 + 25 * 2/6 ms.
    assert quantile(0.5, buckets) == pytest.approx(0.025 + 0.025 * 2 / 6)
    # rank 1 lies halfway into the first bucket, whose lower edge is 0.
    assert quantile(1 / 12, buckets) == pytest.approx(0.005)
    assert quantile(0.5, {0.1: 0, math.inf: 2}) == 0.1  # beyond the last edge: the last edge
    assert quantile(0.5, {0.1: 0, math.inf: 0}) is None


def test_first_scrape_has_no_recent_figures():
    live = live_figures(parse_metrics(THEN, at=100.0))
    small = live.pools["small"]
    assert live.window_s == 0 and small.recent_requests == 0 and small.recent_share is None
    # p50 since the start: rank 3 of 6 lies 1 of 2 into (10, 25] ms.
    assert small.ttft_p50_s == pytest.approx(0.0175) and not small.ttft_recent
    assert live.requests == 9 and live.tokens_per_s == 10.0


def test_two_scrapes_give_the_split_and_ttft_of_what_happened_between():
    live = live_figures(parse_metrics(NOW, at=110.0), parse_metrics(THEN, at=100.0))
    small, large = live.pools["small"], live.pools["large"]
    assert live.window_s == 10.0
    # 6 more small answers and 2 more large ones: 3/4 of the recent traffic went small.
    assert (small.recent_requests, large.recent_requests) == (6, 2)
    assert small.recent_share == 0.75 and large.recent_share == 0.25
    # The 6 new small streams: 4 in (25, 50] ms and 2 in (50, 100] ms; rank 3 is 3/4 into the first.
    assert small.ttft_recent and small.ttft_p50_s == pytest.approx(0.025 + 0.025 * 3 / 4)
    # The 2 new large streams: one in (250, 500] ms, one in (0.5, 1] s; rank 1 is the top of the first.
    assert large.ttft_recent and large.ttft_p50_s == pytest.approx(0.5)
    # The cumulative figures come from the latest scrape.
    assert (small.requests, large.requests, large.failed) == (12, 5, 1)
    assert small.share == pytest.approx(12 / 17) and small.tokens_per_s == 12.5


def test_a_restarted_gateway_is_read_as_a_first_scrape():
    live = live_figures(parse_metrics(THEN, at=110.0), parse_metrics(NOW, at=100.0))
    assert live.window_s == 0 and live.recent_requests == 0
    assert not live.pools["small"].ttft_recent


def test_a_quiet_interval_keeps_the_p50_since_the_start():
    live = live_figures(parse_metrics(THEN, at=101.0), parse_metrics(THEN, at=100.0))
    small = live.pools["small"]
    assert small.recent_requests == 0 and small.recent_share is None
    assert not small.ttft_recent and small.ttft_p50_s == pytest.approx(0.0175)


def test_other_metrics_are_not_a_gateway():
    llama = "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 12\n"
    with pytest.raises(NotAGatewayError, match="not a Switchyard gateway"):
        parse_metrics(llama, at=0.0)
    with pytest.raises(NotAGatewayError):
        parse_metrics("<html><body>hello</body></html>", at=0.0)
