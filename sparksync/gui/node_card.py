"""A card with one node's identity: hostname, model, architecture, memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QWidget

from sparksync.core.base import DEFAULT_MEMORY_UNIT, MemoryUnit, format_memory

if TYPE_CHECKING:  # the wire models load with the first sample, not before the first paint
    from sparksync_agent.protocol import Sample, Snapshot

FIELDS = (
    ("hostname", "Hostname"),
    ("model", "Model"),
    ("arch", "Architecture"),
    ("memory_total", "Memory total"),
    ("os", "System"),
    ("cpus", "CPUs"),
    ("agent", "Agent"),
)


class NodeCard(QGroupBox):
    def __init__(self, name: str, parent: QWidget | None = None):
        super().__init__(name, parent)
        self.setObjectName("nodeCard")
        layout = QFormLayout(self)
        self._labels: dict[str, QLabel] = {}
        self._memory_unit = DEFAULT_MEMORY_UNIT
        self._memory_total: int | None = None
        for key, title in FIELDS:
            label = QLabel("…")
            label.setObjectName(f"node_{key}")
            label.setWordWrap(True)  # a long OS name wraps instead of widening the side panel
            self._labels[key] = label
            layout.addRow(f"{title}:", label)

    def text(self, key: str) -> str:
        return self._labels[key].text()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        info = snapshot.info
        self._set("hostname", info.hostname)
        self._set("model", info.model or "—")
        self._set("arch", info.arch)
        self._set("os", f"{info.os} (kernel {info.kernel})")
        self._set("cpus", str(info.cpu_count))
        self._set("agent", f"{info.agent_version}, protocol {info.protocol_version}")
        if snapshot.latest is not None:
            self.show_sample(snapshot.latest)

    def show_sample(self, sample: Sample) -> None:
        if sample.memory is not None:
            self._memory_total = sample.memory.total_bytes
            self._set("memory_total", format_memory(self._memory_total, self._memory_unit))

    def set_memory_unit(self, unit: MemoryUnit) -> None:
        """Name memory the way the plots do (GB or GiB), never both at once."""
        self._memory_unit = unit
        if self._memory_total is not None:
            self._set("memory_total", format_memory(self._memory_total, unit))

    def _set(self, key: str, value: str) -> None:
        self._labels[key].setText(value)
