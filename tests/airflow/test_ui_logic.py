"""Pure parts of the UI plugin: which token a request carries, form tokens, DAG runs of a table, the SVG charts."""

from __future__ import annotations

import datetime as dt

import pytest

from icecompact_airflow.airflow_api import api_base, check_form_token, form_token, runs_for_table, user_token
from icecompact_airflow.charts import history_chart, sparkline

T0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def test_user_token_prefers_the_header_like_airflow() -> None:
    assert user_token({"authorization": "Bearer abc"}, {"_token": "cookie"}) == "abc"
    assert user_token({"authorization": "Basic xyz"}, {"_token": "cookie"}) == "cookie"
    assert user_token({}, {}) is None


def test_form_token_is_bound_to_the_user_token() -> None:
    value = form_token("alice-token")
    assert check_form_token("alice-token", value)
    assert not check_form_token("bob-token", value)
    assert not check_form_token("alice-token", None) and not check_form_token("alice-token", "")


def test_api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICECOMPACT_AIRFLOW_API_URL", raising=False)
    assert api_base("http://127.0.0.1:8080/compaction/tables/x?catalog=c") == "http://127.0.0.1:8080"
    monkeypatch.setenv("ICECOMPACT_AIRFLOW_API_URL", "http://airflow:8080/")
    assert api_base("https://public.example/compaction/") == "http://airflow:8080"


def test_runs_for_table_needs_the_table_by_name_in_the_catalog() -> None:
    runs = [
        {"dag_run_id": "a", "conf": {"tables": ["db.t"], "catalog": "c1"}},
        {"dag_run_id": "b", "conf": {"tables": "db.x, db.t"}},  # default catalog
        {"dag_run_id": "c", "conf": {"tables": ["*"], "catalog": "c1"}},  # a pattern: not this table's run
        {"dag_run_id": "d", "conf": {"tables": ["db.t"], "catalog": "c2"}},
        {"dag_run_id": "e", "conf": None},
    ]
    assert [r["dag_run_id"] for r in runs_for_table(runs, "db.t", "c1", "c1")] == ["a", "b"]
    assert [r["dag_run_id"] for r in runs_for_table(runs, "db.t", "c1", "other")] == ["a"]


def test_history_chart_marks_runs_and_draws_steps() -> None:
    samples = [{"recorded_at": (T0 + dt.timedelta(hours=h)).isoformat(), "data_files": 10 + h, "fragment_files": h,
                "delete_files": d, "delete_ratio": d / 100} for h, d in enumerate([0, 4, 8, 2])]
    runs = [{"run_id": "r1", "status": "succeeded", "started_at": (T0 + dt.timedelta(hours=2, minutes=30)).isoformat()},
            {"run_id": "r2<x>", "status": "failed", "dry_run": True, "started_at": T0.isoformat()}]
    svg = history_chart(samples, runs)
    assert svg.count('class="run-marker"') == 2 and svg.count('class="sample"') == 4
    assert 'stroke="#b91c1c"' in svg and "r2&lt;x&gt;" in svg and "<x>" not in svg  # escaped
    deletes = svg.split('class="series-delete_files"')[1].split('points="')[1].split('"')[0]
    ys = [float(p.split(",")[1]) for p in deletes.split()]
    assert max(ys) > min(ys) and len(ys) == 2 * 4  # a step per sample, then held to the end
    assert "no health samples" in history_chart([], runs)


def test_sparkline() -> None:
    assert "polyline" not in sparkline([])
    line = sparkline([(T0, 3), (T0 + dt.timedelta(days=1), 0)])
    assert "delete files: 3 -&gt; 0 (2 samples)" in line and line.count("<circle") == 1
