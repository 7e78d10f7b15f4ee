"""sacct's ExitCode column, ``code:signal``, from a job's record."""

from __future__ import annotations

from typing import Any

import pytest

from railyard.cli.history import exit_code


@pytest.mark.parametrize(
    ("record", "shown"),
    [
        ({"exit_code": 3, "signal": None, "end_t_s": 9.0}, "3:0"),
        ({"exit_code": None, "signal": "SIGKILL", "end_t_s": 9.0}, "0:9"),
        ({"exit_code": None, "signal": None, "end_t_s": None}, ""),  # still running
        # a timeout or cancel recorded without the process's status: sacct's 0:0, not "-"
        ({"exit_code": None, "signal": None, "end_t_s": 9.0}, "0:0"),
    ],
)
def test_exit_code_as_sacct_prints_it(record: dict[str, Any], shown: str) -> None:
    assert exit_code(record) == shown  # type: ignore[arg-type]
