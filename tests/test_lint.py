"""ruff and mypy run as part of the suite, so CI checks style and types too: ruff in the main
tier, mypy (cold, the longest single test) in the extended one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # few tests, long ones: handed out first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
STRICT_PACKAGES = [
    "blueprint", "fabric", "plan", "sched", "exec", "control", "client", "twin", "sim", "health",
    "web",
]  # fmt: skip


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


LINTED = ("src", "tests", "benchmarks", "examples", "docs/hooks")  # the site's generator too


def test_ruff_check() -> None:
    result = _run("ruff", "check", *LINTED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = _run("ruff", "format", "--check", *LINTED)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # a cold mypy over 380 files: ~40 s of the main tier; `mypy src/railyard` runs it
def test_mypy_strict_core() -> None:
    paths = [f"src/railyard/{p}" for p in STRICT_PACKAGES if (ROOT / "src/railyard" / p).is_dir()]
    paths += ["src/railyard/probe.py", "src/railyard/inventory.py"]
    if not paths:
        pytest.fail("no core package found")
    result = _run("mypy", *paths)
    assert result.returncode == 0, result.stdout + result.stderr
