"""The command called in-process leaves the process's signal handling alone."""

from __future__ import annotations

import signal

import pytest

from compaction.cli import main


def test_the_command_called_in_process_leaves_sigpipe_ignored() -> None:
    # Python ignores SIGPIPE (a write to a closed socket raises BrokenPipeError). A library call that made it kill the
    # process would kill a whole test worker later, the first time a proxy thread writes to a socket its peer closed.
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    with pytest.raises(SystemExit):
        main(["--help"])
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
