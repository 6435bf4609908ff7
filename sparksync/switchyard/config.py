"""The gateway's config file, as pydantic models.

The file is TOML (Python 3.11+) or JSON, chosen by its extension; see
docs/switchyard.md for a full example. Everything but the pools and the
policy has a default, so the smallest useful file names two pools of URLs and
a policy that says which is small and which is large.
"""

from __future__ import annotations

import ipaddress
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sparksync.switchyard.errors import ConfigError, InsecureBindError

VIRTUAL_MODEL = "switchyard"
DEFAULT_PORT = 8400


class _Strict(BaseModel):
    # A misspelt key must fail loudly, or a user tunes a setting that does nothing.
    model_config = ConfigDict(extra="forbid")


class ListenConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    # The key itself never sits in the config file: name an environment variable or a file.
    api_key_env: str | None = None
    api_key_file: Path | None = None

    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a hostname: it may resolve to anything

    def api_key(self) -> str | None:
        """The configured key, or None; raises ConfigError when a named source is empty."""
        if self.api_key_env:
            value = os.environ.get(self.api_key_env, "").strip()
            if not value:
                raise ConfigError(
                    f"listen.api_key_env names ${self.api_key_env}, which is empty or unset; "
                    "export the key in it or remove the setting"
                )
            return value
        if self.api_key_file:
            try:
                value = self.api_key_file.expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read listen.api_key_file {self.api_key_file}: {exc.strerror}; "
                    "create it (mode 0600) or remove the setting"
                ) from None
            if not value:
                raise ConfigError(f"listen.api_key_file {self.api_key_file} is empty; write the key into it")
            return value
        return None


class PoolConfig(_Strict):
    # Plain URLs, or a running SparkSync workload whose replicas' endpoints are picked up (and
    # followed as it is restarted or scaled) while the gateway runs: exactly one of the two.
    urls: list[str] = Field(default_factory=list)
    workload: str | None = Field(None, min_length=1, description="a workload id, recipe name or group id")
    # The name the replicas serve (llama-server --alias, vLLM --served-model-name); default: the pool's name.
    model: str | None = None
    # Replicas behind their own key (e.g. vLLM --api-key) get it from this environment variable.
    api_key_env: str | None = None

    @field_validator("urls")
    @classmethod
    def _http_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http(s) URL; write it as http://HOST:PORT")
        return [u.rstrip("/") for u in urls]

    @model_validator(mode="after")
    def _urls_or_workload(self) -> PoolConfig:
        if bool(self.urls) == bool(self.workload):
            raise ValueError(
                "give a pool either urls (its replicas' base URLs) or workload (a running workload's id, "
                "recipe name or group id), not both and not neither"
            )
        return self


class HealthConfig(_Strict):
    interval_s: float = Field(2.0, gt=0)
    timeout_s: float = Field(1.0, gt=0)
    path: str = "/health"


class BreakerConfig(_Strict):
    failures: int = Field(3, ge=1, description="consecutive failures that open the breaker")
    cooldown_s: float = Field(10.0, gt=0, description="how long an open breaker keeps the replica out")


class LimitsConfig(_Strict):
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    connect_timeout_s: float = Field(3.0, gt=0)
    # Streams: the silence allowed between two bytes from a replica (the first byte waits for
    # queueing and prefill too).
    read_timeout_s: float = Field(300.0, gt=0)
    # Non-streamed answers: how long a replica may take for the whole answer. llama-server and
    # others send nothing until they have generated all of it, so no idle timeout fits them.
    answer_timeout_s: float = Field(600.0, gt=0)
    request_timeout_s: float = Field(900.0, gt=0)
    # Replicas tried before a request fails; only while no engine took the request on (a refused
    # connect, or an answer of 503/429): a request an engine received is never sent again.
    max_attempts: int = Field(3, ge=1, description="replicas tried before a request fails")


class _PolicyBase(_Strict):
    small: str
    large: str
    # When the chosen pool has no replica available, send the request to the other pool.
    fallback: bool = False


class RuleWeights(_Strict):
    per_1k_prompt_tokens: float = 0.25
    per_tool: float = 0.1
    per_tool_round: float = 0.25
    reasoning: float = 1.0
    per_1k_max_tokens: float = 0.25


DEFAULT_KEYWORDS = {
    "step by step": 0.5,
    "prove": 0.75,
    "analyze": 0.5,
    "analyse": 0.5,
    "plan": 0.25,
    "debug": 0.5,
    "refactor": 0.5,
}


