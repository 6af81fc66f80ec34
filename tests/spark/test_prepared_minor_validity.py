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


# Moving a read onto a later snapshot (PreparedMinor.rebased_work): a writer's DML that deleted rows of data files the
# work writes to added a position delete / DV for them, on v3 replacing their DV, on v2 often their file-scoped
# position delete. The work absorbs those instead of reading every position again.
def _prepared_with(work_deletes: dict[str, SimpleNamespace], data_files: list[str]) -> PreparedMinor:
    from compaction.spark.minor import _Work

    deletes = {"e1": EQ, **work_deletes}
    read = files(["d1", "d2", "d3"], deletes)
    work = _Work(equality={("e1", 0): EQ}, eq_targets={p: {("e1", 0)} for p in data_files},
                 positional={(p, 0): d for p, d in work_deletes.items()},
                 data_files={p: DATA for p in data_files}, dangling={})
    return PreparedMinor(1, read, work, positions={"d1": [1, 2]}, converted_rows=2)


def _dv(target: str) -> SimpleNamespace:
    return _file("POSITION_DELETES", "PUFFIN", target=target)


def _pos(target: str | None) -> SimpleNamespace:
    return _file("POSITION_DELETES", target=target)


def test_a_replaced_dv_is_absorbed_in_its_place() -> None:
    old_dv, new_dv, dv_d2 = _dv("d1"), _dv("d1"), _dv("d2")
    ready = _prepared_with({"v1": old_dv}, ["d1", "d2"])
    # The DML replaced d1's DV and gave d2 its first DV; d3 (no file of ours) got one too.
    moved = ready.rebased_work(files(["d1", "d2", "d3"], {"e1": EQ, "v1b": new_dv, "v2": dv_d2, "v3": _dv("d3")}),
                               _target)
    assert moved is not None
    work, parquet = moved
    assert work.positional == {("v1b", 0): new_dv, ("v2", 0): dv_d2}
    assert work.equality == {("e1", 0): EQ} and set(work.data_files) == {"d1", "d2"}
    assert parquet == []  # DVs are merged in Java from the work's positional files


def test_a_replaced_v2_position_delete_is_absorbed_and_its_rows_read() -> None:
    old, new = _pos("d1"), _pos("d1")
    ready = _prepared_with({"p1": old}, ["d1"])
    moved = ready.rebased_work(files(["d1", "d2", "d3", "d4"], {"e1": EQ, "p1b": new, "e2": EQ}), _target)
    assert moved is not None
    work, parquet = moved
    assert work.positional == {("p1b", 0): new}  # the removed one is not ours to remove any more
    assert parquet == [new]


def test_read_again_when_the_rows_cannot_be_vouched_for() -> None:
    ready = _prepared_with({"v1": _dv("d1")}, ["d1", "d2"])
    live = {"e1": EQ, "v1": _dv("d1")}
    assert ready.rebased_work(files(["d1", "d3"], live), _target) is None  # a data file of the read is gone
    assert ready.rebased_work(files(["d1", "d2", "d3"], {"v1": _dv("d1")}), _target) is None  # the equality delete
    assert ready.rebased_work(files(["d1", "d2", "d3"], {"e1": EQ}), _target) is None  # d1's DV gone, none replaces it
    # A position delete naming several data files, or one not live in the partition.
    assert ready.rebased_work(files(["d1", "d2", "d3"], {**live, "p9": _pos(None)}), _target) is None
    assert ready.rebased_work(files(["d1", "d2", "d3"], {**live, "p9": _pos("x9")}), _target) is None
    # Nothing changed: the same work.
    moved = ready.rebased_work(files(["d1", "d2", "d3"], live), _target)
    assert moved is not None and moved[0].positional == ready.work.positional
