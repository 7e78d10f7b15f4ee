"""GPU device confinement: which device lines a step gets, and which minor each GPU has.

The job-level proof (a job opening mknod'ed device files) is tests/security/test_gpu_devices.py;
here a fake /proc/devices and a fake NVML module (mocks, said here) pin the rules.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from railyard.exec.cgroups.devices import Confinement, char_majors, choose, deny_rules
from railyard.probe import gpu_minors

PROC_DEVICES = """Character devices:
  1 mem
195 nvidia-frontend
195 nvidia
508 nvidia-uvm
509 nvidia-caps

Block devices:
509 nvidia-caps-lookalike
"""


def test_majors_come_from_the_character_section(tmp_path: Path) -> None:
    path = tmp_path / "devices"
    path.write_text(PROC_DEVICES)
    assert char_majors(path) == {
        "mem": 1,
        "nvidia-frontend": 195,
        "nvidia": 195,
        "nvidia-uvm": 508,
        "nvidia-caps": 509,
    }
    assert char_majors(tmp_path / "absent") == {}


def test_a_step_is_denied_every_gpu_but_its_own_and_mig_caps() -> None:
    rules = deny_rules([1, 3], {"nvidia-uvm": 508, "nvidia-caps": 509})
    assert "c 195:0 rwm" in rules
    assert "c 195:2 rwm" in rules
    assert "c 195:253 rwm" in rules
    for allowed in (1, 3, 254, 255):  # its GPUs, nvidia-modeset, nvidiactl
        assert f"c 195:{allowed} rwm" not in rules
    assert "c 509:* rwm" in rules  # MIG capabilities
    assert not any(rule.startswith("c 508:") for rule in rules)  # CUDA needs nvidia-uvm
    assert len(rules) == 252 + 1


def test_where_the_controller_is_missing_one_line_says_so(tmp_path: Path) -> None:
    chosen = choose(tmp_path)
    why = f"no cgroup v1 devices controller at {tmp_path} and no cgroup v2 tracking"
    assert chosen == Confinement(None, why)
    assert chosen.describe() == f"devices: GPUs not confined ({why})"


def fake_nvml(minors: list[int]) -> SimpleNamespace:
    return SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(minors),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMinorNumber=lambda h: minors[h],
    )


def test_gpu_minors_from_nvml_else_the_index() -> None:
    assert gpu_minors(2, fake_nvml([4, 0])) == [4, 0]  # type: ignore[arg-type]
    assert gpu_minors(3, fake_nvml([4, 0])) == [4, 0, 2]  # type: ignore[arg-type]
    assert gpu_minors(4) == [0, 1, 2, 3]  # no NVML here: virtual GPUs
