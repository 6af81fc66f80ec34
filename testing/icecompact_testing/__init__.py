"""The test rig of icecompact: reference reader, generators, soaks and throwaway servers (not installed with the
product; the tests and the benchmarks use it)."""

from __future__ import annotations

import os

#: How many random table shapes the seeded correctness tests (MINOR, MAJOR) draw: ``make test`` keeps the suite
#: within its time limit with the default; ``ICECOMPACT_RANDOM_SHAPES=40 make test`` (or ``make test-wide``) draws
#: more. The seeds are fixed (``first``, ``first + 1``, ...), so a run is reproducible.
RANDOM_SHAPES_DEFAULT = 10


def random_shape_seeds(first: int) -> list[int]:
    count = int(os.environ.get("ICECOMPACT_RANDOM_SHAPES", RANDOM_SHAPES_DEFAULT))
    return list(range(first, first + max(1, count)))
