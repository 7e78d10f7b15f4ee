"""Every rank of every job starts a fresh interpreter for :mod:`railyard.exec.task.wrapper`, so what
it imports is paid once per launch: it must not pull in the executor, the probe or the store,
and a bare rank none of what only interactive, container or step tasks use (73 -> 45 ms to
import it on this machine, 10 ms of that the interpreter's own start)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from railyard.exec.task.identity import Account
from railyard.exec.task.taskfile import Task

HEAVY = ("railyard.exec.local", "railyard.probe", "railyard.exec.task.launch", "sqlalchemy")
# a bare rank's wrapper needs none of these: terminals, containers, srun steps, the executor
# protocol (only raised from), and the stdlib parts only those or rare paths use
BARE_RANK_SKIPS = (
    "railyard.exec.terminals.interactive", "railyard.exec.terminals.terminal",
    "railyard.client.frames", "railyard.exec.containers.containerrun",
    "railyard.exec.containers.container", "railyard.exec.task.stepd",
    "railyard.exec.task.steps", "railyard.exec.protocol", "subprocess", "socket", "hashlib",
    "ctypes", "typing",
)  # fmt: skip


def _loaded(code: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()


def test_the_wrapper_imports_neither_the_executor_nor_the_probe() -> None:
    loaded = _loaded("import sys, railyard.exec.task.wrapper; print(' '.join(sorted(sys.modules)))")
    assert [m for m in HEAVY if m in loaded] == []


def test_a_bare_rank_reads_its_task_without_the_container_terminal_or_step_modules(
    tmp_path: Path,
) -> None:
    task = tmp_path / "rank-0.task.json"
    Task(env={"A": "1"}, cwd="/", account=Account.current(), cgroups=("/x",)).write(task)
    code = (
        "import sys, railyard.exec.task.wrapper as w; from pathlib import Path; "
        f"t = w.Task.read(Path({str(task)!r})); assert t.env == {{'A': '1'}}; "
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = _loaded(code)
    assert [m for m in BARE_RANK_SKIPS if m in loaded] == []


def test_the_package_still_offers_its_names() -> None:
    import railyard.exec as package

    assert package.LocalExecutor.__name__ == "LocalExecutor"
    assert package.Outcome.COMPLETED.value == "completed"
    assert callable(package.nccl_env)
