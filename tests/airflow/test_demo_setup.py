"""The Airflow home `make demo` writes (the demo itself runs `airflow dags test` for real; see README)."""

from __future__ import annotations

import configparser
import stat
from pathlib import Path

from icecompact_airflow.demo import REPO, write_airflow_cfg


def test_airflow_cfg_points_into_the_repo_and_keeps_secrets_and_user_settings(tmp_path: Path) -> None:
    path = write_airflow_cfg(tmp_path / "airflow")
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(path)
    assert cfg.get("core", "dags_folder") == str(REPO / "dags")
    assert cfg.get("core", "plugins_folder") == str(REPO / "plugins")
    assert cfg.get("core", "load_examples") == "False"
    assert cfg.get("database", "sql_alchemy_conn") == f"sqlite:///{tmp_path / 'airflow' / 'airflow.db'}"
    secret = cfg.get("api_auth", "jwt_secret")
    assert len(secret) >= 64 and cfg.get("api", "secret_key") != secret
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    cfg.set("core", "parallelism", "8")
    cfg.add_section("smtp")
    cfg.set("smtp", "smtp_host", "mail.example")
    with open(path, "w") as fh:
        cfg.write(fh)
    write_airflow_cfg(tmp_path / "airflow")  # re-running make demo
    again = configparser.ConfigParser(interpolation=None)
    again.read(path)
    assert again.get("api_auth", "jwt_secret") == secret, "the scheduler and api-server keep sharing one secret"
    assert again.get("smtp", "smtp_host") == "mail.example"
    assert again.get("core", "parallelism") == "4"
