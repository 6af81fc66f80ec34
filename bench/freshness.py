"""Freshness: how soon after a commit gives a partition work is it compacted and validated, on the
event-driven path (``iceberg_compaction_on_health`` + the resident executor), under the soak's live writer and faults.

Runs the soak on the health path (``bench/soak.py --path health``: a writer committing every 2 s, a Spark DELETE or
MERGE every 30 s, a compaction executor SIGKILLed mid-group, the scheduler SIGKILLed, PostgreSQL stopped for 10 s) and
replays the table's history (icecompact_testing.freshness): for every writer's commit that turned a partition's
``auto`` decision from NONE to MINOR / MAJOR, the time until a compaction of ours that had seen that commit was
validated. Writes ``bench/results/soak_health.*`` (every soak goal) and ``bench/results/freshness.{txt,json}``::

    .venv/bin/python bench/freshness.py [--minutes 15] [--size s] [--formats 2,3]
"""

from __future__ import annotations

import json
import subprocess
import sys

from lib.common import BENCH_DIR, RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)


def main() -> int:
    args = sys.argv[1:]
    code = subprocess.call([sys.executable, str(BENCH_DIR / "soak.py"), "--path", "health", *args])
    if {"-h", "--help"} & set(args) or code not in (0, 1):
        return code  # no new soak ran (help, a usage error: 2) or it crashed: the stored results stay as they are
    stored = json.loads((RESULTS_DIR / "soak_health.json").read_text())
    lines = [f"freshness on the health path ({stored.get('header', '')})", ""]
    out: dict[str, object] = {}
    for key, data in sorted((k, v) for k, v in stored.items() if k != "header"):
        fresh = data["checks"].get("freshness") or {}
        goal = (data.get("goals") or {}).get("freshness_p50_15s_p95_30s") or {}
        out[key] = {k: v for k, v in fresh.items() if k != "detail"}
        lines.append(f"== format v{key}: {'MET' if goal.get('met') else 'NOT MET'} p50 <= 15 s, p95 <= 30 s")
        lines.append(f"  {goal.get('figure')}")
        lines.append(f"  where the time went (medians): {fresh.get('profile_p50_s')} (a crossing usually waits for the "
                     f"run in flight to end before its own run is planned)")
        lines.append(f"  {fresh.get('snapshots')} snapshots replayed; manifest cache {fresh.get('manifest_cache')}")
        served = [c for c in fresh.get("detail", []) if "to_validated_s" in c]
        slow = sorted(served, key=lambda c: -c["to_validated_s"])[:5]
        for c in slow:
            lines.append(f"  slowest: {c['partition']} {c['kind']} crossed at t={c['t'] - data['started']:.0f} s, "
                         f"validated after {c['to_validated_s']} s (committed after {c['to_commit_s']} s)")
        lines.append("")
    (RESULTS_DIR / "freshness.txt").write_text("\n".join(lines) + "\n")
    (RESULTS_DIR / "freshness.json").write_text(json.dumps(out, indent=1, default=str))
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main())
