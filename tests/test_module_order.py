"""The order the suite's modules are handed to the xdist workers in (tests/module_order.py)."""

from __future__ import annotations

from dataclasses import dataclass

from module_order import UNKNOWN_MODULE_S, longest_modules_first, module_weights, seconds_by_module


@dataclass
class _Item:
    nodeid: str


def test_modules_go_longest_first_and_keep_their_tests_together_in_order() -> None:
    items = [_Item("tests/a.py::t1"), _Item("tests/b.py::t1"), _Item("tests/a.py::t2"), _Item("tests/new.py::t"),
             _Item("tests/c.py::t1"), _Item("tests/c.py::t2")]
    longest_modules_first(items, {"tests/a.py": 5.0, "tests/b.py": 100.0, "tests/c.py": UNKNOWN_MODULE_S + 1})
    assert [i.nodeid for i in items] == ["tests/b.py::t1", "tests/c.py::t1", "tests/c.py::t2", "tests/new.py::t",
                                         "tests/a.py::t1", "tests/a.py::t2"]


def test_a_durations_report_gives_each_modules_seconds() -> None:
    report = ["============ slowest durations ============",
              "641.27s call     tests/test_soak.py::test_short_soak",
              "7.34s setup    tests/test_minor.py::test_x[300]",
              "40.10s call     tests/test_minor.py::test_x[300]",
              "0.40s teardown tests/test_minor.py::test_x[300]",
              "0.30s call     tests/core/test_tiny.py::test_y",
              "883 passed in 2486.73s"]
    assert seconds_by_module(report) == {"tests/test_soak.py": 641, "tests/test_minor.py": 48}


def test_the_recorded_weights_are_module_paths_as_pytest_names_them() -> None:
    weights = module_weights()
    assert weights and all(m.startswith("tests/") and m.endswith(".py") and s > 0 for m, s in weights.items())
