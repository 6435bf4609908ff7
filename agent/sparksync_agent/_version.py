"""The one place the SparkSync version is defined (client and agent share it)."""

__version__ = "0.1.0"
