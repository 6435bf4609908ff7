"""What every routing policy gives back: a decision, with the reasons behind it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

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
