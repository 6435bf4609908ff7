"""BFCL's scoring rules: the Berkeley Function Calling Leaderboard's AST checks, 1 or 0 per case.

BFCL publishes, with each case, the acceptable values of every argument (its
"possible answers"); an empty string among them means the argument may be
left out. A call is right when:

- it names the expected function;
- every parameter the function requires is given, and no argument is given
  that the function does not have or that the possible answers do not list;
- each value has the parameter's type: integer (a bool is not one), number
  (an integer counts), string, boolean, array (with the items' type, one
  level deep), object; where the acceptable values themselves are of another
  type (BFCL writes variables' names as text), a value of their type passes
  too and is then compared as it is;
- each value is among the acceptable ones: strings compared after dropping
  spaces and ``,./-_*^``, case-blind, with ' read as "; arrays element by
  element the same way, in order; objects key by key (a key missing from the
  answer must have "" among its values); arrays of objects object by object;
  anything else by equality;
- a parameter left out has "" among its acceptable values.

By category: ``simple`` and ``multiple`` need exactly one call, checked
against the expected one; ``parallel`` and ``parallel_multiple`` need as many
calls as expected, matched in any order; ``irrelevance`` is right when no
call decodes (a text answer, or a call whose arguments are not a JSON object).

The tools were renamed for OpenAI's name pattern (``math.factorial`` is
offered as ``math_factorial``) and their BFCL types written as JSON Schema
(``dict`` as object, ``float`` as number, ``tuple`` as array, ``any`` as
string) when the suite was converted (``suites.bfcl``); these checks read
the converted schema, which carries the same information.
"""

from __future__ import annotations

import re
from typing import Any, cast

from sparksync.switchyard.answer import Answer
from sparksync.switchyard.eval.cases import Case, ExpectedCall

_DROPPED = re.compile(r"[ \,\.\/\-\_\*\^]")
_TYPES: dict[str, type] = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "array": list,
    "object": dict,
}
OPTIONAL = ""  # among an argument's acceptable values: it may be left out


class Wrong(Exception):
    """Why a call, or the answer, is not right."""


Calls = list[tuple[str, Any]]  # (name, decoded arguments) of each call, in order


def check(case: Case, answer: Answer, schemas: dict[str, dict]) -> list[str]:
    """Nothing when the answer is right, else why not (one reason)."""
    calls = _decoded(answer)
    try:
        if case.expect.no_call:
            if calls and all(isinstance(arguments, dict) for _, arguments in calls):
                raise Wrong(f"a call to {calls[0][0]!r} came, but none of the offered tools fits")
            return []
        if calls is None:
            raise Wrong("no call could be read (a text answer, or arguments that are not JSON)")
        expected = case.expect.calls()
        if len(calls) != len(expected):
            raise Wrong(f"expected {len(expected)} call(s), got {len(calls)}")
        if case.expect.tool_calls is not None:
            _match_any_order(expected, calls, schemas)
        else:
            _check_call(expected[0], calls[0], schemas)
    except Wrong as exc:
        return [str(exc)]
    return []


def _decoded(answer: Answer) -> Calls | None:
    """The calls with their arguments as JSON; None when there is none, or one does not decode."""
    if not answer.tool_calls:
        return None
    try:
        return [(c.name, c.parsed_arguments()) for c in answer.tool_calls]
    except ValueError:
        return None


def _match_any_order(expected: list[ExpectedCall], calls: Calls, schemas: dict[str, dict]) -> None:
    # Each expected call takes the first unmatched call that fits it, as BFCL does.
    taken: set[int] = set()
    for want in expected:
        reasons = []
        for i, call in enumerate(calls):
            if i in taken:
                continue
            try:
                _check_call(want, call, schemas)
            except Wrong as exc:
                reasons.append(f"call {i}: {exc}")
                continue
            taken.add(i)
            break
        else:
            raise Wrong(f"no call matches the expected {want.name!r} ({'; '.join(reasons)})")


