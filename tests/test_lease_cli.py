"""``icecompact lease acquire|list|release`` and ``compaction.ops.leases.write_lease`` on a real SQLite ledger: what
a writer outside Airflow uses to announce itself (docs/operations.md "Writers and compaction")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from compaction.catalog import EMBEDDED_CATALOG_NAME
from compaction.cli import main
from compaction.ledger import Ledger, LEDGER_URL_ENV
from compaction.ledger.errors import LedgerError
from compaction.ops.leases import write_lease


@pytest.fixture()
def ledger_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv(LEDGER_URL_ENV, url)
    monkeypatch.delenv("ICECOMPACT_CATALOG", raising=False)
    return url


def test_acquire_list_release(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lease", "acquire", "db.events", "--holder", "nightly-merge", "--ttl", "10m"]) == 0
    lease = capsys.readouterr().out.strip()
    assert main(["lease", "list", "db.events"]) == 0
    listing = capsys.readouterr().out
    assert lease in listing and "nightly-merge" in listing
    with Ledger.open(ledger_url) as ledger:
        [held] = ledger.active_write_leases("db.events", catalog=EMBEDDED_CATALOG_NAME)
        assert held.lease_id == lease and (held.expires_at - held.started_at).total_seconds() == 600
    assert main(["lease", "release", lease]) == 0
    assert main(["lease", "list", "db.events"]) == 0
    assert "no live write lease on db.events" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["lease", "acquire", "events"], "expected NAMESPACE.TABLE"),
    (["lease", "acquire", "db.events", "--ttl", "soon"], "--ttl"),
    (["lease", "acquire", "db.events", "--ttl", "0"], "TTL must be > 0"),
    (["lease", "release", "no-such-lease"], "unknown write lease"),
])
def test_bad_input_is_a_clear_error_and_holds_nothing(ledger_url: str, capsys: pytest.CaptureFixture[str],
                                                      argv: list[str], message: str) -> None:
    assert main(argv) in (2, 10)
    assert message in capsys.readouterr().err
    with Ledger.open(ledger_url) as ledger:
        assert ledger.active_write_leases("db.events", catalog=EMBEDDED_CATALOG_NAME) == []


def test_the_context_manager_holds_the_lease_for_the_block_and_waits_for_a_commit_under_way(
        ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        intent = ledger.begin_commit_intent("db.events", "lake", "plan-1 MAJOR rewrite", ttl_s=60)
        # A commit under way that does not end in time: nothing is held afterwards.
        with pytest.raises(LedgerError, match="still under way"):
            with write_lease("db.events", catalog="lake", wait_s=0, ledger_url=ledger_url):
                pytest.fail("entered while a compaction commit was under way")
        assert ledger.active_write_leases("db.events", catalog="lake") == []
        threading.Timer(0.3, ledger.end_commit_intent, args=(intent,)).start()
        with write_lease("db.events", catalog="lake", holder="etl", ledger_url=ledger_url) as lease:
            assert ledger.live_commit_intents("db.events", catalog="lake") == []
            assert [w.lease_id for w in ledger.active_write_leases("db.events", catalog="lake")] == [lease]
        assert ledger.active_write_leases("db.events", catalog="lake") == []
