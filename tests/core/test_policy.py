from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core import policy as P
from compaction.core.errors import ConfigError
from compaction.core.policy import CompactionPolicy
from compaction.core.read_cost import ReadCostCoefficients

MiB = 1024 * 1024

# (field, key, default)
TABLE = [
    ("enabled", "compaction.enabled", True),
    ("major_delete_ratio", "compaction.major.delete-ratio", 0.30),
    ("major_small_file_count", "compaction.major.small-file-count", 10),
    ("minor_delete_file_count", "compaction.minor.delete-file-count", 5),
    ("minor_on_equality_deletes", "compaction.minor.on-equality-deletes", True),
    ("minor_max_position_deletes_per_file", "compaction.minor.max-position-deletes-per-file", 1),
    ("minor_driver_match_max_rows", "compaction.minor.driver-match-max-rows", 4_000_000),
    ("target_file_size_bytes", "compaction.target-file-size-bytes", 128 * MiB),
    ("min_file_size_bytes", "compaction.min-file-size-bytes", 96 * MiB),
    ("max_bytes_per_run", "compaction.max-bytes-per-run", 100 * 1024 * MiB),
    ("max_partitions_per_run", "compaction.max-partitions-per-run", 1000),
    ("weight_ratio", "compaction.weight-ratio", 2.0),
    ("parallel_multiple", "compaction.parallel-multiple", 2),
    ("parallelism", "compaction.parallelism", 2),
    ("min_job_group_bytes", "compaction.min-job-group-bytes", 256 * MiB),
    ("fragment_ratio", "compaction.fragment-ratio", 8),
    ("minor_fragment_file_count", "compaction.minor.fragment-file-count", 12),
    ("minor_interval_seconds", "compaction.minor.interval", 0),
    ("major_segment_delete_ratio", "compaction.major.segment-delete-ratio", 0.1),
    ("major_full_rewrite", "compaction.major.full-rewrite", False),
    ("major_strategy", "compaction.major.strategy", "binpack"),
    ("major_sort_columns", "compaction.major.sort-columns", ""),
    ("one_dv_per_puffin_file", "compaction.one-dv-per-puffin-file", False),
    ("row_group_copy_enabled", "compaction.row-group-copy.enabled", True),
    ("row_group_copy_min_row_group_bytes", "compaction.row-group-copy.min-row-group-bytes", 16 * MiB),
    ("read_cost_max_overhead", "compaction.read-cost.max-overhead", 1.5),
    ("read_cost_min_saving_ms", "compaction.read-cost.min-saving-ms", 50.0),
    *((f"read_cost_{c.name}", "compaction.read-cost." + c.name.replace("_", "-"),
       getattr(ReadCostCoefficients(), c.name)) for c in dataclasses.fields(ReadCostCoefficients)),
    ("yield_max_wait_seconds", "compaction.yield.max-wait", 600),
    ("yield_on_timeout", "compaction.yield.on-timeout", "skip"),
    ("yield_dml_history", "compaction.yield.dml-history", True),
    ("yield_dml_duration_seconds", "compaction.yield.dml-duration", 0),
]


def test_defaults_keys_and_constants() -> None:
    pol = CompactionPolicy()
    assert CompactionPolicy.property_keys() == {f: k for f, k, _ in TABLE}
    assert pol.min_file_size_bytes is None  # derived from the target
    for fieldname, key, default in TABLE:
        if fieldname != "min_file_size_bytes":
            assert getattr(pol, fieldname) == default, fieldname
        const = fieldname.upper()
        if fieldname.endswith("_seconds"):  # durations: the key names the knob, the field its unit
            const = const[: -len("_SECONDS")]
        assert getattr(P, const) == key
        assert getattr(P, const + "_DEFAULT") == default
    assert pol.small_file_threshold_bytes == int(0.75 * 128 * MiB)
    assert pol.max_groups == 4
    assert pol.fragment_threshold_bytes == 16 * MiB
    assert CompactionPolicy.resolve({}) == pol
    assert CompactionPolicy.resolve({}, {}) == pol


