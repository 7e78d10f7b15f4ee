"""Process tracking: which kind a machine gets, and that each kind ends every process of a
step, detached ones included.

The choice is checked on directories that imitate the cgroup files (said here: a mock); the
kill loops run on this machine's real hierarchies (the v1 freezer, the v2 mount with
``cgroup.kill``) under a parent of the test's own, removed afterwards.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from exec_helpers import MakeExecutor, logs, py, spec, wait_for, wait_report

from railyard.exec import Outcome
from railyard.exec.cgroups import cgroup, proctrack
from railyard.exec.cgroups.containment import Containment
from railyard.exec.cgroups.devices import Confinement
from railyard.exec.cgroups.proctrack import Tracking, choose

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make cgroups")

# Forks a setsid'ed daemon (fork, setsid, fork) and a child that keeps forking, prints "ready",
# then sleeps: the processes a process group cannot hold.
SPREAD = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
if os.fork() == 0:
    while True:
        if os.fork() == 0:
            time.sleep(1000)
        time.sleep(0.01)
print("ready", flush=True)
time.sleep(1000)
"""


def fake_v2(tmp_path: Path, kill: bool) -> Path:
    root = tmp_path / "v2"
    (root / "railyard").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("")
    if kill:
        (root / "railyard" / "cgroup.kill").write_text("")
    return root


def fake_freezer(tmp_path: Path) -> Path:
    root = tmp_path / "freezer"
    (root / "railyard").mkdir(parents=True)
    (root / "cgroup.procs").write_text("")
    (root / "railyard" / "freezer.state").write_text("THAWED")
    return root


def test_the_choice_prefers_cgroup_kill_then_the_freezer_then_a_subreaper(
    tmp_path: Path,
) -> None:
    v1_only = tmp_path / "tmpfs"  # like this machine's /sys/fs/cgroup: not a v2 mount
    v1_only.mkdir()
    with_kill = fake_v2(tmp_path, kill=True)
    freezer = fake_freezer(tmp_path)
    assert choose((v1_only, with_kill), freezer) == Tracking("cgroup2", with_kill / "railyard")

    old_kernel = fake_v2(tmp_path / "old", kill=False)
    chosen = choose((old_kernel,), freezer)
    assert chosen == Tracking(
        "freezer", freezer / "railyard", f"{old_kernel / 'railyard'} has no cgroup.kill"
    )
    assert chosen.describe() == (
        f"process tracking: cgroup v1 freezer ({freezer / 'railyard'}); "
        f"{old_kernel / 'railyard'} has no cgroup.kill"
    )

    chosen = choose((v1_only,), tmp_path / "none")
    assert chosen.kind == "subreaper"
    assert chosen.group("step") is None
    assert chosen.describe() == (
        "process tracking: the wrapper as child subreaper only, weaker than a cgroup (a "
        f"process that outlives a SIGKILLed wrapper escapes); no cgroup v2 mount at {v1_only}; "
        f"no cgroup v1 freezer at {tmp_path / 'none'}"
    )


class KernelAnswer:
    """A cgroup file made to answer `errno` to `Path.<method>` while `errno` is set: the
    kernel's answer for a group being removed lasts a moment and cannot be forced here (a
    mock; the real one crashed a cancel in the main tier)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str, file_name: str) -> None:
        self.errno = 0
        real = getattr(Path, method)

        def answer(path: Path, *args: Any, **kwargs: Any) -> Any:
            if path.name == file_name and self.errno:
                raise OSError(self.errno, os.strerror(self.errno))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(Path, method, answer)


def test_a_group_being_removed_has_no_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cgroup the kernel is removing answers ENODEV to a read of its `cgroup.procs` for a
    moment. Other errors still surface."""
    group = tmp_path / "step"
    group.mkdir()
    (group / "cgroup.procs").write_text("12\n34\n")
    kernel = KernelAnswer(monkeypatch, "read_text", "cgroup.procs")
    assert proctrack.procs(group) == [12, 34]
    kernel.errno = errno.ENODEV
    assert proctrack.procs(group) == []
    kernel.errno = errno.EACCES
    with pytest.raises(PermissionError):
        proctrack.procs(group)


