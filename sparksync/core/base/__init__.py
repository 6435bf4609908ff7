"""What every part of the client core stands on.

- ``errors``: the client's one exception hierarchy (each error says what to do next);
- ``paths``: where SparkSync keeps its files (platformdirs, or all under ``SPARKSYNC_HOME``);
- ``file_lock``: an exclusive lock between SparkSync processes;
- ``listeners``: a thread-safe list of callbacks;
- ``units``: formatting of bytes, bit rates and tokens/s;
- ``backoff``: the one retry schedule (SSH transports, telemetry stream and follower);
- ``lazy``: the lazy public names every core package's ``__init__`` exports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.base.backoff import (
        Backoff,
    )
    from sparksync.core.base.errors import (
        AgentAuthError,
        AgentRequestError,
        AgentUnreachableError,
        LocalAgentCancelled,
        LocalAgentError,
        ProtocolMismatchError,
        SparkSyncError,
    )
    from sparksync.core.base.file_lock import (
        exclusive_lock,
    )
    from sparksync.core.base.listeners import (
        Listeners,
    )
    from sparksync.core.base.paths import (
        HOME_ENV,
        cache_dir,
        config_dir,
        data_dir,
        ensure_dir,
        local_agent_state_dir,
        log_dir,
        remove_interrupted_writes,
        state_dir,
    )
    from sparksync.core.base.units import (
        DEFAULT_MEMORY_UNIT,
        MemoryUnit,
        bits_per_s,
        format_bandwidth,
        format_bits_per_s,
        format_bytes,
        format_link_rate,
        format_memory,
        format_percent,
        format_tokens_per_s,
        format_value,
    )

_WHERE = {
    "Backoff": "backoff",
    "AgentAuthError": "errors",
    "AgentRequestError": "errors",
    "AgentUnreachableError": "errors",
    "LocalAgentCancelled": "errors",
    "LocalAgentError": "errors",
    "ProtocolMismatchError": "errors",
    "SparkSyncError": "errors",
    "exclusive_lock": "file_lock",
    "Listeners": "listeners",
    "HOME_ENV": "paths",
    "cache_dir": "paths",
    "config_dir": "paths",
    "data_dir": "paths",
    "ensure_dir": "paths",
    "local_agent_state_dir": "paths",
    "log_dir": "paths",
    "remove_interrupted_writes": "paths",
    "state_dir": "paths",
    "DEFAULT_MEMORY_UNIT": "units",
    "MemoryUnit": "units",
    "bits_per_s": "units",
    "format_bandwidth": "units",
    "format_bits_per_s": "units",
    "format_bytes": "units",
    "format_link_rate": "units",
    "format_memory": "units",
    "format_percent": "units",
    "format_tokens_per_s": "units",
    "format_value": "units",
}
__all__ = [
    "AgentAuthError",
    "AgentRequestError",
    "AgentUnreachableError",
    "Backoff",
    "DEFAULT_MEMORY_UNIT",
    "HOME_ENV",
    "Listeners",
    "LocalAgentCancelled",
    "LocalAgentError",
    "MemoryUnit",
    "ProtocolMismatchError",
    "SparkSyncError",
    "bits_per_s",
    "cache_dir",
    "config_dir",
    "data_dir",
    "ensure_dir",
    "exclusive_lock",
    "format_bandwidth",
    "format_bits_per_s",
    "format_bytes",
    "format_link_rate",
    "format_memory",
    "format_percent",
    "format_tokens_per_s",
    "format_value",
    "local_agent_state_dir",
    "log_dir",
    "remove_interrupted_writes",
    "state_dir",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
