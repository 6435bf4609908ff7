"""The tool-use case file (format ``switchyard-cases/2``), as pydantic models.

A file holds a library of tools, the default scoring rule, and the cases.
Each case has the messages to send, the tools to offer (names from the
library, or full definitions), and what is expected: a tool call (name and
arguments), several calls in any order, no call at all, or an answer
matching a pattern. Format 2 adds the several calls, "no call", a case's
category and BFCL's scoring rule (``suites.bfcl`` converts that suite into
this format); a format-1 file reads as it always did. See docs/switchyard.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sparksync.switchyard.errors import CaseFileError

FORMAT = "switchyard-cases/2"
FORMATS = ("switchyard-cases/1", FORMAT)  # 1 is 2 without its additions


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionDef(_Strict):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolDef(_Strict):
    type: Literal["function"] = "function"
    function: FunctionDef


class ExpectedCall(_Strict):
    name: str
    # Rules exact and partial: the arguments that matter, each with its one right value.
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Rule bfcl: each argument's acceptable values, as BFCL's possible answers list them (an
    # empty string among them: the argument may be left out; nested objects likewise).
    one_of: dict[str, list[Any]] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> ExpectedCall:
        if self.one_of is not None and self.arguments:
            raise ValueError(f"expected call {self.name!r}: give arguments or one_of, not both")
        return self


class Expect(_Strict):
    tool_call: ExpectedCall | None = None
    # Several calls, all expected, in any order (BFCL's parallel categories).
    tool_calls: list[ExpectedCall] | None = Field(None, min_length=1)
    # A regular expression the text answer must match (searched, not anchored); no tool call may come.
    answer_pattern: str | None = None
    # Any answer without a tool call is right (the offered tools cannot do what was asked).
    no_call: bool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> Expect:
        given = [self.tool_call is not None, self.tool_calls is not None, self.answer_pattern is not None,
                 self.no_call]  # fmt: skip
        if sum(given) != 1:
            raise ValueError("expect needs exactly one of tool_call, tool_calls, answer_pattern or no_call")
        if self.answer_pattern is not None:
            re.compile(self.answer_pattern)
        return self

    def calls(self) -> list[ExpectedCall]:
        """The expected calls (none for a text answer or no call)."""
        return [self.tool_call] if self.tool_call is not None else list(self.tool_calls or [])


class Scoring(_Strict):
    # exact: 1 when the name and every expected argument match, else 0.
    # partial: 0 for a wrong name, else 0.5 plus 0.5 x the share of expected arguments that match.
    # bfcl: the Berkeley Function Calling Leaderboard's AST rules (eval/bfcl_rules.py), 1 or 0.
    rule: Literal["exact", "partial", "bfcl"] = "exact"
    case_sensitive: bool = False  # for string arguments and the answer pattern
    extra_arguments: Literal["ignore", "fail"] = "ignore"
    number_tolerance: float = Field(1e-6, ge=0)  # relative


class Case(_Strict):
    id: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[str | ToolDef] = Field(default_factory=list)
    tool_choice: Any = None
    expect: Expect
    scoring: Scoring | None = None
    max_tokens: int | None = Field(None, ge=1)
    tags: list[str] = Field(default_factory=list)
    # Reports give a score per category (e.g. BFCL's simple, multiple, parallel).
    category: str | None = None


class CaseFile(_Strict):
    format: Literal["switchyard-cases/1", "switchyard-cases/2"]
    description: str = ""
    tools: dict[str, ToolDef] = Field(default_factory=dict)
    scoring: Scoring = Field(default_factory=Scoring)
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> CaseFile:
        ids = [c.id for c in self.cases]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"case ids must be unique; repeated: {', '.join(dupes)}")
        for case in self.cases:
            for tool in case.tools:
                if isinstance(tool, str) and tool not in self.tools:
                    raise ValueError(
                        f"case {case.id!r} offers tool {tool!r}, which the file's tools do not define"
                    )
            bfcl = self.scoring_of(case).rule == "bfcl"
            for call in case.expect.calls():
                if bfcl != (call.one_of is not None):
                    raise ValueError(
                        f"case {case.id!r}: the bfcl rule takes each call's acceptable values as one_of, "
                        "the exact and partial rules take arguments"
                    )
        return self

    def tools_of(self, case: Case) -> list[ToolDef]:
        return [self.tools[t] if isinstance(t, str) else t for t in case.tools]

    def scoring_of(self, case: Case) -> Scoring:
        return case.scoring or self.scoring

    def categories(self) -> list[str]:
        """The cases' categories, in the order they first appear."""
        return list(dict.fromkeys(c.category for c in self.cases if c.category))


def load_cases(path: Path) -> CaseFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseFileError(
            f"cannot read the case file {path}: {exc.strerror}; check the --cases path"
        ) from None
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path} is not valid JSON: {exc}") from None
    return parse_cases(data, str(path))


def parse_cases(data: object, source: str) -> CaseFile:
    """A case file's content, checked; CaseFileError lists every problem."""
    try:
        return CaseFile.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CaseFileError(
            f"{source} is not a valid {FORMAT} case file:\n{problems}\nSee docs/switchyard.md for the format."
        ) from None


def example_cases_path() -> Path:
    """The example set shipped with SparkSync."""
    return Path(__file__).resolve().parent.parent / "examples" / "tool_use_cases.json"
