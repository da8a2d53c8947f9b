"""Constraints declared on config fields (``workbench.constraints``): the classes, the one generic validator in
``Config.validate``, the ``--set`` coercer, and that every stage field declares one (or is allowlisted, with why)."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Literal, Optional

import pytest

from workbench._validation import Config, ErrorCollector, ParamError
from workbench.compose import load_stage_modules
from workbench.stage_listing import describe_stages
from workbench.constraints import (Bool, Interval, OneOf, Options, TupleOf, coerce, constraint_of, declared,
                                   type_name)
from workbench.stages import REGISTRIES
from workbench.train.loop import TrainLoopConfig

UNCONSTRAINED = {
    # (stage kind, method, field): why no declared constraint
    ("partition", "metis", "vertex_weights"): "an (N,) or (N, C) tensor: its shape and values are checked against "
                                              "the graph in MetisPartitioner._check",
    ("partition", "metis", "edge_weights"): "a (num_edges,) tensor: checked against the graph in "
                                            "MetisPartitioner._check",
}
"""Stage fields without a declared constraint. Nested configs and graph specs live in RunConfig (checked by its
_validate against the registries), not in a stage's Config."""


def _stage_configs():
    load_stage_modules()
    out = [(kind, name, cls.Config) for kind, reg in sorted(REGISTRIES.items()) for name, cls in sorted(reg.items())]
    return out + [("train", "loop", TrainLoopConfig)]


def test_every_stage_field_declares_a_constraint_or_is_allowlisted():
    missing, seen = [], set()
    for kind, name, cls in _stage_configs():
        for field in cls.field_names():
            key = (kind, name, field)
            if field in declared(cls):
                assert key not in UNCONSTRAINED, f"{key} declares a constraint: drop it from the allowlist"
            elif key in UNCONSTRAINED:
                seen.add(key)
            else:
                missing.append(key)
    assert not missing, f"fields without a declared constraint (declare one, or allowlist with why): {missing}"
    assert seen == set(UNCONSTRAINED), f"allowlisted fields that no longer exist: {set(UNCONSTRAINED) - seen}"


@pytest.mark.parametrize("constraint,phrase,good,bad", [
    (Interval(1, None, type=int), "an int >= 1", [1, 7], [0, 1.5, True, "3", None]),
    (Interval(0, 1, closed="right"), "a number in (0, 1]", [1, 0.5, 1.0], [0, 1.01, math.nan, "x", False]),
    (Interval(0, 1, closed="left"), "a number in [0, 1)", [0, 0.99], [1, -0.1]),
    (Interval(0, None, closed="neither"), "a number > 0", [1e-9, 3], [0, -1]),
    (Interval(None, 5, closed="neither", type=int), "an int < 5", [4, -10], [5, 4.0]),
    (Interval(type=int), "an int", [0, -3], [0.5, "1"]),
    (Interval(1, None, type=int, unit="bytes"), "an int >= 1 (bytes)", [1], [0]),
    (Interval(0, 2**31, closed="left", type=int), "an int in [0, 2**31)", [0, 2**31 - 1], [2**31, -1]),
    (Options("adam", "sgd"), "one of ['adam', 'sgd']", ["adam"], ["Adam", 1, None]),
    (Bool(), "a bool", [True, False], [1, "true", None]),
    (OneOf(None, "auto", Interval(1, None, type=int)), "None, 'auto' or an int >= 1", [None, "auto", 3],
     ["lots", 0, True]),
    (OneOf(None, Options("g3")), "None or one of ['g3']", [None, "g3"], ["kl"]),
    (TupleOf(OneOf(-1, Interval(1, None, type=int))), "a non-empty tuple, each -1 or an int >= 1",
     [(10, 5), [-1], (1,)], [(), (0,), (-2, 1), "10,5", (1.0,)]),
])
def test_constraints_check_and_describe(constraint, phrase, good, bad):
    assert constraint.describe() == phrase
    assert all(constraint.check(v) for v in good), [v for v in good if not constraint.check(v)]
    assert not any(constraint.check(v) for v in bad), [v for v in bad if constraint.check(v)]
    assert constraint.bad_values() and not any(constraint.check(v) for v in constraint.bad_values())


def test_choices_and_bounds_for_forms():
    registry = {"g3": None}
    live = OneOf(None, Options(registry))
    assert live.choices == [None, "g3"]
    registry["kl"] = None                                      # a registry read each time
    assert live.choices == [None, "g3", "kl"] and live.check("kl")
    assert Interval(0, 1).choices is None and OneOf(None, Interval(0, 1)).choices is None
    assert Bool().choices == [False, True]
    assert (Interval(0, 10, closed="neither", type=int).start, Interval(0, 10, closed="neither", type=int).end) == (1, 9)
    assert (Interval(0, 1, closed="neither").start, Interval(0, 1, closed="neither").end) == (0, 1)


