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


# --- the launch estimate: the newest fabric check, else the copy rates -------------------------------


class _Nodes:
    """What ``needs`` asks of ModelNodes: the names, their listings, their ids."""

    def __init__(self, listings: dict[str, ModelList]):
        self._listings = listings

    def names(self, names=None):
        return list(self._listings)

    def listings(self, nodes, manifests=True):
        return {n: self._listings[n] for n in nodes}

    def node_id(self, node: str) -> str:
        return "id-" + node


def _check(gbps_by_link: dict[tuple[str, str], float]):
    from sparksync.core.fabric.check_results import FabricCheckReport, LinkCheck, Measurement, Verdict

    links = [LinkCheck(key=f"{a}:x--{b}:x", a=f"{a}:x", b=f"{b}:x", a_address="10.9.0.1", b_address="10.9.0.2",
                       subnet="10.9.0.0/24", line_rate_gbps=200, mtu=9000, measurements=[
                           Measurement(test="iperf3", where=f"{a} -> {b}", verdict=Verdict.passed, value=v, unit="Gb/s"),
                           Measurement(test="iperf3", where=f"{b} -> {a}", verdict=Verdict.passed, value=v + 1,
                                       unit="Gb/s")])
             for (a, b), v in gbps_by_link.items()]  # fmt: skip
    return FabricCheckReport(topology="switch", nodes=sorted({n for pair in gbps_by_link for n in pair}), links=links)


def test_the_launch_estimate_uses_the_newest_fabric_check_and_says_so(tmp_path):
    from sparksync.core.bench.history import HistoryStore
    from sparksync.core.fabric.check_history import FabricCheckHistory
    from sparksync.core.models.launch_check import COPY_RATES_BASIS, needs

    size = 8_000_000_000
    nodes = _Nodes({"n1": listing(entry("m", size=size)), "n2": listing(), "n3": listing()})
    rates = CopyRates(tmp_path / "rates.json")
    rates.record("id-n2", 100_000_000, 1.0)  # 0.1 GB/s measured by copies
    rates.record("id-n3", 100_000_000, 1.0)
    checks = FabricCheckHistory(HistoryStore(tmp_path / "history.sqlite3"))

    [need] = needs(nodes, {"m": ["n1", "n2", "n3"]}, rates, checks)  # no check stored: the copy rates
    assert need.missing == ["n2", "n3"] and need.estimate_basis == COPY_RATES_BASIS
    assert need.estimate_s == size / 100_000_000 * 2  # two rounds of the tree for two targets
    assert "at the copy rates measured so far" in need.sentence()

    checks.add(_check({("n1", "n2"): 64.0, ("n1", "n3"): 40.0}))
    checks.add(_check({("n1", "n2"): 32.0, ("n1", "n3"): 16.0}))  # the newest: this one counts
    [need] = needs(nodes, {"m": ["n1", "n2", "n3"]}, rates, checks)
    assert need.estimate_s == size / (16.0e9 / 8) * 2  # the slowest missing node's slowest link
    assert need.estimate_basis is not None and "iperf3" in need.estimate_basis
    assert "fabric bandwidth measured by iperf3 in `sparksync cluster check`" in need.sentence()


def test_a_fabric_check_without_figures_for_a_node_gives_the_clusters_slowest_and_none_falls_back(tmp_path):
    from sparksync.core.fabric.check_results import FabricCheckReport
    from sparksync.core.models.launch_check import COPY_RATES_BASIS, fabric_rate, needs

    report = _check({("n1", "n2"): 50.0, ("n3", "n4"): 20.0})
    assert fabric_rate(report, "n2") == 50.0e9 / 8
    assert fabric_rate(report, "renamed") == 20.0e9 / 8  # not in the check by that name: the slowest link
    assert fabric_rate(FabricCheckReport(), "n2") is None

    class _NoFigures:
        def latest(self):
            return FabricCheckReport(nodes=["n1", "n2"])  # iperf3 not run

    nodes = _Nodes({"n1": listing(entry("m", size=1000)), "n2": listing()})
    [need] = needs(nodes, {"m": ["n1", "n2"]}, CopyRates(tmp_path / "none.json"), _NoFigures())
    assert need.estimate_s is None and need.estimate_basis is None  # neither figure: no estimate, and it says so
    assert "no copy to those nodes has been measured yet" in need.sentence()
    rates = CopyRates(tmp_path / "rates.json")
    rates.record("id-n2", 500, 1.0)
    [need] = needs(nodes, {"m": ["n1", "n2"]}, rates, _NoFigures())
    assert need.estimate_basis == COPY_RATES_BASIS and need.estimate_s == 2.0


# --- the route: over the fabric only with the mesh, else the fallback says why -----------------------


class _RouteNodes:
    """Paired nodes whose agents answer ``model_reach`` from a table: host -> (ok, detail)."""

    def __init__(self, reach: dict[str, tuple[bool, str]]):
        from tests.core.node_factory import paired_node

        self.reach, self.asked = reach, []
        self._nodes = {n: paired_node(n, i) for i, n in enumerate(("n1", "n2"), start=1)}

    def paired(self, node):
        return self._nodes[node]

    def node_id(self, node):
        return self._nodes[node].node_id

    def call(self, node, action):
        from sparksync_agent.protocol import ReachReply

        class Client:
            def model_reach(inner, request):
                self.asked.append((node, request))
                ok, detail = self.reach.get(request.host, (False, "no route"))
                return ReachReply(ok=ok, detail=detail)

        return action(Client())


def test_without_the_mesh_the_route_is_the_management_address_or_a_relay_and_it_says_why():
    from sparksync.core.fabric.mesh import MeshEntry, MeshFile, save_mesh
    from sparksync.core.models.route import choose_route

    nodes = _RouteNodes({"10.0.0.2": (True, "")})
    route = choose_route(nodes, "n1", "n2")  # type: ignore[arg-type]
    assert (route.kind, route.over, route.host, route.identity_file) == ("ssh", "management", "10.0.0.2", None)
    assert "not the fabric: the node-to-node mesh is not set up" in route.detail

    # In the mesh, but no fabric plan applied: still not over the fabric, and that is the reason given.
    save_mesh(MeshFile(members={nodes.node_id(n): MeshEntry(name=n, public_line="ssh-ed25519 AAAA x", addresses=[])
                                for n in ("n1", "n2")}))  # fmt: skip
    nodes.reach, nodes.asked = {}, []
    route = choose_route(nodes, "n1", "n2")  # type: ignore[arg-type]
    assert route.kind == "relay" and route.host is None
    assert "cannot ssh to n2 (no route)" in route.detail and "no fabric plan is applied" in route.detail
    assert [r.host for _n, r in nodes.asked] == ["10.0.0.2"]  # no fabric address was tried
    assert "this-computer" not in route.detail
    assert choose_route(nodes, "this-computer", "n2").kind == "direct"  # type: ignore[arg-type]
