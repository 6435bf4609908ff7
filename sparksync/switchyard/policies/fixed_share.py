"""Fixed share: an exact fraction of requests goes to the large pool.

Request n (counting from 0) goes large when floor((n+1)·s) > floor(n·s), for
share s. Over any N consecutive requests the large count is then floor(N·s)
or one more, so 1/4 is exactly 1,000 of 4,000 and the split never drifts the
way a random draw does; and large requests are spread evenly, never bunched.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sparksync.switchyard.features import RequestFeatures
from sparksync.switchyard.policies.base import Decision, Policy


class FixedSharePolicy(Policy):
    name = "fixed_share"

    def __init__(self, small: str, large: str, large_share: Fraction):
        super().__init__(small, large)
        self.share = Fraction(large_share)
        # floor(n·s) in integers: Fraction arithmetic costs every request tens of microseconds.
        self._p, self._q = self.share.numerator, self.share.denominator
        self._count = 0
        self._share_text = str(self.share)  # (Fraction.__str__ is Python code: once, not per request)

    def decide(self, features: RequestFeatures, *, commit: bool = True) -> Decision:
        return self._decide(commit)

    def decide_request(self, body: dict[str, Any], endpoint: str) -> Decision:
        # The share never looks at the request: nothing of it is read.
        return self._decide(True)

    def _decide(self, commit: bool) -> Decision:
        n = self._count
        if commit:
            self._count += 1
        goes_large = (n + 1) * self._p // self._q > n * self._p // self._q
        pool = self.large if goes_large else self.small
        reason = f"request #{n + 1}, large share {self._share_text}"
        details = (
            f"{self._share_text} of requests go to {self.large}, spread evenly by arrival order;",
            f"this would be request #{n + 1} since the gateway started, which goes to {pool}",
        )
        return Decision(pool, self.name, reason, details)
