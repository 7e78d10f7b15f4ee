"""``srun -n1 --gpus=1`` (and ``--gres=gpu:1``, ``--gpus-per-task``; ``--gres=gpu:0`` or
``none``: no GPU) inside a batch script:
the step gets GPUs of the allocation, and concurrent steps get different ones, as under Slurm
(real processes through the LocalExecutor; issue 57 item 3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from exec_helpers import MakeExecutor, logs, spec, wait_report

from railyard.exec import Outcome

# Dumps its environment, then holds its step (and so its GPUs) until four steps have dumped:
# four steps alive at once, each holding one GPU, must hold four different ones.
HOLD = (
    "import json, os, sys, time; d = sys.argv[1]; "
    "name = 'step-' + os.environ['SLURM_STEP_ID'] + '-' + os.environ['SLURM_PROCID']; "
    "open(os.path.join(d, name + '.json'), 'w').write(json.dumps(dict(os.environ))); "
    "end = time.monotonic() + 60; "
    "wait = sys.argv[2:] == ['hold']; "
    "[time.sleep(0.05) for _ in iter(lambda: wait and time.monotonic() < end and "
    "len([f for f in os.listdir(d) if f.startswith('step-')]) < 4, False)]"
)


def _visible(tmp_path: Path) -> dict[str, str]:
    out = {}
    for path in sorted(tmp_path.glob("step-*.json")):
        env = json.loads(path.read_text())
        out[path.stem] = env.get("CUDA_VISIBLE_DEVICES", "unset")
    return out


def test_concurrent_gpu_steps_get_their_own_gpus_of_the_allocation(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    hold = f'{sys.executable} -c "{HOLD}" {tmp_path} hold'
    once = f'{sys.executable} -c "{HOLD}" {tmp_path}'
    body = (
        f"srun -n1 --gpus=1 {hold} &\nsrun -n1 --gres=gpu:1 {hold} &\n"
        f"srun --ntasks=1 --gpus-per-task=1 {hold} &\nsrun -n 1 -G 1 {hold} &\nwait\n"
        f"srun -n2 --gpus-per-task=2 {once}\n"
        "srun -n1 --gpus=5 true; echo five=$?\n"
        f"srun -n1 --gres=gpu:0 {once}\nsrun -n1 --gres=none {once}\n"  # Slurm's no GPU
    )
    script_path = tmp_path / "job" / "script.sh"
    job = spec(tmp_path, (str(script_path),), batch=True, script="#!/bin/bash\n" + body,
               script_path=script_path, steps_dir=tmp_path / "job" / "steps", workers=1,
               gpus_per_worker=4, gpus=(0, 1, 2, 3),
               job_env={"SLURM_JOB_ID": "42"})  # fmt: skip
    executor = make_executor(gpus=4)
    executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED, logs(tmp_path)
    visible = _visible(tmp_path)
    held = [v for k, v in visible.items() if k.split("-")[1] in "0123"]
    assert sorted(held) == ["0", "1", "2", "3"], (visible, logs(tmp_path))
    assert (visible["step-4-0"], visible["step-4-1"]) == ("0,1", "2,3")
    assert (visible["step-5-0"], visible["step-6-0"]) == ("", "")  # gpu:0 and none: no GPU
    text = logs(tmp_path)
    assert "srun: error: the step asks for 5 GPU(s) on" in text
    assert "five=2" in text


def test_srun_label_puts_each_line_after_its_task_s_rank(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """``srun -l``: every line of every task, stdout and stderr, after its rank, right-aligned
    to the widest rank as srun 22.05 prints them; a last line without a newline too."""
    body = (
        "srun -l -n 3 -O sh -c 'echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2'\n"
        "srun --label -n 11 -O sh -c 'printf tail$SLURM_PROCID'\n"
    )
    script_path = tmp_path / "job" / "script.sh"
    job = spec(tmp_path, (str(script_path),), batch=True, script="#!/bin/bash\n" + body,
               script_path=script_path, steps_dir=tmp_path / "job" / "steps", workers=1,
               gpus_per_worker=0, job_env={"SLURM_JOB_ID": "43"})  # fmt: skip
    executor = make_executor(gpus=0)
    executor.start(job)
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED, logs(tmp_path)
    lines = logs(tmp_path).splitlines()
    assert sorted(line for line in lines if ": out" in line or ": err" in line) == [
        f"{rank}: {kind} {rank}" for rank in range(3) for kind in ("err", "out")
    ]
    tails = sorted(line for line in lines if "tail" in line)
    assert tails == sorted(f"{rank:>2}: tail{rank}" for rank in range(11)), lines
