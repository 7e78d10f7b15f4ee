"""The ``local`` preset: this machine as a one-node cluster, from what the OS and NVML report.

GPUs are read through NVML (nvidia-ml-py) when it is installed and a driver answers; otherwise
the node has no GPUs (the control plane can declare some with ``--gpus``).
"""

from __future__ import annotations

import os
import platform

import yaml

from railyard.blueprint.catalog import GPUS
from railyard.probe import detect_gpus

# NVML device-name fragments -> catalogue names (NVML reports e.g. "NVIDIA H100 80GB HBM3").
_NVML_NAMES = {
    "H100": "H100-SXM-80GB",
    "H200": "H200-SXM-141GB",
    "A100": "A100-SXM-80GB",
    "B200": "B200-SXM-180GB",
    "L40S": "L40S-48GB",
    "RTX 6000 Ada": "RTX-6000-Ada-48GB",
}


def catalogue_name(nvml_name: str) -> str | None:
    """Map an NVML device name onto a catalogue entry, if we know the model."""
    for fragment, name in _NVML_NAMES.items():
        if fragment in nvml_name:
            return name
    return None


def _ram_gbyte() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    return 0.0


def local_blueprint_yaml() -> str:
    """A blueprint document for this machine (no fabric: one node needs none)."""
    found = detect_gpus()
    model = catalogue_name(found[0].name) if found else None
    node: dict[str, object] = {
        "cpu_cores": os.cpu_count() or 1,
        "ram_gbyte": _ram_gbyte(),
        "power_w": 0,
        "source": f"detected on {platform.node() or 'this machine'}",
    }
    if model in GPUS:
        node.update(gpu=model, gpus=len(found), power_w=GPUS[model].tdp_w * len(found))
    doc = {
        "name": "local",
        "description": "this machine as a one-node cluster",
        "follows": "railyard's embedded default for `railyard up`",
        "node_types": {"this-machine": node},
        "node_groups": {"local": {"node_type": "this-machine", "count": 1}},
    }
    return yaml.safe_dump(doc, sort_keys=False)