def test_policy_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CompactionPolicy().parallelism = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    "key,text,fieldname,expected",
    [
        ("compaction.enabled", "FALSE", "enabled", False),
        ("compaction.major.delete-ratio", "0.5", "major_delete_ratio", 0.5),
        ("compaction.major.small-file-count", "3", "major_small_file_count", 3),
        ("compaction.minor.delete-file-count", " 7 ", "minor_delete_file_count", 7),
        ("compaction.minor.on-equality-deletes", "false", "minor_on_equality_deletes", False),
        ("compaction.minor.max-position-deletes-per-file", "4", "minor_max_position_deletes_per_file", 4),
        ("compaction.target-file-size-bytes", "1000", "target_file_size_bytes", 1000),
        ("compaction.min-file-size-bytes", "123", "min_file_size_bytes", 123),
        ("compaction.max-bytes-per-run", "99", "max_bytes_per_run", 99),
        ("compaction.max-partitions-per-run", "3", "max_partitions_per_run", 3),
        ("compaction.weight-ratio", "1.5", "weight_ratio", 1.5),
        ("compaction.parallel-multiple", "3", "parallel_multiple", 3),
        ("compaction.parallelism", "8", "parallelism", 8),
        ("compaction.one-dv-per-puffin-file", "TRUE", "one_dv_per_puffin_file", True),
    ],
)
def test_table_property_overrides_default(key: str, text: str, fieldname: str, expected: object) -> None:
    pol = CompactionPolicy.resolve({key: text, "unrelated.key": "x", "compaction.some-other-tool": "y"})
    assert getattr(pol, fieldname) == expected
    assert getattr(CompactionPolicy(), fieldname) != expected


def test_target_size_fallback_and_derived_min() -> None:
    pol = CompactionPolicy.resolve({"write.target-file-size-bytes": "1000"})
    assert pol.target_file_size_bytes == 1000
    assert pol.small_file_threshold_bytes == 750
    # our own key beats Iceberg's write property
    pol = CompactionPolicy.resolve({"write.target-file-size-bytes": "1000", P.TARGET_FILE_SIZE_BYTES: "2000"})
    assert pol.target_file_size_bytes == 2000
    assert pol.small_file_threshold_bytes == 1500
    # run parameter beats both
    pol = CompactionPolicy.resolve(
        {"write.target-file-size-bytes": "1000", P.TARGET_FILE_SIZE_BYTES: "2000"}, {"target-file-size-bytes": 400}
    )
    assert (pol.target_file_size_bytes, pol.small_file_threshold_bytes) == (400, 300)
    # explicit min wins over the derived one
    pol = CompactionPolicy.resolve({P.TARGET_FILE_SIZE_BYTES: "2000", P.MIN_FILE_SIZE_BYTES: "10"})
    assert pol.min_file_size_bytes == pol.small_file_threshold_bytes == 10
    assert CompactionPolicy(target_file_size_bytes=100).small_file_threshold_bytes == 75
    # replace() keeps a derived threshold derived
    assert dataclasses.replace(CompactionPolicy(), target_file_size_bytes=100).small_file_threshold_bytes == 75


@pytest.mark.parametrize("spelling", ["compaction.major.delete-ratio", "major.delete-ratio", "major_delete_ratio"])
def test_run_params_beat_table_properties_in_all_spellings(spelling: str) -> None:
    pol = CompactionPolicy.resolve({P.MAJOR_DELETE_RATIO: "0.5"}, {spelling: "0.7"})
    assert pol.major_delete_ratio == 0.7
    pol = CompactionPolicy.resolve({P.MAJOR_DELETE_RATIO: "0.5"}, {spelling: 0.9})
    assert pol.major_delete_ratio == 0.9


def test_run_param_typed_values_and_none() -> None:
    pol = CompactionPolicy.resolve(
        {P.ENABLED: "false", P.PARALLELISM: "3"},
        {"enabled": True, "parallelism": None, "weight_ratio": 3, "max_partitions_per_run": 7.0},
    )
    assert pol.enabled is True
    assert pol.parallelism == 3  # None = not given, table property stays
    assert pol.weight_ratio == 3.0 and isinstance(pol.weight_ratio, float)
    assert pol.max_partitions_per_run == 7 and isinstance(pol.max_partitions_per_run, int)


