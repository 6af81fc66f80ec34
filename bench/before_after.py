"""The same benchmark from two revisions of the code, interleaved in one run: did a change move the figures?

A revision's benchmark runs in its own checkout (a git worktree of ``--before``; the working tree for "after"), with
that checkout first on ``PYTHONPATH`` so it imports its own ``compaction`` package. Rounds alternate before / after, so
the machine's drift lands on both sides; each side's figures are the medians over its rounds, and the report prints
every ratio the benchmark measures (its own contenders side by side) beside the same ratio of the other revision.

    .venv/bin/python bench/before_after.py --before 7b3144d6 --rounds 3 -- scale.py --sizes m

The benchmark must accept ``--output STEM`` and write ``STEM.json`` with ``sizes.<size>.ratios`` and
``sizes.<size>.times.<contender>.median_s`` (``bench/scale.py`` does). Results: ``bench/results/before_after.{txt,json}``
(``--output`` to change)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, ROOT  # noqa: E402  (sets sys.path)

#: A ratio whose after / before quotient is within this band is reported as unchanged: repeated runs of the same code
#: on these machines spread by about this much (bench/results/scale_repeat3.json: min..max of one contender ~ +-10 %).
NOISE_BAND = 0.10


def checkout(revision: str, folder: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(folder), revision],
                   check=True, capture_output=True)
    return folder


def run_once(tree: Path, script: str, args: list[str], stem: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    command = [sys.executable, str(tree / "bench" / script), *args, "--output", str(stem)]
    print(f"   $ ({tree.name}) {' '.join(command[1:])}", flush=True)
    subprocess.run(command, cwd=tree, env=env, check=True)
    return json.loads(stem.with_suffix(".json").read_text())


def figures(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``size -> {name: value}`` for every ratio and every contender's median seconds of one run."""
    out: dict[str, dict[str, float]] = {}
    for size, entry in result["sizes"].items():
        values = {f"ratio {k}": float(v) for k, v in (entry.get("ratios") or {}).items()}
        values.update({f"time {k}": float(v["median_s"]) for k, v in (entry.get("times") or {}).items()})
        out[size] = values
    return out


def medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    sizes = runs[0].keys()
    return {size: {name: round(statistics.median(r[size][name] for r in runs if name in r.get(size, {})), 4)
                   for name in runs[0][size]} for size in sizes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="git revision of the 'before' side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "before_after")
    ap.add_argument("benchmark", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]: a script in bench/ and its options")
    ns = ap.parse_args(argv)
    bench = [a for a in ns.benchmark if a != "--"]
    if not bench:
        ap.error("name the benchmark after --, for example: -- scale.py --sizes m")
    script, args = bench[0], bench[1:]
    started = time.monotonic()
    load_start = os.getloadavg()[0]
    after_rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True,
                               capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="before_after_") as tmp_name:
        tmp = Path(tmp_name)
        before_tree = checkout(ns.before, tmp / "before")
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
        try:
            for round_no in range(1, ns.rounds + 1):
                for side, tree in (("before", before_tree), ("after", ROOT)):
                    print(f"== round {round_no}/{ns.rounds}: {side}", flush=True)
                    runs[side].append(figures(run_once(tree, script, args, tmp / f"{side}_{round_no}")))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before_tree)],
                           capture_output=True)
    before, after = medians(runs["before"]), medians(runs["after"])
    lines = [f"before_after  {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}  "
             f"benchmark: {' '.join(bench)}",
             f"before = {ns.before}, after = {after_rev} (working tree); {ns.rounds} rounds alternating before/after; "
             f"medians over rounds; load average {load_start:.1f} at start, {os.getloadavg()[0]:.1f} at end; "
             f"whole run {(time.monotonic() - started) / 60:.1f} min",
             f"'changed' when after/before is outside 1 +- {NOISE_BAND:.2f} (the spread of repeated runs of one "
             "revision here)", ""]
    verdicts: dict[str, dict[str, Any]] = {}
    for size in before:
        lines.append(f"== {size}")
        lines.append(f"   {'figure':45s} {'before':>9s} {'after':>9s} {'after/before':>13s}")
        for name, b in before[size].items():
            a = after.get(size, {}).get(name)
            if a is None:
                continue
            quotient = a / b if b else float("nan")
            changed = abs(quotient - 1) > NOISE_BAND
            verdicts.setdefault(size, {})[name] = {"before": b, "after": a, "after_over_before": round(quotient, 3),
                                                   "changed": changed}
            lines.append(f"   {name:45s} {b:9.3f} {a:9.3f} {quotient:12.2f}x{'  CHANGED' if changed else ''}")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    ns.output.with_suffix(".txt").write_text(text + "\n")
    ns.output.with_suffix(".json").write_text(json.dumps(
        {"benchmark": "before_after", "command": bench, "before": ns.before, "after": after_rev,
         "rounds": ns.rounds, "noise_band": NOISE_BAND, "per_round": runs, "figures": verdicts}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