def _check_call(want: ExpectedCall, call: tuple[str, Any], schemas: dict[str, dict]) -> None:
    name, arguments = call
    if name != want.name:
        raise Wrong(f"expected a call to {want.name!r}, got {name!r}")
    if not isinstance(arguments, dict):
        raise Wrong("the arguments are not a JSON object")
    schema = schemas.get(want.name) or {}
    properties = schema.get("properties") or {}
    possible = want.one_of or {}
    for required in schema.get("required") or []:
        if required not in arguments:
            raise Wrong(f"the required argument {required!r} is missing")
    for key, value in arguments.items():
        if key not in properties or key not in possible:
            raise Wrong(f"unexpected argument {key!r}")
        _check_value(key, value, properties[key], possible[key])
    for key, values in possible.items():
        if key not in arguments and OPTIONAL not in values:
            raise Wrong(f"the argument {key!r} is missing")


def _check_value(key: str, value: Any, prop: dict, acceptable: list[Any]) -> None:
    declared = prop.get("type")
    expected = _TYPES.get(declared) if isinstance(declared, str) else None
    items: dict = prop["items"] if isinstance(prop.get("items"), dict) else {}
    item_type = items.get("type")
    nested = _TYPES.get(item_type) if expected is list and isinstance(item_type, str) else None
    if expected is float and type(value) is int:
        value = float(value)  # an integer is a number
    variable = False
    if expected is not None:
        typed, variable = _typed(value, acceptable, expected, nested)
        if not typed:
            raise Wrong(f"argument {key!r}: {value!r} is not of type {declared}")
    if not variable:
        if expected is dict:
            return _check_object(key, value, acceptable)
        if expected is list and nested is dict:
            return _check_objects(key, value, acceptable)
        if expected is str:
            if _standard(value) not in [_standard(a) for a in acceptable if isinstance(a, str)]:
                raise Wrong(f"argument {key!r}: {value!r} is not among {acceptable!r}")
            return None
        if expected is list:
            if _standard_list(value) not in [_standard_list(a) for a in acceptable if isinstance(a, list)]:
                raise Wrong(f"argument {key!r}: {value!r} is not among {acceptable!r}")
            return None
    if value not in acceptable:
        raise Wrong(f"argument {key!r}: {value!r} is not among {acceptable!r}")
    return None


def _typed(value: Any, acceptable: list[Any], expected: type, nested: type | None) -> tuple[bool, bool]:
    """(whether the value's type passes, whether it stands for a variable).

    The type must be the parameter's exactly (True is not an integer); an
    array's items are checked one level deep against an acceptable array.
    Where the acceptable values are of another type than the parameter's,
    BFCL takes them for variables' names: a value of either type passes,
    and its value is then compared plainly.
    """
    answer_type = next((type(a) for a in acceptable if a != OPTIONAL), None)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable
        items = cast(list, value)
        for candidate in acceptable:
            if not isinstance(candidate, list) or all(_typed(v, candidate, nested, None)[0] for v in items):
                return True, variable
        return False, variable
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, variable


def _check_object(key: str, value: dict, acceptable: list[Any]) -> None:
    for candidate in acceptable:
        if isinstance(candidate, dict) and _object_fits(value, candidate):
            return
    raise Wrong(f"argument {key!r}: {value!r} matches none of {acceptable!r}")


def _object_fits(value: dict, candidate: dict) -> bool:
    """Each key of the answer's object is acceptable, and each key it lacks may be left out."""
    for k, v in value.items():
        if k not in candidate:
            return False
        options = [_standard(o) if isinstance(o, str) else o for o in candidate[k]]
        if (_standard(v) if isinstance(v, str) else v) not in options:
            return False
    return all(k in value or OPTIONAL in options for k, options in candidate.items())


def _check_objects(key: str, value: list, acceptable: list[Any]) -> None:
    # Object by object, in order, against one of the acceptable arrays of objects.
    for candidate in acceptable:
        if not isinstance(candidate, (list, str)) or len(candidate) != len(value):
            continue
        if all(isinstance(c, dict) and isinstance(v, dict) and _object_fits(v, c) for v, c in zip(value, candidate)):
            return
    raise Wrong(f"argument {key!r}: {value!r} matches none of {acceptable!r}")


def _standard(text: str) -> str:
    return _DROPPED.sub("", text).lower().replace("'", '"')


def _standard_list(values: list) -> list:
    return [_standard(v) if isinstance(v, str) else v for v in values]
