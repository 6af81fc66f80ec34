"""Which data files of a rewrite are concatenated at the Parquet row-group level instead of decoded and re-encoded.

A file qualifies when rewriting it cannot change a row:

* no delete file applies to it (Iceberg's scan planning gives its task no delete: the spec's applicability rules for
  position deletes, DVs and equality deletes, with the column bounds Iceberg uses to rule equality deletes out);
* it is on the rewrite's output spec and its columns are exactly the table's current schema (same field ids and
  types), so that the copied rows read the same under the table's schema as in the source file;
* on format v3, its row-lineage columns (``_row_id``, ``_last_updated_sequence_number``) are written in the file for
  every row. The spec gives a row without them the row id ``first_row_id + position`` of its *file*; a new file
  gets a new ``first_row_id``, so copying such rows would change their ids. A file a compaction wrote already
  holds them (Iceberg's rewrite writes both columns), and that is what the large segments of a streaming table
  usually are;
* its row groups average at least ``min_row_group_bytes``: copied row groups keep their size, and a file of many
  small row groups reads slower than the one the decoding rewrite writes.

Qualifying files are packed per Parquet schema (row groups of different physical schemas cannot share a file) into
outputs of at most the target size; an output of a single file would be a copy of that file, so such a file is
left to the decoding rewrite with the rest. Pure: fed what the Spark side read from the plan and the footers.
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class CopyCandidate:
    """One data file of a planned rewrite group, as read from the plan and its Parquet footer."""

    path: str
    size_bytes: int
    row_groups: int
    row_group_bytes: int  # compressed bytes of all its row groups together
    schema_key: str  # the file's exact Parquet schema: only files with equal keys share an output
    has_deletes: bool
    on_output_spec: bool
    matches_current_schema: bool
    #: v3: every row has ``_row_id`` and ``_last_updated_sequence_number`` written in the file. Always true on v2.
    keeps_row_lineage: bool

    @property
    def average_row_group_bytes(self) -> float:
        return self.row_group_bytes / self.row_groups if self.row_groups else 0.0


@dataclass(frozen=True)
class CopyPlan:
    """``outputs``: the paths whose row groups are concatenated into one new file each; ``decoded``: the paths left
    to the decoding rewrite, in the candidates' order; ``reasons``: why each decoded file did not qualify."""

    outputs: tuple[tuple[str, ...], ...]
    decoded: tuple[str, ...]
    reasons: tuple[tuple[str, str], ...]

    @property
    def copied(self) -> tuple[str, ...]:
        return tuple(path for output in self.outputs for path in output)


def why_not_copied(candidate: CopyCandidate, min_row_group_bytes: int) -> str | None:
    """Why ``candidate``'s rows must be decoded, or None when its row groups may be copied."""
    if candidate.has_deletes:
        return "a delete applies to it"
    if not candidate.on_output_spec:
        return "written under another partition spec"
    if not candidate.matches_current_schema:
        return "its columns are not the current schema's"
    if not candidate.keeps_row_lineage:
        return "its rows inherit their row ids from the file (v3 row lineage)"
    if candidate.row_groups == 0 or candidate.average_row_group_bytes < min_row_group_bytes:
        return f"row groups average {candidate.average_row_group_bytes:.0f} bytes < {min_row_group_bytes}"
    return None


def plan_row_group_copies(candidates: list[CopyCandidate], *, target_file_size_bytes: int,
                          min_row_group_bytes: int) -> CopyPlan:
    """Pack the qualifying candidates into outputs of at most ``target_file_size_bytes`` (first fit, largest
    first, per schema key); everything else, and every output that would hold one file, is decoded."""
    reasons: list[tuple[str, str]] = []
    by_schema: dict[str, list[CopyCandidate]] = {}
    for c in candidates:
        reason = why_not_copied(c, min_row_group_bytes)
        if reason is None:
            by_schema.setdefault(c.schema_key, []).append(c)
        else:
            reasons.append((c.path, reason))
    outputs: list[tuple[str, ...]] = []
    for group in by_schema.values():
        bins: list[tuple[int, list[str]]] = []
        for c in sorted(group, key=lambda c: (-c.size_bytes, c.path)):
            for i, (used, paths) in enumerate(bins):
                if used + c.size_bytes <= target_file_size_bytes:
                    bins[i] = (used + c.size_bytes, paths + [c.path])
                    break
            else:
                bins.append((c.size_bytes, [c.path]))
        for _, paths in bins:
            if len(paths) > 1:
                outputs.append(tuple(paths))
            else:
                reasons.append((paths[0], "no other file to share an output with"))
    copied = {p for output in outputs for p in output}
    decoded = tuple(c.path for c in candidates if c.path not in copied)
    return CopyPlan(outputs=tuple(outputs), decoded=decoded, reasons=tuple(reasons))
