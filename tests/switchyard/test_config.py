"""The config file: TOML and JSON, defaults, and errors that say what to fix."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from sparksync.switchyard.config import load_config, parse_config
from sparksync.switchyard.errors import ConfigError, InsecureBindError

TOML = """
[listen]
port = 8500

[pools.minicpm]
model = "minicpm5-2b"
urls = ["http://10.0.0.7:8000/", "http://10.0.0.8:8000"]

[pools.qwen]
urls = ["http://10.0.0.1:8000"]

[policy]
kind = "rules"
small = "minicpm"
large = "qwen"
threshold = 1.5
fallback = true

[policy.keywords]
"prove" = 2.0
"""


def _minimal(**policy) -> dict:
    return {
        "pools": {"a": {"urls": ["http://h:1"]}, "b": {"urls": ["http://h:2"]}},
        "policy": {"kind": "fixed_share", "small": "a", "large": "b", "large_share": 0.5, **policy},
    }


def test_toml_file_loads_with_defaults(tmp_path):
    path = tmp_path / "switchyard.toml"
    path.write_text(TOML)
    config = load_config(path)
    assert config.listen.host == "127.0.0.1" and config.listen.port == 8500
    assert config.pools["minicpm"].urls == [
        "http://10.0.0.7:8000",
        "http://10.0.0.8:8000",
    ]  # no trailing slash
    assert config.upstream_model("minicpm") == "minicpm5-2b" and config.upstream_model("qwen") == "qwen"
    assert config.policy.kind == "rules" and config.policy.threshold == 1.5 and config.policy.fallback
    assert config.policy.keywords == {"prove": 2.0}
    assert config.limits.max_attempts == 3 and config.breaker.failures == 3


def test_json_file_loads_the_same_model(tmp_path):
    path = tmp_path / "switchyard.json"
    path.write_text(json.dumps(_minimal()))
    assert load_config(path).policy.large_share == Fraction(1, 2)


@pytest.mark.parametrize(
    ("given", "share"),
    [
        ("1/4", Fraction(1, 4)),
        (0.25, Fraction(1, 4)),
        (0, Fraction(0)),
        ("2/3", Fraction(2, 3)),
        (1, Fraction(1)),
    ],
)
def test_large_share_accepts_fractions_and_decimals(given, share):
    assert parse_config(_minimal(large_share=given)).policy.large_share == share


@pytest.mark.parametrize("given", [1.5, "-1/4", "half"])
def test_bad_large_share_is_refused(given):
    with pytest.raises(ConfigError, match="large_share"):
        parse_config(_minimal(large_share=given))


def test_policy_must_name_existing_pools():
    data = _minimal()
    data["policy"]["large"] = "qwen"
    with pytest.raises(ConfigError, match=r"policy.large names pool 'qwen', but the pools are \['a', 'b'\]"):
        parse_config(data)


def test_misspelt_key_is_refused():
    data = _minimal()
    data["health"] = {"intervall_s": 1}
    with pytest.raises(ConfigError, match="health.intervall_s"):
        parse_config(data)


def test_pool_may_not_take_the_virtual_models_name():
    data = _minimal()
    data["pools"]["switchyard"] = data["pools"].pop("a")
    data["policy"]["small"] = "switchyard"
    with pytest.raises(ConfigError, match="may not be called 'switchyard'"):
        parse_config(data)


def test_non_http_url_is_refused():
    data = _minimal()
    data["pools"]["a"]["urls"] = ["10.0.0.1:8000"]
    with pytest.raises(ConfigError, match="not an http"):
        parse_config(data)


def test_missing_and_broken_files_say_so(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[pools\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken)


def test_loopback_needs_no_key_but_another_address_does(monkeypatch):
    assert parse_config(_minimal()).check_bind() is None
    open_bind = _minimal()
    open_bind["listen"] = {"host": "192.0.2.1"}  # TEST-NET: only parsed here, never bound
    with pytest.raises(InsecureBindError, match="without an API key"):
        parse_config(open_bind).check_bind()
    open_bind["listen"]["api_key_env"] = "SY_TEST_KEY"
    with pytest.raises(ConfigError, match="empty or unset"):
        parse_config(open_bind).check_bind()
    monkeypatch.setenv("SY_TEST_KEY", "s3cret")
    assert parse_config(open_bind).check_bind() == "s3cret"


def test_api_key_file(tmp_path):
    key = tmp_path / "key"
    key.write_text("k-123\n")
    data = _minimal()
    data["listen"] = {"host": "192.0.2.1", "api_key_file": str(key)}
    assert parse_config(data).check_bind() == "k-123"
