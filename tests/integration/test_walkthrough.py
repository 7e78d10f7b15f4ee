"""The README's ten-minute tour runs as printed (issue 58, item 5): its commands, in order,
against a real `railyard up --gpus 8`. It waits on job states and log lines, never on a number
of seconds, so on a loaded machine too job 1 is preempted after its first checkpoint and
resumes from it, and each later command finds what it reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess
from tests.parts import needs
from tests.waiting import scaled

ROOT = Path(__file__).resolve().parents[2]
# The tour's setup (the venv and torch): the test's own interpreter stands in for them.
SETUP = ("source .venv/bin/activate", "pip install")


def tour_commands(readme: str) -> list[str]:
    """The `$ ` lines of the tour's console blocks, from its heading to the plan example."""
    tour = readme[readme.index("## A ten-minute tour") : readme.index("$ railyard plan")]
    commands: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", tour, flags=re.DOTALL):
        commands += [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    return [c for c in commands if not c.startswith(SETUP)]


def test_the_tour_waits_on_states_not_seconds() -> None:
    commands = tour_commands((ROOT / "README.md").read_text())
    assert any(c.startswith("wait_for() {") for c in commands)
    assert any(c.startswith("until railyard logs 1") for c in commands)
    # a shell `sleep N` only inside a loop that polls for a state, never as a step of its own
    sleeps = [c for c in commands if re.search(r"(^|[;&|]\s*)sleep \d", c)]
    assert [c for c in sleeps if not c.startswith(("until ", "wait_for() {"))] == []
    assert not re.search(r"seconds? later", (ROOT / "README.md").read_text())


def test_the_docs_walkthrough_holds_the_tours_commands() -> None:
    page = (ROOT / "docs/tutorials/walkthrough.md").read_text()
    commands = tour_commands((ROOT / "README.md").read_text())
    assert len(commands) > 8
    assert [c for c in commands if f"$ {c}" not in page] == []


@pytest.mark.slow  # the extended tier: the tour runs for a minute or more
@needs("torch")
def test_the_tour_runs_as_printed(tmp_path: Path) -> None:
    commands = tour_commands((ROOT / "README.md").read_text())
    state = tmp_path / "state"
    state.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    script = "\n".join(f"echo '>>> {i}'\n{c}\necho \"<<< $?\"" for i, c in enumerate(commands))
    server = ServerProcess(state, gpus=8)
    server.start()
    try:
        env = {
            **os.environ,
            "RAILYARD_HOME": str(state),  # client.json: the server's URL and admin token
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        done = subprocess.run(
            ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
            timeout=scaled(300), check=False,
        )  # fmt: skip
    finally:
        server.stop()
    said = done.stdout + done.stderr
    assert re.findall(r"<<< (\d+)", said) == ["0"] * len(commands), said[-4000:]
    preempted = re.search(r"preempted at step (\d+)", said)
    resumed = re.search(r"resumed from step (\d+)", said)
    assert preempted, said[-4000:]
    assert resumed, said[-4000:]
    # after its first checkpoint (ddp_train.py saves every 10 steps, and the tour waits for it)
    assert int(resumed.group(1)) == int(preempted.group(1)) >= 10
    assert said.count("task 1 of array 3 is job 5 on GPU") == 2, said[-4000:]  # logs and file
    assert "final loss" in said
    assert "done" in said
