"""Routing policies; ``make_policy`` builds the one a config names."""

from __future__ import annotations

from sparksync.switchyard.config import (
    CascadePolicyConfig,
    FixedSharePolicyConfig,
    PolicyConfig,
    RulesPolicyConfig,
)
from sparksync.switchyard.policies.base import Decision, Policy
from sparksync.switchyard.policies.cascade import CascadePolicy
from sparksync.switchyard.policies.fixed_share import FixedSharePolicy
from sparksync.switchyard.policies.rules import RulesPolicy

__all__ = ["CascadePolicy", "Decision", "FixedSharePolicy", "Policy", "RulesPolicy", "make_policy"]


def make_policy(config: PolicyConfig) -> Policy:
    if isinstance(config, RulesPolicyConfig):
        return RulesPolicy(config)
    if isinstance(config, CascadePolicyConfig):
        return CascadePolicy(config)
    if isinstance(config, FixedSharePolicyConfig):
        return FixedSharePolicy(config.small, config.large, config.large_share)
    raise TypeError(f"no policy for {type(config).__name__}")
