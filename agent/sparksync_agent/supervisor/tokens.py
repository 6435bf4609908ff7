"""Tokens/s for a running rank: rates from an engine's Prometheus counters, or training log lines.

Counters (``llamacpp:tokens_predicted_total``, ``vllm:generation_tokens_total``,
``sglang:generation_tokens_total``...) only grow; a rate is the growth between
two scrapes divided by the time between them. A counter that goes down means
the engine restarted, so the pair is skipped rather than reported as negative.

llama.cpp adds a request's tokens to ``llamacpp:tokens_predicted_total`` only
when the request ends, so during a long answer the counter stands still. Its
``/slots`` endpoint shows each busy slot's ``n_decoded`` as it grows; with it,
decode tokens/s is the slots' growth plus whatever the counter gained beyond
the tasks the slots already showed (answers that began and ended between two
readings).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class SlotTask:
    """What one busy llama-server slot is generating: its task and the tokens decoded so far."""

    task: int | None
    decoded: int


def busy_slots(text: str) -> dict[int, SlotTask]:
    """Busy slots from llama-server's ``/slots`` JSON, by slot id.

    Each entry has ``id``, ``id_task``, ``is_processing`` and ``next_token[0].n_decoded``
    (tools/server/README.md, "GET /slots"). An idle slot shows its previous task with its
    statistics cleared, so only busy slots count. Raises ValueError for anything else
    (a server started with ``--no-slots`` answers an error object).
    """
    payload: Any = json.loads(text)
    if not isinstance(payload, list):
        raise ValueError("the slots endpoint did not answer a list of slots")
    busy: dict[int, SlotTask] = {}
    for entry in payload:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            raise ValueError("a slot without an id")
        if not entry.get("is_processing"):
            continue
        progress = entry.get("next_token") or [{}]
        decoded = progress[0].get("n_decoded", 0) if isinstance(progress[0], dict) else 0
        task = entry.get("id_task")
        busy[entry["id"]] = SlotTask(task if isinstance(task, int) else None, int(decoded or 0))
    return busy


class LiveDecode:
    """Decode tokens/s from busy slots' progress plus a finished-requests counter.

    Per reading: the tokens each busy slot decoded since the last reading (all of
    them for a task seen for the first time), plus the counter's growth beyond the
    last-seen progress of the tasks that ended (those tokens were already counted).
    When the counter has not caught up yet with a task that ended (the two are read
    one after the other), what it owes is carried to the next reading, so no token is
    counted twice and none is lost.
    """

    def __init__(self) -> None:
        self._at: float | None = None
        self._counter = 0.0
        self._slots: dict[int, SlotTask] = {}
        self._owed = 0.0
        self.rate: float | None = None

    def reset(self) -> None:
        self._at, self._slots, self._owed, self.rate = None, {}, 0.0, None

    def update(self, at: float, counter: float, slots: dict[int, SlotTask]) -> float | None:
        last_at, last_counter, last_slots = self._at, self._counter, self._slots
        self._at, self._counter, self._slots = at, counter, slots
        if last_at is None or at <= last_at:
            return self.rate
        if counter < last_counter:  # a restarted engine: start over from this reading
            self._owed = 0.0
            return self.rate
        grown, ended = 0.0, 0.0
        for slot, now in slots.items():
            before = last_slots.get(slot)
            if before is not None and before.task == now.task and now.decoded >= before.decoded:
                grown += now.decoded - before.decoded
            else:  # a new task on this slot: everything it decoded is new
                grown += now.decoded
                ended += before.decoded if before is not None else 0
        ended += sum(before.decoded for slot, before in last_slots.items() if slot not in slots)
        beyond = (counter - last_counter) - (self._owed + ended)
        self._owed = max(0.0, -beyond)
        self.rate = (grown + max(0.0, beyond)) / (at - last_at)
        return self.rate


class PrometheusTokens:
    """Decode and prefill tokens/s of one rank, from its engine's counters (and slots, where it has them)."""

    def __init__(self, source: TokensSource):
        self.source = source
        self.decode = CounterRate()
        self._live = LiveDecode() if source.slots_path else None
        self.live = False  # whether the last decode figure came from the slots or the gauge
        self._gauge: float | None = None
        self.prefill = CounterRate()

    @property
    def url(self) -> str:
        return self._url(self.source.path)

    @property
    def slots_url(self) -> str | None:
        return self._url(self.source.slots_path) if self.source.slots_path else None

    def _url(self, path: str) -> str:
        host = f"[{self.source.host}]" if ":" in self.source.host else self.source.host
        return f"http://{host}:{self.source.port}{path}"

    @property
    def decode_rate(self) -> float | None:
        if self._gauge is not None:
            return self._gauge
        if self._live is not None and self.live:
            return self._live.rate
        return self.decode.rate

    def update(self, at: float, text: str | None, slots_text: str | None = None) -> None:
        """Feed one scrape (None when it failed: rates are unknown until two good ones).

        ``slots_text`` is the slots endpoint's answer, read just after the counters; when it
        is missing or unreadable, decode falls back to the counter's rate.
        """
        source = self.source
        decode, prefill = source.decode_counter, source.prefill_counter
        names = [n for n in (decode, prefill, source.decode_gauge, source.busy_gauge) if n]
        values = counter_values(text, names) if text is not None else {}
        counter = values.get(decode) if decode else None
        self.decode.update(at, counter)
        if prefill:
            self.prefill.update(at, values.get(prefill))
        self._gauge = None
        if source.decode_gauge and source.busy_gauge and values.get(source.busy_gauge, 0.0) > 0:
            self._gauge = values.get(source.decode_gauge)
        self.live = False
        if self._live is None:
            return
        slots = None
        if slots_text is not None and counter is not None:
            try:
                slots = busy_slots(slots_text)
            except (ValueError, TypeError, AttributeError, IndexError):
                slots = None
        if slots is None or counter is None:
            self._live.reset()
            return
        self._live.update(at, counter, slots)
        self.live = self._live.rate is not None


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
