"""Every benchmark script starts as the README prints it, `python benchmarks/NAME.py`: its
imports resolve with only its own folder on the path (three scripts once imported
`benchmarks.common` without putting the repository there, and one a function that had
moved: each stopped with a traceback before printing a row)."""

from __future__ import annotations

import subprocess
import sys
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
# current directory; the module's top level runs (imports, constants), not its main(). All
# scripts load in one interpreter (one start-up, not forty), each on a clean slate: the path
# is put back and every module loaded from the repository outside `src` and the venv
# (benchmarks.common, a script's sibling, the tests' helpers) is forgotten, so one script's
# imports never satisfy the next one's.
LOAD = """
import runpy, sys, traceback
root, scripts = sys.argv[1], sys.argv[2:]
path, installed = list(sys.path), set(sys.modules)
def ours(name):
    module = sys.modules[name]
    places = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", [])]
    return any(p.startswith(root + "/") and not p.startswith((root + "/src/", sys.prefix))
               for p in places)
for script in scripts:
    sys.path[:] = [script.rsplit("/", 1)[0], *path[1:]]
    try:
        runpy.run_path(script, run_name="x")
    except BaseException as error:
        print(f"FAILED {script}: {traceback.format_exception_only(error)[-1].strip()}")
    finally:
        sys.path[:] = path
        for name in [n for n in sys.modules if n not in installed and ours(n)]:
            del sys.modules[name]
"""


def test_every_benchmark_script_imports_as_a_script() -> None:
    assert len(SCRIPTS) >= 25, SCRIPTS  # the glob found the folder
    args = [sys.executable, "-c", LOAD, str(ROOT), *map(str, SCRIPTS)]
    done = subprocess.run(args, cwd="/", capture_output=True, text=True, timeout=300, check=False)
    failed = [line.removeprefix("FAILED ") for line in done.stdout.splitlines()
              if line.startswith("FAILED ")]  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert not failed, "\n".join(failed)


def test_the_attack_campaign_loads_every_attack_module() -> None:
    """`benchmarks/attacks_*.py` are the campaign's parts, loaded by it rather than run."""
    code = "from benchmarks.attack_campaign import later_attacks; print(len(later_attacks()))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    modules = len(list(ROOT.glob("benchmarks/attacks_*.py")))
    assert int(done.stdout) >= modules, done.stdout  # at least one attack in each
