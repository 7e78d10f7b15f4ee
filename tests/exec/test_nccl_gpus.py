"""NCCL settings from the blueprint's NICs, and the GPU count of a node."""

from __future__ import annotations

import types
from typing import Any

import pytest

from railyard.exec import detect_gpus, nccl_env, resolve_gpus


def test_no_nics_sets_only_the_bootstrap_interface() -> None:
    assert nccl_env(0, "infiniband") == {}
    assert nccl_env(0, "roce", socket_ifname="eth0") == {"NCCL_SOCKET_IFNAME": "eth0"}


def test_infiniband_lists_hcas_exactly() -> None:
    env = nccl_env(4, "infiniband", socket_ifname="enp1s0", design="tor-clos")
    assert env == {"NCCL_SOCKET_IFNAME": "enp1s0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"}


def test_roce_rail_optimized() -> None:
    env = nccl_env(2, "roce", nic_names=["mlx5_4", "mlx5_7"], design="rail-optimized")
    assert env == {
        "NCCL_IB_HCA": "=mlx5_4,mlx5_7",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_CROSS_NIC": "0",
    }


def test_ethernet_without_rdma_disables_ib() -> None:
    assert nccl_env(1, "tcp") == {"NCCL_IB_DISABLE": "1"}


def test_nic_names_must_match_count() -> None:
    with pytest.raises(ValueError, match="1 NIC names for 2 NICs"):
        nccl_env(2, "infiniband", nic_names=["mlx5_0"])


def fake_nvml(names: list[Any], fail: bool = False) -> types.ModuleType:
    """An NVML stand-in with the calls detect_gpus makes (not a mock of the OS)."""
    nvml = types.ModuleType("fake_pynvml")

    def init() -> None:
        if fail:
            raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = init  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(names)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = lambda h: names[h]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=80 << 30)  # type: ignore[attr-defined]
    return nvml


def test_detect_gpus_through_nvml() -> None:
    gpus = detect_gpus(fake_nvml([b"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]))
    assert [(g.index, g.name, g.uuid) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "GPU-0000"),
        (1, "NVIDIA H100 80GB HBM3", "GPU-0001"),
    ]
    assert gpus[0].memory_bytes == 80 << 30


def test_no_driver_means_no_gpus() -> None:
    assert detect_gpus(fake_nvml(["x"], fail=True)) == []
    assert resolve_gpus(None, fake_nvml(["x"], fail=True)) == 0


def test_declared_count_wins() -> None:
    assert resolve_gpus(8) == 8
    assert resolve_gpus(8, fake_nvml(["a", "b"])) == 8
    assert resolve_gpus(None, fake_nvml(["a", "b"])) == 2
    with pytest.raises(ValueError, match="< 0"):
        resolve_gpus(-1)


def test_this_machine() -> None:
    assert resolve_gpus(None) == len(detect_gpus())  # whatever is here, never an error
