"""Golden launches for vLLM on 1, 2 and 4 nodes, native and in NGC's container.

Written by hand from vLLM's multi-node documentation (a Ray head, ``ray start
--address=<head>:<port>`` on the others, then ``vllm serve ...
--tensor-parallel-size N --distributed-executor-backend ray`` on the head),
vLLM's run_cluster.sh (``ray start --block``, ``--node-ip-address``,
``VLLM_HOST_IP`` per node) and NVIDIA's DGX Spark vLLM playbook (NGC image,
``--network host --ipc host --gpus all``, ``RAY_memory_monitor_refresh_ms=0``).
"""

from __future__ import annotations

from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.recipe import Recipe
from tests.core.workloads.fakes import FABRIC_ENV, nodes, sparks, summary

IMAGE = "nvcr.io/nvidia/vllm:25.11-py3"


def recipe(tensor: int, pipeline: int = 1, container: bool = False) -> Recipe:
    fields = {
        "name": "vllm", "engine": "vllm", "model": "Qwen/Qwen3-8B",
        "parallelism": {"tensor": tensor, "pipeline": pipeline}, "ports": {"http": 8000, "ray": 6379},
    }  # fmt: skip
    if container:
        fields["container"] = {"image": IMAGE}
    return Recipe.model_validate(fields)


TOKEN = "<the group's ray token>"  # made at random per launch; replaced here to compare whole launches


def launches(count: int, **kw):
    ranks = build_group("vllm-1", recipe(**{"tensor": count, **kw}), nodes(count), sparks(count)).ranks
    tokens = {r.env["RAY_AUTH_TOKEN"] for r in ranks if "RAY_AUTH_TOKEN" in r.env}
    assert len(tokens) <= 1  # one token for the whole group, on every rank
    for r in ranks:
        if "RAY_AUTH_TOKEN" in r.env:
            r.env["RAY_AUTH_TOKEN"] = TOKEN
    return ranks


def ray_env(i: int) -> dict[str, str]:
    return {**FABRIC_ENV, "VLLM_HOST_IP": f"192.168.100.1{i}", "RAY_memory_monitor_refresh_ms": "0",
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}  # fmt: skip


SERVE_ENV = {**ray_env(1), "RAY_ADDRESS": "192.168.100.11:6379"}
RAY_HEAD = ["ray", "start", "--block", "--head", "--port", "6379", "--dashboard-host", "127.0.0.1",
            "--node-ip-address", "192.168.100.11"]  # fmt: skip


def ray_worker(i: int) -> list[str]:
    return [
        "ray",
        "start",
        "--block",
        "--address",
        "192.168.100.11:6379",
        "--node-ip-address",
        f"192.168.100.1{i}",
    ]


def serve(tp: str, *more: str) -> list[str]:
    return ["vllm", "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "8000",
            "--tensor-parallel-size", tp, *more]  # fmt: skip


def test_one_node_is_a_plain_vllm_serve():
    assert [summary(r) for r in launches(1)] == [
        {"node": "spark-1", "rank": 0, "role": "vllm-serve", "stage": 0, "argv": serve("1"), "env": {}},
    ]


def test_two_nodes_start_ray_head_then_worker_then_serve_over_ray():
    assert [summary(r) for r in launches(2)] == [
        {"node": "spark-1", "rank": 0, "role": "ray-head", "stage": 0, "argv": RAY_HEAD, "env": ray_env(1)},
        {"node": "spark-2", "rank": 1, "role": "ray-worker", "stage": 1, "argv": ray_worker(2), "env": ray_env(2)},
        {"node": "spark-1", "rank": 0, "role": "vllm-serve", "stage": 2,
         "argv": serve("2", "--distributed-executor-backend", "ray"), "env": SERVE_ENV},
    ]  # fmt: skip


def test_four_nodes_have_three_ray_workers_and_tensor_parallel_4():
    expected = (
        [{"node": "spark-1", "rank": 0, "role": "ray-head", "stage": 0, "argv": RAY_HEAD, "env": ray_env(1)}]
        + [{"node": f"spark-{i}", "rank": i - 1, "role": "ray-worker", "stage": 1, "argv": ray_worker(i),
            "env": ray_env(i)} for i in (2, 3, 4)]
        + [{"node": "spark-1", "rank": 0, "role": "vllm-serve", "stage": 2,
            "argv": serve("4", "--distributed-executor-backend", "ray"), "env": SERVE_ENV}]
    )  # fmt: skip
    assert [summary(r) for r in launches(4)] == expected


