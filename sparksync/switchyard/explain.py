"""Why a request goes where it goes: ``sparksync switchyard explain REQUEST.json``.

It runs the very policy the gateway runs, on the request's body, without
sending anything and without changing any state (a fixed share's counter
does not move), and shows the features the policy saw.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sparksync.switchyard import features
from sparksync.switchyard.config import VIRTUAL_MODEL, SwitchyardConfig
from sparksync.switchyard.errors import SwitchyardError
from sparksync.switchyard.policies import Decision, make_policy


@dataclass(frozen=True)
class Explanation:
    model: str
    decision: Decision
    features: features.RequestFeatures

    def as_dict(self) -> dict[str, Any]:
        decision = asdict(self.decision)
        decision["details"] = list(self.decision.details)
        feats = asdict(self.features) | {"prompt_tokens": self.features.prompt_tokens}
        return {"model": self.model, "pool": self.decision.pool, "decision": decision, "features": feats}


def explain(config: SwitchyardConfig, body: dict[str, Any], forced_pool: str | None = None) -> Explanation:
    endpoint = "chat" if "messages" in body else "completions" if "prompt" in body else None
    if endpoint is None:
        raise SwitchyardError(
            "the request has neither 'messages' (chat) nor 'prompt' (completions); "
            "pass the JSON body you would POST to the gateway"
        )
    feats = features.extract(body, endpoint)
    model: str = body["model"] if isinstance(body.get("model"), str) else VIRTUAL_MODEL
    target = forced_pool or (model if model in config.pools else None)
    if target is not None:
        if target not in config.pools:
            raise SwitchyardError(f"there is no pool {target!r}; the pools are {', '.join(config.pools)}")
        how = "the X-Switchyard-Pool header" if forced_pool else f"the model name {model!r}"
        return Explanation(model, Decision(target, "forced", f"{how} names the pool"), feats)
    if model != VIRTUAL_MODEL:
        raise SwitchyardError(
            f"the gateway would refuse model {model!r} (404); use {VIRTUAL_MODEL!r} or a pool: "
            f"{', '.join(config.pools)}"
        )
    return Explanation(model, make_policy(config.policy).decide(feats, commit=False), feats)


def render(explanation: Explanation) -> str:
    d, f = explanation.decision, explanation.features
    lines = [f"-> pool {d.pool!r} ({d.policy}: {d.reason})"]
    if d.escalate_to:
        lines.append(f"   escalates to {d.escalate_to!r} when the answer fails validation")
    lines += [f"   {line}" for line in d.details]
    lines.append("features:")
    lines += [
        f"   endpoint          {f.endpoint}",
        f"   prompt            ~{f.prompt_tokens} tokens ({f.prompt_chars} characters)",
        f"   tools offered     {f.n_tools}",
        f"   tool-call rounds  {f.tool_rounds}",
        f"   reasoning         {f.reasoning:g}",
        f"   max_tokens        {f.max_tokens if f.max_tokens is not None else '(not set)'}",
        f"   demands a call    {'yes' if f.demands_tool_call else 'no'}",
    ]
    return "\n".join(lines)