@pytest.mark.parametrize(
    "key,value",
    [
        ("compaction.major.delete-ratio", "abc"),
        ("compaction.major.delete-ratio", "0"),
        ("compaction.major.delete-ratio", "1.5"),
        ("compaction.major.delete-ratio", "-0.1"),
        ("compaction.major.delete-ratio", "nan"),
        ("compaction.weight-ratio", "inf"),
        ("compaction.weight-ratio", "0"),
        ("compaction.major.small-file-count", "1"),
        ("compaction.major.small-file-count", "ten"),
        ("compaction.minor.delete-file-count", "0"),
        ("compaction.minor.delete-file-count", "2.5"),
        ("compaction.minor.max-position-deletes-per-file", "0"),
        ("compaction.target-file-size-bytes", "0"),
        ("compaction.target-file-size-bytes", "128MB"),
        ("compaction.min-file-size-bytes", "-1"),
        ("compaction.max-bytes-per-run", "-5"),
        ("compaction.max-partitions-per-run", "0"),
        ("compaction.parallelism", "0"),
        ("compaction.parallel-multiple", ""),
        ("compaction.enabled", "yes"),
        ("compaction.minor.on-equality-deletes", "1"),
        ("write.target-file-size-bytes", "big"),
    ],
)
def test_invalid_table_property_names_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as exc:
        CompactionPolicy.resolve({key: value})
    assert key in str(exc.value)
    assert repr(value) in str(exc.value)
    assert exc.value.exit_code == 2


@pytest.mark.parametrize(
    "key,value",
    [
        ("parallelism", True),
        ("parallelism", 1.5),
        ("major.delete-ratio", 2),
        ("enabled", "maybe"),
        ("enabled", 1),
        ("weight_ratio", [1]),
        ("compaction.max-bytes-per-run", 0),
    ],
)
def test_invalid_override_names_key_and_value(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as exc:
        CompactionPolicy.resolve({}, {key: value})
    assert key in str(exc.value)
    assert repr(value) in str(exc.value)


def test_unknown_and_duplicate_override_keys() -> None:
    with pytest.raises(ConfigError, match="'major.delete_ratio'") as exc:
        CompactionPolicy.resolve({}, {"major.delete_ratio": 0.5})
    assert "0.5" in str(exc.value)
    with pytest.raises(ConfigError, match="given twice"):
        CompactionPolicy.resolve({}, {"major_delete_ratio": 0.5, "major.delete-ratio": 0.6})


def test_min_above_target_is_rejected() -> None:
    with pytest.raises(ConfigError, match="compaction.min-file-size-bytes"):
        CompactionPolicy.resolve({P.TARGET_FILE_SIZE_BYTES: "100", P.MIN_FILE_SIZE_BYTES: "101"})
    with pytest.raises(ConfigError, match="compaction.parallelism"):
        CompactionPolicy(parallelism=0)


def test_to_dict_from_dict_and_properties_round_trip() -> None:
    pol = CompactionPolicy.resolve({P.WEIGHT_RATIO: "3.25", P.ENABLED: "false"}, {"min_file_size_bytes": 5})
    d = pol.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["min_file_size_bytes"] == 5 and d["small_file_threshold_bytes"] == 5
    assert CompactionPolicy.from_dict(json.loads(json.dumps(d))) == pol
    derived = CompactionPolicy(target_file_size_bytes=1000)
    assert derived.to_dict()["min_file_size_bytes"] is None
    assert derived.to_dict()["small_file_threshold_bytes"] == 750
    assert CompactionPolicy.from_dict(json.loads(json.dumps(derived.to_dict()))) == derived
    assert CompactionPolicy.resolve(derived.to_properties()) == derived
    assert CompactionPolicy.resolve(pol.to_properties()) == pol
    with pytest.raises(ConfigError, match="bogus"):
        CompactionPolicy.from_dict({**d, "bogus": 1})


_valid_overrides = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "major_delete_ratio": st.floats(min_value=0.01, max_value=1.0),
        "major_small_file_count": st.integers(2, 100),
        "minor_delete_file_count": st.integers(1, 100),
        "minor_on_equality_deletes": st.booleans(),
        "minor_max_position_deletes_per_file": st.integers(1, 10),
        "target_file_size_bytes": st.integers(1_000, 10**12),
        "max_bytes_per_run": st.integers(1, 10**15),
        "max_partitions_per_run": st.integers(1, 10**6),
        "weight_ratio": st.floats(min_value=0.01, max_value=1e6),
        "parallel_multiple": st.integers(1, 8),
        "parallelism": st.integers(1, 64),
    },
)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(table=_valid_overrides, run=_valid_overrides)
def test_precedence_property(table: dict[str, object], run: dict[str, object]) -> None:
    keys = CompactionPolicy.property_keys()
    props = {keys[k]: (str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)) for k, v in table.items()}
    pol = CompactionPolicy.resolve(props, run)
    default = CompactionPolicy()
    for name in keys:
        if name == "min_file_size_bytes":
            continue
        expected = run.get(name, table.get(name, getattr(default, name)))
        assert getattr(pol, name) == expected, name
    assert pol.min_file_size_bytes is None
    assert pol.small_file_threshold_bytes == int(0.75 * pol.target_file_size_bytes)
    assert CompactionPolicy.from_dict(json.loads(json.dumps(pol.to_dict()))) == pol


