"""What the host and the Spark entry point (``python -m compaction.spark``) agree on: the executor's options as
command-line arguments, and where a job keeps its incomplete result. Both sides import it; it imports neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compaction.core.errors import ConfigError
from compaction.spark.executor import ServeOptions


def progress_path(result_path: Path) -> Path:
    """Where a running job keeps its incomplete result (what it has committed and validated so far)."""
    return result_path.with_name(f"{result_path.stem}.progress.json")


def option_args(options: ServeOptions) -> tuple[str, ...]:
    """:class:`ServeOptions` as arguments (of ``serve`` and of ``icecompact executor run``). Pure."""
    heap = options.limits.heap_limit_fraction
    return ("--poll-s", f"{options.poll_s:g}", "--lease-s", f"{options.lease_s:g}",
            "--heartbeat-s", f"{options.heartbeat_s:g}", "--max-groups", str(options.limits.max_groups),
            "--heap-limit", "0" if heap is None else f"{heap:g}", "--idle-exit-s", f"{options.idle_exit_s:g}")


def options_from_args(args: Any) -> ServeOptions:
    """The inverse of :func:`option_args` (an argparse namespace with those attributes)."""
    from compaction.core.queue import RestartLimits

    try:
        return ServeOptions(poll_s=args.poll_s, lease_s=args.lease_s, heartbeat_s=args.heartbeat_s,
                            limits=RestartLimits(args.max_groups, args.heap_limit or None),
                            idle_exit_s=args.idle_exit_s)
    except ValueError as e:
        raise ConfigError(f"invalid executor options: {e}") from e


def add_option_args(parser: Any) -> None:
    defaults = ServeOptions()
    parser.add_argument("--poll-s", type=float, default=defaults.poll_s, help="seconds between queue polls when idle")
    parser.add_argument("--lease-s", type=float, default=defaults.lease_s,
                        help="a claimed item is taken back when its lease is not renewed for this long")
    parser.add_argument("--heartbeat-s", type=float, default=defaults.heartbeat_s)
    parser.add_argument("--max-groups", type=int, default=defaults.limits.max_groups,
                        help="start a fresh Spark application after this many groups (0: never)")
    parser.add_argument("--heap-limit", type=float, default=defaults.limits.heap_limit_fraction,
                        help="start a fresh one when the driver heap stays above this fraction after a GC (0: never)")
    parser.add_argument("--idle-exit-s", type=float, default=defaults.idle_exit_s,
                        help="stop after this long without work (0: never)")


def serve_command(executor_id: str, catalog: str, generation: int, result: Path, options: ServeOptions) -> tuple[str, ...]:
    """The entry point's arguments for one generation of an executor. Pure; never a secret."""
    return ("serve", "--catalog", catalog, "--executor-id", executor_id, "--generation", str(generation),
            "--result", str(result), *option_args(options))


def maintain_command(plan: Path, result: Path, catalog: str) -> tuple[str, ...]:
    """The entry point's arguments for a maintenance plan (``maintain``): the plan and result are files, so the plan
    never meets argv's length limit and nothing of the table's configuration is in argv. Pure; never a secret."""
    return ("maintain", "--plan", str(plan), "--result", str(result), "--catalog", catalog)
