"""From an HTTP request to a routed Job: size limit, JSON, model name, forced pool, policy decision.

Every refusal here is an ``HttpError`` that the app turns into an OpenAI-style
error body, with a message that says what to change.
"""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

from sparksync.switchyard.config import VIRTUAL_MODEL, SwitchyardConfig
from sparksync.switchyard.policies import Decision, Policy
from sparksync.switchyard.relay import Job

log = logging.getLogger(__name__)
POOL_HEADER = "x-switchyard-pool"


class HttpError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def check_key(headers: Mapping[str, str], api_key: str | None) -> None:
    if api_key is None:
        return
    given = headers.get("authorization", "")
    token = given[7:].strip() if given[:7].lower() == "bearer " else headers.get("x-api-key", "")
    if not hmac.compare_digest(token.encode(), api_key.encode()):
        raise HttpError(
            401,
            "missing or wrong API key: send it as 'Authorization: Bearer KEY' "
            "(the key the gateway's listen.api_key_env or api_key_file holds)",
            "invalid_api_key",
        )


async def read_json(headers: Mapping[str, str], stream: AsyncIterator[bytes], limit: int) -> dict[str, Any]:
    """The body as a JSON object, refusing anything over ``limit`` bytes before reading it all."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(
            400, f"the request body is not valid JSON ({exc}); send a JSON object", "invalid_json"
        ) from None
    if not isinstance(body, dict):
        raise HttpError(400, "the request body must be a JSON object", "invalid_json")
    return body


def _too_large(size: int, limit: int) -> HttpError:
    return HttpError(
        413,
        f"the request body is {size} bytes or more, over the gateway's limit of {limit}; "
        "send less, or raise limits.max_body_bytes in the config",
        "body_too_large",
    )


class Router:
    """Turns a checked body into a Job with its routing decision."""

    def __init__(self, config: SwitchyardConfig, policy: Policy):
        self.config = config
        self.policy = policy
        # Request ids: 6 random hex digits for this gateway, then a counter (12 in all), so that
        # no request pays for a random number (a system call) or a UUID.
        self._id_prefix = os.urandom(3).hex()
        self._ids = itertools.count()

    def models(self) -> list[str]:
        return [VIRTUAL_MODEL, *self.config.pools]

    def job(self, headers: Mapping[str, str], body: dict[str, Any], endpoint: str, path: str) -> Job:
        _check_shape(body, endpoint)
        request_id = headers.get("x-request-id") or f"{self._id_prefix}{next(self._ids) & 0xFFFFFF:06x}"
        decision, via = self._decide(headers, body, endpoint)
        log.info(
            "request %s: %s -> pool %s (via %s; %s: %s)",
            request_id,
            endpoint,
            decision.pool,
            via,
            decision.policy,
            decision.reason,
        )
        return Job(request_id, endpoint, path, body, body.get("stream") is True, decision, via)

    def _decide(
        self, headers: Mapping[str, str], body: dict[str, Any], endpoint: str
    ) -> tuple[Decision, str]:
        model = body["model"]
        forced = headers.get(POOL_HEADER)
        if forced is not None:
            if forced not in self.config.pools:
                raise HttpError(
                    400,
                    f"header X-Switchyard-Pool names pool {forced!r}; the pools are "
                    f"{', '.join(self.config.pools)}",
                    "unknown_pool",
                )
            if model != VIRTUAL_MODEL and model not in self.config.pools:
                raise self._unknown_model(model)
            return Decision(forced, "forced", "X-Switchyard-Pool header"), "header"
        if model in self.config.pools:
            return Decision(model, "forced", f"model {model!r} names the pool"), "model"
        if model != VIRTUAL_MODEL:
            raise self._unknown_model(model)
        return self.policy.decide_request(body, endpoint), "policy"

    def _unknown_model(self, model: str) -> HttpError:
        return HttpError(
            404,
            f"the model {model!r} does not exist here; the models are "
            f"{', '.join(self.models())} ({VIRTUAL_MODEL!r} is routed by the policy)",
            "model_not_found",
            "model",
        )


def _check_shape(body: dict[str, Any], endpoint: str) -> None:
    if not isinstance(body.get("model"), str):
        raise HttpError(
            400, "the request has no 'model'; name one (see GET /v1/models)", "missing_model", "model"
        )
    if endpoint == "chat" and not (isinstance(body.get("messages"), list) and body["messages"]):
        raise HttpError(
            400, "'messages' must be a non-empty list of chat messages", "invalid_messages", "messages"
        )
    if endpoint == "completions" and not isinstance(body.get("prompt"), (str, list)):
        raise HttpError(400, "'prompt' must be a string or a list of strings", "invalid_prompt", "prompt")
