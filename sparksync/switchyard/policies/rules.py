"""Rules: add up a difficulty score from the request's features; at or above the threshold, go large.

Each feature adds weight x amount, and each non-zero term is kept as a
reason, so the log and ``explain`` show exactly why a request scored what it did.
"""

from __future__ import annotations

from sparksync.switchyard.config import RulesPolicyConfig
from sparksync.switchyard.features import RequestFeatures
from sparksync.switchyard.policies.base import Decision, Policy


class RulesPolicy(Policy):
    name = "rules"

    def __init__(self, config: RulesPolicyConfig):
        super().__init__(config.small, config.large)
        self.threshold = config.threshold
        self.weights = config.weights
        self.keywords = {k.lower(): w for k, w in config.keywords.items()}

    def terms(self, f: RequestFeatures) -> list[tuple[float, str]]:
        """(points, why) for every feature that adds to the score."""
        w = self.weights
        terms = [
            (w.per_1k_prompt_tokens * f.prompt_tokens / 1000, f"prompt of ~{f.prompt_tokens} tokens"),
            (w.per_tool * f.n_tools, f"{f.n_tools} tool(s) offered"),
            (w.per_tool_round * f.tool_rounds, f"{f.tool_rounds} earlier tool-call round(s)"),
            (w.reasoning * f.reasoning, f"reasoning requested (level {f.reasoning:g})"),
            (w.per_1k_max_tokens * (f.max_tokens or 0) / 1000, f"max_tokens {f.max_tokens}"),
        ]
        text = f.last_user_text.lower()
        terms += [(weight, f"keyword {kw!r}") for kw, weight in self.keywords.items() if kw in text]
        return [(round(points, 4), why) for points, why in terms if points]

    def decide(self, features: RequestFeatures, *, commit: bool = True) -> Decision:
        terms = self.terms(features)
        score = round(sum(points for points, _ in terms), 4)
        large = score >= self.threshold
        pool = self.large if large else self.small
        relation = ">=" if large else "<"
        reason = f"score {score:.2f} {relation} {self.threshold:g}"
        # The score counts every term; the reasons leave out those that would read "+0.00"
        # (a short prompt's few thousandths), which explain nothing.
        shown = [(points, why) for points, why in terms if round(points, 2)]
        if shown:
            reason += ": " + ", ".join(f"{why} {points:+.2f}" for points, why in shown)
        details = tuple(f"{points:+.2f}  {why}" for points, why in shown) or (
            "(no feature adds 0.01 or more to the score)",
        )
        return Decision(pool, self.name, reason, details, score=score)
