"""Every benchmark script starts as the README prints it, `python benchmarks/NAME.py`: its
imports resolve with only its own folder on the path (three scripts once imported
`benchmarks.common` without putting the repository there, and one a function that had
moved: each stopped with a traceback before printing a row)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # few tests, long ones: handed out first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = {"__init__.py", "common.py", "rawhttp.py", "habits.py", "habit_cases.py"}  # imported
SCRIPTS = sorted(
    p
    for p in [*ROOT.glob("benchmarks/*.py"), *ROOT.glob("benchmarks/slurm/*.py")]
    if p.name not in LIBRARIES and not p.name.startswith("attacks_")  # the campaign's parts
)
# What `python path/to/script.py` gives a script: its folder first on the path, not the
# current directory; the module's top level runs (imports, constants), not its main().
LOAD = "import runpy, sys; sys.path[0] = sys.argv[1]; runpy.run_path(sys.argv[2], run_name='x')"


def _load(script: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    args = [sys.executable, "-c", LOAD, str(script.parent), str(script)]
    done = subprocess.run(args, cwd="/", capture_output=True, text=True, timeout=120, check=False)
    return script, done


def test_every_benchmark_script_imports_as_a_script() -> None:
    assert len(SCRIPTS) >= 25, SCRIPTS  # the glob found the folder
    with ThreadPoolExecutor(max_workers=4) as pool:
        failed = [
            f"{script.relative_to(ROOT)}: {done.stderr.strip().splitlines()[-1]}"
            for script, done in pool.map(_load, SCRIPTS)
            if done.returncode != 0
        ]
    assert not failed, "\n".join(failed)


def test_the_attack_campaign_loads_every_attack_module() -> None:
    """`benchmarks/attacks_*.py` are the campaign's parts, loaded by it rather than run."""
    code = "from benchmarks.attack_campaign import later_attacks; print(len(later_attacks()))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    modules = len(list(ROOT.glob("benchmarks/attacks_*.py")))
    assert int(done.stdout) >= modules, done.stdout  # at least one attack in each
