"""The real app on a real X server (Xvfb): it reaches live plots and a screenshot of them is not blank."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gui

XVFB_RUN = shutil.which("xvfb-run")


@pytest.mark.skipif(XVFB_RUN is None, reason="needs xvfb-run (apt-get install xvfb xauth)")
def test_screenshot_of_live_plots_under_xvfb(tmp_path):
    shot = tmp_path / "dashboard.png"
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        SPARKSYNC_HOME=str(tmp_path / "home"),
        SPARKSYNC_GUI_SCREENSHOT=str(shot),
        SPARKSYNC_GUI_SCREENSHOT_AFTER_S="3",
    )
    done = subprocess.run(
        [XVFB_RUN, "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-m", "sparksync.gui.app", "--sample-hz", "5"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    from PySide6.QtGui import QImage

    image = QImage(str(shot)).convertToFormat(QImage.Format.Format_Grayscale8)
    assert (image.width(), image.height()) == (1280, 800)
    pixels = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes()).reshape(800, -1)[
        :, :1280
    ]
    plots = pixels[60:780, 300:1270]  # right of the side panel, below the controls
    assert plots.std() > 10 and (plots < 40).mean() > 0.3  # dark plot backgrounds carrying lines and text
