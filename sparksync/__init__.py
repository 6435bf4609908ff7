"""SparkSync desktop client: a Qt-free core, a CLI and a PySide6 GUI."""

from sparksync_agent._version import __version__

__all__ = ["__version__"]
