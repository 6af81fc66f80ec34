"""The order in which pytest-xdist hands out the suite's modules: the longest first.

``make test`` runs the suite on two workers with ``--dist loadscope --no-loadscope-reorder``: each module stays on
one worker (its module fixtures are built once) and the workers take modules in collection order as they run
dry. Handed out longest first (the classic longest-processing-time rule), the modules of a few seconds fill the
end and both workers finish within a short time of each other; in file order, or xdist's own order (by number of
tests, which puts the 10-minute soak with its single test last), one worker ran the soak alone for minutes at the
end.

The weights are the seconds each module took in a full run (``tests/module_seconds.json``; a module not listed,
e.g. a new one, counts as :data:`UNKNOWN_MODULE_S`). They only order the work: a stale figure costs some balance,
never a test. Refresh them from a run's ``--durations=0`` report:

    .venv/bin/python -m pytest tests -q -n 2 --dist loadscope --no-loadscope-reorder --durations=0 > run.log
    .venv/bin/python tests/module_order.py run.log
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

import pytest

WEIGHTS_FILE = Path(__file__).with_name("module_seconds.json")
#: A module with no recorded figure: about a typical Spark test module.
UNKNOWN_MODULE_S = 20.0
#: Modules shorter than this are left out of the file (they all fit anywhere).
RECORDED_MIN_S = 1.0
_DURATION_LINE = re.compile(r"\s*(?P<seconds>[\d.]+)s (?:call|setup|teardown)\s+(?P<module>[^:\s]+)::")


def module_weights(path: Path = WEIGHTS_FILE) -> dict[str, float]:
    if not path.exists():
        return {}
    return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}


def longest_modules_first(items: list[pytest.Item], weights: dict[str, float]) -> None:
    """Sort ``items`` in place: modules by descending weight, each module's tests together and in their own order."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], index)

    def key(item: pytest.Item) -> tuple[float, int]:
        module = item.nodeid.split("::", 1)[0]
        return -weights.get(module, UNKNOWN_MODULE_S), first_seen[module]

    items.sort(key=key)


def seconds_by_module(report_lines: Sequence[str]) -> dict[str, int]:
    """Each module's setup + call + teardown seconds from a pytest ``--durations=0`` report."""
    seconds: Counter[str] = Counter()
    for line in report_lines:
        match = _DURATION_LINE.match(line)
        if match:
            seconds[match["module"]] += float(match["seconds"])
    return {module: round(s) for module, s in seconds.most_common() if s >= RECORDED_MIN_S}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tests/module_order.py PYTEST_DURATIONS_REPORT", file=sys.stderr)
        return 2
    measured = seconds_by_module(Path(argv[0]).read_text().splitlines())
    if not measured:
        print(f"no '--durations=0' lines in {argv[0]}: nothing written", file=sys.stderr)
        return 1
    WEIGHTS_FILE.write_text(json.dumps(measured, indent=1) + "\n")
    print(f"{len(measured)} modules, {sum(measured.values())} s in all, written to {WEIGHTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
