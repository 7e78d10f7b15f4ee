"""Slurm's time spellings for `railyard history --starttime/--endtime` (sacct -S/-E)."""

from __future__ import annotations

from datetime import datetime

import pytest

from railyard.client.timespec import parse_time

NOW = datetime(2026, 11, 22, 15, 30, 45)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-20", datetime(2026, 11, 20)),
        ("2026-11-20T10:00", datetime(2026, 11, 20, 10, 0)),
        ("2026-11-20T10:00:07", datetime(2026, 11, 20, 10, 0, 7)),
        ("11/20", datetime(2026, 11, 20)),
        ("11/20/25", datetime(2025, 11, 20)),
        ("10:15", datetime(2026, 11, 22, 10, 15)),
        ("10:15:30", datetime(2026, 11, 22, 10, 15, 30)),
        ("today", datetime(2026, 11, 22)),
        ("tomorrow", datetime(2026, 11, 23)),
        ("now", NOW),
        ("NOW", NOW),
        ("now-1days", datetime(2026, 11, 21, 15, 30, 45)),
        ("now-1day", datetime(2026, 11, 21, 15, 30, 45)),
        ("now-1d", datetime(2026, 11, 21, 15, 30, 45)),
        ("now-3hours", datetime(2026, 11, 22, 12, 30, 45)),
        ("now-90minutes", datetime(2026, 11, 22, 14, 0, 45)),
        ("now-90min", datetime(2026, 11, 22, 14, 0, 45)),
        ("now-90m", datetime(2026, 11, 22, 14, 0, 45)),
        ("now-45", datetime(2026, 11, 22, 15, 30, 0)),  # seconds by default
        ("now+2weeks", datetime(2026, 12, 6, 15, 30, 45)),
    ],
)
def test_spellings(text: str, expected: datetime) -> None:
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday-ish", "bad time 'yesterday-ish' (hint: YYYY-MM-DD"),
        ("now-1fortnights", "unknown unit 'fortnights'"),
        ("2026-13-01", "bad time '2026-13-01': month must be in 1..12"),
        ("25:00", "bad time '25:00': hour must be in 0..23"),
        ("", "bad time ''"),
    ],
)
def test_bad_spellings_name_the_value_and_the_formats(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="hint") as info:
        parse_time(text, NOW)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "past", "future"),
    [
        # a time of day already past: today's when looking back (sacct -S), tomorrow's when
        # waiting for it (sbatch --begin), as Slurm's parse_time reads them
        ("10:15", datetime(2026, 11, 22, 10, 15), datetime(2026, 11, 23, 10, 15)),
        ("16:00", datetime(2026, 11, 22, 16, 0), datetime(2026, 11, 22, 16, 0)),
        ("noon", datetime(2026, 11, 22, 12, 0), datetime(2026, 11, 23, 12, 0)),
        ("teatime", datetime(2026, 11, 22, 16, 0), datetime(2026, 11, 22, 16, 0)),
        ("fika", datetime(2026, 11, 22, 15, 0), datetime(2026, 11, 23, 15, 0)),
        ("midnight", datetime(2026, 11, 22), datetime(2026, 11, 23)),
        # a day of the year already past: next year's, unless the year is given
        ("03/01", datetime(2026, 3, 1), datetime(2027, 3, 1)),
        ("12/24", datetime(2026, 12, 24), datetime(2026, 12, 24)),
        ("11/22", datetime(2026, 11, 22), datetime(2026, 11, 22)),
        ("03/01/26", datetime(2026, 3, 1), datetime(2026, 3, 1)),
        ("2026-11-20T10:00", datetime(2026, 11, 20, 10, 0), datetime(2026, 11, 20, 10, 0)),
        ("now-1days", datetime(2026, 11, 21, 15, 30, 45), datetime(2026, 11, 21, 15, 30, 45)),
    ],
)
def test_a_time_to_wait_for_is_the_next_one(text: str, past: datetime, future: datetime) -> None:
    assert parse_time(text, NOW) == past
    assert parse_time(text, NOW, future=True) == future


@pytest.mark.parametrize("text", ["now+99999999999days", "now+9999999days", "now-9999999days"])
def test_a_time_out_of_range_is_a_one_line_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"out of range \(hint: ") as info:
        parse_time(text, NOW, future=True)
    assert text in str(info.value)
