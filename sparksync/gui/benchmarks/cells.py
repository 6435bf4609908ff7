"""Table cells as people read them (no Qt): tok/s with two decimals, ratios as 4.43x, shares as %."""

from __future__ import annotations

from typing import Any

DASH = "—"


def format_cell(column: str, value: Any, label: str = "") -> str:
    """``label`` names the row's figure in a settings or comparison table ("decode % of bound")."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        where = f"{column} {label}"
        if "efficiency" in where:
            return f"{value:.1%}"
        if "speed-up" in where or "ratio" in column:
            return f"{value:.2f}x"
        if "% of bound" in where:
            return f"{value:.1f} %"
        return f"{value:,.2f}"
    return str(value)


def format_percent_of_bound(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f} %"
