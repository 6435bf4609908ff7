"""What ``sparksync --version`` and ``sparksync node list`` load: only what they use (not timed).

Each command runs in a fresh interpreter; afterwards the test reads which of
the heavy stacks ended up in ``sys.modules``. The figures for how long they
take are in tests/perf/test_startup_perf.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from sparksync.core.nodes import Registry
from tests.core.node_factory import paired_node

# Each of these costs tens to hundreds of milliseconds to import, and neither command needs one.
HEAVY = (
    "PySide6", "pyqtgraph", "matplotlib", "numpy", "gguf", "paramiko", "cryptography", "zeroconf",
    "fastapi", "uvicorn", "starlette", "httpx", "keyring", "psutil",
    "sparksync.switchyard", "sparksync.core.bench", "sparksync.core.workloads", "sparksync.core.ssh",
    "sparksync.gui",
)  # fmt: skip

_PROBE = textwrap.dedent(
    """
    import json, sys
    from sparksync.cli.main import main
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    heavy = json.loads(sys.stdin.read())
    print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}), file=sys.stderr)
    """
)


def _loaded_by(args: list[str], home) -> tuple[int, list[str], str]:
    env = {**os.environ, "SPARKSYNC_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], input=json.dumps(HEAVY), capture_output=True, text=True,
        env=env, timeout=60, check=False,
    )  # fmt: skip
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["loaded"], done.stdout


def test_version_loads_none_of_the_heavy_stacks(tmp_path):
    code, loaded, out = _loaded_by(["--version"], tmp_path)
    assert code == 0 and out.startswith("sparksync ")
    assert loaded == []


def test_node_list_loads_none_of_the_heavy_stacks(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    Registry().add(paired_node("n1", 1))
    code, loaded, out = _loaded_by(["node", "list", "--json"], tmp_path)
    assert code == 0
    assert [n["name"] for n in json.loads(out)["nodes"]] == ["n1"]  # it did read the registry
    assert loaded == []
