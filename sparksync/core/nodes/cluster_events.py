"""News about the cluster that the user should hear even with the window hidden: one door for the core.

Core code that notices something worth a notification (the fabric code
finding a link degraded, say) calls ``ClusterEvents.tell`` from any thread;
the desktop app subscribes once and turns each event into a tray
notification, the CLI can print them. No Qt here, no I/O.

    actions.events.fabric_link_degraded("spark-1 enp1s0f0np0 ↔ spark-2 enp1s0f0np0",
                                        "negotiated 100 Gb/s, 200 Gb/s expected")
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sparksync.core.base.listeners import Listeners

log = logging.getLogger(__name__)


class EventKind(str, enum.Enum):
    FABRIC_LINK_DEGRADED = "fabric-link-degraded"
    FABRIC_LINK_HEALTHY = "fabric-link-healthy"


@dataclass(frozen=True)
class ClusterEvent:
    kind: EventKind
    subject: str  # what it is about, as the user reads it (a link: "spark-1 enp1s0f0np0 ↔ spark-2 …")
    detail: str  # why, in plain words


EventListener = Callable[[ClusterEvent], None]


class ClusterEvents:
    def __init__(self) -> None:
        self._listeners: Listeners[EventListener] = Listeners()

    def add_listener(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener`` on every event, from the thread that tells it; returns the unsubscribe."""
        return self._listeners.add(listener)

    def tell(self, event: ClusterEvent) -> None:
        log.info("%s: %s: %s", event.kind.value, event.subject, event.detail)
        for listener in self._listeners.snapshot():
            try:
                listener(event)
            except Exception:  # one broken listener must not keep the news from the others
                log.exception("a cluster event listener failed")

    def fabric_link_degraded(self, link: str, why: str) -> None:
        """The hook for the fabric checks: ``link`` runs below its expected speed or MTU (``why``)."""
        self.tell(ClusterEvent(EventKind.FABRIC_LINK_DEGRADED, link, why))

    def fabric_link_healthy(self, link: str, detail: str = "It runs at its expected speed again.") -> None:
        self.tell(ClusterEvent(EventKind.FABRIC_LINK_HEALTHY, link, detail))
