"""Per-rank tokens/s figures, kept ready for the sampler to read in O(1)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from sparksync_agent.protocol import WorkloadFigures
from sparksync_agent.supervisor.probes import fetch_text

if TYPE_CHECKING:
    from sparksync_agent.supervisor.rank import Rank

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 2.0


class FiguresBoard:
    """The latest figures of the running ranks; None while none runs.

    The supervisor's scraper replaces ``figures`` once a second; the sampler
    only reads them (as JSON, encoded once per replacement however fast it
    samples), so sampling never waits on an engine.
    """

    def __init__(self) -> None:
        self._figures: list[WorkloadFigures] | None = None
        self._encoded: bytes | None = None

    @property
    def figures(self) -> list[WorkloadFigures] | None:
        return self._figures

    @figures.setter
    def figures(self, figures: list[WorkloadFigures] | None) -> None:
        self._figures, self._encoded = figures, None

    def encoded(self) -> bytes | None:
        """``figures`` as the JSON of ``Sample.workloads``; None while no rank runs."""
        if self._figures is None:
            return None
        if self._encoded is None:
            self._encoded = _FIGURES.dump_json(self._figures, exclude_none=True)
        return self._encoded


_FIGURES = TypeAdapter(list[WorkloadFigures])


async def _fetch(url: str) -> str | None:
    try:
        return await asyncio.to_thread(fetch_text, url, SCRAPE_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        log.debug("tokens scrape of %s failed: %s", url, exc)
        return None


async def scrape_rank(rank: Rank) -> None:
    """Read the rank's counters (then its slots) once; a failed scrape leaves the rates unknown."""
    prom = rank.prom
    if prom is None:  # its tokens/s come from elsewhere
        return
    text = await _fetch(prom.url)
    # The slots after the counters: a request that ends in between is then owed by the
    # counter to the next reading rather than counted twice (see LiveDecode).
    slots_url = prom.slots_url
    slots = await _fetch(slots_url) if slots_url is not None and text is not None else None
    try:
        prom.update(time.monotonic(), text, slots)
    except ValueError as exc:  # not Prometheus text
        log.debug("tokens scrape of %s unreadable: %s", prom.url, exc)
        prom.update(time.monotonic(), None)
