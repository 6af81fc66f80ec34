"""Airflow plugin: the compaction health and history UI under ``/compaction`` (behind Airflow's authentication).

See :mod:`icecompact_airflow.web`. Importing this module imports FastAPI and Airflow only (no pyspark/pyiceberg).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from icecompact_airflow.web import PREFIX, create_app


class IcecompactPlugin(AirflowPlugin):
    name = "icecompact"
    fastapi_apps = [{"app": create_app(), "url_prefix": PREFIX, "name": "Iceberg compaction health"}]
    external_views = [{"name": "Iceberg compaction", "href": f"{PREFIX}/", "destination": "nav",
                       "category": "browse", "url_route": "iceberg-compaction"}]
