"""The memory and speed planner: will a model fit on the cluster, and how fast can it go.

Pure functions over pydantic models, no Qt and no I/O except ``readers``
(which reads model file headers). See docs/planner.md for the method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.planner.bounds import (
        SPLITS,
        Hardware,
        Split,
        decode_bound,
        percent_of_bound,
        prefill_bound,
        split_for_engine,
        split_label,
        split_model,
    )
    from sparksync.core.planner.errors import ModelFileError, PlanInputError, PlannerError, UnknownQuantError
    from sparksync.core.planner.fit import (
        DEFAULT_OVERHEAD_GB,
        GB,
        MAX_NODES,
        FitOptions,
        FitReport,
        NodeMemory,
        plan_fit,
        plan_on,
        stated_cluster,
    )
    from sparksync.core.planner.model import ModelSpec
    from sparksync.core.planner.quant import QUANTS, quant_for
    from sparksync.core.planner.readers import read_model
    from sparksync.core.planner.kv_cache import KV_DTYPES

_WHERE = {
    "Hardware": "bounds",
    "SPLITS": "bounds",
    "Split": "bounds",
    "split_for_engine": "bounds",
    "split_label": "bounds",
    "split_model": "bounds",
    "decode_bound": "bounds",
    "percent_of_bound": "bounds",
    "prefill_bound": "bounds",
    "ModelFileError": "errors",
    "PlanInputError": "errors",
    "PlannerError": "errors",
    "UnknownQuantError": "errors",
    "DEFAULT_OVERHEAD_GB": "fit",
    "GB": "fit",
    "MAX_NODES": "fit",
    "FitOptions": "fit",
    "FitReport": "fit",
    "NodeMemory": "fit",
    "plan_fit": "fit",
    "plan_on": "fit",
    "stated_cluster": "fit",
    "ModelSpec": "model",
    "QUANTS": "quant",
    "quant_for": "quant",
    "read_model": "readers",
    "KV_DTYPES": "kv_cache",
}
__all__ = [
    "DEFAULT_OVERHEAD_GB",
    "GB",
    "KV_DTYPES",
    "MAX_NODES",
    "QUANTS",
    "SPLITS",
    "FitOptions",
    "FitReport",
    "Hardware",
    "ModelFileError",
    "ModelSpec",
    "NodeMemory",
    "PlanInputError",
    "PlannerError",
    "Split",
    "UnknownQuantError",
    "decode_bound",
    "percent_of_bound",
    "plan_fit",
    "plan_on",
    "prefill_bound",
    "quant_for",
    "read_model",
    "split_for_engine",
    "split_label",
    "split_model",
    "stated_cluster",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