def test_killing_a_group_being_removed_finds_nothing_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race on the write: `cgroup.kill` of a group being removed answered ENODEV to
    a cancel in the main tier's teardown. A group already gone has nothing to kill either;
    other errors still surface."""
    group = tmp_path / "step"
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    kernel = KernelAnswer(monkeypatch, "write_text", "cgroup.kill")
    kernel.errno = errno.ENODEV
    assert proctrack.kill_v2(group, timeout_s=1.0)
    kernel.errno = errno.ENOENT
    assert proctrack.kill_v2(tmp_path / "gone", timeout_s=1.0)
    kernel.errno = errno.EACCES
    with pytest.raises(PermissionError):
        proctrack.kill_v2(group, timeout_s=1.0)


def test_step_names_differ_per_server_and_attempt(tmp_path: Path) -> None:
    a = proctrack.step_name("7", 0, tmp_path / "a" / "attempts" / "7")
    assert a.startswith("job_7_0_")
    assert a != proctrack.step_name("7", 0, tmp_path / "b" / "attempts" / "7")
    assert a != proctrack.step_name("7", 1, tmp_path / "a" / "attempts" / "7")
    assert proctrack.step_name("a/../b", 0, tmp_path).startswith("job_a_.._b_0_")


def hierarchies() -> list[tuple[str, Path]]:
    found = [("freezer", proctrack.FREEZER)]
    found += [("cgroup2", root) for root in proctrack.V2_CANDIDATES]
    return [(kind, root) for kind, root in found if (root / "cgroup.procs").is_file()]


@pytest.fixture(params=hierarchies(), ids=lambda p: p[0])
def tracking(request: pytest.FixtureRequest) -> Iterator[Tracking]:
    """A tracking of the given kind under a parent of this test's own (removed after)."""
    kind, root = request.param
    if kind == "cgroup2" and not (root / "cgroup.controllers").is_file():
        pytest.skip(f"{root} is not cgroup v2")
    parent = root / f"railyard-test-{secrets.token_hex(4)}"
    try:
        parent.mkdir()
    except PermissionError:
        pytest.skip(f"cannot make cgroups under {root}")
    if kind == "cgroup2" and not (parent / "cgroup.kill").exists():
        parent.rmdir()
        pytest.skip("no cgroup.kill on this kernel")
    yield Tracking(kind, parent)
    for child in parent.iterdir():
        if child.is_dir():
            Tracking(kind, parent).end(child.name)
    parent.rmdir()


@ROOT_ONLY
def test_ending_a_step_kills_every_process_in_it(tracking: Tracking) -> None:
    """Freezer: freeze, kill, thaw until empty; v2: cgroup.kill. A forking child and a
    setsid daemon go too, and the group is removed."""
    group = tracking.make("step")
    assert group is not None
    procs = group / "cgroup.procs"
    proc = subprocess.Popen(
        [sys.executable, "-c", SPREAD],
        stdout=subprocess.PIPE,
        preexec_fn=lambda: procs.write_text(str(os.getpid())),
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    wait_for(lambda: len(tracking.pids("step")) >= 4)
    assert tracking.end("step")
    assert proc.wait() == -signal.SIGKILL
    assert not group.exists()


@ROOT_ONLY
def test_preemption_ends_a_detached_daemon(make_executor: MakeExecutor, tmp_path: Path) -> None:
    """Through the executor: a preempted job that ignores the signals is killed after its
    graces, and its setsid'ed daemon dies with it; the header says how GPUs are confined."""
    pid_file = tmp_path / "daemon.pid"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "p = subprocess.Popen(['setsid', 'sleep', '1000'])\n"
        "for sig in (signal.SIGUSR1, signal.SIGTERM): signal.signal(sig, signal.SIG_IGN)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(1000)\n"
    )
    executor = make_executor(gpus=0, term_grace_s=0.5)
    executor.start(spec(tmp_path, py(code)))
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    daemon = int(pid_file.read_text())
    executor.request_checkpoint_stop("job", 0.2)
    report = wait_report(executor, "job")
    assert (report.outcome, report.signal) == (Outcome.KILLED, "SIGKILL")
    wait_for(lambda: not Path(f"/proc/{daemon}").exists(), 10)
    assert f"==== {executor.containment.device_guard.describe()}\n" in logs(tmp_path)


def test_the_subreaper_fallback_kills_what_the_command_left(
    make_executor: MakeExecutor, tmp_path: Path
) -> None:
    """No cgroup: the wrapper reaps the orphaned daemon and kills it when the command ends."""
    pid_file = tmp_path / "daemon.pid"
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(1000)\n"
        "    os._exit(0)\n"
        f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.01)\n"
    )
    no_cgroups = Containment(Tracking("subreaper"), Confinement(None, "a test"))
    executor = make_executor(gpus=0, containment=no_cgroups)
    executor.start(spec(tmp_path, py(code)))
    assert wait_report(executor, "job").outcome == Outcome.COMPLETED
    daemon = int(pid_file.read_text())
    wait_for(lambda: not Path(f"/proc/{daemon}").exists(), 10)


