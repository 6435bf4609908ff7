"""The tool-use case file (format ``switchyard-cases/1``), as pydantic models.

A file holds a library of tools, the default scoring rule, and the cases.
Each case has the messages to send, the tools to offer (names from the
library, or full definitions), and what is expected: a tool call (name and
arguments) or an answer matching a pattern. See docs/switchyard.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sparksync.switchyard.errors import CaseFileError

FORMAT = "switchyard-cases/1"


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
    arguments: dict[str, Any] = Field(default_factory=dict)


class Expect(_Strict):
    tool_call: ExpectedCall | None = None
    # A regular expression the text answer must match (searched, not anchored); no tool call may come.
    answer_pattern: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Expect:
        if (self.tool_call is None) == (self.answer_pattern is None):
            raise ValueError("expect needs exactly one of tool_call or answer_pattern")
        if self.answer_pattern is not None:
            re.compile(self.answer_pattern)
        return self


class Scoring(_Strict):
    # exact: 1 when the name and every expected argument match, else 0.
    # partial: 0 for a wrong name, else 0.5 plus 0.5 x the share of expected arguments that match.
    rule: Literal["exact", "partial"] = "exact"
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


class CaseFile(_Strict):
    format: Literal["switchyard-cases/1"]
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
        return self

    def tools_of(self, case: Case) -> list[ToolDef]:
        return [self.tools[t] if isinstance(t, str) else t for t in case.tools]

    def scoring_of(self, case: Case) -> Scoring:
        return case.scoring or self.scoring


def load_cases(path: Path) -> CaseFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseFileError(
            f"cannot read the case file {path}: {exc.strerror}; check the --cases path"
        ) from None
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path} is not valid JSON: {exc}") from None
    try:
        return CaseFile.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CaseFileError(
            f"{path} is not a valid {FORMAT} case file:\n{problems}\nSee docs/switchyard.md for the format."
        ) from None


def example_cases_path() -> Path:
    """The example set shipped with SparkSync."""
    return Path(__file__).resolve().parent.parent / "examples" / "tool_use_cases.json"
