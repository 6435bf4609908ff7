"""The model matrix, store names in recipes, per-node paths in launches, copy rates, this computer's names."""

from __future__ import annotations

import json

from sparksync_agent.protocol import (
    ModelEntry,
    ModelFile,
    ModelFormat,
    ModelList,
    ModelRoot,
    ModelState,
    RankLaunch,
    RootKind,
)

from sparksync.core.agents.this_computer import canonical_name, is_local
from sparksync.core.base.errors import AgentUnreachableError
from sparksync.core.models import CopyRates, build_matrix
from sparksync.core.models.launch_check import placeholder, resolve_launch, store_models, store_name


def entry(name: str, state=ModelState.present, kind=RootKind.store, size=10, path=None) -> ModelEntry:
    return ModelEntry(name=name, format=ModelFormat.gguf, state=state, root="/r", root_kind=kind, directory="/r/" + name,
                      path=path or f"/r/{name}/{name}.gguf", size_bytes=size,
                      files=[ModelFile(path=f"{name}.gguf", size=size, sha256="0" * 64)])  # fmt: skip


def listing(*models: ModelEntry, free: int = 1000) -> ModelList:
    return ModelList(roots=[ModelRoot(path="/r", kind=RootKind.store, exists=True, free_bytes=free)], models=list(models))


def test_the_matrix_has_every_model_and_node_a_present_copy_beating_a_partial_one():
    matrix = build_matrix({
        "n1": listing(entry("a"), entry("b", ModelState.partial), free=500),
        "n2": listing(entry("b", ModelState.partial, size=3), entry("b", kind=RootKind.hf_cache, path="/hf/b")),
        "n3": AgentUnreachableError("no answer"),
    })  # fmt: skip
    assert matrix.models == ["a", "b"]
    assert [(c.name, c.free_bytes, c.error) for c in matrix.nodes] == [("n1", 500, None), ("n2", 1000, None),
                                                                       ("n3", None, "no answer")]  # fmt: skip
    assert [matrix.cell("a", n).state for n in ("n1", "n2", "n3")] == ["present", "missing", "unknown"]
    assert [matrix.cell("b", n).state for n in ("n1", "n2")] == ["partial", "present"]
    assert matrix.cell("b", "n2").path == "/hf/b"
    assert matrix.missing_on("b", ["n1", "n2"]) == ["n1"]
    assert matrix.sizes == {"a": 10, "b": 10}
    doc = json.loads(json.dumps(matrix.to_json()))
    assert doc["models"][1]["nodes"]["n2"]["state"] == "present"


def test_store_names_paths_and_templates():
    assert store_name("store:org/m") == ("org/m", True)
    assert store_name("tiny") == ("tiny", False)
    assert store_name("Qwen/Qwen3-32B") == ("Qwen/Qwen3-32B", False)
    for not_a_name in ("/models/x.gguf", "~/x.gguf", "./x", "<model>", "http://h/x", "", "a/b/c", "store:../x"):
        assert store_name(not_a_name) is None, not_a_name


def test_a_plain_name_is_a_store_model_only_when_some_node_lists_it():
    models = {"llama": "tiny", "vllm": "Qwen/Qwen3-32B", "explicit": "store:gone", "path": "/m/x.gguf"}
    nodes = {"llama": ["n1", "n2"], "vllm": ["n3"], "explicit": ["n4"], "path": ["n5"]}
    assert store_models(models, nodes, known={"tiny"}) == {"tiny": ["n1", "n2"], "gone": ["n4"]}


def test_each_rank_gets_its_own_nodes_path_and_nothing_else_changes():
    marker = placeholder("tiny")
    launch = RankLaunch(group="g", node="n2", rank=0, role="llama-server", log_name="x",
                        argv=["llama-server", "-m", marker, "--alias", "tiny", f"--model={marker}"],
                        env={"MODEL": marker, "OTHER": "tiny"}, readiness={"kind": "process"})  # fmt: skip
    fixed = resolve_launch(launch, {"tiny": {"n1": "/one/tiny.gguf", "n2": "/two/tiny/tiny.gguf"}})
    assert fixed.argv == ["llama-server", "-m", "/two/tiny/tiny.gguf", "--alias", "tiny",
                          "--model=/two/tiny/tiny.gguf"]  # fmt: skip
    assert fixed.env == {"MODEL": "/two/tiny/tiny.gguf", "OTHER": "tiny"}


def test_copy_rates_are_kept_per_node_id_as_a_running_mean(tmp_path):
    rates = CopyRates(tmp_path / "rates.json")
    assert rates.get("id1") is None
    rates.record("id1", 100_000_000, 10.0)
    assert rates.get("id1") == 10_000_000
    rates.record("id1", 300_000_000, 10.0)
    assert rates.get("id1") == 20_000_000  # half the old figure, half the new
    assert json.loads((tmp_path / "rates.json").read_text())["version"] == 1
    (tmp_path / "rates.json").write_text("{not json")
    assert CopyRates(tmp_path / "rates.json").get("id1") is None  # an estimate only: unreadable means none


def test_this_computer_answers_to_local_this_computer_and_this_dash_computer():
    for name in ("local", "this computer", "This-Computer", "this-computer", " this  computer "):
        assert is_local(name) and canonical_name(name) == "this computer"
    assert not is_local("n1") and not is_local("this")
