"""The benchmark profile: the published preset and custom ones, as llama-benchy options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.profile import LLAMA_BENCHY_DEFAULT_RUNS, BenchProfile


def test_published_profile_is_the_one_nvidia_used():
    profile = BenchProfile.published()
    assert (profile.pp, profile.tg, profile.depth, profile.concurrency) == ((8192,), (256,), (0,), (1,))
    assert profile.speculative_decoding is False
    # llama-benchy's own runs and warmup: neither --runs nor --no-warmup is passed.
    assert profile.benchy_args() == ["--pp", "8192", "--tg", "256", "--depth", "0", "--concurrency", "1"]
    assert profile.request_count() == LLAMA_BENCHY_DEFAULT_RUNS == 3


def test_custom_profile_carries_every_value_to_llama_benchy():
    profile = BenchProfile.build(pp=(512, 2048), tg=(64,), depth=(0, 4096), concurrency=(1, 4), runs=5,
                                 exact_tg=True, no_cache=True, warmup=False)
    assert profile.name == "custom"
    assert profile.benchy_args() == [
        "--pp", "512", "2048", "--tg", "64", "--depth", "0", "4096", "--concurrency", "1", "4",
        "--runs", "5", "--no-warmup", "--exact-tg", "--no-cache",
    ]
    # 2 pp x 1 tg x 2 depths, each run sends 1 + 4 requests, 5 runs.
    assert profile.request_count() == 2 * 2 * (1 + 4) * 5
    assert profile.max_request_tokens() == 4096 + 2048 + 64


def test_the_published_profile_cannot_be_changed():
    with pytest.raises(ValidationError, match="published profile cannot be changed"):
        BenchProfile(name="published", pp=(256,))


def test_a_custom_profile_with_published_values_still_says_custom():
    profile = BenchProfile.build()
    assert profile.name == "custom" and profile.has_published_values()
    assert not BenchProfile.build(runs=3).has_published_values()  # explicit runs is a choice of its own


@pytest.mark.parametrize(("values", "message"), [
    ({"pp": (0,)}, "pp: Value error, every value must be at least 1"),
    ({"depth": (-1,)}, "depth: Value error, a depth cannot be negative"),
    ({"concurrency": ()}, "concurrency: Tuple should have at least 1 item"),
    ({"runs": 0}, "runs: Input should be greater than or equal to 1"),
])
def test_bad_values_are_refused_with_the_field_named(values, message):
    with pytest.raises(BenchInputError) as caught:
        BenchProfile.build(**values)
    assert message in str(caught.value)
    assert "Fix the value" in str(caught.value)


def test_profile_survives_a_json_round_trip():
    profile = BenchProfile.build(pp=(256, 512), tg=(32,), runs=1)
    assert BenchProfile.model_validate_json(profile.model_dump_json()) == profile


def test_describe_names_the_defaults_it_kept():
    assert BenchProfile.published().describe() == (
        "published: pp 8192, tg 256, depth 0, concurrency 1, runs 3 (llama-benchy default)")
