"""The soak's writer process with a real Flink upsert job instead of our own writer (``SoakConfig.writer="flink"``).

Same protocol as :class:`icecompact_testing.soak.SoakWriter`: builds the table, writes ``ready``, writes until
``<workdir>/stop`` exists, then the stream's live rows to ``expected.parquet`` and its commits to ``writer.jsonl``.
The table is created by Flink (``region``-partitioned, PRIMARY KEY (region, id), ``write.upsert.enabled``) on the
soak's PostgreSQL catalog, and fed a deterministic CDC stream (:mod:`icecompact_testing.flink`) one batch at a
time, each once the one before is committed, at most one every ``commit_interval_s`` (Flink's file source reads
files it finds together in no particular order, which would lose the stream's order); Flink checkpoints every
second, each checkpoint with data committing data files, equality deletes and (for keys upserted twice within it)
position deletes in one commit.

Flink's commits are read back from the table's history at the end, not polled: a batch is committed by the first
Flink snapshot whose cumulative ``added-records`` covers the stream's inserts through that batch (a checkpoint
commits a prefix of the stream), so each batch's latency is that snapshot's time minus the batch's feed time. A
Flink commit never fails "softly": the job runs with no restart and no tolerated failed checkpoint, so any failed
checkpoint or commit fails the job, and the job's final state (cancelled by us, or failed) is one more event."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from icecompact_testing.soak import WriterProcess

__all__ = ["FlinkSoakWriter", "batch_commits"]

#: The snapshot summary key Iceberg's Flink committer writes (the job that committed).
FLINK_JOB_ID = "flink.job-id"


def batch_commits(inserts_per_batch: list[int], flink_snapshots: list[tuple[float, int]]) -> list[float | None]:
    """For each batch, the time of the first Flink snapshot whose cumulative added records cover the stream's
    inserts through that batch (``None``: not committed). ``flink_snapshots``: (commit time, added records) in commit
    order."""
    out: list[float | None] = []
    covered = 0
    cumulative_inserts = 0
    snapshots = iter(flink_snapshots)
    current: tuple[float, int] | None = None
    for inserts in inserts_per_batch:
        cumulative_inserts += inserts
        while covered < cumulative_inserts:
            current = next(snapshots, None)
            if current is None:
                break
            covered += current[1]
        out.append(current[0] if current is not None and covered >= cumulative_inserts else None)
    return out


class FlinkSoakWriter(WriterProcess):
    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self._loaded: Any = None  # the pyiceberg catalog, once loaded

    def run(self) -> int:
        from icecompact_testing.flink import FlinkWriter, StreamSpec

        config = self.config
        spec = StreamSpec(seed=config.seed, keys=config.flink_keys, regions=4, batch_events=config.flink_batch_events)
        writer = FlinkWriter.start(self.catalog, {config.table: config.format_version}, self.workdir / "flink",
                                   spec=spec, checkpoint_interval_ms=config.flink_checkpoint_ms)
        fed_at: list[float] = []
        inserts: list[int] = []

        def feed(batches: int = 1) -> None:
            # The next file only once the last one is committed: files the source finds in one scan of its
            # directory are read in no particular order, and the stream's order is what the model assumes.
            for batch in writer.feed(batches, one_file=True):
                fed_at.append(time.time())
                inserts.append(sum(1 for e in batch if e["op"] != "d"))
            self._wait_records(writer, sum(inserts), timeout_s=600)

        try:
            if config.policy:
                table = self.catalog.load().load_table(tuple(config.table.split(".")))
                with table.transaction() as tx:
                    tx.set_properties(dict(config.policy))
            # The base: the stream's first batches, committed before the soak's clock starts.
            feed(config.flink_base_batches)  # one file: a few large commits, as a table that has been compacted
            (self.workdir / "ready").write_text(json.dumps({"live_rows": len(writer.expected()),
                                                            "stats": {"base_batches": config.flink_base_batches}}))
            while not (self.workdir / "stop").exists() and writer.alive():
                tick = time.monotonic()
                feed()
                time.sleep(max(0.0, config.commit_interval_s - (time.monotonic() - tick)))
        finally:
            status = writer.stop()
        self.event(kind="flink_job", ok=bool(status.get("cancelled")) and status.get("state") == "CANCELED",
                   state=status.get("state"), error=(status.get("error") or "")[:2000], batches=writer.batches_fed)
        self._stream_events(inserts, fed_at, config.flink_base_batches)
        self._write_expected(writer.expected())
        return 0 if status.get("state") == "CANCELED" and status.get("cancelled") else 1

    def _flink_snapshots(self) -> list[tuple[float, int]]:
        """(commit time, added records) of every snapshot the Flink job committed, in commit order."""
        if self._loaded is None:
            self._loaded = self.catalog.load()
        table = self._loaded.load_table(tuple(self.config.table.split(".")))
        flink = []
        for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0):
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if FLINK_JOB_ID in summary:
                flink.append((snapshot.timestamp_ms / 1000.0, int(summary.get("added-records", 0))))
        return flink

    def _wait_records(self, writer: Any, records: int, timeout_s: float) -> None:
        """Until the Flink job's commits added ``records`` rows, from the snapshot summaries (a checkpoint commits a
        prefix of the stream; a full read of the table at every poll, as :meth:`FlinkWriter.wait_committed` does,
        is too slow at this size - the final checks compare the rows)."""
        deadline = time.monotonic() + timeout_s
        while sum(added for _, added in self._flink_snapshots()) < records:
            if not writer.alive():
                raise RuntimeError(f"the Flink job is not running: {writer.status()}\n{writer.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"batches up to {writer.batches_fed} not committed in {timeout_s} s")
            time.sleep(0.3)

    def _stream_events(self, inserts: list[int], fed_at: list[float], base_batches: int) -> None:
        """One ``stream`` event per batch fed after the base (the soak's writer summary reads them)."""
        flink = self._flink_snapshots()
        for b, committed_at in enumerate(batch_commits(inserts, flink)):
            if b < base_batches:
                continue
            if committed_at is None:
                self.event(kind="stream", round=b, t=fed_at[b], ok=False, error="not committed by the Flink job")
            else:
                self.event(kind="stream", round=b, t=fed_at[b], ok=True, latency=max(0.0, committed_at - fed_at[b]))
        self.event(kind="flink_commits", commits=len(flink))

    def _write_expected(self, rows: dict[Any, tuple[str, int, int, str]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        values = list(rows.values())
        table = pa.table({"region": pa.array([r[0] for r in values], pa.string()),
                          "id": pa.array([r[1] for r in values], pa.int64()),
                          "seq": pa.array([r[2] for r in values], pa.int64()),
                          "payload": pa.array([r[3] for r in values], pa.string())})
        pq.write_table(table, self.workdir / "expected.parquet")
        self.event(kind="expected", rows=table.num_rows)


def config_for_flink(config: Any) -> Any:
    """The soak's settings for a Flink writer: no PostgreSQL outage (the job runs with no restart strategy, so a
    catalog outage would fail it - not compaction's doing; the Spark-writer soak covers the outage)."""
    return dataclasses.replace(config, writer="flink", postgres_outage_at=None)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "writer":
        return FlinkSoakWriter(Path(args[1])).run()
    print("usage: python -m icecompact_testing.flink_soak writer WORKDIR (started by the soak; see bench/soak.py)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
