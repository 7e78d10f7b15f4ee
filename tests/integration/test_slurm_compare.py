"""railyard's batch step and srun tasks against real Slurm's, where Slurm runs on this machine
(benchmarks/slurm/setup_local_slurm.sh): the env comparison and whole scripts; skips
elsewhere, so CI does not depend on Slurm."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from benchmarks.slurm.compare_env import compare, slurm_version
from benchmarks.slurm.habit_cases import CASES

from tests.parts import needs

VERSION = slurm_version()
pytestmark = [
    needs("slurm"),
    pytest.mark.slow,  # the extended tier: a comparison with a real Slurm
    pytest.mark.skipif(os.geteuid() != 0, reason="the comparison runs both systems as root"),
]
# Variables that must agree exactly (the launch contract, in Slurm's words).
AGREE = {
    "SLURM_NTASKS", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_JOB_NODELIST",
    "SLURM_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_PROCID",
    "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS", "SLURM_GPUS_ON_NODE",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_GPUS", "SLURM_STEP_ID", "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL", "SLURM_JOB_NAME", "SLURM_JOB_USER", "SLURM_JOB_UID",
    "SLURM_SUBMIT_HOST", "SLURMD_NODENAME", "SLURM_CPUS_ON_NODE", "ENVIRONMENT",
}  # fmt: skip


def test_batch_srun_tasks_match_slurm(tmp_path: Path) -> None:
    assert VERSION is not None
    report = compare(tmp_path, VERSION, ["batch-srun"])
    scenario = report["scenarios"]["batch-srun"]
    assert scenario["processes"]["slurm"] == scenario["processes"]["railyard"]
    assert scenario["processes"]["slurm"] == ["task-0", "task-1"]
    for compared in scenario["compared"].values():
        assert set(compared["same"]) >= AGREE, compared
        assert compared["differs"] == []


def test_whole_scripts_run_alike(tmp_path: Path) -> None:
    """compare_scripts.py's scripts that once differed: both accept them, run as many
    tasks, end in the same state and leave the same files; no unexplained variable differs
    but for --exclusive's CPU counts (the README's table)."""
    from benchmarks.slurm.compare_scripts import _unexplained
    from benchmarks.slurm.compare_scripts import compare as compare_scripts

    assert VERSION is not None
    names = ["gpus-per-task", "nodelist", "mem-per-cpu", "export-none", "exclusive", "partition"]
    report = compare_scripts(tmp_path, VERSION, names)
    for name, result in report["scripts"].items():
        slurm, railyard = result["slurm"], result["railyard"]
        assert slurm["accepted"], (name, slurm)
        assert railyard["accepted"], (name, railyard)
        assert (slurm["tasks"], slurm["state"], slurm["files"]) == (
            railyard["tasks"],
            railyard["state"],
            railyard["files"],
        ), name
        left = {f for found in result["differ"].values() for f in _unexplained(found)}
        if name != "exclusive":
            assert not left, (name, left)


@pytest.fixture(scope="module")
def habits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """compare_habits.py's cases, every one, both systems side by side (about 4 minutes)."""
    from benchmarks.slurm.compare_habits import compare as compare_habits
    from benchmarks.slurm.habit_cases import CASES

    assert VERSION is not None
    report: dict[str, Any] = compare_habits(tmp_path_factory.mktemp("habits"), VERSION, list(CASES))
    return report


@pytest.mark.parametrize("case", list(CASES))
def test_a_switching_users_habit_runs_as_under_slurm(habits: dict[str, Any], case: str) -> None:
    """Issue 57's items 1-11 and issue 56's throttled array: what the user sees is Slurm's,
    or differs only where habit_cases.DELIBERATE says why."""
    from benchmarks.slurm.compare_habits import differing

    result = habits["cases"][case]
    assert "error" not in result["railyard"]["seen"], result["railyard"]["seen"]
    assert "error" not in result["slurm"]["seen"], result["slurm"]["seen"]
    if result["verdict"] == "open":
        pytest.xfail(result["why"])
    assert result["verdict"] in {"identical", "deliberate"}, {
        key: (result["slurm"]["seen"].get(key), result["railyard"]["seen"].get(key))
        for key in differing(result)
    }
