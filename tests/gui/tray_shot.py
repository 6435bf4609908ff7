"""A picture of the tray's menu with a node submenu open (docs/screenshots/tray.png; illustrative states).

    xvfb-run -a -s "-screen 0 1280x800x24" python -m tests.gui.tray_shot OUT.png

The menu is the app's ``Tray`` over the test stand-in for the core
(``tests.gui.fake_core.FakeActions``) with three paired nodes in the three
states a user meets (online, degraded with its reason, offline), so the
picture shows what each looks like without a lab of Sparks.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QPoint, QTimer
from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtWidgets import QApplication, QStatusBar

MEMORY = {"spark-1a2b": ("41.2 GB", "121.7 GB"), "spark-3c4d": ("96.0 GB", "121.7 GB")}


def main(path: str) -> int:
    from sparksync.core.telemetry.cluster_summary import ClusterSummary
    from sparksync.core.nodes.rows import NodeRow, NodeState
    from sparksync.gui.tray.notifier import Notifier
    from sparksync.gui.tray.tray import Tray
    from sparksync.gui.workers import Jobs
    from tests.gui.fake_core import FakeActions

    app = QApplication.instance() or QApplication([sys.argv[0]])
    names = list(MEMORY) + ["spark-5e6f"]
    bar = QStatusBar()
    tray = Tray(
        FakeActions(names), Jobs(), Notifier(bar), summary=lambda: ClusterSummary(1, 3, 137.2e9, 12.0),
        summary_text=lambda s: s.text(), open_dashboard=lambda: None, pair_new_node=lambda: None,
        quit_app=lambda: None, node_memory=MEMORY.get,
    )  # fmt: skip
    tray.set_nodes(names)
    tray.on_rows_changed([
        NodeRow("paired:spark-1a2b", "spark-1a2b", "10.0.0.1", NodeState.ONLINE, None, None, True),
        NodeRow("paired:spark-3c4d", "spark-3c4d", "10.0.0.2", NodeState.DEGRADED,
                "the agent does not answer (port 22 is open)", None, True),
        NodeRow("paired:spark-5e6f", "spark-5e6f", "10.0.0.3", NodeState.OFFLINE, "no answer within 15 s", None, True),
    ])  # fmt: skip
    outcome = {"code": 1}

    def open_menus() -> None:
        tray.jobs.wait(10)
        tray.menu.popup(QPoint(20, 20))
        QTimer.singleShot(500, open_sub)

    def open_sub() -> None:
        sub = tray._node_menus["spark-3c4d"]
        tray.menu.setActiveAction(sub.menuAction())
        sub.popup(tray.menu.geometry().topRight() + QPoint(0, tray.menu.actionGeometry(sub.menuAction()).y()))
        QTimer.singleShot(500, lambda: shoot(sub))

    def shoot(sub) -> None:
        main_rect, sub_rect = tray.menu.geometry(), sub.geometry()
        area = main_rect.united(sub_rect).adjusted(-10, -10, 10, 10)
        picture = QPixmap(area.size())
        picture.fill()
        painter = QPainter(picture)
        painter.drawPixmap(main_rect.topLeft() - area.topLeft(), tray.menu.grab())
        painter.drawPixmap(sub_rect.topLeft() - area.topLeft(), sub.grab())
        painter.end()
        outcome["code"] = 0 if picture.save(path, "PNG") else 1
        app.quit()

    tray.load_apps()
    QTimer.singleShot(800, open_menus)
    QTimer.singleShot(20_000, app.quit)
    app.exec()
    return outcome["code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
