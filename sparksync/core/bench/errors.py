"""Errors of the benchmark harness.

Every message says what happened and what to do next. None holds an API key:
messages end up in logs, the history and bug reports.
"""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class BenchError(SparkSyncError):
    """Base of every benchmark error."""

    exit_code = 30


class BenchInputError(BenchError):
    """A bad argument: a missing tokenizer or prompt file, an impossible profile."""

    exit_code = 2  # bad input, as click reports a bad option


class BenchToolError(BenchError):
    """llama-benchy is missing, or is not the pinned version."""

    exit_code = 31


class EndpointUnreachableError(BenchError):
    """Nothing answers at the endpoint, or it is not an OpenAI-style API."""

    exit_code = 32


class ModelNotServedError(BenchError):
    """The endpoint answers but does not serve the model asked for."""

    exit_code = 33


class TokenizerMismatchError(BenchError):
    """The tokenizer counts tokens differently from the served model."""

    exit_code = 34


class ProfileTooLargeError(BenchError):
    """One request of the profile would not fit in the server's context."""

    exit_code = 35


class BenchRunFailedError(BenchError):
    """llama-benchy ran but produced no usable result."""

    exit_code = 36


class BenchCancelledError(BenchError):
    """The user cancelled the benchmark (what it measured so far is kept)."""

    exit_code = 130  # what a shell reports for Ctrl-C


class HistoryError(BenchError):
    """The benchmark history database cannot be read or written."""

    exit_code = 37


class RunNotFoundError(BenchError):
    """No stored run has the id asked for."""

    exit_code = 38