@pytest.mark.parametrize("constraint,text,value", [
    (Interval(1, None, type=int), "8", 8),
    (Interval(1, None, type=int), "eight", "eight"),          # kept: validation refuses it with the phrase
    (Interval(0, 1), "0.5", 0.5),
    (Bool(), "yes", True),
    (Bool(), "off", False),
    (OneOf(None, "auto", Interval(1, None, type=int)), "none", None),
    (OneOf(None, "auto", Interval(1, None, type=int)), "auto", "auto"),
    (OneOf(None, "auto", Interval(1, None, type=int)), "1024", 1024),
    (OneOf(None, Options("g3")), "null", None),
    (Options("none", "epoch-fixed"), "none", "none"),           # "none" is an option here, not None
    (TupleOf(OneOf(-1, Interval(1, None, type=int))), "10,-1", (10, -1)),
    (TupleOf(OneOf(-1, Interval(1, None, type=int))), "10;5", (10, 5)),
    (TupleOf(OneOf(-1, Interval(1, None, type=int))), "a,b", "a,b"),
])
def test_coerce_reads_set_strings(constraint, text, value):
    assert coerce(text, constraint) == value and type(coerce(text, constraint)) is type(value)


@dataclasses.dataclass(kw_only=True)
class Knobs(Config):
    width: Annotated[int, Interval(1, None)] = 2
    """An int: the Interval takes its type from the annotation."""
    rate: Annotated[float, Interval(0, 1)] = 0.5
    """A float."""
    mode: Literal["fast", "slow"] = "fast"
    """A Literal is its own Options."""
    flag: bool = False
    """A bool is its own Bool."""
    sizes: Annotated[tuple[int, ...], TupleOf(Interval(1, None))] = (1, 2)
    """A tuple of ints."""
    cap: Annotated[Optional[int], OneOf(None, Interval(0, None))] = None
    """None or an int."""
    plain: str = "x"
    """No constraint."""

    def _validate(self, errs: ErrorCollector) -> None:
        errs.check(self.cap is None or self.cap <= self.width, "cap", f"at most width={self.width}", self.cap)


def test_declared_reads_annotations():
    found = declared(Knobs)
    assert sorted(found) == ["cap", "flag", "mode", "rate", "sizes", "width"]
    assert found["width"].describe() == "an int >= 1" and found["rate"].describe() == "a number in [0, 1]"
    assert found["mode"].describe() == "one of ['fast', 'slow']" and found["flag"].describe() == "a bool"
    assert found["sizes"].describe() == "a non-empty tuple, each an int >= 1"
    assert constraint_of(Optional[bool]).describe() == "None or a bool" and constraint_of(int) is None
    assert [type_name(t) for t in (int, Optional[int], tuple[int, ...], Literal["a"])] == [
        "int", "int or None", "tuple of int", "str"]


def test_a_subclass_changing_a_default_keeps_the_constraint():
    @dataclasses.dataclass(kw_only=True)
    class Wider(Knobs):
        width: int = 8
        """Same type, new default: the parent's constraint holds."""
        rate: float = 0.25
        """Same type, new default."""

    assert declared(Wider)["width"].describe() == "an int >= 1"
    with pytest.raises(ParamError, match=r"The 'width' parameter of .*Wider must be an int >= 1. Got 0 instead."):
        Wider(width=0)


def test_one_validator_reports_every_field_then_the_cross_field_checks():
    with pytest.raises(ParamError) as info:
        Knobs(width=0, rate=2, mode="fastest", flag="yes", sizes=(0,), cap=-1)
    assert info.value.errors == [
        "The 'width' parameter of Knobs must be an int >= 1. Got 0 instead.",
        "The 'rate' parameter of Knobs must be a number in [0, 1]. Got 2 instead.",
        "The 'mode' parameter of Knobs must be one of ['fast', 'slow'] (did you mean 'fast'?). Got 'fastest' instead.",
        "The 'flag' parameter of Knobs must be a bool. Got 'yes' instead.",
        "The 'sizes' parameter of Knobs must be a non-empty tuple, each an int >= 1. Got (0,) instead.",
        "The 'cap' parameter of Knobs must be None or an int >= 0. Got -1 instead."]
    with pytest.raises(ParamError, match=r"^The 'cap' parameter of Knobs must be at most width=2. Got 3 instead.$"):
        Knobs(cap=3)                                            # every field holds: the cross-field check runs


def test_accepted_values_are_kept_in_their_canonical_form():
    k = Knobs(rate=1, sizes=[3, 4])
    assert type(k.rate) is float and k.sizes == (3, 4)


def test_with_strings_coerces_by_the_constraint_and_refuses_with_its_phrase():
    k = Knobs().with_strings({"width": "5", "flag": "true", "sizes": "4,5", "cap": "none", "mode": "slow"})
    assert (k.width, k.flag, k.sizes, k.cap, k.mode) == (5, True, (4, 5), None, "slow")
    with pytest.raises(ParamError, match=r"^The 'width' parameter of Knobs must be an int >= 1. Got 'five' instead.$"):
        Knobs().with_strings({"width": "five"})


def test_stages_listing_shows_each_fields_type_and_constraint():
    text = describe_stages()
    assert "      fanouts (tuple of int; a non-empty tuple, each -1 or an int >= 1): Neighbours per layer" in text
    assert "      epochs (int; an int >= 1): Training epochs" in text
    assert "      refine (str or None; None or one of ['g3']): " in text
    assert "      replace (bool): " in text
