"""Host-side operations: a run (inspect, plan, record, submit each job group, record outcomes), spark-submit and the
resident executors' supervisor, maintenance, post-hoc checks, the fleet view and the health watcher. Above
``compaction.spark`` (whose jobs it starts), ``compaction.metadata`` and ``compaction.ledger``; below the CLI and
the Airflow package."""
