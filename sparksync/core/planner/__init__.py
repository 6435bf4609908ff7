"""The memory and speed planner: will a model fit on the cluster, and how fast can it go.

Pure functions over pydantic models, no Qt and no I/O except ``readers``
(which reads model file headers). See docs/planner.md for the method.
"""

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
from sparksync.core.planner.fit import FitOptions, FitReport, NodeMemory, plan_fit, stated_cluster
from sparksync.core.planner.model import ModelSpec
from sparksync.core.planner.quant import QUANTS, quant_for
from sparksync.core.planner.readers import read_model

__all__ = [
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
    "prefill_bound",
    "quant_for",
    "read_model",
    "split_for_engine",
    "split_label",
    "split_model",
    "stated_cluster",
]
