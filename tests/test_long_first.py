"""Modules marked ``long`` are handed to the xdist workers first (tests/conftest.py), so the
run does not end with one long module on one worker while the other sits idle; a module
marked ``exclusive`` goes last. One collection answers both."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHORT = "tests/test_parts.py"  # five quick tests
LONG = "tests/test_lint.py"  # marked long: two in the main tier
ALONE = "tests/health/test_health_checks.py"  # exclusive, 21 tests: by count alone it goes first


@cache
def handed_out() -> list[str]:
    """The module of each collected test, in the order xdist will hand them out."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-n0", "-p", "no:cacheprovider",
         ALONE, SHORT, LONG],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line.split("::")[0] for line in done.stdout.splitlines() if "::" in line]


def test_a_long_module_is_handed_out_before_a_module_of_more_tests() -> None:
    modules = handed_out()
    assert modules.index(LONG) < modules.index(SHORT)
    assert sorted(set(modules)) == sorted({ALONE, SHORT, LONG})


def test_a_module_that_runs_alone_is_handed_out_last() -> None:
    """An ``exclusive`` module idles the other worker while it runs: at the end of the run
    that worker has little left to do."""
    modules = handed_out()
    assert modules.index(ALONE) > max(modules.index(SHORT), modules.index(LONG))