def test_pipeline_parallel_over_four_nodes():
    ranks = build_group("vllm-1", recipe(2, pipeline=2), nodes(4), sparks(4)).ranks
    assert ranks[-1].argv == serve(
        "2", "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray"
    )


def test_ray_nodes_are_ready_when_ray_says_so_and_serve_when_health_answers():
    head, worker, vllm_serve = launches(2)
    assert head.readiness.kind == worker.readiness.kind == "log"
    assert head.readiness.pattern == r"Ray runtime started\."
    assert head.ports == [6379] and worker.ports == []
    assert (vllm_serve.readiness.kind, vllm_serve.readiness.path, vllm_serve.ports) == (
        "http",
        "/health",
        [8000],
    )
    assert (vllm_serve.tokens_source.decode_counter, vllm_serve.tokens_source.prefill_counter) == (
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
    )


RAY_KEYS = ["GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include",
            "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_memory_monitor_refresh_ms", "TP_SOCKET_IFNAME",
            "UCX_NET_DEVICES", "VLLM_HOST_IP"]  # fmt: skip


def docker(name: str, keys: list[str]) -> list[str]:
    passed = [part for key in keys for part in ("-e", key)]
    return ["docker", "run", "--rm", "--name", name, "--network", "host", "--ipc", "host", "--gpus", "all",
            *passed, IMAGE]  # fmt: skip


def test_container_wraps_every_process_in_docker_run_with_the_variables_passed_by_name():
    head, worker, vllm_serve = launches(2, container=True)
    assert head.argv == [*docker("sparksync-vllm-1-ray-head", RAY_KEYS), *RAY_HEAD]
    assert worker.argv == [*docker("sparksync-vllm-1-ray-worker", RAY_KEYS), *ray_worker(2)]
    serve_keys = sorted([*RAY_KEYS, "RAY_ADDRESS"])
    assert vllm_serve.argv == [
        *docker("sparksync-vllm-1-vllm-serve", serve_keys),
        *serve("2", "--distributed-executor-backend", "ray"),
    ]
    # The values travel in the process environment; docker's "-e NAME" forwards them.
    assert (head.env, worker.env, vllm_serve.env) == (ray_env(1), ray_env(2), SERVE_ENV)
    assert head.stop_argv == ["docker", "stop", "sparksync-vllm-1-ray-head"]


def test_single_node_container():
    (only,) = launches(1, container=True)
    assert only.argv == [*docker("sparksync-vllm-1-vllm-serve", []), *serve("1")]


def test_ray_runs_with_a_token_of_its_own_per_launch_in_the_environment_only():
    def raw(count: int, **kw):
        return build_group("vllm-1", recipe(**{"tensor": count, **kw}), nodes(count), sparks(count)).ranks

    first, second = raw(2), raw(2)
    token = first[0].env["RAY_AUTH_TOKEN"]
    assert len(token) >= 40 and all(r.env["RAY_AUTH_TOKEN"] == token for r in first)
    assert all(r.env["RAY_AUTH_MODE"] == "token" for r in first)
    assert second[0].env["RAY_AUTH_TOKEN"] != token  # a new launch, a new token
    for ranks in (first, raw(2, container=True), raw(4)):
        for launch in ranks:
            token = launch.env["RAY_AUTH_TOKEN"]
            assert not any(token in part for part in [*launch.argv, *launch.stop_argv]), launch.role
    # A printed command hides it too.
    from sparksync.core.workloads.launches import HIDDEN, shell_command

    assert token not in shell_command(first[0]) and f"RAY_AUTH_TOKEN={HIDDEN}" in shell_command(first[0])


def test_the_dashboard_stays_on_loopback_and_ray_binds_the_fabric_address():
    head, worker, _serve = launches(2)
    assert head.argv[head.argv.index("--dashboard-host") + 1] == "127.0.0.1"
    assert head.argv[head.argv.index("--node-ip-address") + 1] == "192.168.100.11"
    assert worker.argv[worker.argv.index("--node-ip-address") + 1] == "192.168.100.12"
    assert "0.0.0.0" not in " ".join(head.argv + worker.argv)
