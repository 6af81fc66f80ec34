"""The read-cost model: what a full scan of a partition costs now, over a freshly compacted copy, and after a MINOR
or a MAJOR, estimated from metadata alone (pure; no I/O).

A scan opens every live data file and, for each, every delete file that applies to it (Iceberg spec, "Scan
Planning": a position delete file is read and filtered by file path for every data file it may apply to, a deletion
vector is one blob read, equality deletes are loaded as a set and every row of the data files they apply to is
probed against it). A data file whose rows are filtered by position (a position delete or a DV applies) is also
counted once on its own: the reader builds its set of deleted positions and filters every batch of it. Measured,
that costs several times a file open, whatever the number of delete files behind it (``bench/results/read_cost.txt``:
the fit charges it and next to nothing per delete file read), and it is what a MINOR leaves on every data file
whose deletes it converted. Its cost is modelled as linear in these counts (:class:`ReadShape`) with one coefficient each
(:class:`ReadCostCoefficients`, milliseconds per unit). Defaults come from ``bench/read_cost.py`` on Spark 4.1
with Iceberg 1.12 in local mode; users re-measure them on their own cluster with the same script and set the
``compaction.read-cost.*`` table properties it prints.

A *compacted copy* of a partition holds its live rows in files of the target size and no delete file. The
*overhead* is the estimated cost over the compacted copy's: the planner keeps every partition under
``compaction.read-cost.max-overhead`` at the least bytes rewritten (compaction.core.planner).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

__all__ = [
    "MIB",
    "ReadCostCoefficients",
    "ReadShape",
    "ReadCostEstimate",
    "compacted_shape",
    "rewritten_shape",
]

MIB = 1024 * 1024


@dataclass(frozen=True)
class ReadShape:
    """What a full scan of a partition reads, counted from metadata."""

    data_files: int = 0
    data_mib: float = 0.0
    #: position delete files read: each counted once per data file it applies to
    position_delete_reads: int = 0
    #: rows of those position delete files, counted per data file they are read for
    position_delete_rows: int = 0
    #: data files that a position delete file or a DV applies to (each filtered by its deleted positions)
    position_filtered_files: int = 0
    #: deletion vectors read (one per data file that has one)
    dv_reads: int = 0
    #: equality delete files that apply to the partition (loaded once per scan)
    equality_delete_files: int = 0
    #: their rows
    equality_delete_rows: int = 0
    #: MiB of the data files equality deletes apply to (every row of them is probed)
    equality_probe_mib: float = 0.0

    def __add__(self, other: ReadShape) -> ReadShape:
        return ReadShape(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def as_features(self) -> tuple[float, ...]:
        """The counts in :data:`FEATURES` order (what the calibration fits against)."""
        return tuple(float(getattr(self, name)) for name in FEATURES)


#: ReadShape field -> the coefficient's name (also its table-property suffix, compaction.core.policy).
FEATURES = tuple(f.name for f in fields(ReadShape))


@dataclass(frozen=True)
class ReadCostCoefficients:
    """Milliseconds per unit of each :class:`ReadShape` count. Defaults: ``bench/results/read_cost.txt``."""

    # bench/read_cost.py, 2026-12-06 (Spark 4.1, Iceberg 1.12, local[2], local disk; 14 tables at s and m, v2 and
    # v3, a streaming one among them): on object stores a file open costs more, so re-measure there.
    data_file_ms: float = 1.88
    data_mib_ms: float = 1.82
    position_delete_read_ms: float = 0.34
    position_delete_row_ms: float = 0.0008
    position_filtered_file_ms: float = 1.6
    dv_read_ms: float = 0.0
    equality_delete_file_ms: float = 7.0
    equality_delete_row_ms: float = 0.0
    equality_probe_mib_ms: float = 0.18

    def cost_ms(self, shape: ReadShape) -> float:
        return (self.data_file_ms * shape.data_files + self.data_mib_ms * shape.data_mib
                + self.position_delete_read_ms * shape.position_delete_reads
                + self.position_delete_row_ms * shape.position_delete_rows
                + self.position_filtered_file_ms * shape.position_filtered_files
                + self.dv_read_ms * shape.dv_reads
                + self.equality_delete_file_ms * shape.equality_delete_files
                + self.equality_delete_row_ms * shape.equality_delete_rows
                + self.equality_probe_mib_ms * shape.equality_probe_mib)

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    @classmethod
    def from_tuple(cls, values: tuple[float, ...]) -> ReadCostCoefficients:
        names = [f.name for f in fields(cls)]
        if len(values) != len(names):
            raise ValueError(f"expected {len(names)} coefficients, got {len(values)}")
        return cls(**dict(zip(names, (float(v) for v in values))))

    def compacted_ms(self, compacted: ReadShape) -> float:
        """The cost of a compacted copy, kept above 0 so that an overhead over it is defined: a partition whose rows
        are all deleted compacts to nothing, and its overhead is then taken over one file's open."""
        return max(self.cost_ms(compacted), self.data_file_ms, 1e-6)


