"""Every wire model survives a JSON round trip (property test)."""

from __future__ import annotations

import inspect
from types import UnionType
from typing import Annotated, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sparksync_agent import protocol

WIRE_MODELS = [
    obj
    for _, obj in inspect.getmembers(protocol, inspect.isclass)
    if issubclass(obj, protocol.WireModel) and obj is not protocol.WireModel
]

# JSON carries neither NaN nor infinities, and the models refuse them.
st.register_type_strategy(float, st.floats(allow_nan=False, allow_infinity=False, width=64))


def _fields_strategy(model: type[BaseModel]) -> st.SearchStrategy:
    # Draw every field from its annotation, defaults included, so optional and
    # nested parts are exercised too (hypothesis cannot see pydantic's factories).
    fields = {name: _field_strategy(f.annotation, f.metadata) for name, f in model.model_fields.items()}
    return st.fixed_dictionaries(fields).flatmap(lambda values: st.just(_build(model, values)))


def _field_strategy(annotation, metadata: list) -> st.SearchStrategy:
    # A nested model directly in a field goes through this strategy too, so one
    # whose validators refuse a draw (a probe without its port) is skipped, not raised.
    if _is_wire_model(annotation):
        return _model_strategy(annotation)
    if get_origin(annotation) is list and _is_wire_model(get_args(annotation)[0]):
        # So do a list's models: hypothesis would build them from their signature, ignoring
        # the patterns their fields carry (a file path drawn empty).
        return st.lists(_model_strategy(get_args(annotation)[0]), max_size=3)
    pattern = _pattern(metadata)
    if pattern is not None and annotation is str:
        return _matching(pattern)
    if pattern is None and _has_pattern(annotation):
        return _type_strategy(annotation)
    # Field bounds (ge=1, gt=0...) travel as annotated-types metadata, which hypothesis honours.
    return st.from_type(Annotated[(annotation, *metadata)] if metadata else annotation)


def _is_wire_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, protocol.WireModel)


def _model_strategy(model: type[BaseModel]) -> st.SearchStrategy:
    return st.deferred(lambda: _fields_strategy(model).filter(lambda x: x is not None))


def _pattern(metadata: list) -> str | None:
    # pydantic keeps Field(pattern=...) in its own metadata, which hypothesis cannot read:
    # without this, a name field draws random text and almost every draw is refused.
    for item in metadata:
        for inner in (item, *getattr(item, "metadata", ())):
            if isinstance(getattr(inner, "pattern", None), str):
                return inner.pattern
    return None


def _matching(pattern: str) -> st.SearchStrategy:
    # pydantic's (Rust) regex has no "$ before a trailing newline", Python's has.
    return st.from_regex(pattern.replace("$", r"\Z"))


def _has_pattern(annotation) -> bool:
    if get_origin(annotation) is Annotated:
        return _pattern(list(get_args(annotation)[1:])) is not None
    return any(_has_pattern(arg) for arg in get_args(annotation))


def _type_strategy(annotation) -> st.SearchStrategy:
    # Optional and list fields whose items carry a pattern (RootPath | None, list[RootPath]).
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        pattern = _pattern(list(args[1:]))
        return _matching(pattern) if pattern is not None and args[0] is str else st.from_type(annotation)
    if origin in (Union, UnionType):
        return st.one_of(*(_type_strategy(arg) for arg in args))
    if origin is list:
        return st.lists(_type_strategy(args[0]), max_size=3)
    return st.from_type(annotation)


def _build(model: type[BaseModel], values: dict):
    try:
        return model(**values)
    except ValueError:
        return None  # outside a field's constraints (e.g. seq < 1): not a wire message


for _model in WIRE_MODELS:
    st.register_type_strategy(_model, _model_strategy(_model))


def test_the_protocol_module_defines_the_models():
    names = {m.__name__ for m in WIRE_MODELS}
    assert {"Sample", "Snapshot", "TelemetryPage", "Hello", "HelloReply", "AgentStatus", "NodeInfo"} <= names


@pytest.mark.parametrize("model", WIRE_MODELS, ids=lambda m: m.__name__)
# Draws that a model's validators refuse are skipped by design (a probe without its port, a
# log source without its pattern), and nested models compound that: RankStart, through
# RankLaunch's probe and tokens source, now and then filters more than hypothesis's health
# check allows. It still round-trips up to 40 valid draws a case, and fails if it finds none.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_json_round_trip(model: type[BaseModel], data):
    instance = data.draw(st.from_type(model))
    again = model.model_validate_json(instance.model_dump_json())
    assert again == instance
    compact = model.model_validate_json(instance.model_dump_json(exclude_none=True))
    assert compact == instance


def test_nan_is_refused():
    with pytest.raises(ValueError):
        protocol.CpuSample(percent=float("nan"), per_core=[], load_avg=(0, 0, 0))


def test_major_version():
    assert protocol.protocol_major("1.7") == 1
    assert protocol.protocol_major(protocol.PROTOCOL_VERSION) >= 1
