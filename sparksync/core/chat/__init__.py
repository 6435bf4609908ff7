"""Chat with a model the cluster serves: a running workload's engine or a Switchyard gateway.

- ``targets``: what can be chatted with (a workload's endpoint, reached through its
  node's tunnel, or a gateway's URL), and how to reach it;
- ``stream``: one streamed answer from an OpenAI-compatible ``/v1/chat/completions``,
  with its time to first token and tokens/s;
- ``conversation``: the turns so far, Qt-free, for the app's Chat tab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.chat.conversation import (
        Conversation,
        Turn,
    )
    from sparksync.core.chat.errors import (
        ChatError,
    )
    from sparksync.core.chat.stream import (
        Answer,
        stream_answer,
    )
    from sparksync.core.chat.targets import (
        ChatTarget,
        Reach,
        gateway_target,
        opened,
        workload_targets,
    )

_WHERE = {
    "Conversation": "conversation",
    "Turn": "conversation",
    "ChatError": "errors",
    "Answer": "stream",
    "stream_answer": "stream",
    "ChatTarget": "targets",
    "Reach": "targets",
    "gateway_target": "targets",
    "opened": "targets",
    "workload_targets": "targets",
}
__all__ = [
    "Answer",
    "ChatError",
    "ChatTarget",
    "Conversation",
    "Reach",
    "Turn",
    "gateway_target",
    "opened",
    "stream_answer",
    "workload_targets",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