@pytest.mark.parametrize("text,seconds", [("0", 0), ("off", 0), ("90", 90), ("90s", 90), ("30m", 1800), (" 2h ", 7200),
                                          ("1d", 86400)])
def test_minor_interval_durations(text: str, seconds: int) -> None:
    assert CompactionPolicy.resolve({"compaction.minor.interval": text}).minor_interval_seconds == seconds


@pytest.mark.parametrize("text", ["-5m", "1w", "soon", "1.5h"])
def test_minor_interval_rejects_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="compaction.minor.interval"):
        CompactionPolicy.resolve({"compaction.minor.interval": text})


@pytest.mark.parametrize("text,expected", [
    ("a", [("a", True, True)]),
    ("a DESC", [("a", False, False)]),
    ("a desc nulls first, b asc nulls last", [("a", False, True), ("b", True, False)]),
    (" info.a ,b", [("info.a", True, True), ("b", True, True)]),
])
def test_sort_columns_parse(text: str, expected: list[tuple[str, bool, bool]]) -> None:
    terms = P.parse_sort_columns(text)
    assert [(t.name, t.ascending, t.nulls_first) for t in terms] == expected


@pytest.mark.parametrize("text", ["a,,b", "a sideways", "a DESC NULLS", "a NULLS MIDDLE", "1a", "a b", "a, a",
                                  "x-y"])
def test_bad_sort_columns_are_refused_with_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match="compaction.major.sort-columns"):
        CompactionPolicy.resolve({"compaction.major.strategy": "sort", "compaction.major.sort-columns": text})


def test_clustering_strategies_make_every_major_a_full_rewrite_described_in_its_reason() -> None:
    pol = CompactionPolicy.resolve({"compaction.major.strategy": "zorder", "compaction.major.sort-columns": "a, b"})
    assert pol.clusters and pol.describe_strategy() == "zorder by a, b"
    assert CompactionPolicy.from_dict(json.loads(json.dumps(pol.to_dict()))) == pol
    assert not CompactionPolicy().clusters
    assert CompactionPolicy.resolve({"compaction.major.strategy": "sort"}).describe_strategy() == \
        "sort by the table's sort order"


@pytest.mark.parametrize("spelling", ["compaction.one-dv-per-puffin-file", "one-dv-per-puffin-file",
                                      "one_dv_per_puffin_file"])
def test_one_dv_per_puffin_file_is_a_run_parameter_too(spelling: str) -> None:
    """The DV layout switch follows the policy's precedence (a run parameter beats the table property) and travels
    in the plan to the Spark job."""
    pol = CompactionPolicy.resolve({P.ONE_DV_PER_PUFFIN_FILE: "true"}, {spelling: False})
    assert pol.one_dv_per_puffin_file is False
    pol = CompactionPolicy.resolve({}, {spelling: "true"})
    assert pol.one_dv_per_puffin_file is True
    assert CompactionPolicy.from_dict(json.loads(json.dumps(pol.to_dict()))) == pol
    assert pol.to_properties()[P.ONE_DV_PER_PUFFIN_FILE] == "true"
    with pytest.raises(ConfigError, match="compaction.one-dv-per-puffin-file"):
        CompactionPolicy.resolve({P.ONE_DV_PER_PUFFIN_FILE: "yes"})
