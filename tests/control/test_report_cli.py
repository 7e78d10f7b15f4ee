"""``railyard report`` as a user types it (sreport): the table, ``--csv``, ``--json``, and bad
input in one line with exit 2; GPU-hours against a hand count."""

from __future__ import annotations

import csv
import io
import time

import pytest
from tests.control.test_cli_client import Cli, cli, server  # noqa: F401 (fixtures)

from railyard.control.store.database import Store
from railyard.control.store.usagedays import Ended, record_attempts

pytestmark = pytest.mark.stores


def test_report_like_sreport(cli: Cli, store: Store) -> None:  # noqa: F811
    now = time.time()
    with store.session() as session:
        record_attempts(session, [  # alice: 2 GPUs 1.5 h and 4 GPUs 15 min; bob: 8 GPUs 3 h
            Ended("1", 0, "alice", "default", 2, now - 4 * 3600, now - 2.5 * 3600, "requeue"),
            Ended("1", 1, "alice", "default", 4, now - 3600, now - 2700, "completed"),
            Ended("2", 0, "bob", "research", 8, now - 5 * 3600, now - 2 * 3600, "completed"),
        ])  # fmt: skip
    window = ("-S", "now-1days")
    shown = cli("root", "report", *window)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].endswith("UTC, 16 GPUs in the cluster")
    assert lines[1].split() == ["USER", "GPU-HOURS", "SHARE"]
    assert [line.split() for line in lines[2:]] == [
        ["bob", "24.00", "6.25%"],  # 24 of 16 GPUs x 24 h
        ["alice", "4.00", "1.04%"],
    ]
    days = cli("root", "report", "-S", "now-3days", "-p", "day").stdout.splitlines()
    assert days[1].split() == ["PERIOD", "USER", "GPU-HOURS", "SHARE"]
    rows = list(csv.DictReader(io.StringIO(cli("root", "report", *window, "--by",
                                               "account,user", "--csv").stdout)))  # fmt: skip
    assert [(r["account"], r["user"], float(r["gpu_hours"])) for r in rows] == [
        ("research", "bob", 24.0), ("default", "alice", 4.0)
    ]  # fmt: skip
    own = cli.json("alice", "report", *window, "--user", "bob")  # a user sees their own only
    assert [(line["user"], line["gpu_hours"]) for line in own["lines"]] == [("alice", 4.0)]
    days = cli.json("root", "report", "-S", "now-3days", "--period", "day")
    assert sum(line["gpu_hours"] for line in days["lines"]) == pytest.approx(28.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--by", "team"), "railyard: report: --by 'team': unknown group team (hint: any of"),
        (("-S", "last week"), "railyard: report: bad time 'last week' (hint:"),
        (("-S", "now", "-E", "now-1days"), "railyard: report: --endtime"),
        (("--period", "year"), "argument --period/-p: invalid choice: 'year'"),
    ],
)
def test_bad_report_input_is_one_line_exit_2(
    cli: Cli,  # noqa: F811
    args: tuple[str, ...],
    message: str,
) -> None:
    result = cli("alice", "report", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stdout == ""
