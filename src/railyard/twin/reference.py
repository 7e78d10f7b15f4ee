"""Clusters matching the rows of the published-measurement table, for validation.

Each row of ``perf_reference.csv`` names a GPU, a node count and a fabric ("8x200G infiniband
rail", "8x400G infiniband"). We build the reference design those systems use: NVIDIA's
rail-optimized fabric (DGX SuperPOD reference architectures) with the fewest tiers of the
matching InfiniBand switch that can carry the node count, or the A3 Mega preset for Google's
Ethernet rows. One node needs no fabric beyond its NVSwitch.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping

from railyard.blueprint import Blueprint, load, load_text
from railyard.fabric.build import build_fabric
from railyard.fabric.model import FabricError

IB_SWITCH_FOR_GBIT_S = {200: "QM8700", 400: "QM9700"}  # HDR and NDR generations
# RoCE rows (Meta's Llama 3 cluster: 400 Gb/s Ethernet, Arista 7800 / Minipack2, Dubey et al.
# 2024 section 3.3.1): a 51.2 Tb/s switch split into 128 x 400G ports stands in for them
ETH_SWITCH_FOR_GBIT_S = {400: "SN5600-400G", 800: "SN5600"}


def nodes_of(row: Mapping[str, str]) -> int:
    """The row's node count ("48", "2+", "2 or more" -> the first integer)."""
    match = re.search(r"\d+", row["nodes"])
    return int(match.group()) if match else 1


def net_stack_of(row: Mapping[str, str]) -> str:
    """The network data path a row's cluster runs NCCL over: Google's A3 Mega runs
    GPUDirect-TCPXO, A3 High GPUDirect-TCPX, the rest RDMA (InfiniBand or RoCE)."""
    text = f"{row.get('setup', '')} {row.get('fabric', '')}".lower()
    if "tcpxo" in text or "a3 mega" in text:
        return "tcpxo"
    if "tcpx" in text or "a3 high" in text:
        return "tcpx"
    return "rdma"


def reference_blueprint(row: Mapping[str, str]) -> Blueprint:
    """The smallest standard cluster with the row's GPU, node count and NICs."""
    nodes = max(1, nodes_of(row))
    fabric = row["fabric"].lower()
    gpu = row["gpu"] or "H100-SXM-80GB"
    if "ethernet" in fabric and gpu.startswith("H100"):
        return load("a3-mega").blueprint  # Google A3 Mega, 8x200G per node (seed 004)
    nics = re.match(r"\s*(\d+)\s*x\s*(\d+)\s*g", fabric)
    count, gbit_s = (int(nics.group(1)), int(nics.group(2))) if nics else (8, 400)
    roce = "roce" in fabric or "ethernet" in fabric
    switch = (ETH_SWITCH_FOR_GBIT_S if roce else IB_SWITCH_FOR_GBIT_S).get(gbit_s, "QM9700")
    transport = "roce" if roce else "infiniband"
    for tiers in (1, 2, 3) if nodes > 1 else (1,):
        design = "single" if tiers == 1 else "rail-optimized"
        try:
            bp = _cluster(gpu, nodes, count, gbit_s, design, [switch] * tiers, transport)
            build_fabric(bp)
            return bp
        except FabricError:
            continue
    raise ValueError(f"row {row.get('id')}: no {switch} fabric of up to 3 tiers fits {nodes} nodes")


def single_node_blueprint(gpu: str, gpus: int) -> Blueprint:
    """One node of ``gpus`` x ``gpu`` behind one switch: the network model for a blueprint
    without a fabric (``local``), where every collective stays inside the node."""
    if not gpu or gpus < 1:
        raise ValueError("the node has no GPUs the catalogue knows")
    return _cluster(gpu, 1, 8, 400, "single", ["QM9700"], gpus=gpus)


def _cluster(
    gpu: str,
    nodes: int,
    nics: int,
    gbit_s: int,
    design: str,
    tiers: list[str],
    transport: str = "infiniband",
    *,
    gpus: int = 8,
) -> Blueprint:
    tier_list = ", ".join(f"{{switch: {t}}}" for t in tiers)
    text = textwrap.dedent(
        f"""\
        name: reference-{gpu.lower()}-{nodes}
        node_types:
          box:
            gpu: {gpu}
            gpus: {gpus}
            nvlink_domain_gpus: {gpus}
            nics: {{count: {nics}, speed_gbit_s: {gbit_s}}}
            power_w: 10000
        node_groups:
          n: {{node_type: box, count: {nodes}, hostname_prefix: n}}
        fabric:
          design: {design}
          transport: {transport}
          tiers: [{tier_list}]
        """
    )
    return load_text(text, file="reference.yaml").blueprint
