"""When a failed rank is started again, and when the agent gives up."""

from __future__ import annotations

from sparksync_agent.protocol import RestartPolicy


def failures_in_window(failures: list[float], now: float, policy: RestartPolicy) -> list[float]:
    return [t for t in failures if now - t <= policy.window_s]


def next_delay(failures: list[float], now: float, policy: RestartPolicy) -> float | None:
    """Seconds to wait before the next start, or None to give up (or not restart at all).

    ``failures`` already holds the failure that just happened.
    """
    if policy.mode != "on-failure":
        return None
    recent = failures_in_window(failures, now, policy)
    if len(recent) >= policy.max_failures:
        return None
    # Back off harder with each failure in the window: a crash loop must not spin.
    return min(policy.backoff_max_s, policy.backoff_s * 2 ** max(0, len(recent) - 1))


def give_up_message(failures: list[float], now: float, policy: RestartPolicy) -> str:
    recent = failures_in_window(failures, now, policy)
    return (
        f"gave up after {len(recent)} failures within {policy.window_s:g} s "
        f"(the restart policy allows {policy.max_failures - 1} restarts in that window); "
        "read the last log lines, fix the cause, then start it again"
    )
