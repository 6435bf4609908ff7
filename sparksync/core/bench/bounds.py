"""The physical limit beside every benchmark: each test's decode and prefill bounds.

The planner (``sparksync.core.planner.bounds``) gives the fastest decode and
prefill the run's N nodes can reach; a test's figure is then shown as a
percentage of that bound. Per test of the profile (pp, tg, depth,
concurrency):

* decode: ``decode_bound`` with ``batch = concurrency`` and the KV cache at
  ``depth + pp + tg / 2`` tokens, the mean cache size over the generated
  tokens. llama-benchy's decode figure at concurrency C is the aggregate of
  the C streams, as is the bound (batch / step time);
* the split follows the engine: llama.cpp over several nodes (its RPC
  backend) is a layer split, the others tensor parallel (``split_for_engine``);
  the record keeps which, and every "% of bound" names it;
* prefill: ``prefill_bound`` over ``depth + pp`` tokens (llama-benchy counts
  the depth as prompt unless the server caches it), ``batch = concurrency``.

The model's numbers come from its own files (a GGUF header, or a
safetensors index plus ``config.json``): given with ``--model-file``, or
found on their own when the endpoint is a llama.cpp server on this machine
(its ``/props`` names the GGUF it loaded) or the tokenizer's folder holds the
model. A run without them stores no bounds and says how to get them.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.results import percent_of_bound as percent
from sparksync.core.planner.bounds import Hardware, Split, decode_bound, prefill_bound, split_label, split_model
from sparksync.core.planner.errors import PlannerError
from sparksync.core.planner.model import ModelSpec
from sparksync.core.planner.readers import read_model

log = logging.getLogger(__name__)
__all__ = ["RunBounds", "TestBound", "find_model_spec", "percent", "run_bounds"]

TestKey = tuple[int, int, int, int]  # (pp, tg, depth, concurrency), as SuiteRow.key
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class TestBound(BaseModel):
    model_config = ConfigDict(frozen=True)

    pp: int
    tg: int
    depth: int
    concurrency: int
    decode_tps: float
    prefill_tps: float

    @property
    def key(self) -> TestKey:
        return (self.pp, self.tg, self.depth, self.concurrency)


class RunBounds(BaseModel):
    """The bounds of every test of a run, and what they were computed from."""

    model_config = ConfigDict(frozen=True)

    model: ModelSpec
    hardware: Hardware
    nodes: int = Field(ge=1)
    split: Split = Field("tensor", description="How the nodes share the model (older records: tensor)")
    tests: list[TestBound]
    notes: list[str] = Field(default_factory=list)

    @property
    def bound_model(self) -> str:
        """The model the bound was computed under, in words (stands beside every "% of bound")."""
        return split_model(self.split, self.nodes)

    @property
    def bound_label(self) -> str:
        return split_label(self.split, self.nodes)

    def for_test(self, key: TestKey) -> TestBound | None:
        return next((t for t in self.tests if t.key == key), None)

    @property
    def headline(self) -> TestBound | None:
        """The first test's bounds (the headline figures come from the first test measured)."""
        return self.tests[0] if self.tests else None


def run_bounds(model: ModelSpec, profile: BenchProfile, nodes: int, hardware: Hardware | None = None,
               kv_dtype: str = "bf16", split: Split = "tensor") -> RunBounds:
    """Bounds for each test of ``profile``, in llama-benchy's order (depth, pp, tg, concurrency)."""
    hardware = hardware or Hardware()
    tests = [_test_bound(model, nodes, hardware, kv_dtype, depth, pp, tg, c, split)
             for depth, pp, tg, c in itertools.product(profile.depth, profile.pp, profile.tg, profile.concurrency)]
    notes = [] if model.has_kv_shape else ["the model's shape is unknown: KV-cache reads are not counted"]
    if nodes > 1 and split != "replica" and (model.layers is None or model.hidden is None):
        notes.append("the model's layers and hidden size are unknown: the fabric's cost is not counted")
    return RunBounds(model=model, hardware=hardware, nodes=nodes, split=split, tests=tests, notes=notes)


def _test_bound(model: ModelSpec, nodes: int, hardware: Hardware, kv_dtype: str, depth: int, pp: int,
                tg: int, concurrency: int, split: Split = "tensor") -> TestBound:
    comm_known = nodes == 1 or (model.layers is not None and model.hidden is not None)
    basis = model
    if not comm_known:
        # Without layers and hidden size the fabric's cost cannot be computed: count it as
        # (next to) free, which keeps the figure an upper bound.
        basis = model.model_copy(update={"layers": 1, "hidden": 1})
        hardware = hardware.model_copy(update={"allreduce_latency_us": 0.0})
    decode = decode_bound(basis, nodes, hardware, context=depth + pp + tg // 2, batch=concurrency,
                          kv_dtype=kv_dtype, split=split)
    prefill = prefill_bound(basis, nodes, hardware, prompt_tokens=depth + pp, batch=concurrency, split=split)
    return TestBound(pp=pp, tg=tg, depth=depth, concurrency=concurrency,
                     decode_tps=decode.tokens_per_second, prefill_tps=prefill.tokens_per_second)


# --- finding the model's numbers -----------------------------------------------


def find_model_spec(model_file: Path | None, tokenizer: Path, server_model_path: str | None,
                    endpoint_url: str) -> tuple[ModelSpec | None, str | None]:
    """The model's numbers and, when there are none, a sentence saying how to give them.

    ``model_file`` (the user's) is read or refused; the other places are tried
    quietly, since a tokenizer folder or a server's path need not hold a model.
    """
    if model_file is not None:
        return read_model(model_file), None
    for candidate in _candidates(tokenizer, server_model_path, endpoint_url):
        try:
            return read_model(candidate), None
        except PlannerError as exc:
            log.debug("no model numbers in %s: %s", candidate, exc)
    return None, ("no bound: the model's files were not found on this machine; give --model-file "
                  "(its GGUF, or its safetensors folder) to see each figure as a percentage of the bound")


def _candidates(tokenizer: Path, server_model_path: str | None, endpoint_url: str) -> list[Path]:
    found = []
    # Only a server on this machine names a path that means the same here.
    if server_model_path and urlsplit(endpoint_url).hostname in LOOPBACK_HOSTS:
        found.append(Path(server_model_path))
    folder = tokenizer if tokenizer.is_dir() else tokenizer.parent
    if (folder / "config.json").is_file() or any(folder.glob("*.gguf")):
        found.append(folder)
    return [p for p in found if p.exists()]
