"""``sparksync cluster`` refusals that need no node (the real path is tests/lab/test_fabric_lab.py)."""

from __future__ import annotations

from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.fabric import FabricStore, build_cabling, classify, make_plan
from tests.core.fabric.reports import Cabling


def test_apply_without_a_plan_says_to_plan_first():
    done = CliRunner().invoke(cli, ["cluster", "apply", "--sudo-password-stdin"], input="pw\n")
    assert done.exit_code == 2 and "run 'sparksync cluster plan' first" in done.output


def test_apply_without_a_terminal_needs_the_password_on_stdin():
    reports = Cabling(["a", "b"]).direct().reports()
    FabricStore().save_plan(make_plan(classify(build_cabling(reports)), reports))
    done = CliRunner().invoke(cli, ["cluster", "apply"])
    assert done.exit_code == 2 and "--sudo-password-stdin" in done.output


def test_detect_needs_two_paired_nodes():
    done = CliRunner().invoke(cli, ["cluster", "detect"])
    assert done.exit_code == 2 and "needs two paired nodes" in done.output


def test_every_subcommand_has_json():
    for name in ("detect", "plan", "apply", "rollback"):
        done = CliRunner().invoke(cli, ["cluster", name, "--help"])
        assert "--json" in done.output, name
