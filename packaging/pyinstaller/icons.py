"""Raster icons rendered from the one SVG master, ``resources/sparksync.svg``.

Rendered with Qt's own SVG renderer (PySide6 is already a dependency of the
app), on the offscreen platform, so a build needs neither a display nor an
extra SVG tool.
"""

from __future__ import annotations

import os
from pathlib import Path

MASTER = Path(__file__).resolve().parents[2] / "resources" / "sparksync.svg"
# The hicolor theme's usual application sizes.
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def render_png(size: int, out: Path, master: Path = MASTER) -> Path:
    """Render ``master`` as a ``size`` x ``size`` PNG at ``out``."""
    _qt_app()
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(master))
    if not renderer.isValid():
        raise ValueError(f"{master} is not an SVG Qt can render")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(out), "PNG"):
        raise OSError(f"could not write {out}")
    return out


def render_hicolor(root: Path, name: str = "sparksync", master: Path = MASTER) -> list[Path]:
    """Fill ``root`` (a ``share/icons/hicolor``) with every size plus the scalable master."""
    made = [
        render_png(size, root / f"{size}x{size}" / "apps" / f"{name}.png", master) for size in HICOLOR_SIZES
    ]
    scalable = root / "scalable" / "apps" / f"{name}.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    scalable.write_bytes(master.read_bytes())
    return [*made, scalable]


_app = None  # the QGuiApplication must outlive every render


def _qt_app():
    # QPainter needs a QGuiApplication; "offscreen" keeps builds display-free.
    global _app
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    _app = QGuiApplication.instance() or QGuiApplication(["sparksync-icons"])
    return _app
