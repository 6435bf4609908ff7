"""Public tool-calling suites, read from their installed package and converted into Switchyard's case format.

One suite is supported: the Berkeley Function Calling Leaderboard (BFCL),
from the ``bfcl-eval`` package (Apache-2.0). Its wheel ships every test case
and its possible answers as JSON lines under ``bfcl_eval/data``; SparkSync
reads those files where pip put them (through the package's metadata, so
nothing of the package is imported and nothing reaches the network) and
never copies them. ``bfcl-eval`` pins a long list of model SDKs it needs for
its own runner and none of them is needed here, so it is installed without
its dependencies: ``pip install --no-deps bfcl-eval==2026.3.23``.

The conversion gives each case what BFCL's own runner gives a model that
calls functions through an OpenAI-compatible API: the question's messages,
and the functions as OpenAI tools (``math.factorial`` becomes
``math_factorial``, OpenAI's names allowing no dots; BFCL's types as JSON
Schema: ``dict`` an object, ``float`` a number marked as a float, ``tuple`` an
array, ``any`` or no type a string; the description ends with the note that
the function is in Python 3 syntax). Scoring is BFCL's (``bfcl_rules``).

Categories: ``simple`` (one function, one call), ``multiple`` (several
functions, one call), ``parallel`` (one function, several calls),
``parallel_multiple`` (several of each) and ``irrelevance`` (no offered
function fits: the right answer calls none). With ``limit`` the cases are
taken in turn from each category (the first of each, then the second...),
so a short run still covers them all.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import logging
import re
from collections.abc import Iterator, Sequence
from itertools import chain, zip_longest
from typing import Any

from sparksync.switchyard.errors import CaseFileError
from sparksync.switchyard.eval.cases import FORMAT, CaseFile, parse_cases

log = logging.getLogger(__name__)

BFCL_DISTRIBUTION = "bfcl-eval"
BFCL_VERSION = "2026.3.23"  # the version these conversions were checked against
BFCL_INSTALL = f"pip install --no-deps {BFCL_DISTRIBUTION}=={BFCL_VERSION}"
# Our name -> BFCL's file stem (its data files are BFCL_v4_<stem>.json).
BFCL_CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
}
DEFAULT_CATEGORIES = ("simple", "multiple", "parallel")
SUITES = ("bfcl",)

# BFCL's parameter types as JSON Schema types (what its runner sends OpenAI-style models).
_JSON_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
    "tuple": "array", "any": "string",
}  # fmt: skip
PYTHON_NOTE = " Note that the provided function is in Python 3 syntax."
FLOAT_NOTE = " This is a float type value."


def load_suite(name: str, categories: Sequence[str] | None = None, limit: int | None = None) -> CaseFile:
    """The suite's cases as a checked case file (see ``bfcl_cases``)."""
    if name != "bfcl":
        raise CaseFileError(f"there is no suite {name!r}; the suites are {', '.join(SUITES)}")
    return bfcl_cases(categories or DEFAULT_CATEGORIES, limit)


def bfcl_cases(categories: Sequence[str] = DEFAULT_CATEGORIES, limit: int | None = None) -> CaseFile:
    unknown = [c for c in categories if c not in BFCL_CATEGORIES]
    if unknown:
        raise CaseFileError(
            f"BFCL has no category {', '.join(map(repr, unknown))}; the categories are "
            f"{', '.join(BFCL_CATEGORIES)}"
        )
    version = bfcl_version()
    per_category = [_category_cases(category) for category in categories]
    taken = [case for case in chain.from_iterable(zip_longest(*per_category)) if case is not None]
    cases = taken[:limit] if limit is not None else taken
    document = {
        "format": FORMAT,
        "description": f"BFCL ({BFCL_DISTRIBUTION} {version}): {', '.join(categories)}; "
        "scored by BFCL's AST rules",
        "scoring": {"rule": "bfcl"},
        "cases": cases,
    }
    return parse_cases(document, f"the BFCL cases of {BFCL_DISTRIBUTION} {version}")