def test_old_empty_step_groups_are_swept(tmp_path: Path) -> None:
    """Groups left by jobs ended behind a server's back go at the next start, with the empty
    groups below them; a young one (maybe another server's start in flight) and one with
    processes, in it or below it, stay. Plain directories
    stand in for cgroups here (a mock)."""
    tracking, dev = tmp_path / "tracking", tmp_path / "devices"
    for parent in (tracking, dev):
        (parent / "old").mkdir(parents=True)
        (parent / "young").mkdir()
        (parent / "busy").mkdir()
        (parent / "busy" / "cgroup.procs").write_text("4242\n")
        (parent / "nested" / "batch").mkdir(parents=True)  # a group made below the step's
        (parent / "held" / "batch").mkdir(parents=True)
        (parent / "held" / "batch" / "cgroup.procs").write_text("4243\n")
        for name in ("old", "busy", "nested", "held"):
            os.utime(parent / name, (0, 0))
    containment = Containment(Tracking("cgroup2", tracking), Confinement(dev))
    assert sorted(containment.sweep()) == sorted(
        str(parent / name) for parent in (tracking, dev) for name in ("old", "nested")
    )
    assert sorted(p.name for p in tracking.iterdir()) == ["busy", "held", "young"]


Outside = tuple[Containment, str, subprocess.Popen[bytes], Path]


@pytest.fixture
def outside_tracking(tracking: Tracking) -> Iterator[Outside]:
    """A step with a ``sleep`` in a group below the step's in the v1 freezer hierarchy, and
    not in its tracking group: where Podman puts ``conmon`` (``<step>/conmon`` in the v1
    hierarchies only). Yields the containment, the step, the process and its group."""
    freezer = proctrack.FREEZER
    if not (freezer / "cgroup.procs").is_file():
        pytest.skip("no cgroup v1 freezer hierarchy here")
    made_parent = not (freezer / proctrack.PARENT).exists()
    step = f"railyard-test-{secrets.token_hex(4)}"
    monitor = freezer / proctrack.PARENT / step / "conmon"
    monitor.mkdir(parents=True)
    tracking.make(step)
    procs = monitor / "cgroup.procs"
    sleeper = subprocess.Popen(
        ["sleep", "1000"], preexec_fn=lambda: procs.write_text(str(os.getpid()))
    )
    threading.Thread(target=sleeper.wait).start()  # reaped as soon as it dies
    try:
        yield (
            Containment(tracking, Confinement(None, "a test"), tracking.parent),
            step,
            sleeper,
            monitor,
        )
    finally:
        if monitor.exists():
            (monitor / "freezer.state").write_text("THAWED")
        sleeper.kill()
        sleeper.wait()
        cgroup.remove_tree(monitor.parent)
        if made_parent:  # unless a runtime of another test made a group in it meanwhile
            with contextlib.suppress(OSError):
                (freezer / proctrack.PARENT).rmdir()


def groups_of(step: str) -> list[Path]:
    return list(proctrack.CGROUP_MOUNT.glob(f"*/*/{step}"))


@ROOT_ONLY
def test_ending_a_step_kills_a_runtime_monitor_outside_its_tracking_group(
    outside_tracking: Outside,
) -> None:
    containment, step, sleeper, _ = outside_tracking
    assert containment.end(step)
    wait_for(lambda: sleeper.returncode is not None)
    assert sleeper.returncode == -signal.SIGKILL
    assert groups_of(step) == []
    assert step not in containment.leftover


@ROOT_ONLY
def test_ending_a_step_waits_for_a_process_to_die_then_a_retry_finishes(
    outside_tracking: Outside,
) -> None:
    """A frozen process takes its SIGKILL only once thawed: past its timeout ``end`` says so
    and keeps the step; within it, it waits; a later :meth:`Containment.retry` finishes."""
    containment, step, _, monitor = outside_tracking
    (monitor / "freezer.state").write_text("FROZEN")
    assert not containment.end(step, timeout_s=0.1)
    containment.retry()
    assert step in containment.leftover
    assert groups_of(step)
    threading.Timer(0.3, lambda: (monitor / "freezer.state").write_text("THAWED")).start()
    assert containment.end(step, timeout_s=30)
    assert groups_of(step) == []
    (monitor.parent / "conmon").mkdir(parents=True)  # the next: left by a retry
    procs = monitor / "cgroup.procs"
    late = subprocess.Popen(
        ["sleep", "1000"], preexec_fn=lambda: procs.write_text(str(os.getpid()))
    )
    threading.Thread(target=late.wait).start()
    (monitor / "freezer.state").write_text("FROZEN")
    assert not containment.end(step, timeout_s=0.1)
    (monitor / "freezer.state").write_text("THAWED")
    wait_for(lambda: (containment.retry(), step not in containment.leftover)[1])
    assert groups_of(step) == []
    wait_for(lambda: late.returncode is not None)
    assert late.returncode == -signal.SIGKILL
