"""``railyard run`` and ``alloc`` as srun and salloc 22.05 behave (issue 57 item 10): srun's
line for a failed task, status 1 for a Ctrl-C while queued, salloc's Granted/Relinquishing
lines, an allocation shell that is no batch step (no GPU, node or task variables; ``srun -n2``
refused in a one-task allocation, as Slurm refuses it), and the job's srun found when PATH was
set outright. A real ``railyard up`` runs the jobs; the CLI is a child process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

from tests.integration.server_proc import ServerProcess
from tests.integration.test_run_terminal import cli_env, railyard, server
from tests.waiting import wait_for

__all__ = ["server"]  # the module's server, used by name

SALLOC_VARS = {
    "SLURM_CLUSTER_NAME", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NNODES",
    "SLURM_JOB_PARTITION", "SLURM_JOB_ACCOUNT", "SLURM_JOB_QOS", "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
}  # fmt: skip
"""What salloc 22.05 sets in its shell for ``salloc -G1`` (man salloc, OUTPUT ENVIRONMENT
VARIABLES), less the GPU request's own (SLURM_GPUS...), which depend on the spelling."""
NOT_IN_SALLOC = {"CUDA_VISIBLE_DEVICES", "SLURMD_NODENAME", "SLURM_NODEID", "SLURM_PROCID",
                 "SLURM_LOCALID", "SLURM_GTIDS", "SLURM_CPUS_ON_NODE", "SLURM_JOB_GPUS",
                 "SLURM_GPUS_ON_NODE", "GPU_DEVICE_ORDINAL", "ENVIRONMENT"}  # fmt: skip


def test_a_failed_task_gets_sruns_error_line(server: ServerProcess) -> None:
    done = railyard(server, "run", "--", "sh", "-c", "exit 3")
    assert done.returncode == 3, done.stderr
    assert re.search(r"^srun: error: \S+: task 0: Exited with exit code 3$", done.stderr, re.M), (
        done.stderr
    )
    fine = railyard(server, "run", "--", "true")
    assert (fine.returncode, "srun: error" in fine.stderr) == (0, False), fine.stderr


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGINT, 1), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_ctrl_c_or_a_kill_while_queued_cancels_and_exits_1_as_srun(
    server: ServerProcess, sig: signal.Signals, status: int
) -> None:
    """Ctrl-C exits 1 as srun's; `timeout`'s SIGTERM or a hang-up ends the client with that
    signal's status. Either way the job goes with it: it ran later, with nobody attached,
    holding the GPUs it waited for."""
    name = f"later-{sig.name}"
    client = subprocess.Popen(
        [sys.executable, "-m", "railyard", "run", "--begin", "now+1hour", "-J", name, "--",
         "true"],
        env=cli_env(server), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert client.stderr is not None
    line = client.stderr.readline()
    assert "queued and waiting for resources" in line, line
    client.send_signal(sig)
    assert client.wait(timeout=60) == status
    (job,) = [j for j in server.request("GET", "/v1/jobs?state=cancelled") if j["name"] == name]
    assert job["state"] == "cancelled"


def test_alloc_says_granted_and_relinquishing_and_its_shell_is_no_batch_step(
    server: ServerProcess,
) -> None:
    shell = (
        "env; echo ---; srun -n2 true; echo refused=$?; "
        "PATH=/usr/bin:/bin; srun sh -c 'echo step=$SLURM_STEP_ID gpus=$CUDA_VISIBLE_DEVICES'"
    )
    done = railyard(server, "alloc", "-G", "1", "-J", "salloc", "--", "bash", "-c", shell)
    assert done.returncode == 0, done.stderr
    granted = re.search(r"^salloc: Granted job allocation (\d+)$", done.stderr, re.M)
    assert granted is not None, done.stderr
    job_id = granted.group(1)
    assert done.stderr.rstrip().endswith(f"salloc: Relinquishing job allocation {job_id}")
    env_text, _, after = done.stdout.partition("---\n")
    names = {line.split("=", 1)[0] for line in env_text.splitlines() if "=" in line}
    assert names.isdisjoint(NOT_IN_SALLOC), names & NOT_IN_SALLOC
    slurm = {n for n in names if n.startswith("SLURM_")}
    assert slurm >= SALLOC_VARS, SALLOC_VARS - slurm
    assert "refused=2" in after, (after, done.stderr)
    assert "More processors requested than permitted" in done.stderr
    assert re.search(r"^step=0 gpus=\d$", after, re.M), after  # the job's srun, its GPU
    wait_for(lambda: server.request("GET", f"/v1/jobs/{job_id}")["state"] == "completed")
    print(f"salloc shell: {len(slurm)} SLURM_* variables: {sorted(slurm)}", file=sys.stderr)
