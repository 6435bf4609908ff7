"""BFCL from the installed bfcl-eval package: the conversion into switchyard cases, and BFCL's scoring rules
against answers written by hand (fixtures/bfcl_answers.json), each with the score worked out by hand."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from sparksync.switchyard.answer import Answer, ToolCall
from sparksync.switchyard.errors import CaseFileError
from sparksync.switchyard.eval import suites
from sparksync.switchyard.eval.cases import load_cases
from sparksync.switchyard.eval.scoring import score_case
from sparksync.switchyard.eval.suites import BFCL_CATEGORIES, bfcl_cases, load_suite
from tests.switchyard.suite_answers import right_answer

ANSWERS = json.loads((Path(__file__).parent / "fixtures" / "bfcl_answers.json").read_text())["answers"]
EVERY = bfcl_cases(tuple(BFCL_CATEGORIES))
BY_ID = {c.id: c for c in EVERY.cases}


def answer_of(written: dict) -> Answer:
    if "content" in written:
        return Answer(written["content"])
    return Answer("", [ToolCall(name, arguments) for name, arguments in written["calls"]])


@pytest.mark.parametrize("written", ANSWERS, ids=[f"{a['case']}: {a['why'][:60]}" for a in ANSWERS])
def test_a_written_answer_scores_as_worked_out_by_hand(written):
    result = score_case(EVERY, BY_ID[written["case"]], answer_of(written))
    assert result.score == written["score"], result.notes
    assert bool(result.notes) == (written["score"] == 0)  # a lost point always says why


def test_the_default_categories_and_a_limit_take_cases_in_turn():
    cases = load_suite("bfcl", limit=92)
    # Read from the installed wheel's data files: nothing of the package runs (nor reaches the network).
    assert not any(name == "bfcl_eval" or name.startswith("bfcl_eval.") for name in sys.modules)
    assert Counter(c.category for c in cases.cases) == {"simple": 31, "multiple": 31, "parallel": 30}
    assert [c.id for c in cases.cases[:4]] == ["simple_python_0", "multiple_0", "parallel_0", "simple_python_1"]
    assert cases.categories() == ["simple", "multiple", "parallel"]
    assert cases.scoring.rule == "bfcl" and cases.format == "switchyard-cases/2"
    assert cases.description.startswith(f"BFCL (bfcl-eval {importlib.metadata.version('bfcl-eval')})")
    # What the package ships, whole: 400 simple, 200 multiple, 200 parallel, 200 parallel_multiple, 240 irrelevance.
    assert Counter(c.category for c in EVERY.cases) == {
        "simple": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240,
    }  # fmt: skip


def test_functions_become_the_openai_tools_bfcls_own_runner_sends():
    (tool,) = BY_ID["simple_python_25"].tools
    function = tool.function
    assert function.name == "calculate_final_velocity"
    assert function.description.endswith(". Note that the provided function is in Python 3 syntax.")
    properties = function.parameters["properties"]
    assert function.parameters["type"] == "object" and function.parameters["required"] == ["height"]
    assert properties["height"]["type"] == "integer"
    assert properties["gravity"]["type"] == "number" and properties["gravity"]["format"] == "float"
    assert properties["gravity"]["description"].endswith(" This is a float type value.")
    names = [t.function.name for t in BY_ID["multiple_0"].tools]
    assert names == ["triangle_properties_get", "circle_properties_get"]  # no dots in OpenAI's names
    conditions = BY_ID["simple_python_89"].tools[0].function.parameters["properties"]["conditions"]
    assert conditions["type"] == "object" and conditions["properties"]["school"]["type"] == "string"
    interval = BY_ID["simple_python_13"].tools[0].function.parameters["properties"]["interval"]
    assert interval == {"type": "array", "items": {"type": "number"}, "description": interval["description"]}
    assert BY_ID["parallel_0"].expect.tool_calls is not None and BY_ID["irrelevance_0"].expect.no_call


def test_every_case_takes_full_marks_from_its_own_possible_answer():
    """A call built from each case's first acceptable values passes BFCL's rules, for all 1,240 cases:
    the conversion and the rules agree with the suite's own answers."""
    failed = []
    for case in EVERY.cases:
        answer = right_answer(case)
        result = score_case(EVERY, case, answer)
        if result.score != 1:
            failed.append((case.id, result.notes))
    assert failed == []


def test_the_converted_cases_write_out_and_read_back(tmp_path):
    from click.testing import CliRunner

    from sparksync.cli.main import cli

    out = tmp_path / "bfcl.json"
    result = CliRunner().invoke(
        cli, ["switchyard", "convert", "--suite", "bfcl", "--categories", "parallel,irrelevance", "--limit", "6",
              "--out", str(out)]  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "6 cases" in result.stdout
    read = load_cases(out)
    assert read == load_suite("bfcl", ["parallel", "irrelevance"], 6)


def test_a_missing_package_or_category_says_what_to_do(monkeypatch):
    with pytest.raises(CaseFileError, match="no category 'live'"):
        load_suite("bfcl", ["simple", "live"])

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(suites.importlib.metadata, "version", not_installed)
    with pytest.raises(CaseFileError, match=r"pip install --no-deps bfcl-eval==2026\.3\.23"):
        load_suite("bfcl")
