"""The two tiers (tests/tiers.py, tests/conftest.py): the main tier runs store-agnostic tests
on SQLite and the store's own tests on both stores, each tiered test at its main size; the
extended tier (`-m slow`) holds the rest, so the two together run everything once."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # few tests, long ones: handed out first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
AGNOSTIC = "tests/control/test_auth.py"  # tests the API's rules, whatever the store
STORES = "tests/control/test_transitions.py"  # compare-and-set: what the store itself does
TIERED = "tests/sched/test_sched_properties.py"
MARKS = "tier-mark "  # the lines tests/tier_marks.py prints


def _collect(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-n0", "-p", "no:cacheprovider",
         "-p", "tests.tier_marks", *args, AGNOSTIC, STORES, TIERED],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.splitlines()


@cache
def main_tier() -> list[str]:
    """What the README's test command runs (pyproject's `-m 'not slow'`)."""
    return [line for line in _collect() if "::" in line and not line.startswith(MARKS)]


@cache
def every_test() -> dict[str, bool]:
    """Every test (`-m ""`), each with whether it is marked slow once collection is done."""
    marked = [line.removeprefix(MARKS).rsplit(" ", 1) for line in _collect("-m", "")
              if line.startswith(MARKS)]  # fmt: skip
    return {test: tier == "slow" for test, tier in marked}


def of(items: list[str], path: str, marker: str) -> list[str]:
    return [i for i in items if i.startswith(path) and marker in i]


def test_the_main_tier_runs_store_agnostic_tests_on_sqlite_only() -> None:
    main = main_tier()
    assert of(main, AGNOSTIC, "sqlite") != []
    assert of(main, AGNOSTIC, "postgresql") == []
    assert of(main, STORES, "sqlite") != []
    assert of(main, STORES, "postgresql") != []
    assert of(main, TIERED, "[main]") != []
    assert of(main, TIERED, "[extended]") == []


def test_the_extended_tier_holds_the_rest_and_the_two_make_the_whole() -> None:
    """`-m slow` selects the tests marked slow: the main tier must be exactly the others."""
    everything = every_test()
    extended = [test for test, slow in everything.items() if slow]
    assert of(extended, AGNOSTIC, "postgresql") != []
    assert of(extended, AGNOSTIC, "sqlite") == []
    assert of(extended, STORES, "") == []
    assert of(extended, TIERED, "[extended]") != []
    assert of(extended, TIERED, "[main]") == []
    assert sorted(main_tier()) == sorted(test for test, slow in everything.items() if not slow)
