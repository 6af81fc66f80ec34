"""Airflow plugin: the compaction health and history UI under ``/compaction`` (behind Airflow's authentication), and
the listener that gives tasks writing an Iceberg table a write lease (:mod:`icecompact_airflow.writer_leases`).

See :mod:`icecompact_airflow.web`. Importing this module imports FastAPI and Airflow only (no pyspark/pyiceberg).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from icecompact_airflow import writer_leases
from icecompact_airflow.web import PREFIX, create_app


class IcecompactPlugin(AirflowPlugin):
    name = "icecompact"
    # Tasks declaring an Iceberg table as an outlet hold a write lease on it while they run.
    listeners = [writer_leases]
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "Iceberg compaction health"}]
    external_views = [{"name": "Iceberg compaction", "href": f"{PREFIX}/", "destination": "nav",
                       "category": "browse", "url_route": "iceberg-compaction"}]
