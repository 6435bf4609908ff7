"""Tokens/s for a running rank: rates from an engine's Prometheus counters, or training log lines.

Counters (``llamacpp:tokens_predicted_total``, ``vllm:generation_tokens_total``,
``sglang:generation_tokens_total``...) only grow; a rate is the growth between
two scrapes divided by the time between them. A counter that goes down means
the engine restarted, so the pair is skipped rather than reported as negative.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from sparksync_agent.protocol import TOKENS_GROUP, TokensSource


def counter_values(text: str, names: list[str]) -> dict[str, float]:
    """The named counters from a Prometheus text exposition, summed over their labels.

    A counter may be named with or without its ``_total`` suffix. Missing ones are absent.
    """
    wanted = {name: name for name in names}
    wanted.update({f"{name}_total": name for name in names if not name.endswith("_total")})
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = wanted.get(sample.name)
            if name is not None and math.isfinite(sample.value):
                found[name] = found.get(name, 0.0) + sample.value
    return found


@dataclass
class _Point:
    at: float
    value: float


class CounterRate:
    """Per-second rate of one counter between consecutive readings."""

    def __init__(self) -> None:
        self._last: _Point | None = None
        self.rate: float | None = None

    def update(self, at: float, value: float | None) -> float | None:
        if value is None:
            self._last, self.rate = None, None
            return None
        last, self._last = self._last, _Point(at, value)
        if last is None or at <= last.at:
            return self.rate
        delta = value - last.value
        # A counter that went down belongs to a restarted engine: skip this pair.
        self.rate = delta / (at - last.at) if delta >= 0 else self.rate
        return self.rate


class PrometheusTokens:
    """Decode and prefill tokens/s of one rank, from its engine's counters."""

    def __init__(self, source: TokensSource):
        self.source = source
        self.decode = CounterRate()
        self.prefill = CounterRate()

    @property
    def url(self) -> str:
        host = f"[{self.source.host}]" if ":" in self.source.host else self.source.host
        return f"http://{host}:{self.source.port}{self.source.path}"

    def update(self, at: float, text: str | None) -> None:
        """Feed one scrape (None when it failed: rates are unknown until two good ones)."""
        decode, prefill = self.source.decode_counter, self.source.prefill_counter
        names = [n for n in (decode, prefill) if n]
        values = counter_values(text, names) if text is not None else {}
        self.decode.update(at, values.get(decode) if decode else None)
        if prefill:
            self.prefill.update(at, values.get(prefill))


def parse_number(text: str) -> float:
    """'4,649' -> 4649.0; '1_000.5' -> 1000.5 (thousands separators as logs print them)."""
    return float(text.replace(",", "").replace("_", "").strip())


@dataclass
class LogFigures:
    tokens_per_s: float | None = None
    step: int | None = None
    loss: float | None = None


class LogTokens:
    """The latest tokens/s, step and loss from lines matching the source's pattern."""

    def __init__(self, source: TokensSource):
        self._regex = re.compile(source.pattern or "")
        self.figures = LogFigures()

    def feed(self, line: str) -> bool:
        match = self._regex.search(line)
        if match is None:
            return False
        groups = match.groupdict()
        try:
            figures = LogFigures(tokens_per_s=parse_number(groups[TOKENS_GROUP]))
            if groups.get("step"):
                figures.step = int(parse_number(groups["step"]))
            if groups.get("loss"):
                loss = parse_number(groups["loss"])
                figures.loss = loss if math.isfinite(loss) else None
        except (ValueError, TypeError):
            return False
        self.figures = figures
        return True
