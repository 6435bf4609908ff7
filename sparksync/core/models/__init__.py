"""Models on every node: where each one is, fetching on a node, copies fanned out and verified.

- ``nodes``: ``ModelNodes`` (the models side of the fleet), the model × node ``ModelMatrix``;
- ``copy``: ``ModelCopy``: free space first, a pipelined fan-out, sha256 checks, one re-copy;
- ``fanout``: the fan-out's schedule: which node serves which, a node serving while it receives;
- ``route``: which way a copy goes (node-to-node SSH, or relayed through this computer);
- ``fetch``: a node downloads a Hugging Face repo itself (the token from the keyring);
- ``rates``: copy rates measured per node, for the estimate a workload launch shows;
- ``rsh``: rsync's remote shell over SparkSync's own SSH;
- ``errors``: what can go wrong.

Nothing is imported until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.models.copy import CopyEvent, CopyReport, ModelCopy, NodeResult
    from sparksync.core.models.errors import (
        CopyCancelled,
        CopyFailedError,
        ModelError,
        ModelMissingError,
        NoSpaceError,
    )
    from sparksync.core.models.fetch import HF_TOKEN_SECRET, fetch_model, forget_token, store_token, stored_token
    from sparksync.core.models.nodes import Cell, ModelMatrix, ModelNodes, NodeColumn, build_matrix
    from sparksync.core.models.rates import CopyRates
    from sparksync.core.models.route import Route, choose_route

_WHERE = {
    "CopyCancelled": "errors",
    "CopyEvent": "copy",
    "CopyReport": "copy",
    "ModelCopy": "copy",
    "NodeResult": "copy",
    "CopyFailedError": "errors",
    "ModelError": "errors",
    "ModelMissingError": "errors",
    "NoSpaceError": "errors",
    "HF_TOKEN_SECRET": "fetch",
    "fetch_model": "fetch",
    "forget_token": "fetch",
    "store_token": "fetch",
    "stored_token": "fetch",
    "Cell": "nodes",
    "ModelMatrix": "nodes",
    "ModelNodes": "nodes",
    "NodeColumn": "nodes",
    "build_matrix": "nodes",
    "CopyRates": "rates",
    "Route": "route",
    "choose_route": "route",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
