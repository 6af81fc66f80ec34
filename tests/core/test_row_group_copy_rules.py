"""Which files a MAJOR copies at the row-group level (compaction.core.row_group_copy), pure."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.row_group_copy import CopyCandidate, plan_row_group_copies, why_not_copied

MIB = 1024 * 1024
pytestmark = pytest.mark.unit


def candidate(path: str, size_mib: int = 100, **changes: object) -> CopyCandidate:
    base = CopyCandidate(path=path, size_bytes=size_mib * MIB, row_groups=1, row_group_bytes=size_mib * MIB,
                         schema_key="s1", has_deletes=False, on_output_spec=True, matches_current_schema=True,
                         keeps_row_lineage=True)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "reason"), [
    ({"has_deletes": True}, "a delete applies to it"),
    ({"on_output_spec": False}, "written under another partition spec"),
    ({"matches_current_schema": False}, "its columns are not the current schema's"),
    ({"keeps_row_lineage": False}, "its rows inherit their row ids from the file (v3 row lineage)"),
    ({"row_groups": 20}, "row groups average"),
    ({"row_groups": 0}, "row groups average"),
])
def test_a_file_whose_rows_could_change_or_whose_row_groups_are_small_is_decoded(changes: dict[str, object],
                                                                                  reason: str) -> None:
    c = candidate("a", **changes)  # type: ignore[arg-type]
    found = why_not_copied(c, 16 * MIB)
    assert found is not None and found.startswith(reason)
    assert why_not_copied(candidate("a"), 16 * MIB) is None


def test_clean_files_are_packed_per_schema_up_to_the_target_and_a_lone_file_is_decoded() -> None:
    files = [candidate("a", 200), candidate("b", 200), candidate("c", 100), candidate("d", 300),
             candidate("e", 100, schema_key="s2"), candidate("f", 100, has_deletes=True)]
    result = plan_row_group_copies(files, target_file_size_bytes=512 * MIB, min_row_group_bytes=16 * MIB)
    assert result.outputs == (("d", "a"), ("b", "c"))  # first fit, largest first: 300+200, then 200+100
    assert result.decoded == ("e", "f")
    assert dict(result.reasons) == {"f": "a delete applies to it", "e": "no other file to share an output with"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 600), st.sampled_from(["s1", "s2"]), st.booleans(), st.integers(1, 8)),
                max_size=30),
       st.integers(64, 1024))
def test_every_file_is_copied_once_or_decoded_and_no_output_exceeds_the_target(
        shapes: list[tuple[int, str, bool, int]], target_mib: int) -> None:
    files = [candidate(f"f{i}", size, schema_key=key, has_deletes=deletes, row_groups=groups)
             for i, (size, key, deletes, groups) in enumerate(shapes)]
    result = plan_row_group_copies(files, target_file_size_bytes=target_mib * MIB, min_row_group_bytes=16 * MIB)
    by_path = {f.path: f for f in files}
    assert sorted(result.copied + result.decoded) == sorted(by_path)
    for output in result.outputs:
        assert len(output) >= 2
        assert sum(by_path[p].size_bytes for p in output) <= target_mib * MIB
        assert len({by_path[p].schema_key for p in output}) == 1
        assert all(why_not_copied(by_path[p], 16 * MIB) is None for p in output)
    assert {p for p, _ in result.reasons} == set(result.decoded)
