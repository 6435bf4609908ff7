"""The hicolor icons are rendered from the one SVG master, at every size, with content."""

from __future__ import annotations

import importlib.util

import pytest

from tests.packaging.debcache import ROOT

pytestmark = pytest.mark.gui

_spec = importlib.util.spec_from_file_location("sparksync_icons", ROOT / "packaging/pyinstaller/icons.py")
icons = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(icons)


def test_every_hicolor_size_is_rendered_from_the_master(
    qapp, tmp_path
):  # qapp: a QApplication, never a bare QGuiApplication
    from PySide6.QtGui import QImage

    made = icons.render_hicolor(tmp_path / "hicolor")
    assert len(made) == len(icons.HICOLOR_SIZES) + 1
    assert (tmp_path / "hicolor/scalable/apps/sparksync.svg").read_bytes() == icons.MASTER.read_bytes()
    for size in icons.HICOLOR_SIZES:
        image = QImage(str(tmp_path / f"hicolor/{size}x{size}/apps/sparksync.png"))
        assert (image.width(), image.height()) == (size, size)
        assert image.hasAlphaChannel()
        # The rounded square fills the middle; its corners stay transparent.
        assert image.pixelColor(size // 2, size // 2).alpha() == 255
        assert image.pixelColor(0, 0).alpha() == 0


def test_a_file_that_is_not_svg_is_refused(qapp, tmp_path):
    bad = tmp_path / "bad.svg"
    bad.write_text("not an svg")
    with pytest.raises(ValueError, match="not an SVG"):
        icons.render_png(16, tmp_path / "x.png", master=bad)
