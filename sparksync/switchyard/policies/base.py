"""What every routing policy gives back: a decision, with the reasons behind it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from typing import Any

from sparksync.switchyard import features as request_features
from sparksync.switchyard.features import RequestFeatures


@dataclass(frozen=True)
class Decision:
    pool: str
    policy: str
    reason: str  # one short line, for the log and the X-Switchyard-Reason header
    details: tuple[str, ...] = field(default_factory=tuple)  # the longer story, for `explain`
    score: float | None = None
    # Cascade only: validate the answer of ``pool`` and go to this pool when it fails.
    escalate_to: str | None = None


class Policy(ABC):
    name: str

    def __init__(self, small: str, large: str):
        self.small = small
        self.large = large

    @abstractmethod
    def decide(self, features: RequestFeatures, *, commit: bool = True) -> Decision:
        """Where this request goes. ``commit=False`` previews without changing any state
        (``explain`` uses it, so explaining never shifts a fixed share)."""

    def decide_request(self, body: dict[str, Any], endpoint: str) -> Decision:
        """Where the request with this JSON body goes (the gateway's hot path).

        A policy that never looks at the request overrides this, so that its
        requests are not read for features nobody uses."""
        return self.decide(request_features.extract(body, endpoint))