def _live_bytes(data_bytes: int, deleted_fraction: float) -> float:
    return data_bytes * max(0.0, 1.0 - min(1.0, deleted_fraction))


def compacted_shape(data_bytes: int, data_records: int, deleted_fraction: float, target_file_size: int) -> ReadShape:
    """The partition's live rows in files of ``target_file_size`` and no delete file."""
    live = _live_bytes(data_bytes, deleted_fraction)
    if data_records <= 0 or live <= 0:
        return ReadShape()
    return ReadShape(data_files=max(1, math.ceil(live / target_file_size)), data_mib=live / MIB)


def rewritten_shape(current: ReadShape, *, rewritten_files: int, rewritten_bytes: int, deleted_fraction: float,
                    kept_with_deletes: int, kept_delete_rows: int, target_file_size: int,
                    deletion_vectors: bool) -> ReadShape:
    """The partition after a rewrite of ``rewritten_files`` data files (``rewritten_bytes``; their deletes applied,
    written at ``target_file_size``) whose remaining deletes are converted into one position delete / DV per data
    file (what a MINOR, and the conversion of a selective MAJOR, leave: ``kept_with_deletes`` files, with
    ``kept_delete_rows`` rows deleted; a DV on v3, a file-scoped position delete on v2). Equality deletes are gone."""
    live = _live_bytes(rewritten_bytes, deleted_fraction)
    new_files = max(1, math.ceil(live / target_file_size)) if rewritten_files and live > 0 else 0
    return ReadShape(
        data_files=current.data_files - rewritten_files + new_files,
        data_mib=current.data_mib - rewritten_bytes / MIB + live / MIB,
        position_delete_reads=0 if deletion_vectors else kept_with_deletes,
        position_delete_rows=0 if deletion_vectors else kept_delete_rows,
        position_filtered_files=kept_with_deletes,
        dv_reads=kept_with_deletes if deletion_vectors else 0,
    )


@dataclass(frozen=True)
class ReadCostEstimate:
    """A partition's scan now, as a compacted copy, and after each kind of compaction (None: that kind has nothing
    to do), with the coefficients that price them."""

    coefficients: ReadCostCoefficients
    now: ReadShape
    compacted: ReadShape
    after_minor: ReadShape | None
    after_major: ReadShape | None  # a selective MAJOR
    after_full: ReadShape | None  # a full MAJOR

    def ms(self, shape: ReadShape | None) -> float | None:
        return None if shape is None else self.coefficients.cost_ms(shape)

    @property
    def now_ms(self) -> float:
        return self.coefficients.cost_ms(self.now)

    @property
    def compacted_ms(self) -> float:
        return self.coefficients.compacted_ms(self.compacted)

    def overhead(self, ms: float | None = None) -> float:
        """``ms`` (default: now) over the compacted copy's cost."""
        return (self.now_ms if ms is None else ms) / self.compacted_ms

    def priced(self, coefficients: ReadCostCoefficients) -> ReadCostEstimate:
        return replace(self, coefficients=coefficients)
