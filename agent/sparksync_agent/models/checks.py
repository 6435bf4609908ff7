"""Checks of what a model request names, each a 400 that names the field, never its value's secret."""

from __future__ import annotations

import re

from sparksync_agent.models.errors import ModelError
from sparksync_agent.protocol import REVISION_PATTERN, USER_PATTERN, valid_model_name


def name(value: str, what: str = "model name") -> str:
    if not valid_model_name(value):
        raise ModelError(400, "bad_name", f"{value!r} is not a {what} (letters, digits, . _ -, at most one '/')")
    return value


def user(value: str) -> str:
    if not re.match(USER_PATTERN, value):
        raise ModelError(400, "bad_user", f"{value!r} is not a user name")
    return value


def revision(value: str) -> str:
    if not re.match(REVISION_PATTERN, value):
        raise ModelError(400, "bad_revision", f"{value!r} is not a revision")
    return value


def endpoint(value: str | None) -> str | None:
    if value is not None and not re.match(r"^https?://[^\s]+$", value):
        raise ModelError(400, "bad_endpoint", "the endpoint must be an http(s) URL")
    return value
