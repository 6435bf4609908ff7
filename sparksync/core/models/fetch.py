"""``model fetch``: a node downloads a Hugging Face repo itself, with the real huggingface_hub.

The token, when the user keeps one, is read from the keyring here
(``SecretStore``, entry ``hf-token``) and travels only in the request's body
through the SSH tunnel to the node's agent, which hands it to the
downloading process in its environment: never a file, a log or a command line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pydantic import SecretStr
from sparksync_agent.protocol import FetchRequest, JobState, ModelJob

from sparksync.core.models.errors import CopyCancelled, ModelError
from sparksync.core.models.nodes import ModelNodes

HF_TOKEN_SECRET = "hf-token"
POLL_S = 0.3


def stored_token() -> SecretStr | None:
    """The user's Hugging Face token from the keyring, if they stored one (``model token set``)."""
    from sparksync.core.ssh.secrets import SecretStore

    value = SecretStore().get(HF_TOKEN_SECRET)
    return SecretStr(value) if value else None


def store_token(token: str) -> None:
    from sparksync.core.ssh.secrets import SecretStore

    SecretStore().set(HF_TOKEN_SECRET, token)


def forget_token() -> bool:
    """Remove the stored token; whether there was one."""
    from sparksync.core.ssh.secrets import SecretStore

    return SecretStore().delete(HF_TOKEN_SECRET)


def fetch_model(
    nodes: ModelNodes,
    node: str,
    repo: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: SecretStr | None = None,
    on_progress: Callable[[ModelJob], None] | None = None,
    cancel: threading.Event | None = None,
) -> ModelJob:
    """Start the download on ``node`` and follow it to the end; the finished job (with the model)."""
    secret = token.get_secret_value() if token is not None else None
    request = FetchRequest(repo=repo, revision=revision, endpoint=endpoint, token=secret)
    job = nodes.call(node, lambda c: c.fetch_model(request))
    while True:
        if on_progress is not None:
            on_progress(job)
        if job.state.finished:
            break
        if cancel is not None and cancel.wait(POLL_S):
            nodes.call(node, lambda c: c.cancel_model_job(job.id))
            raise CopyCancelled(f"the fetch of {repo} on {node} was stopped; a new fetch resumes it")
        if cancel is None:
            time.sleep(POLL_S)
        job = nodes.call(node, lambda c: c.model_job(job.id))
    if job.state is not JobState.done:
        raise ModelError(job.message or f"the fetch of {repo} on {node} ended {job.state.value}")
    return job
