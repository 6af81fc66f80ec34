from __future__ import annotations

from compaction.core.display import format_bytes, validation_label


def test_format_bytes_picks_the_largest_unit_below_1024() -> None:
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1024) == "1.0 KiB"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3.0 GiB"
    assert format_bytes(-2048) == "-2.0 KiB"
    assert format_bytes(5 * 1024**5) == "5120.0 TiB"


def test_validation_label() -> None:
    assert validation_label("count", "passed") == "passed (count)"
    assert validation_label(None, "skipped") == "skipped"
    assert validation_label("count", None) == "-"
