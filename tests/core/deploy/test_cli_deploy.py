"""``sparksync node deploy``: what it refuses before reaching any node (the lab test runs it for real)."""

from __future__ import annotations

from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.nodes.registry import Registry
from tests.core.node_factory import paired_node


def invoke(*args: str):
    return CliRunner().invoke(cli, ["node", "deploy", *args])


def test_nothing_named_is_a_usage_error():
    result = invoke()
    assert result.exit_code == 2 and "Name the nodes to deploy to" in result.stderr


def test_all_with_no_paired_nodes_says_how_to_pair():
    result = invoke("--all")
    assert result.exit_code == 2 and "sparksync node pair HOST" in result.stderr


def test_names_and_all_together_are_refused():
    Registry().add(paired_node("spark-0001", 1))
    result = invoke("spark-0001", "--all")
    assert result.exit_code == 2 and "not both" in result.stderr


def test_an_unknown_name_names_the_paired_ones():
    Registry().add(paired_node("spark-0001", 1))
    result = invoke("spark-9999")
    assert result.exit_code != 0
    assert "No paired node is named 'spark-9999' (paired: spark-0001)" in result.stderr


def test_deploy_is_listed_under_node():
    result = CliRunner().invoke(cli, ["node", "--help"])
    assert "deploy" in result.stdout
