"""Every rank of every job starts a fresh interpreter for :mod:`railyard.exec.wrapper`, so what
it imports is paid once per launch: it must not pull in the executor, the probe or the store."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("railyard.exec.local", "railyard.probe", "railyard.exec.launch", "sqlalchemy")


def test_the_wrapper_imports_neither_the_executor_nor_the_probe() -> None:
    code = "import sys, railyard.exec.wrapper; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [m for m in HEAVY if m in loaded] == []


def test_the_package_still_offers_its_names() -> None:
    import railyard.exec as package

    assert package.LocalExecutor.__name__ == "LocalExecutor"
    assert package.Outcome.COMPLETED.value == "completed"
    assert callable(package.nccl_env)
