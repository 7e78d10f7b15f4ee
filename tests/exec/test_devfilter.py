"""GPU confinement on cgroup v2 hosts: the eBPF device program of
:mod:`railyard.exec.cgroups.devfilter`.

The program is checked twice: by a small interpreter of the few instructions it uses (so its
logic is pinned on any machine), and by this kernel, which runs it when a process in a
cgroup v2 group opens device files that root made with ``mknod`` (major 195, no driver
behind it: a file the program allows fails with ENXIO, or ENODEV or opens where a driver is
loaded; one it denies fails with EPERM). The job
level (a real job, through the executor) is the last test. The cgroup v1 controller this
machine also has is the other way (tests/security/test_gpu_devices.py).
"""

from __future__ import annotations

import errno
import os
import secrets
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_helpers import MakeExecutor, logs, py, spec, wait_report

from railyard.exec import Outcome
from railyard.exec.cgroups import devfilter, proctrack
from railyard.exec.cgroups.containment import Containment
from railyard.exec.cgroups.devices import NVIDIA_MAJOR, choose
from railyard.exec.cgroups.proctrack import Tracking

CHAR, BLOCK = 2, 1


def run(code: bytes, dev_type: int, major: int, minor: int) -> int:
    """What the program returns for one access (1 allow, 0 deny): the instructions it uses."""
    regs = [0] * 11
    ctx = (dev_type | (3 << 16), major, minor)  # access: read | write, in the high 16 bits
    pc = 0
    while True:
        op, regs_byte, off, imm = struct.unpack_from("<BBhi", code, pc * 8)
        dst, src = regs_byte & 0xF, regs_byte >> 4
        pc += 1
        if op == 0x61:
            assert src == 1
            assert off in (0, 4, 8)
            regs[dst] = ctx[off // 4]
        elif op == 0x57:
            regs[dst] &= imm
        elif op == 0xB7:
            regs[dst] = imm
        elif op in (0x15, 0x55):
            if (regs[dst] == imm) == (op == 0x15):
                pc += off
        elif op == 0x95:
            return regs[0]
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")


def test_the_program_allows_its_gpus_and_the_control_devices_only() -> None:
    code = devfilter.program(NVIDIA_MAJOR, {1, 3, 254, 255}, [509])
    allowed = {m for m in range(256) if run(code, CHAR, NVIDIA_MAJOR, m)}
    assert allowed == {1, 3, 254, 255}
    assert run(code, CHAR, 509, 0) == 0  # nvidia-caps (MIG capabilities)
    assert run(code, CHAR, 508, 0) == 1  # nvidia-uvm: CUDA needs it
    assert run(code, CHAR, 1, 3) == 1  # /dev/null
    assert run(code, BLOCK, NVIDIA_MAJOR, 0) == 1  # a block device that shares the major
    none = devfilter.program(NVIDIA_MAJOR, {254, 255}, [])
    assert {m for m in range(256) if run(none, CHAR, NVIDIA_MAJOR, m)} == {254, 255}


def v2_root() -> Path | None:
    for root in proctrack.V2_CANDIDATES:
        if (root / "cgroup.controllers").is_file():
            return root
    return None


@pytest.fixture
def v2_parent() -> Iterator[Path]:
    """A cgroup v2 parent of this test's own where device programs load (removed after)."""
    root = v2_root()
    if os.geteuid() != 0 or root is None:
        pytest.skip("needs root and a cgroup v2 hierarchy")
    if refused := devfilter.available():
        pytest.skip(refused)
    parent = root / f"railyard-test-{secrets.token_hex(4)}"
    parent.mkdir()
    yield parent
    for child in parent.iterdir():
        if child.is_dir():
            Tracking("cgroup2", parent).end(child.name)
    parent.rmdir()


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    path = tmp_path / "dev"
    path.mkdir()
    for name, minor in {"nvidia0": 0, "nvidia1": 1, "nvidia2": 2, "nvidiactl": 255}.items():
        os.mknod(path / name, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, minor))
    return path


OPEN_ALL = """
import errno, os, sys
for name in sorted(os.listdir(sys.argv[1])):
    try:
        os.close(os.open(os.path.join(sys.argv[1], name), os.O_RDWR))
        print(name, "opened")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
"""


def opened_in(group: Path, dev: Path) -> dict[str, str]:
    """What each device file gives a process that joined ``group`` first."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        (group / "cgroup.procs").write_text(str(os.getpid()))
        os.dup2(write, 1)
        os.execv(sys.executable, [sys.executable, "-c", OPEN_ALL, str(dev)])
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_the_kernel_denies_what_the_program_denies(v2_parent: Path, dev: Path) -> None:
    group = v2_parent / "step"
    group.mkdir()
    devfilter.attach(group, devfilter.program(NVIDIA_MAJOR, {1, 254, 255}, []))
    seen = opened_in(group, dev)
    assert (seen.pop("nvidia0"), seen.pop("nvidia2")) == ("EPERM", "EPERM")
    assert "EPERM" not in seen.values(), seen  # nvidia1, nvidiactl: the driver answers
    outside = opened_in(v2_parent, dev)  # the parent has no program
    assert "EPERM" not in outside.values(), outside


def test_attaching_to_a_missing_group_is_an_error(v2_parent: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        devfilter.attach(v2_parent / "absent", devfilter.program(NVIDIA_MAJOR, (), ()))
    assert caught.value.errno == errno.ENOENT


def test_without_v1_devices_a_v2_host_confines_with_the_program(
    v2_parent: Path, tmp_path: Path
) -> None:
    chosen = choose(tmp_path / "no-v1", v2_parent=v2_parent)
    assert (chosen.parent, chosen.kind) == (v2_parent, "bpf")
    assert chosen.describe() == (
        f"devices: each job reaches only its own GPUs (cgroup v2 eBPF device filter, {v2_parent})"
    )


def test_a_job_on_a_v2_host_opens_only_its_own_gpu(
    make_executor: MakeExecutor, v2_parent: Path, dev: Path, tmp_path: Path
) -> None:
    """Through the executor, as on a host with cgroup v2 alone: the job's tracking group
    carries the program; the job of GPU 1 is refused GPUs 0 and 2."""
    tracking = Tracking("cgroup2", v2_parent)
    containment = Containment(tracking, choose(tmp_path / "no-v1", v2_parent=v2_parent))
    executor = make_executor(gpus=3, containment=containment)  # type: ignore[arg-type]
    executor.start(spec(tmp_path, py(OPEN_ALL, str(dev)), gpus=(1,), gpus_per_worker=1))
    report = wait_report(executor, "job")
    assert report.outcome == Outcome.COMPLETED, logs(tmp_path)
    text = logs(tmp_path)
    assert "cgroup v2 eBPF device filter" in text
    assert "nvidia0 EPERM" in text, text
    assert "nvidia2 EPERM" in text, text
    assert "nvidia1 EPERM" not in text, text