class RulesPolicyConfig(_PolicyBase):
    kind: Literal["rules"]
    threshold: float = 1.0
    weights: RuleWeights = Field(default_factory=RuleWeights)
    keywords: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_KEYWORDS))


DEFAULT_REFUSALS = [
    r"^\s*(i'?m|i am) (sorry|afraid)\b",
    r"^\s*i (can ?not|can't|won't|am unable to|'m unable to)\b",
    r"^\s*as an ai\b",
]


class CascadePolicyConfig(_PolicyBase):
    kind: Literal["cascade"]
    # With a threshold, a request whose rules score (weights, keywords: as the rules policy's)
    # is at or above it goes straight to the large pool; only the others try small first.
    threshold: float | None = None
    weights: RuleWeights = Field(default_factory=RuleWeights)
    keywords: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_KEYWORDS))
    refusal_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_REFUSALS))
    # A request whose tool_choice demands a call ("required" or a named function) fails without one.
    require_demanded_tool_call: bool = True
    # A small answer cut by max_tokens (finish_reason "length") escalates too.
    escalate_on_truncation: bool = False


class FixedSharePolicyConfig(_PolicyBase):
    kind: Literal["fixed_share"]
    large_share: Fraction

    @field_validator("large_share", mode="before")
    @classmethod
    def _fraction(cls, value: object) -> Fraction:
        try:
            share = Fraction(str(value)).limit_denominator(10_000)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f'large_share must be a fraction such as 0.25 or "1/4", got {value!r}') from None
        if not 0 <= share <= 1:
            raise ValueError(f"large_share must lie between 0 and 1, got {value!r}")
        return share


PolicyConfig = Annotated[
    RulesPolicyConfig | CascadePolicyConfig | FixedSharePolicyConfig, Field(discriminator="kind")
]


class SwitchyardConfig(_Strict):
    listen: ListenConfig = Field(default_factory=ListenConfig)
    pools: dict[str, PoolConfig] = Field(min_length=1)
    policy: PolicyConfig
    health: HealthConfig = Field(default_factory=HealthConfig)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @model_validator(mode="after")
    def _policy_names_pools(self) -> SwitchyardConfig:
        if VIRTUAL_MODEL in self.pools:
            raise ValueError(f"a pool may not be called {VIRTUAL_MODEL!r}: that is the routed model's name")
        for role in ("small", "large"):
            name = getattr(self.policy, role)
            if name not in self.pools:
                raise ValueError(f"policy.{role} names pool {name!r}, but the pools are {sorted(self.pools)}")
        if self.policy.small == self.policy.large:
            raise ValueError("policy.small and policy.large name the same pool; name two different pools")
        return self

    def workload_pools(self) -> dict[str, str]:
        """Pool name -> the workload it follows, for the pools given as workloads."""
        return {name: pool.workload for name, pool in self.pools.items() if pool.workload}

    def upstream_model(self, pool: str) -> str:
        return self.pools[pool].model or pool

    def check_bind(self) -> str | None:
        """The API key to demand, or None on loopback without one; refuses an open non-loopback bind."""
        key = self.listen.api_key()
        if key is None and not self.listen.is_loopback():
            raise InsecureBindError(
                f"refusing to listen on {self.listen.host} without an API key: set listen.api_key_env "
                "(or listen.api_key_file) in the config, or listen on 127.0.0.1"
            )
        return key


def parse_config(data: object, source: str = "config") -> SwitchyardConfig:
    try:
        return SwitchyardConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{source} is not a valid Switchyard config:\n{_describe(exc)}\n"
            "See docs/switchyard.md for the format."
        ) from None


def load_config(path: Path) -> SwitchyardConfig:
    """Read and validate a TOML or JSON config file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the Switchyard config {path}: {exc.strerror}; check the path given to --config"
        ) from None
    return parse_config(_decode(path, text), str(path))


def save_config(config: SwitchyardConfig, path: Path) -> Path:
    """Write the config as a person would (TOML, or JSON by the extension): only what differs from the
    defaults, the policy's kind always. ``load_config`` reads it back to the same config."""
    from sparksync_agent.atomic import write_atomic

    data = config.model_dump(mode="json", exclude_defaults=True)
    data["policy"] = config.policy.model_dump(mode="json", exclude_defaults=True) | {"kind": config.policy.kind}
    if path.suffix.lower() == ".json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        import tomlkit

        text = tomlkit.dumps(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text, mode=0o644)
    return path


def _decode(path: Path, text: str) -> object:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise ConfigError(
            f"{path}: TOML configs need Python 3.11 or newer; write the config as .json"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)
