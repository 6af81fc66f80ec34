"""Calibrate the read-cost model (``compaction.core.read_cost``) and check its predictions against measured scans.

For every table shape (``icecompact_testing.bulk``: streaming CDC tables with fragments, equality deletes, position
deletes / DVs, or only small files), four states are scanned side by side, each on its own clone registered from the
base's metadata file:

* ``base``: as generated;
* ``minor``: after our MINOR (``plan(mode=minor)`` + ``run_groups``);
* ``major``: after our selective MAJOR (``plan(mode=major)``);
* ``compacted``: after Iceberg's ``CALL rewrite_data_files`` with ``rewrite-all`` (the compacted copy).

Each state's :class:`ReadShape` (what the planner counts) and its full-scan time (Spark, ``--scans`` times rotated between the states, the fastest;
count + checksum of every column, as the soak's sampler) are recorded. The coefficients are fitted by non-negative
least squares, ``scan ms = constant + sum(coefficient x count)``; the constant is the per-query cost a scan pays
whatever the table (planning, job start), not charged to partitions.

The check is out of sample: for each table, the coefficients are fitted on the *other* tables only, and the
planner's own estimates for that table (``compaction.core.planner.read_costs``: now, over a compacted copy, after a
MINOR) are compared with the measured ratios ``base / compacted`` and ``minor / compacted`` (each with the per-query
constant on both sides, as a measured scan pays it). Goal: within 25 %.

Then the coefficients fitted on every table are printed as the ``compaction.read-cost.*`` table properties to set
(``ALTER TABLE ... SET TBLPROPERTIES``), and written to the results: re-run this on your own cluster (its Spark
settings via ``ICECOMPACT_SPARK_*`` as for the product) to calibrate the model for it.

Usage::

    .venv/bin/python bench/read_cost.py                       # 7 shapes (s, m) x v2, v3; ~30 min on 2 cores
    .venv/bin/python bench/read_cost.py --shapes xs,xs_many,s --formats 2 --scans 1   # quick

Results: ``bench/results/read_cost.{txt,json}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from lib.common import RESULTS_DIR, embedded_spark  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.contenders import drop_clone, procedure_table, register_clone, rotated
from lib.scans import full_scan

CATALOG_NAME = "readcost"
NAMESPACE = "bench"
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
MIB = 1024 * 1024
STATES = ("base", "minor", "major", "compacted")
GOAL_RELATIVE_ERROR = 0.25

_POSITIONAL = {"rounds": 12, "update_fraction": 0.0, "delete_fraction": 0.0, "position_delete_every": 1,
               "position_delete_fraction": 0.01}
#: shape name -> (bulk size, BulkSpec overrides)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "xs": ("xs", {}),
    "xs_many": ("xs", {"rounds": 48}),
    "s": ("s", {}),
    "s_fragments": ("s", {"rounds": 32, "update_fraction": 0.0, "delete_fraction": 0.0, "position_delete_every": 0}),
    "s_positional": ("s", _POSITIONAL),
    "s_equality": ("s", {"rounds": 24, "position_delete_every": 0}),
    "s_streaming": ("s", {"rounds": 20, "position_delete_every": 0}),
    "m": ("m", {}),
    "m_positional": ("m", _POSITIONAL),
}
#: shape name -> our MINOR after every N-th streaming round while the table is generated: a streaming table as the
#: health watcher keeps it (Spark-written segments and merged fragments, one position delete / DV per data file, and
#: the equality deletes of the rounds since the last MINOR).
MINOR_EVERY: dict[str, int] = {"s_streaming": 6}
#: Measured by default: the shapes users have (the ``xs`` ones are toys, where the per-query cost is most of a scan).
DEFAULT_SHAPES = ("s", "s_fragments", "s_positional", "s_equality", "s_streaming", "m", "m_positional")


class BenchmarkError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------- the fit
def nnls(rows: Sequence[Sequence[float]], y: Sequence[float], iterations: int = 500) -> list[float]:
    """Non-negative least squares (Lawson-Hanson active set) of ``rows @ x ~ y``, columns scaled for stability."""
    import numpy as np

    a = np.asarray(rows, dtype=float)
    b = np.asarray(y, dtype=float)
    scale = np.where(a.max(axis=0) > 0, a.max(axis=0), 1.0)
    a = a / scale
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    for _ in range(iterations):
        if passive.all() or (w[~passive] <= 1e-10).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            mask = passive & (z <= 0)
            alpha = np.min(x[mask] / (x[mask] - z[mask]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12
            x[~passive] = 0.0
        w = a.T @ (b - a @ x)
    return list(x / scale)


def fit(points: Sequence[dict[str, Any]]) -> tuple[float, Any]:
    """(per-query constant ms, ReadCostCoefficients) fitted to ``points`` (``features``, ``scan_ms``)."""
    from compaction.core.read_cost import ReadCostCoefficients

    rows = [[1.0, *p["features"]] for p in points]
    solution = nnls(rows, [p["scan_ms"] for p in points])
    return solution[0], ReadCostCoefficients.from_tuple(tuple(solution[1:]))


# ------------------------------------------------------------------------------------------------- one table
class TableRun:
    def __init__(self, spark: Any, catalog_cfg: Any, shape: str, format_version: int, scans: int, seed: int) -> None:
        self.spark, self.catalog_cfg = spark, catalog_cfg
        self.shape, self.format_version, self.scans, self.seed = shape, format_version, scans, seed
        self.tag = f"{shape}/v{format_version}"
        self.clones = 0

    def ref(self, name: str) -> str:
        return f"{CATALOG_NAME}.{NAMESPACE}.{name}"

    def log(self, message: str) -> None:
        print(f"[{self.tag}] {message}", flush=True)

    def clone(self, label: str) -> str:
        self.clones += 1
        name = f"{label}_{self.shape}_v{self.format_version}_{self.clones}"
        register_clone(self.spark, CATALOG_NAME, NAMESPACE, name, self.metadata_file)
        return name

    def policy(self, properties: dict[str, str]) -> Any:
        from compaction.core.policy import CompactionPolicy

        return CompactionPolicy.resolve(properties, {"target_file_size_bytes": self.target})

    def ours(self, name: str, mode: str) -> None:
        from compaction.core.planner import plan
        from compaction.metadata.inspect import inspect_table
        from compaction.spark.job import run_groups
        from compaction.spark.validation import ValidationLevel

        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        the_plan = plan(state, self.policy(state.properties), mode, NOW)
        parts = []
        for result in run_groups(self.spark, the_plan, [g.group_id for g in the_plan.groups],
                                 level=ValidationLevel.parse("none"), max_retries=3):
            parts += result.partitions
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op")]
        if bad:
            raise BenchmarkError(f"our {mode} on {name}: {bad[:5]}")

    def call(self, name: str) -> None:
        options = {"rewrite-all": "true", "remove-dangling-deletes": "true", "use-starting-sequence-number": "true",
                   "target-file-size-bytes": str(self.target)}
        self.spark.sql(f"CALL {CATALOG_NAME}.system.rewrite_data_files("
                       f"table => '{procedure_table(CATALOG_NAME, NAMESPACE, name)}', options => map("
                       + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + "))").collect()

    def costs(self, name: str) -> tuple[Any, dict[Any, Any]]:
        """(the summed ReadShape, per-partition (shape, estimate) under the default coefficients)."""
        from compaction.core.planner import read_costs
        from compaction.core.read_cost import ReadShape
        from compaction.metadata.inspect import inspect_table

        state = inspect_table(self.catalog_cfg, f"{NAMESPACE}.{name}")
        per_partition = read_costs(state, self.policy(state.properties))
        total = ReadShape()
        for shape, _ in per_partition.values():
            total = total + shape
        return total, per_partition

    def run(self) -> dict[str, Any]:
        from icecompact_testing.bulk import BulkSpec, generate_bulk

        size, overrides = SHAPES[self.shape]
        spec = BulkSpec.named(size, self.format_version, seed=self.seed, **overrides)
        self.target = spec.target_file_size
        self.log("generating ...")
        base = f"base_{self.shape}_v{self.format_version}"
        every = MINOR_EVERY.get(self.shape)

        def minor_between_rounds(round_: int) -> None:
            if every and round_ % every == 0:
                self.ours(base, "minor")

        generate_bulk(self.spark, self.catalog_cfg, f"{NAMESPACE}.{base}", spec, replace=True, log=None,
                      after_round=minor_between_rounds if every else None)
        base_table = self.catalog_cfg.load().load_table((NAMESPACE, base))
        self.metadata_file = base_table.metadata_location
        base_snapshots = {s.snapshot_id for s in base_table.snapshots()}
        _, reference = full_scan(self.spark, self.ref(base))
        names = {"base": base}
        for state in STATES[1:]:
            names[state] = self.clone(state)
            if state == "compacted":
                self.call(names[state])
            else:
                self.ours(names[state], state)
            _, check = full_scan(self.spark, self.ref(names[state]))
            if check != reference:
                raise BenchmarkError(f"{state}: {check} rows/checksum, the base {reference}")
        full_scan(self.spark, self.ref(base))  # warm-up, untimed
        samples: dict[str, list[float]] = {s: [] for s in STATES}
        for r in range(self.scans):
            for state in rotated(list(STATES), r):
                elapsed, _ = full_scan(self.spark, self.ref(names[state]))
                samples[state].append(elapsed * 1000.0)
        states: dict[str, Any] = {}
        for state in STATES:
            total, per_partition = self.costs(names[state])
            # The fastest of the rotated scans: the machine's load only ever adds time to a scan.
            states[state] = {"scan_ms": min(samples[state]), "median_ms": statistics.median(samples[state]),
                             "samples_ms": samples[state],
                             "shape": dataclasses.asdict(total), "features": list(total.as_features())}
            if state == "base":
                # The planner's own estimates for each partition: priced again under other coefficients.
                states[state]["estimates"] = [
                    {k: (dataclasses.asdict(v) if v is not None else None)
                     for k, v in (("now", e.now), ("compacted", e.compacted), ("after_minor", e.after_minor))}
                    for _, e in per_partition.values()]
        for state in STATES[1:]:
            drop_clone(self.spark, self.ref(names[state]), base_snapshots)
        self.log("scan ms " + ", ".join(f"{s} {states[s]['scan_ms']:.0f}" for s in STATES)
                 + f"; base {states['base']['shape']}")
        return {"shape": self.shape, "format_version": self.format_version, "target_file_size_bytes": self.target,
                "states": states}


# ------------------------------------------------------------------------------------------------- the check
def predicted_ratios(run: dict[str, Any], constant: float, coefficients: Any) -> dict[str, float]:
    """The planner's estimates for the base state priced under ``coefficients`` (now / compacted copy, after a
    MINOR / compacted copy), each with the per-query ``constant`` on both sides."""
    from compaction.core.read_cost import ReadCostEstimate, ReadShape

    now = compacted = after_minor = constant
    for e in run["states"]["base"]["estimates"]:
        estimate = ReadCostEstimate(coefficients, ReadShape(**e["now"]), ReadShape(**e["compacted"]),
                                    ReadShape(**e["after_minor"]) if e["after_minor"] else None, None, None)
        now += estimate.now_ms
        compacted += estimate.compacted_ms
        after_minor += estimate.ms(estimate.after_minor) if estimate.after_minor else estimate.now_ms
    return {"base_over_compacted": now / compacted, "minor_over_compacted": after_minor / compacted}


def check(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    ok = [r for r in runs if "error" not in r]
    for i, run in enumerate(ok):
        others = [p for j, r in enumerate(ok) if j != i for p in r["states"].values()]
        constant, coefficients = fit(others)
        predicted = predicted_ratios(run, constant, coefficients)
        states = run["states"]
        measured = {"base_over_compacted": states["base"]["scan_ms"] / states["compacted"]["scan_ms"],
                    "minor_over_compacted": states["minor"]["scan_ms"] / states["compacted"]["scan_ms"]}
        errors = {k: predicted[k] / measured[k] - 1.0 for k in measured}
        out.append({"table": f"{run['shape']}/v{run['format_version']}", "predicted": predicted,
                    "measured": measured, "relative_error": errors,
                    "met": all(abs(e) <= GOAL_RELATIVE_ERROR for e in errors.values())})
    return out


def render(runs: list[dict[str, Any]], checks: list[dict[str, Any]], constant: float, coefficients: Any,
           header: str) -> str:
    from compaction.core.policy import CompactionPolicy

    lines = [header, "", "scans (ms, fastest) per state; counts of the base state"]
    for r in runs:
        tag = f"{r['shape']}/v{r['format_version']}"
        if "error" in r:
            lines.append(f"  {tag:<16} FAILED: {r['error']}")
            continue
        st = r["states"]
        b = st["base"]["shape"]
        lines.append(f"  {tag:<16} " + "  ".join(f"{s} {st[s]['scan_ms']:7.0f}" for s in STATES)
                     + f"   base: {b['data_files']} data files, {b['data_mib']:.0f} MiB, {b['position_delete_reads']}"
                       f" pos reads, {b['dv_reads']} DVs, {b['equality_delete_files']} eq files")
    lines += ["", "out of sample (coefficients fitted on the other tables), planner's estimate vs measured:"]
    for c in checks:
        lines.append(f"  {c['table']:<16} base/compacted {c['predicted']['base_over_compacted']:5.2f} vs "
                     f"{c['measured']['base_over_compacted']:5.2f} ({c['relative_error']['base_over_compacted']:+.0%})"
                     f"   minor/compacted {c['predicted']['minor_over_compacted']:5.2f} vs "
                     f"{c['measured']['minor_over_compacted']:5.2f} "
                     f"({c['relative_error']['minor_over_compacted']:+.0%})   {'met' if c['met'] else 'NOT MET'}")
    met = sum(1 for c in checks if c["met"])
    lines.append(f"  goal: every estimate within {GOAL_RELATIVE_ERROR:.0%} of the measured ratio: {met} of "
                 f"{len(checks)} tables {'met' if met == len(checks) else 'NOT MET'}")
    keys = CompactionPolicy.property_keys()
    props = {keys[f"read_cost_{f.name}"]: f"{getattr(coefficients, f.name):.6g}"
             for f in dataclasses.fields(coefficients)}
    lines += ["", f"fitted on every table: per-query constant {constant:.0f} ms (not charged to partitions); set on a "
                  "table with:",
              "  ALTER TABLE <table> SET TBLPROPERTIES (" + ", ".join(f"'{k}'='{v}'" for k, v in props.items()) + ")"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help=f"of {', '.join(SHAPES)}")
    ap.add_argument("--formats", default="2,3")
    ap.add_argument("--scans", type=int, default=7)
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "read_cost")
    args = ap.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        ap.error(f"unknown shapes {unknown}; known: {', '.join(SHAPES)}")
    formats = [int(f) for f in args.formats.split(",") if f]

    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with embedded_spark(CATALOG_NAME, "read-cost-bench", NAMESPACE) as (spark, catalog_cfg):
        for shape in shapes:
            for fv in formats:
                try:
                    runs.append(TableRun(spark, catalog_cfg, shape, fv, args.scans, args.seed).run())
                except Exception as exc:  # noqa: BLE001 - one table failing keeps the others' figures
                    runs.append({"shape": shape, "format_version": fv, "error": f"{type(exc).__name__}: {exc}"})
                    print(f"[{shape}/v{fv}] FAILED: {exc}", flush=True)
        good = [r for r in runs if "error" not in r]
        if len(good) < 3:
            raise BenchmarkError(f"only {len(good)} tables measured; the fit needs at least 3")
        constant, coefficients = fit([p for r in good for p in r["states"].values()])
        checks = check(runs)
        header = (f"read_cost  {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}  (2 cores shared, "
                  f"Spark local[2]; fastest of {args.scans} rotated scans per state; load average {load_start:.2f} at start, "
                  f"{os.getloadavg()[0]:.2f} at the end; {(time.perf_counter() - started) / 60:.1f} min)")
        text = render(runs, checks, constant, coefficients, header)
        args.output.with_suffix(".txt").write_text(text + "\n")
        args.output.with_suffix(".json").write_text(json.dumps(
            {"argv": sys.argv[1:] if argv is None else argv, "runs": runs, "checks": checks,
             "constant_ms": constant, "coefficients": dataclasses.asdict(coefficients)}, indent=2, default=str)
            + "\n")
        print("\n" + text, flush=True)
        return 0 if checks and all(c["met"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
