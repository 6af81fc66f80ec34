"""When positions a group MINOR read before may still be committed (compaction.spark.minor.PreparedMinor): while the
files they were read from are all live and the partition only gained data files, equality deletes, and position
deletes / DVs naming only those new data files since. A DV or position delete on a file of the read invalidates them: on v3 ours would be a second DV for a data file (the 2026-11-26
health soak caught one through the post-commit check, and undid it)."""

from __future__ import annotations

from types import SimpleNamespace

from compaction.spark.minor import PreparedMinor
from compaction.spark.partition_files import PartitionFiles


def _enum(name: str) -> SimpleNamespace:  # a Java enum value as py4j shows it
    return SimpleNamespace(toString=lambda: name)


def _file(content: str, fmt: str = "PARQUET", target: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(content=lambda: _enum(content), format=lambda: _enum(fmt), target=target)


def _target(delete_file: SimpleNamespace) -> str | None:
    return delete_file.target  # type: ignore[no-any-return]


DATA = _file("DATA")
EQ, POS, DV = _file("EQUALITY_DELETES"), _file("POSITION_DELETES"), _file("POSITION_DELETES", "PUFFIN")


def files(data: list[str], deletes: dict[str, SimpleNamespace]) -> PartitionFiles:
    return PartitionFiles(1, data={p: DATA for p in data}, deletes={(p, 0): d for p, d in deletes.items()})


def prepared() -> PreparedMinor:
    return PreparedMinor(1, files(["d1", "d2"], {"e1": EQ, "p1": POS}), work=None, positions={}, converted_rows=0)  # type: ignore[arg-type]


def test_valid_while_only_data_and_equality_deletes_were_added() -> None:
    assert prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ, "p1": POS}), _target)
    assert prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "e2": EQ}), _target)


def test_invalid_after_a_removal_or_an_added_position_delete_or_dv() -> None:
    assert not prepared().still_valid_for(files(["d1"], {"e1": EQ, "p1": POS}), _target)  # a data file rewritten away
    assert not prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ}), _target)  # a position delete merged away
    assert not prepared().still_valid_for(files(["d1", "d2"], {"e1": EQ, "p1": POS, "v1": DV}), _target)
    assert not prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "p2": POS}), _target)
    # A position delete / DV that names a data file of the read: ours could be a second DV, or miss its rows.
    on_d2 = {"v1": _file("POSITION_DELETES", "PUFFIN", target="d2"), "p2": _file("POSITION_DELETES", target="d2")}
    for ref, d in on_d2.items():
        assert not prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, ref: d}), _target)


def test_valid_after_a_writer_deleted_from_a_data_file_added_since_the_read() -> None:
    """A streaming upsert writer (Flink) adds, with each commit, a data file and a position delete / DV naming only
    that file (a key updated twice within one checkpoint): nothing the read covers changed."""
    for fmt in ("PARQUET", "PUFFIN"):
        on_d3 = _file("POSITION_DELETES", fmt, target="d3")
        assert prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "e2": EQ, "n3": on_d3}),
                                          _target)
        # Naming a data file that is not live in the partition (another partition's): not placed, read again.
        elsewhere = _file("POSITION_DELETES", fmt, target="x9")
        assert not prepared().still_valid_for(files(["d1", "d2", "d3"], {"e1": EQ, "p1": POS, "n9": elsewhere}),
                                              _target)
