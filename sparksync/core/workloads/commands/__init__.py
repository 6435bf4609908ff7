"""One module per engine, each turning a recipe and a group into the group's RankLaunch list.

Every builder takes a ``GroupContext`` and returns the launches in start
order (lower ``stage`` first). The flags each one writes are checked against
the engine's documentation, cited at the top of its module.
"""

from __future__ import annotations

from collections.abc import Callable

from sparksync.core.workloads.commands import custom, llamacpp, sglang, torchrun, trtllm, vllm
from sparksync.core.workloads.commands.common import check_filled
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.launch_spec import RankLaunch
from sparksync.core.workloads.recipe import Engine

Builder = Callable[[GroupContext], list[RankLaunch]]

BUILDERS: dict[Engine, Builder] = {
    Engine.llamacpp: llamacpp.build,
    Engine.vllm: vllm.build,
    Engine.sglang: sglang.build,
    Engine.trtllm: trtllm.build,
    Engine.torchrun: torchrun.build,
    Engine.custom: custom.build,
}

__all__ = ["BUILDERS", "GroupContext", "build_ranks"]


def build_ranks(ctx: GroupContext) -> list[RankLaunch]:
    """The group's launches, in start order."""
    check_filled(ctx.recipe)
    return sorted(BUILDERS[ctx.recipe.engine](ctx), key=lambda launch: launch.stage)
