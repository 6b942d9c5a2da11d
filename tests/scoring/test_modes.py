"""The metric-mode registry is what the modules of ``anchorage.scoring.modes`` declare as ``MODE``, and every declared
mode defines the whole contract (:class:`anchorage.scoring.modes.MetricMode`)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from anchorage.registry import by_name
from anchorage.scoring import modes
from anchorage.scoring.modes import MODES, MetricMode, get_mode

CONTRACT = [name for name, value in vars(MetricMode).items() if callable(value) and not name.startswith("_")]


def test_the_modes_are_what_the_modules_declare() -> None:
    names = sorted(m.name for m in pkgutil.iter_modules(modes.__path__))
    declared = [importlib.import_module(f"{modes.__name__}.{name}").MODE for name in names]
    assert list(MODES.values()) == declared             # in the order of the module names, one per module
    assert list(MODES) == [mode.name for mode in declared] and len(MODES) >= 3


@pytest.mark.parametrize("name", list(MODES))
def test_each_mode_defines_the_whole_contract(name: str) -> None:
    mode = MODES[name]
    assert len(CONTRACT) == 9
    undefined = [method for method in CONTRACT if getattr(type(mode), method) is getattr(MetricMode, method)]
    assert undefined == []
    assert mode.name == name and mode.formula and isinstance(mode.needs_baseline, bool)


def test_an_unknown_mode_is_refused_with_the_known_ones() -> None:
    assert get_mode("constant_endpoint") is MODES["constant_endpoint"]
    with pytest.raises(ValueError, match="unknown normalization_mode 'nope'; known: constant_endpoint, legacy_"):
        get_mode("nope")


def test_two_modes_of_one_name_are_an_error() -> None:
    legacy = MODES["legacy_target_distance_to_outstanding"]
    with pytest.raises(ValueError, match="metric mode 'legacy_target_distance_to_outstanding' is declared twice"):
        by_name([legacy, type(legacy)()], "metric mode")
