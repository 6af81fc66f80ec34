"""Reading a table's metadata on the host with pyiceberg: the per-partition state the planner takes (``inspect``),
decoded manifests and their cache (``manifests``), partition filters (``filters``) and retries of transient storage
errors (``storage_retry``). No Spark."""
