"""examples/ddp_train.py under the local executor: train, preempt, resume to the end (CPU,
gloo). One test, because each run costs two torch imports."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from exec_helpers import MakeExecutor, logs, spec, wait_for, wait_report
from tests.parts import needs

from railyard.exec import LocalExecutor, Outcome

# Two torch imports per attempt: the extended tier; the main tier preempts and resumes DDP
# through the control plane (tests/control/test_loop_torch.py).
pytestmark = [needs("torch"), pytest.mark.long, pytest.mark.slow, pytest.mark.heavy]

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
JOB = "ddp"
DDP_TIMEOUT_S = 180.0  # two torch imports on a loaded two-core machine


def train(make_executor: MakeExecutor, tmp_path: Path, restart: int, *args: str) -> LocalExecutor:
    executor: LocalExecutor = make_executor(term_grace_s=30)
    command = (sys.executable, str(SCRIPT), *args)
    executor.start(spec(tmp_path, command, job_id=JOB, workers=2, restart_count=restart))
    return executor


def test_train_preempt_resume(make_executor: MakeExecutor, tmp_path: Path) -> None:
    slow = ("--steps", "400", "--ckpt-every", "5", "--sleep-per-step", "0.05")
    executor = train(make_executor, tmp_path, 0, *slow)
    wait_for((tmp_path / "ckpt" / JOB / "ckpt.pt").exists, DDP_TIMEOUT_S)
    executor.request_checkpoint_stop(JOB, grace_s=120)
    report = wait_report(executor, JOB, DDP_TIMEOUT_S)
    text = logs(tmp_path, JOB)
    assert report.outcome == Outcome.PREEMPTED, text
    assert "resumed" not in text
    preempted = re.search(r"preempted at step (\d+)", text)
    assert preempted is not None, text
    stopped_at = int(preempted.group(1))
    assert 0 < stopped_at < 400

    steps = str(stopped_at + 20)
    executor = train(make_executor, tmp_path, 1, "--steps", steps, "--ckpt-every", "5")
    report = wait_report(executor, JOB, DDP_TIMEOUT_S)
    text = logs(tmp_path, JOB)
    assert (report.outcome, report.exit_code) == (Outcome.COMPLETED, 0), text
    assert f"resumed from step {stopped_at}" in text
    assert re.search(r"final loss \d+\.\d+\ndone\n", text)
