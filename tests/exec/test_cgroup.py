"""CPU and memory limits: written to cgroup v2 where it can be, said to be not enforced where not.

The files a cgroup v2 hierarchy would take are checked on a directory that imitates one (a
mock, said here because this machine's /sys/fs/cgroup is cgroup v1 with an empty v2 mount and
cannot take limits); what this machine really does is checked too: the job runs, its header
says the limits are not enforced and why.
"""

from __future__ import annotations

from pathlib import Path

from exec_helpers import MakeExecutor, logs, py, spec, wait_report

from railyard.exec import Outcome
from railyard.exec.cgroups.cgroup import CGROUP_ROOT, Limits, prepare, unavailable
from railyard.exec.cgroups.proctrack import step_name


def fake_root(tmp_path: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def test_limits_are_written_where_cgroup_v2_takes_them(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    (root / "railyard").mkdir()
    (root / "railyard" / "cgroup.subtree_control").write_text("")
    group, line = prepare("job_7", Limits(cpus=4, mem_bytes=16 << 30), root)
    assert group == root / "railyard" / "job_7"
    assert (group / "cpu.max").read_text() == "400000 100000"
    assert (group / "memory.max").read_text() == str(16 << 30)
    assert (root / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert line == f"limits: 4 CPUs and 16384 MiB per node, enforced (cgroup v2 {group})"


def test_why_limits_are_not_enforced(tmp_path: Path) -> None:
    assert unavailable(Limits(cpus=1), tmp_path / "none") == (
        f"cgroup v2 is not mounted at {tmp_path / 'none'}"
    )
    root = fake_root(tmp_path, controllers="pids")
    assert unavailable(Limits(cpus=1, mem_bytes=1), root) == (
        f"cgroup v2 at {root} lacks the cpu and memory controller"
    )
    group, line = prepare("job_1", Limits(mem_bytes=1 << 30), root)
    assert group is None
    assert line.startswith("limits: 1024 MiB per node, not enforced (cgroup v2 at")
    assert prepare("job_1", Limits(), root) == (None, "limits: none requested")


def test_the_job_header_says_whether_limits_hold(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """Real: on this machine the reason comes from /sys/fs/cgroup itself."""
    executor = make_executor(gpus=0)
    handle = executor.start(
        spec(tmp_path, py("print('ok')"), cpus_per_task=2, mem_per_node_mb=1024)
    )
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    reason = unavailable(Limits(cpus=2, mem_bytes=1 << 30))
    if reason is not None:
        expected = f"2 CPUs and 1024 MiB per node, not enforced ({reason})"
        assert handle.limits == expected
        assert f"==== limits: {expected}\n" in logs(tmp_path)
    else:  # a machine with writable cgroup v2: the job ran inside its group
        step = step_name("job", 0, tmp_path / "logs" / "job")  # the step's records directory
        assert handle.limits.endswith(f"(cgroup v2 {CGROUP_ROOT}/railyard/{step})")
