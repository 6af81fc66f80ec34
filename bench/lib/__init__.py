"""What the benchmark scripts share; each ``bench/*.py`` is an entry point that imports from here, never from
another script (``from lib.common import ...``: a script's folder, ``bench/``, is on ``sys.path`` when it runs).

* ``common``: paths (``BENCH_DIR``, ``ROOT``, ``RESULTS_DIR``), the ``sys.path`` / ``SPARK_LOCAL_IP`` set-up (done
  when it is imported: import it first), a process's resident memory, a table's live files by kind, a contender's
  timing summary and its report line;
* ``contenders``: clones of a base table and the contenders run on them (ours in-process, Iceberg's
  ``CALL rewrite_data_files`` and its action per partition, plain Parquet), their order between repeats;
* ``phases``: the phase timers wrapped around our Spark job's functions, their medians and grouped breakdown;
* ``scans``: the full-table scan (count and checksum of every column) that times and checks a table;
* ``io_stats``: bytes read and written by Spark stages (Spark's status store);
* ``spark_files_agg``: per-partition file statistics through Spark's ``files`` metadata table (in-session, or run
  alone as a spark-submit application by ``inspect_scale.py``).
"""
