"""sparksync_agent: the headless SparkSync node agent (no Qt, few dependencies)."""

from sparksync_agent._version import __version__

__all__ = ["__version__"]
