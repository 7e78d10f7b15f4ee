"""``scontrol show hostnames`` and ``show hostlist`` inside a batch job, as multi-node Slurm
scripts use them (``MASTER_ADDR=$(scontrol show hostnames | head -n 1)``); anything else
scontrol does is refused in one line. The module's rules, then a real job through the
LocalExecutor."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from exec_helpers import NODE, MakeExecutor, logs, spec, wait_report

from railyard.exec import Outcome
from railyard.exec.task.jobfiles import install_shims
from railyard.exec.task.scontrol import REFUSED, run

JOB_ENV = {"SLURM_JOB_NODELIST": "gpu[01-02],login"}


@pytest.mark.parametrize(
    ("argv", "out"),
    [
        (["show", "hostnames"], "gpu01\ngpu02\nlogin"),
        (["show", "hostnames", "a[1-2]-b[3-4]"], "a1-b3\na1-b4\na2-b3\na2-b4"),
        (["show", "hostnames", "n[08-09]", "m1"], "n08\nn09\nm1"),
        (["show", "hostlist", "gpu001,gpu002,gpu003"], "gpu[001-003]"),
        (["show", "hostlist", "n1", "n2", "x"], "n[1-2],x"),
    ],
)
def test_show_hostnames_and_hostlist(argv: list[str], out: str) -> None:
    assert run(argv, JOB_ENV) == (0, out)


@pytest.mark.parametrize(
    "argv",
    [[], ["show"], ["show", "job", "12"], ["update", "JobId=1"], ["hostnames"], ["--version"]],
)
def test_anything_else_is_refused_in_one_line(argv: list[str]) -> None:
    assert run(argv, JOB_ENV) == (1, REFUSED)
    assert "\n" not in REFUSED


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["show", "hostnames", "gpu[5-3]"], JOB_ENV, "runs backwards"),
        (["show", "hostnames", "gpu[1-3"], JOB_ENV, "unclosed"),
        (["show", "hostnames"], {}, "SLURM_JOB_NODELIST is unset"),
        (["show", "hostlist"], JOB_ENV, "needs a list"),
    ],
)
def test_a_bad_or_missing_list_is_an_error(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    code, text = run(argv, env)
    assert code == 1
    assert text.startswith("scontrol: error: ")
    assert message in text


def test_the_shim_sits_beside_srun_and_runs_the_module(tmp_path: Path) -> None:
    bin_dir = install_shims(tmp_path / "bin")
    shim = bin_dir / "scontrol"
    assert (bin_dir / "srun").exists()
    assert shim.stat().st_mode & stat.S_IXUSR
    assert "-I -m railyard.exec.task.scontrol" in shim.read_text()
    assert not list(bin_dir.glob(".*.tmp"))


def test_a_batch_job_reads_its_nodes_with_scontrol(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    body = (
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        'echo "master=$MASTER_ADDR"\n'
        'nodes=( $(scontrol show hostnames) ); echo "count=${#nodes[@]} first=${nodes[0]}"\n'
        'echo "list=$(scontrol show hostlist gpu01,gpu02,gpu03)"\n'
        "scontrol show job 1; echo refused=$?\n"
    )
    script_path = tmp_path / "job" / "script.sh"
    job = spec(tmp_path, (str(script_path),), batch=True, script="#!/bin/bash\n" + body,
               script_path=script_path, steps_dir=tmp_path / "job" / "steps",
               job_env={"SLURM_JOB_ID": "44"})  # fmt: skip
    executor = make_executor(gpus=0)
    executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED, logs(tmp_path)
    text = logs(tmp_path)
    assert f"master={NODE}\n" in text, text
    assert f"count=1 first={NODE}\n" in text, text
    assert "list=gpu[01-03]\n" in text, text
    assert f"{REFUSED}\nrefused=1\n" in text, text


def test_the_module_runs_as_a_program() -> None:
    """What the shim execs: the names on stdout, exit 0; a refusal on stderr, exit 1."""
    ok = subprocess.run(
        [sys.executable, "-m", "railyard.exec.task.scontrol", "show", "hostnames", "n[1-2]"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "n1\nn2\n", "")
    bad = subprocess.run(
        [sys.executable, "-m", "railyard.exec.task.scontrol", "ping"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (bad.returncode, bad.stdout, bad.stderr) == (1, "", REFUSED + "\n")
