"""``railyard up --max-tasks-per-job`` / ``--max-array-size`` / ``--max-jobs-per-user``: a
limit no job could meet, or one past what the API could ever accept, stops ``up`` before it
starts (exit 2, one line)."""

from __future__ import annotations

import pytest

from railyard.cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-tasks-per-job", "0"], "up: --max-tasks-per-job: 1 to 1048576"),
        (["--max-array-size", "0"], "up: --max-array-size: 1 to 10000"),
        (["--max-array-size", "10001"], "up: --max-array-size: 1 to 10000"),
        (["--max-jobs-per-user", "0"], "up: --max-jobs-per-user: 1 to 2147483647"),
    ],
)
def test_a_site_limit_out_of_range_stops_up(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["up", *flags]) == 2
    assert message in capsys.readouterr().err
