"""When positions a group MINOR read before may still be committed (compaction.spark.minor.PreparedMinor): while the
files they were read from are all live and the partition only gained data files and equality deletes since. A DV
or position delete added meanwhile invalidates them: on v3 ours would be a second DV for a data file (the 2026-11-26
health soak caught one through the post-commit check, and undid it)."""

from __future__ import annotations

from types import SimpleNamespace

from compaction.spark.minor import PreparedMinor
from compaction.spark.partition_files import PartitionFiles


def _enum(name: str) -> SimpleNamespace:  # a Java enum value as py4j shows it
    return SimpleNamespace(toString=lambda: name)


def _file(content: str, fmt: str = "PARQUET") -> SimpleNamespace:
    return SimpleNamespace(content=lambda: _enum(content), format=lambda: _enum(fmt))


DATA = _file("DATA")
EQ, POS, DV = _file("EQUALITY_DELETES"), _file("POSITION_DELETES"), _file("POSITION_DELETES", "PUFFIN")


def files(data: list[str], deletes: dict[str, SimpleNamespace]) -> PartitionFiles:
    return PartitionFiles(1, data={p: DATA for p in data}, deletes={(p, 0): d for p, d in deletes.items()})


def prepared() -> PreparedMinor:
    return PreparedMinor(1, files(["d1", "d2"], {"e1": EQ, "p1": POS}), work=None, positions={}, converted_rows=0)  # type: ignore[arg-type]


def test_valid_while_only_data_and_equality_deletes_were_added() -> None:
    assert prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ, "p1": POS}))
    assert prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "e2": EQ}))


def test_invalid_after_a_removal_or_an_added_position_delete_or_dv() -> None:
    assert not prepared().still_valid_for(files(["d1"], {"e1": EQ, "p1": POS}))  # a data file rewritten away
    assert not prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ}))  # a position delete merged away
    assert not prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ, "p1": POS, "v1": DV}))
    assert not prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "p2": POS}))
