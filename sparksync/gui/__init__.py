"""The desktop app (PySide6 + pyqtgraph); ``sparksync.gui.app`` is its entry point."""
