"""The app's "Run a model on this computer" flow on a real X server, ending in a screenshot.

    xvfb-run -a -s "-screen 0 1280x800x24" python -m tests.gui.local_model_shot OUT.png

The window is the app's (``sparksync.gui.app.cluster``, ``MainWindow``); the
script presses what a newcomer presses on the dashboard: "Use the demo
model", then "Start". Once the model's tokens/s is on the plot for a few
seconds, the window is saved to OUT.png and the app quits (exit 0; 1 when
the flow did not get there within the time).
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from sparksync.core.telemetry import CLUSTER
from sparksync.core.telemetry.dashboard_series import tokens_series

TIMEOUT_MS = 150_000
AFTER_TOKENS_MS = 12_000  # let the tokens/s curve run a while before the picture


def main(path: str) -> int:
    from sparksync.gui.app import cluster
    from sparksync.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    window = MainWindow(actions=cluster(2.0))
    window.resize(1280, 800)
    card = window.local_model
    outcome = {"code": 1}
    started = {}

    def on_engine(present: bool) -> None:
        if present:
            card.demo.click()

    def on_model_picked() -> None:
        if card.model.text().endswith(".gguf") and "view" not in started:
            started["view"] = None
            card.start_button.click()

    def watch_tokens() -> None:
        view = started.get("view")
        if view is not None and (window.model.latest(CLUSTER, tokens_series(view.workload_id)) or 0) > 0:
            poll.stop()
            QTimer.singleShot(AFTER_TOKENS_MS, shoot)

    def shoot() -> None:
        image = window.grab().toImage()
        outcome["code"] = 0 if image.save(path, "PNG") else 1
        card.stop()  # the demo model goes with the app
        QTimer.singleShot(3000, window.quit)

    card.engine_shown.connect(on_engine)
    card.model.textChanged.connect(lambda _text: on_model_picked())
    card.started.connect(lambda view: started.update(view=view))
    window.shut_down.connect(app.quit)
    poll = QTimer(window, interval=200)
    poll.timeout.connect(watch_tokens)
    poll.start()
    QTimer.singleShot(TIMEOUT_MS, window.quit)
    window.show()
    window.start()
    app.exec()
    return outcome["code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
