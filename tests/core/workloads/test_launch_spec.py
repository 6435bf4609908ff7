"""The wire models the agent will receive: what a valid probe, tokens source and launch are."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe, TokensSource


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"kind": "http", "path": "/health"}, "needs a port"),
        ({"kind": "http", "port": 80, "path": "health"}, "path starting with '/'"),
        ({"kind": "tcp"}, "needs a port"),
        ({"kind": "log"}, "a log readiness pattern is needed"),
        ({"kind": "log", "pattern": "step (\\d+"}, "not a valid regular expression"),
    ],
)
def test_incomplete_readiness_probes_are_refused(fields, reason):
    with pytest.raises(ValidationError, match=reason):
        ReadinessProbe(**fields)


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"kind": "prometheus", "decode_counter": "x"}, "needs a port and a decode_counter"),
        ({"kind": "prometheus", "port": 80}, "needs a port and a decode_counter"),
        ({"kind": "log", "pattern": r"tok/sec: (\d+)"}, r"named group \(\?P<tokens_per_s>"),
    ],
)
def test_incomplete_tokens_sources_are_refused(fields, reason):
    with pytest.raises(ValidationError, match=reason):
        TokensSource(**fields)


def test_a_launch_round_trips_as_json_and_ignores_fields_from_a_newer_peer():
    launch = RankLaunch(
        group="qwen-1", node="spark-1", rank=0, role="llama-server", stage=1,
        argv=["llama-server", "-m", "m.gguf"], env={"A": "1"}, ports=[8080],
        readiness=ReadinessProbe(kind="http", port=8080, path="/health"),
        tokens_source=TokensSource(kind="prometheus", port=8080, decode_counter="llamacpp:tokens_predicted_total"),
        log_name="qwen-1.0.llama-server.log",
    )  # fmt: skip
    wire = launch.model_dump(mode="json")
    assert RankLaunch.model_validate_json(launch.model_dump_json()) == launch
    assert RankLaunch.model_validate({**wire, "added_in_1_1": True}) == launch


def test_a_launch_needs_a_command():
    with pytest.raises(ValidationError, match="argv"):
        RankLaunch(group="g", node="n", rank=0, role="r", argv=[], readiness=ReadinessProbe(kind="process"),
                   log_name="x.log")  # fmt: skip
