"""Units the app shows, named one way everywhere.

- Memory sizes: decimal GB (10⁹ bytes, how DGX Spark memory is sold: "128 GB")
  or binary GiB (2³⁰ bytes, what ``free -g`` prints). The user picks one and
  every label, axis and tooltip then uses it; the two are never mixed.
- Link rates are bits per second, decimal (``Gb/s``), as NICs are rated
  ("200 Gb/s"). Agents report bytes/s; :func:`bits_per_s` converts.
- Memory bandwidth is bytes per second (``GB/s``), as "273 GB/s" is quoted.
- Token throughput is ``tok/s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

BITS_PER_BYTE = 8
TOKENS_PER_S = "tok/s"

_DECIMAL_PREFIXES = ("", "k", "M", "G", "T", "P")
_BINARY_PREFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi")


class MemoryUnit(str, Enum):
    """How memory sizes are shown: decimal ``GB`` or binary ``GiB``."""

    GB = "GB"
    GIB = "GiB"

    @property
    def bytes(self) -> int:
        return 10**9 if self is MemoryUnit.GB else 2**30

    @property
    def base(self) -> int:
        return 1000 if self is MemoryUnit.GB else 1024

    @property
    def prefixes(self) -> tuple[str, ...]:
        return _DECIMAL_PREFIXES if self is MemoryUnit.GB else _BINARY_PREFIXES

    @property
    def explained(self) -> str:
        return "GB, 10⁹ bytes" if self is MemoryUnit.GB else "GiB, 2³⁰ bytes"


DEFAULT_MEMORY_UNIT = MemoryUnit.GB


@dataclass(frozen=True)
class Scaled:
    """A value in a unit chosen for people: ``value`` ``unit``."""

    value: float
    unit: str

    def __str__(self) -> str:
        return f"{_number(self.value)} {self.unit}"


def to_memory_unit(n_bytes: float, unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> float:
    """Bytes in GB or GiB (a plain number, for plots whose axis names the unit)."""
    return n_bytes / unit.bytes


def bits_per_s(bytes_per_s: float) -> float:
    return bytes_per_s * BITS_PER_BYTE


def scale_bytes(n_bytes: float, unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> Scaled:
    """Bytes with the prefix that keeps the number readable: 1.02 TB, 119.7 GiB."""
    value, prefix = _scale(n_bytes, unit.base, unit.prefixes)
    return Scaled(value, prefix + "B")


def format_bytes(n_bytes: float, unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> str:
    """``format_bytes(8 * 128e9)`` is '1.02 TB'; in GiB, 8 × 128 GiB is '1 TiB'."""
    return str(scale_bytes(n_bytes, unit))


def format_memory(n_bytes: float, unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> str:
    """Bytes always in GB or GiB (never TB), for side-by-side figures: '25.3 GB'."""
    return f"{_number(to_memory_unit(n_bytes, unit))} {unit.value}"


def format_link_rate(bytes_per_s: float) -> str:
    """A link rate from bytes/s, shown in bits/s: ``format_link_rate(25e9)`` is '200 Gb/s'."""
    return format_bits_per_s(bits_per_s(bytes_per_s))


def format_bits_per_s(bits: float) -> str:
    value, prefix = _scale(bits, 1000, _DECIMAL_PREFIXES)
    return f"{_number(value)} {prefix}b/s"


def format_bandwidth(bytes_per_s: float) -> str:
    """A memory bandwidth in bytes/s: ``format_bandwidth(273e9)`` is '273 GB/s'."""
    value, prefix = _scale(bytes_per_s, 1000, _DECIMAL_PREFIXES)
    return f"{_number(value)} {prefix}B/s"


def format_tokens_per_s(value: float) -> str:
    return f"{_number(value)} {TOKENS_PER_S}"


def format_percent(value: float) -> str:
    return f"{_number(value)} %"


def format_value(value: float, unit: str, memory_unit: MemoryUnit = DEFAULT_MEMORY_UNIT) -> str:
    """A value stored in base ``unit`` ("B", "bit/s", "%", "tok/s", ...), the way people read it."""
    if unit == "B":
        return format_memory(value, memory_unit)
    if unit == "bit/s":
        return format_bits_per_s(value)
    if unit == TOKENS_PER_S:
        return format_tokens_per_s(value)
    return f"{_number(value)} {unit}"


def _scale(value: float, base: int, prefixes: tuple[str, ...]) -> tuple[float, str]:
    if not math.isfinite(value) or value == 0:
        return value, prefixes[0]
    power = min(int(math.log(abs(value), base)), len(prefixes) - 1) if abs(value) >= 1 else 0
    scaled = value / base**power
    if abs(round(scaled, _decimals(scaled))) >= base and power + 1 < len(prefixes):
        power, scaled = power + 1, value / base ** (power + 1)  # 999.96 GB reads better as 1 TB
    return scaled, prefixes[power]


def _decimals(value: float) -> int:
    """Three significant digits, but no fake precision: 1.02, 25.3, 128."""
    magnitude = abs(value)
    return 2 if magnitude < 10 else 1 if magnitude < 100 else 0


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "—"
    text = f"{value:.{_decimals(value)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
