"""Which running workloads use a model: a rank whose command line, environment or folder names it."""

from __future__ import annotations

import os

from sparksync_agent.supervisor.supervisor import Supervisor


def workloads_using(supervisor: Supervisor | None, paths: list[str]) -> list[str]:
    if supervisor is None:
        return []
    wanted = {os.path.realpath(p) for p in paths} | set(paths)
    users = []
    for (workload_id, _name), rank in list(supervisor.ranks.items()):
        if rank.record.state.finished:
            continue
        launch = rank.record.launch
        words = [*launch.argv, *launch.env.values(), launch.cwd or ""]
        if any(_names(word, wanted) for word in words):
            users.append(workload_id)
    return sorted(set(users))


def _names(word: str, wanted: set[str]) -> bool:
    # "--model=/x/y.gguf" and "/x/y/" name it too.
    for path in wanted:
        if path and path in word:
            return True
    return False
