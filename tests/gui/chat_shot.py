"""The Chat tab with a real answer, on a real X server (docs/screenshots/chat.png).

    SPARKSYNC_HOME=$(mktemp -d) xvfb-run -a -s "-screen 0 1280x800x24" python -m tests.gui.chat_shot OUT.png

The window is the app's; the script presses what a newcomer presses: on the
dashboard "Use the demo model" and "Start" (the tiny model SparkSync writes,
on this computer's CPU through its local agent), then in the Chat tab it
picks that workload and sends two messages. Once both answers are in, with
their TTFT and tokens/s, the window is saved to OUT.png and the app quits
(exit 0; 1 when the flow did not get there in time). The demo model is a
random one: its answers are noise, its figures are real.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

TIMEOUT_MS = 200_000
QUESTIONS = ["Which nodes are in the cluster?", "How much memory do they have?"]


def main(path: str) -> int:
    from sparksync.gui.app import cluster
    from sparksync.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    window = MainWindow(actions=cluster(2.0))
    window.resize(1280, 800)
    card, chat = window.local_model, window.chat
    outcome = {"code": 1}
    asked = []

    def on_engine(present: bool) -> None:
        if present:
            card.demo.click()

    def on_model_picked() -> None:
        if card.model.text().endswith(".gguf") and not card.start_button.property("pressed"):
            card.start_button.setProperty("pressed", True)
            card.start_button.click()

    def on_targets(targets: list) -> None:
        if targets and not asked:
            window.tabs.setCurrentWidget(chat)
            ask()

    def ask() -> None:
        if len(asked) < len(QUESTIONS):
            asked.append(QUESTIONS[len(asked)])
            chat.send(asked[-1])
        else:
            QTimer.singleShot(500, shoot)

    def shoot() -> None:
        image = window.grab().toImage()
        outcome["code"] = 0 if image.save(path, "PNG") else 1
        card.stop()
        QTimer.singleShot(3000, window.quit)

    card.engine_shown.connect(on_engine)
    card.model.textChanged.connect(lambda _text: on_model_picked())
    chat.targets_changed.connect(on_targets)
    chat.answered.connect(lambda _answer: ask())
    chat.failed.connect(lambda message: (print(message, file=sys.stderr), window.quit()))
    window.shut_down.connect(app.quit)
    QTimer.singleShot(TIMEOUT_MS, window.quit)
    window.show()
    window.start()
    app.exec()
    return outcome["code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
