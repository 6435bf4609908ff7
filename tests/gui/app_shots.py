"""Screenshots of the app's tabs on a real X server, as a newcomer first sees them (docs/screenshots/).

    SPARKSYNC_HOME=$(mktemp -d) xvfb-run -a -s "-screen 0 1280x800x24" \\
        python -m tests.gui.app_shots docs/screenshots [TAB ...]

The window is the app's (``sparksync.gui.app.cluster``, ``MainWindow``) on
this computer's real agent, with nothing paired. Once the plots show live
data, each tab named (by default every tab) is made current, given a few
seconds to fill in from its workers, and saved as ``<tab>-first-run.png``
in lower case (the pictures of a busy cluster keep their own names).
Exit 0 when every picture was written, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

TIMEOUT_MS = 120_000
SETTLE_MS = 3_000  # a tab's workers answer (registry read, engine check) before its picture


def file_name(tab: str) -> str:
    return f"{tab.lower().replace(' ', '-')}-first-run.png"


def main(out_dir: str, wanted: list[str]) -> int:
    from sparksync.gui.app import cluster
    from sparksync.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    window = MainWindow(actions=cluster(2.0))
    window.resize(1280, 800)
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    todo = [t for t in titles if not wanted or t.lower() in {w.lower() for w in wanted}]
    outcome = {"code": 0 if todo else 1, "saved": []}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def next_tab() -> None:
        if not todo:
            window.quit()
            return
        title = todo[0]
        window.tabs.setCurrentIndex(titles.index(title))
        QTimer.singleShot(SETTLE_MS, shoot)

    def shoot() -> None:
        title = todo.pop(0)
        path = out / file_name(title)
        if window.grab().toImage().save(str(path), "PNG"):
            outcome["saved"].append(str(path))
        else:
            outcome["code"] = 1
        next_tab()

    window.live_data_shown.connect(lambda: QTimer.singleShot(SETTLE_MS, next_tab))
    window.shut_down.connect(app.quit)
    QTimer.singleShot(TIMEOUT_MS, window.quit)
    window.show()
    window.start()
    app.exec()
    for path in outcome["saved"]:
        print(path)
    return outcome["code"] if not todo else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
