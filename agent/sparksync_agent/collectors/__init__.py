"""Telemetry collectors.

Each collector fills one field of :class:`~sparksync_agent.protocol.Sample`
(``field``). A collector that raises is logged once and disabled, and the
agent keeps serving: one broken sysfs file must never take the node's
telemetry down with it.

The sampler asks each collector for its field already encoded as JSON
(``encode``). At 10 Hz the agent must stay under 0.5% of a core, and every
sample runs with cold caches after 100 ms asleep: building, validating and
serialising the pydantic models measured as half of what collecting a sample
cost. The collectors on that path (memory, CPU, network) therefore write their JSON
directly and check it against the wire model only in ``sample``, which the
tests and the rare callers use; any other collector is encoded through its
``Sample`` field's pydantic type, exactly as before.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from sparksync_agent.protocol import CollectorState, Sample

log = logging.getLogger(__name__)


class Collector(ABC):
    """One source of telemetry.

    ``sample(now)`` returns the value for ``Sample.<field>`` (or None when the
    node simply has none, e.g. no RDMA); ``now`` is a monotonic clock reading
    that rate computations use.
    """

    name: str = "collector"
    field: str = ""

    @abstractmethod
    def sample(self, now: float) -> Any: ...

    def encode(self, now: float) -> bytes | None:
        """``sample(now)`` as the JSON of ``Sample.<field>``, or None when absent."""
        return encode_field(self.field, self.sample(now))

    def close(self) -> None:
        """Release what the collector holds (NVML handles and such)."""


class CollectorSet:
    """Runs the collectors for one sample and disables any that fail."""

    def __init__(self, collectors: list[Collector]):
        self._active = list(collectors)
        self._disabled: dict[str, str] = {}
        self._names = [c.name for c in collectors]
        # (collector, b'"field":') for the sampling path: built once, not per sample.
        self._encoders = self._prefixed()

    def _prefixed(self) -> tuple[tuple[Collector, bytes], ...]:
        return tuple((c, b'"%s":' % c.field.encode()) for c in self._active)

    def collect(self, now: float) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for collector in list(self._active):
            try:
                values[collector.field] = collector.sample(now)
            except Exception as exc:  # noqa: BLE001 - any failure disables just this collector
                self._disable(collector, exc)
        return values

    def collect_json(self, now: float) -> list[bytes]:
        """Each present field as ``"name":<json>``, ready to join into a Sample object."""
        members: list[bytes] = []
        for collector, prefix in self._encoders:  # a tuple: _disable may replace it meanwhile
            try:
                encoded = collector.encode(now)
            except Exception as exc:  # noqa: BLE001 - any failure disables just this collector
                self._disable(collector, exc)
                continue
            if encoded is not None:
                members.append(prefix + encoded)
        return members

    def states(self) -> list[CollectorState]:
        return [
            CollectorState(name=name, enabled=name not in self._disabled, reason=self._disabled.get(name))
            for name in self._names
        ]

    def close(self) -> None:
        for collector in self._active:
            try:
                collector.close()
            except Exception:
                log.debug("closing collector %s failed", collector.name, exc_info=True)

    def _disable(self, collector: Collector, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("collector %s failed and is disabled: %s", collector.name, reason)
        self._disabled[collector.name] = reason
        self._active.remove(collector)
        self._encoders = self._prefixed()
        try:
            collector.close()
        except Exception:  # noqa: BLE001
            pass


@cache
def _field_adapter(field: str) -> TypeAdapter:
    annotation = Sample.model_fields[field].annotation
    assert annotation is not None, "a pydantic field always has an annotation"
    return TypeAdapter(annotation)


def encode_field(field: str, value: Any) -> bytes | None:
    """A collector's value as the JSON of ``Sample.<field>`` (None: the field is left out).

    Validated first, as ``Sample(**values)`` used to: a collector that returns
    something the wire model refuses fails here and is disabled.
    """
    if value is None or field not in Sample.model_fields:
        return None  # an unknown field was dropped by Sample(**values) too (extra="ignore")
    adapter = _field_adapter(field)
    return adapter.dump_json(adapter.validate_python(value), exclude_none=True)
