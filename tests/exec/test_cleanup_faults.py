"""A cleanup that fails or hangs never loses or delays a report (issue 55 items 2 and 3).

Two jobs end before one poll. The step of the first left a container record behind (its
launcher's list of step containers, as `srun --container-image` writes it), so its cleanup
runs ``podman rm``; here a runtime that hangs past its timeout on the first call, then works
(a real executable, named by `exec.containers.container.PODMAN`). Or its cgroup's removal
raises once (a
race with another remover). Either way the poll reports both jobs at once, while the cleanup
is still under way; each is reported once, and the cleanup is tried again until it is done.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from exec_helpers import MakeExecutor, py, spec, wait_for

import railyard.exec.cgroups.cgroup as cgroup
import railyard.exec.containers.container as container
from railyard.exec import LocalExecutor
from railyard.exec.protocol import ExitReport, JobHandle
from railyard.exec.task.steps import names_path

HANGING_PODMAN = """#!/bin/sh
echo "$*" >> {calls}
if [ "$(wc -l < {calls})" -eq 1 ]; then exec sleep 120; fi
exit 0
"""


def _reports(executor: LocalExecutor, count: int) -> list[ExitReport]:
    """Polls until ``count`` reports came (a report waits for its step's stragglers to be
    killed: the poll's own moment, else the cleanup thread's kill, then the next poll)."""
    got: list[ExitReport] = []
    wait_for(lambda: bool(got.extend(executor.poll())) or len(got) >= count)
    return got


def _ended(handles: list[JobHandle]) -> None:
    """Wait until every rank has exited (peeked at, never reaped: the poll reaps it)."""
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    for handle in handles:
        for worker in handle.workers:
            wait_for(lambda w=worker: os.waitid(os.P_PID, w.pid, flags) is not None)


def _two_ended(executor: LocalExecutor, tmp_path: Path) -> list[JobHandle]:
    handles = [executor.start(spec(tmp_path, py("pass"), job_id=j)) for j in ("a", "b")]
    _ended(handles)
    return handles


def _fast_retries(executor: LocalExecutor) -> None:
    """Small pauses between tries, so the test does not wait for the defaults (an executor
    with no cleanup thread, as before issue 55, has none to set)."""
    cleaner = getattr(executor, "cleaner", None)
    if cleaner is not None:
        cleaner.rm_timeout_s = 5.0
        cleaner.first_retry_s = 0.5


def test_a_podman_rm_that_times_out_delays_and_loses_no_report(
    make_executor: MakeExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "podman-calls"
    podman = tmp_path / "bin" / "podman"
    podman.parent.mkdir()
    podman.write_text(HANGING_PODMAN.format(calls=calls))
    podman.chmod(0o755)
    monkeypatch.setattr(container, "PODMAN", str(podman))
    executor = make_executor()
    _fast_retries(executor)
    handles = _two_ended(executor, tmp_path)
    records = handles[0].workers[0].exit_path.parent
    names_path(records, 0).write_text("railyard-a-step-1\n")  # a step container left behind
    reports = _reports(executor, 2)  # its `podman rm` hangs, off this thread
    assert sorted(r.job_id for r in reports) == ["a", "b"]
    assert executor.cleaner.pending() >= 1  # the poll did not wait for it
    assert executor.discard("none", timeout_s=60)  # tried again after the timeout: done
    assert executor.cleaner.failures >= 1
    lines = calls.read_text().splitlines()
    assert len(lines) >= 2
    assert all("railyard-a-step-1" in line for line in lines)
    assert executor.poll() == []  # each reported once


def test_a_cgroup_removal_that_raises_loses_no_report(
    make_executor: MakeExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = make_executor()  # its sweep of stale groups (other runs' leftovers) first
    _fast_retries(executor)
    handles = _two_ended(executor, tmp_path)
    steps = [executor._step(h) for h in handles]
    groups = [executor.containment.tracking.group(s) for s in steps if s is not None]
    remove_tree = cgroup.remove_tree
    raised: list[Path] = []

    def racing(group: Path) -> bool:
        """Raises once, for one of this test's step groups only."""
        if not raised and group.name in steps:
            raised.append(group)
            raise OSError(16, "Device or resource busy (injected)", str(group))
        return remove_tree(group)

    monkeypatch.setattr(cgroup, "remove_tree", racing)
    reports = _reports(executor, 2)
    assert sorted(r.job_id for r in reports) == ["a", "b"]
    assert executor.discard("none", timeout_s=60)  # tried again: every group gone
    if executor.containment.tracking.kind != "none":
        assert raised
        assert executor.cleaner.failures == 1
    assert [g for g in groups if g is not None and g.exists()] == []
    assert executor.poll() == []
    assert executor.running() == set()


def test_a_settled_attempt_is_forgotten_and_a_start_again_adopts_its_record(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """The map of started attempts holds running ones only (it grew for the executor's
    lifetime); a start of a reported attempt again finds its handle record, as after a
    restart, and never runs it twice."""
    out = tmp_path / "runs"
    job = spec(tmp_path, py(f"open({str(out)!r}, 'a').write('ran\\n')"))
    executor = make_executor()
    handle = executor.start(job)
    _ended([handle])
    assert [r.job_id for r in executor.poll()] == ["job"]
    assert executor._started == {}
    assert executor.start(job) == handle
    deadline = time.monotonic() + 60
    while executor.running() and time.monotonic() < deadline:
        executor.poll()
    assert out.read_text() == "ran\n"
    assert executor._started == {}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_job_is_reported_only_once_its_stragglers_are_dead(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """The main process exits and leaves a child that ignores SIGTERM: the report (which
    settles the job and frees its GPUs for another) comes only when the child is dead, however
    the kill is split between the poll and the cleanup thread (the soak saw a settled job's
    processes alive when the report went first)."""
    executor = make_executor()
    if executor.containment.tracking.kind == "none":
        pytest.skip("no tracking cgroup: a child subreaper ends stragglers itself")
    pid_file = tmp_path / "child.pid"
    body = (f"import os, signal, sys, time\nif os.fork() == 0:\n"
            f"    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(300)\n"
            f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.01)\n")  # fmt: skip
    executor.start(spec(tmp_path, py(body)))
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    reports = []
    while not reports and time.monotonic() < deadline:
        reports = executor.poll()
        if reports:
            assert not _alive(child), "reported while a process of the job still ran"
        time.sleep(0.02)
    assert [r.job_id for r in reports] == ["job"]
    assert executor.discard("none", timeout_s=60)