def bfcl_version() -> str:
    try:
        version = importlib.metadata.version(BFCL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise CaseFileError(
            f"the BFCL suite comes from the {BFCL_DISTRIBUTION} package, which is not installed; "
            f"install it with `{BFCL_INSTALL}` (its data is all SparkSync reads, so none of its "
            "dependencies is needed)"
        ) from None
    if version != BFCL_VERSION:
        log.warning(
            "%s %s is installed; SparkSync's conversion was checked against %s (`%s`)",
            BFCL_DISTRIBUTION, version, BFCL_VERSION, BFCL_INSTALL,
        )  # fmt: skip
    return version


def suite_label(cases: CaseFile) -> str:
    """How reports name a converted suite (its description's first part)."""
    return cases.description.split(":")[0]


def _category_cases(category: str) -> list[dict[str, Any]]:
    stem = BFCL_CATEGORIES[category]
    questions = _json_lines(f"BFCL_v4_{stem}.json")
    answers = {} if category == "irrelevance" else {
        a["id"]: a["ground_truth"] for a in _json_lines(f"possible_answer/BFCL_v4_{stem}.json")
    }  # fmt: skip
    cases = []
    for entry in questions:
        if category != "irrelevance" and entry["id"] not in answers:
            raise CaseFileError(f"BFCL case {entry['id']} has no possible answer in {BFCL_DISTRIBUTION}")
        cases.append(convert_case(category, entry, answers.get(entry["id"])))
    return cases


def convert_case(category: str, entry: dict[str, Any], ground_truth: list[dict] | None) -> dict[str, Any]:
    """One BFCL entry (and its possible answers) as a switchyard case."""
    turns = entry["question"]
    if len(turns) != 1:
        raise CaseFileError(f"BFCL case {entry['id']} has {len(turns)} turns; only single-turn categories convert")
    case: dict[str, Any] = {
        "id": entry["id"],
        "category": category,
        "tags": ["bfcl", category],
        "messages": turns[0],
        "tools": [openai_tool(f) for f in entry["function"]],
    }
    if category == "irrelevance":
        case["expect"] = {"no_call": True}
        return case
    assert ground_truth is not None
    calls = [_expected_call(answer) for answer in ground_truth]
    case["expect"] = {"tool_calls": calls} if category.startswith("parallel") else {"tool_call": calls[0]}
    return case


def openai_tool(function: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function as the OpenAI tool BFCL's runner offers a function-calling model."""
    function = copy.deepcopy(function)
    parameters = function.get("parameters") or {}
    parameters["type"] = "object"
    parameters["properties"] = _json_properties(parameters.get("properties") or {})
    return {
        "type": "function",
        "function": {
            "name": openai_name(function["name"]),
            "description": (function.get("description") or "") + PYTHON_NOTE,
            "parameters": parameters,
        },
    }


def openai_name(name: str) -> str:
    return re.sub(r"\.", "_", name)


def _json_properties(properties: dict[str, Any]) -> dict[str, Any]:
    for prop in properties.values():
        _json_schema(prop, named=True)
    return properties


def _json_schema(prop: dict[str, Any], named: bool) -> None:
    """BFCL's types as JSON Schema's, in place; a named parameter of type float says so in words too."""
    declared = prop.get("type")
    if declared == "float" and named:
        prop["format"] = "float"
        prop["description"] = (prop.get("description") or "") + FLOAT_NOTE
    prop["type"] = _JSON_TYPES.get(declared, "string") if isinstance(declared, str) else "string"
    if isinstance(prop.get("properties"), dict):
        _json_properties(prop["properties"])
    if isinstance(prop.get("items"), dict):
        _json_schema(prop["items"], named=False)


def _expected_call(answer: dict[str, dict[str, list]]) -> dict[str, Any]:
    ((name, one_of),) = answer.items()
    return {"name": openai_name(name), "one_of": one_of}


def _json_lines(relative: str) -> list[dict[str, Any]]:
    path = _data_file(relative)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseFileError(
            f"cannot read {path} from {BFCL_DISTRIBUTION}: {exc.strerror}; reinstall it (`{BFCL_INSTALL}`)"
        ) from None
    return [json.loads(line) for line in _lines(text)]


def _lines(text: str) -> Iterator[str]:
    return (line for line in text.splitlines() if line.strip())


def _data_file(relative: str):
    distribution = importlib.metadata.distribution(BFCL_DISTRIBUTION)
    return distribution.locate_file(f"bfcl_eval/data/{relative}")
