"""The one error template, config validation and --set coercion."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pytest

from workbench._validation import (Config, ErrorCollector, ParamError, check_choice, check_float, check_int,
                                   parse_settings)


@dataclasses.dataclass(kw_only=True)
class _Demo(Config):
    num_parts: int = 2
    """How many parts."""
    lr: float = 0.01
    """Learning rate."""
    method: str = "metis"
    """Partitioner."""
    pin: bool = False
    """Pin the input."""
    widths: tuple[int, ...] = (16, 16)
    """Hidden widths."""
    cap: Optional[int] = None
    """An optional cap."""

    def _validate(self, errs: ErrorCollector) -> None:
        errs.check(self.num_parts >= 1, "num_parts", "an int >= 1", self.num_parts)
        errs.check(self.lr > 0, "lr", "a positive float", self.lr)


def test_template_names_parameter_owner_and_value():
    with pytest.raises(ParamError) as info:
        check_int(0, "num_parts", "METIS", low=1, high=10)
    assert str(info.value) == "The 'num_parts' parameter of METIS must be an int in [1, 10]. Got 0 instead."


def test_check_helpers_accept_good_values():
    assert check_int(3, "k", "X", 1) == 3
    assert check_float(0.5, "p", "X", 0, 1) == 0.5
    assert check_choice("a", "c", "X", ["a", "b"]) == "a"
    for bad in (True, 1.5, "3"):
        with pytest.raises(ParamError):
            check_int(bad, "k", "X")
    with pytest.raises(ParamError):
        check_float(float("nan"), "p", "X")


def test_choice_error_lists_choices_and_suggests():
    with pytest.raises(ParamError, match=r"one of \['metis', 'random'\] \(did you mean 'metis'\?\)"):
        check_choice("metsi", "method", "partition", ["metis", "random"])


def test_config_reports_all_errors_at_once():
    with pytest.raises(ParamError) as info:
        _Demo(num_parts=0, lr=-1.0)
    assert len(info.value.errors) == 2
    assert "'num_parts'" in str(info.value) and "'lr'" in str(info.value)


def test_with_strings_coerces_types():
    cfg = _Demo().with_strings({"num_parts": "4", "lr": "0.1", "pin": "yes", "widths": "8,4", "cap": "none"})
    assert (cfg.num_parts, cfg.lr, cfg.pin, cfg.widths, cfg.cap) == (4, 0.1, True, (8, 4), None)
    assert _Demo().with_strings({"cap": "7"}).cap == 7


def test_with_strings_unknown_name_lists_valid_options():
    with pytest.raises(ParamError) as info:
        _Demo().with_strings({"num_prts": "4"})
    msg = str(info.value)
    assert "'num_prts'" in msg and "did you mean 'num_parts'" in msg and "Valid options: num_parts, lr" in msg


def test_with_strings_bad_value_and_validation():
    with pytest.raises(ParamError, match="'num_parts'"):
        _Demo().with_strings({"num_parts": "many"})
    with pytest.raises(ParamError, match="'lr'"):
        _Demo().with_strings({"lr": "-2"})


def test_field_docs_and_repr():
    docs = _Demo.field_docs()
    assert docs["num_parts"] == "How many parts." and docs["lr"] == "Learning rate."
    html = _Demo()._repr_html_()
    assert "num_parts" in html and "Learning rate." in html
    assert _Demo().to_dict()["widths"] == [16, 16]


def test_parse_settings():
    assert parse_settings(["a=1", "b = x"]) == {"a": "1", "b": "x"}
    with pytest.raises(ParamError, match="NAME=VALUE"):
        parse_settings(["novalue"])
