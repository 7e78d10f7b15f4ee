"""Real torch.distributed jobs through the service loop (torch is an optional extra: skips
without it). gloo on this CPU machine; the same script uses NCCL on GPUs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from tests.control.loop_helpers import (
    Cluster,
    add_job,
    job,
    make_loop,
    seed_cluster,
    states,
    step_until,
)
from tests.parts import needs

from railyard.control.store.database import Store

pytestmark = [needs("torch"), pytest.mark.long, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
DDP = [sys.executable, str(ROOT / "examples" / "ddp_train.py")]


def _log(state_dir: Path, job_id: str, rank: int = 0) -> str:
    return (state_dir / "jobs" / job_id / "logs" / f"rank-{rank}.log").read_text()


def test_two_worker_ddp_completes(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2)
    service = make_loop(store, tmp_path, gpus=2)
    job_id = add_job(store, [*DDP, "--steps", "20", "--ckpt-every", "5"], workers=2)
    ended = ("completed", "failed", "cancelled", "timeout")
    step_until(service, lambda: states(store)[job_id] in ended, timeout_s=180)
    assert states(store)[job_id] == "completed", _log(tmp_path, job_id, 0)
    assert "done" in _log(tmp_path, job_id, 0)
    assert "final loss" in _log(tmp_path, job_id, 0)
    assert (tmp_path / "jobs" / job_id / "checkpoints" / "ckpt.pt").exists()


def test_preemption_checkpoints_and_resumes(store: Store, tmp_path: Path) -> None:
    seed_cluster(store, gpus=2, priority_preemption=True)
    service = make_loop(store, tmp_path, gpus=2)
    low = add_job(
        store,
        [*DDP, "--steps", "150", "--ckpt-every", "5", "--sleep-per-step", "0.05"],
        workers=2,
        priority=100,
        preemptible=True,
        checkpoint_grace_s=30.0,
    )
    ckpt = tmp_path / "jobs" / low / "checkpoints" / "ckpt.pt"
    step_until(service, ckpt.exists, timeout_s=120)
    high = add_job(store, [sys.executable, "-c", "print('urgent')"], workers=2, priority=1000)
    step_until(service, lambda: states(store)[high] == "completed", timeout_s=120)
    step_until(service, lambda: states(store)[low] == "completed", timeout_s=180)
    row = job(store, low)
    assert row.restart_count == 1
    log = _log(tmp_path, low, 0)
    preempted = re.search(r"preempted at step (\d+)", log)
    resumed = re.search(r"resumed from step (\d+)", log)
    assert preempted, log
    assert resumed, log
    assert int(resumed.group(1)) == int(preempted.group(1)) > 0
    assert log.rstrip().endswith("done")


VENV_PATH = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"


def test_slurm_example_srun_torchrun_with_gloo(tmp_path: Path) -> None:
    """examples/slurm_ddp.sh as written: the script runs once, srun starts one torchrun per node
    (--ntasks-per-node=1), torchrun one process per GPU, each with LOCAL_RANK < the GPUs it
    sees; gloo here, NCCL on GPUs. The submitter's PATH (a venv) finds torchrun."""
    cluster = Cluster(tmp_path, gpus=2)
    script = (ROOT / "examples" / "slurm_ddp.sh").read_text()
    output = str(tmp_path / "ddp-%j.out")
    env = {"PATH": VENV_PATH}
    [job_id] = cluster.submit(
        script=script, gpus_per_node=2, ntasks_per_node=1, output=output, workdir=str(ROOT), env=env
    )
    cluster.run(job_id, timeout_s=240)
    log = (tmp_path / "ddp-1.out").read_text()
    assert "job 1 on node0: 1 node(s), 2 GPUs each" in log
    assert "final loss" in log
    assert "exit 0" in log
    assert (tmp_path / "jobs" / job_id / "checkpoints" / "ckpt.pt").exists()


def test_srun_python_ddp_one_task_per_gpu(tmp_path: Path) -> None:
    """`srun python train.py` with --ntasks-per-node=2: srun gives each task RANK, LOCAL_RANK,
    WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which init_process_group("env://") reads."""
    cluster = Cluster(tmp_path, gpus=2)
    train = ROOT / "examples" / "ddp_train.py"
    script = (
        f"#!/bin/bash\n#SBATCH --gres=gpu:2 --ntasks-per-node=2\nsrun python {train} --steps 10\n"
    )
    [job_id] = cluster.submit(
        script=script, gpus_per_node=2, ntasks_per_node=2, env={"PATH": VENV_PATH}
    )
    cluster.run(job_id, timeout_s=240)
    log = cluster.log(job_id)
    assert log.count("final loss") == 1  # rank 0 prints it, once
    assert "done" in log
