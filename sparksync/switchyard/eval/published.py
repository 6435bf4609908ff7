"""The published Switchyard prototype's figures (NVIDIA, 2026-10-22; see FACTS.md), drawn beside a sweep.

On 8 nodes (3 large replicas of 2 nodes, 2 small replicas of 1 node), a
92-case tool-use benchmark scored 91/100 routed, the same as the large model
alone; aggregate throughput was about 1.5x the large model's alone with half
of the requests on it, and about 3.0x with a quarter.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

CASES = 92
SCORE = 91  # routed, and the large model alone: score parity
SMALL_MODEL = "MiniCPM5 2B"
LARGE_MODEL = "Qwen3.8 Flash Next"


@dataclass(frozen=True)
class PublishedPoint:
    large_share: Fraction
    throughput_x: float  # aggregate output tokens/s over the large model alone

    @property
    def label(self) -> str:
        return f"published: {self.throughput_x:.1f}x at {self.large_share} large"


POINTS = (PublishedPoint(Fraction(1, 2), 1.5), PublishedPoint(Fraction(1, 4), 3.0))


def reference() -> str:
    points = "; ".join(f"about {p.throughput_x:.1f}x with {p.large_share} of the requests large" for p in POINTS)
    return (f"Published ({SMALL_MODEL} + {LARGE_MODEL}, 8 nodes): {SCORE}/100 on {CASES} tool-use cases routed, "
            f"the large model's own score; {points}.")  # fmt: skip
