"""``engine install llama.cpp --node local``: on this computer the build is the engine cache's, and reused.

The cache holds the build already (``make engines``), so the install finds
it: the steps are reported for the progress bar, nothing is compiled, and
the answer is the folder this computer's agent has on its PATH.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.engines import bin_dirs
from sparksync.core.workloads.engine_install import install_here

pytestmark = pytest.mark.engine


def test_installing_here_finds_the_cached_build_and_reports_its_steps(llama_binaries):
    steps = []
    where = install_here(lambda progress: steps.append(progress.step), flavour="cpu")
    assert where == str(llama_binaries.root)
    assert steps[0] == "check" and steps[-1] == "done"
    assert llama_binaries.llama_server.parent in bin_dirs()  # where this computer's agent looks


def test_the_command_installs_on_this_computer_through_its_agent(llama_binaries):
    result = CliRunner().invoke(cli, ["engine", "install", "llama.cpp", "--node", "local", "--flavour", "cpu"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"this computer: llama.cpp installed in {llama_binaries.root}"
