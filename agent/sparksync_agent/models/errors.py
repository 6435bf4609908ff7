"""The agent's refusals about models, each with an HTTP status and a stable code."""

from __future__ import annotations


class ModelError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code
