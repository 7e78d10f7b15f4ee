"""Per-hop rates and latencies of NVLink, PCIe, NICs and switches, each with its public source.

These are the only hardware figures the collective model uses; every collective and every
reference row is predicted from the same ones. Rates are GB/s per direction (1 GB = 1e9 bytes,
as nccl-tests reports them).
"""

from __future__ import annotations

from dataclasses import dataclass

from railyard.blueprint.models import Blueprint, NodeType, Transport

# NVLink 3 and 4 run 25 GB/s per direction per link (A100: 12 links = 300 GB/s, H100: 18 links =
# 450 GB/s); NVLink 5 doubles it to 50 GB/s (B200: 18 links = 900 GB/s). NVIDIA A100 and H100
# Tensor Core GPU architecture whitepapers; NVIDIA Blackwell architecture technical brief.
NVLINK_RAW_GBYTE_S_PER_LINK = {"ampere": 25.0, "hopper": 25.0, "blackwell": 50.0}

# What NCCL itself assumes one NVLink moves after protocol and packet overhead, per direction:
# NVIDIA/nccl src/graph/topo.h SM80_NVLINK_BW 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1.
# 18 x 20.6 = 370.8 GB/s is the H100 ring ceiling nccl-tests users observe (NVIDIA/nccl issue 1455,
# nccl-tests issue 212: ~370 GB/s of 450).
NVLINK_NCCL_GBYTE_S_PER_LINK = {"ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}

# NVLink SHARP (NVLS) runs the reduction in the NVSwitch; NCCL derates its bandwidth by this
# factor (NVIDIA/nccl src/graph/tuning.cc, nvlsEfficiency: Volta 0, Ampere 0, Hopper 0.85,
# Blackwell 0.74). Zero means the generation has no NVLS (third-generation NVSwitch is needed).
NVLS_EFFICIENCY = {"ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}

# PCIe per direction: Gen4 16 GT/s and Gen5 32 GT/s per lane, 128b/130b encoding, x16
# (PCI-SIG PCI Express Base Specification 4.0 / 5.0): 31.5 and 63.0 GB/s.
PCIE_X16_GBYTE_S = {4: 31.5, 5: 63.0}
# Each 256-byte TLP payload carries ~24 bytes of framing, sequence number, header and LCRC
# (PCIe Base Spec; Xilinx WP350 "Understanding Performance of PCI Express Systems"): 256/280.
PCIE_TLP_EFFICIENCY = 256 / 280
# Host interface by GPU generation: A100 and Ada are Gen4, Hopper and HGX B200 NIC paths Gen5
# (datasheets named in railyard.blueprint.catalog).
PCIE_GEN = {"ampere": 4, "hopper": 5, "blackwell": 5, "ada": 4}

# Payload share of a 4096-byte RDMA MTU on the wire.
# InfiniBand: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 bytes (IBTA Architecture Spec vol. 1, ch. 5).
# RoCEv2: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 + preamble/SFD 8 + inter-frame
# gap 12 = 82 bytes (IEEE 802.3 clause 3/4; IBTA RoCEv2 annex A17).
RDMA_MTU_BYTES = 4096
HEADER_BYTES = {Transport.INFINIBAND: 26, Transport.ROCE: 82}

# Port-to-port switch latency. InfiniBand: ~130 ns for NVIDIA Quantum switches (QM8700 product
# brief; Quantum-2 quoted under 150 ns). Ethernet: NVIDIA Spectrum datasheets quote a few hundred
# ns cut-through (SN2700 ~300 ns); 0.5 us is taken for the deeper Spectrum-3/4 pipelines.
SWITCH_LATENCY_US = {Transport.INFINIBAND: 0.13, Transport.ROCE: 0.5}
# Light in fibre travels ~5 ns/m (refractive index ~1.47); ~10 m per data-hall hop.
CABLE_LATENCY_US = 0.05


def gpu_arch(name: str) -> str:
    """GPU generation from a catalogue name (``H100-SXM-80GB`` -> ``hopper``)."""
    key = name.upper()
    if key.startswith(("H100", "H200", "H800", "GH200")):
        return "hopper"
    if key.startswith(("B100", "B200", "GB200", "B300")):
        return "blackwell"
    if key.startswith(("A100", "A800")):
        return "ampere"
    return "ada"


@dataclass(frozen=True)
class NodeLinks:
    """What one node of a blueprint offers a collective, per GPU and per NIC."""

    arch: str
    gpus: int
    nvlink_domain_gpus: int
    nvlink_gbyte_s: float  # per GPU per direction as NCCL achieves it; 0 without NVLink
    pcie_gbyte_s: float  # per GPU or NIC per direction, after TLP overhead
    nvls_efficiency: float
    nics: int
    nic_gbyte_s: float  # per NIC per direction, payload after headers, capped by its PCIe
    transport: Transport

    def intra_gbyte_s(self, gpus_per_node: int) -> float:
        """Per-GPU bandwidth between GPUs of one node: NVLink if they share a domain, else PCIe."""
        if self.nvlink_gbyte_s > 0 and gpus_per_node <= max(self.nvlink_domain_gpus, 1):
            return self.nvlink_gbyte_s
        return self.pcie_gbyte_s

    def has_nvls(self, gpus_per_node: int) -> bool:
        """NVLS needs a third-generation NVSwitch joining the GPUs (HGX H100 and later)."""
        return (
            self.nvls_efficiency > 0
            and self.nvlink_domain_gpus > 2
            and gpus_per_node <= self.nvlink_domain_gpus
        )


def wire_efficiency(transport: Transport) -> float:
    """Payload share of the line rate for full-MTU RDMA packets."""
    return RDMA_MTU_BYTES / (RDMA_MTU_BYTES + HEADER_BYTES[transport])


def switch_hop_us(transport: Transport) -> float:
    """Latency of one switch traversal plus its cable."""
    return SWITCH_LATENCY_US[transport] + CABLE_LATENCY_US


def node_links(bp: Blueprint, node: NodeType) -> NodeLinks:
    """Rates of one GPU node type of ``bp`` on its fabric's transport."""
    if node.gpu is None or node.gpus == 0:
        raise ValueError("collectives need a node type with GPUs")
    spec = bp.gpu_spec(node.gpu)
    arch = gpu_arch(node.gpu)
    transport = bp.fabric.transport if bp.fabric else Transport.INFINIBAND
    pcie = PCIE_X16_GBYTE_S[PCIE_GEN[arch]] * PCIE_TLP_EFFICIENCY
    nvlink = 0.0
    if spec.nvlink_gbyte_s_per_dir > 0 and arch in NVLINK_RAW_GBYTE_S_PER_LINK:
        links = spec.nvlink_gbyte_s_per_dir / NVLINK_RAW_GBYTE_S_PER_LINK[arch]
        nvlink = links * NVLINK_NCCL_GBYTE_S_PER_LINK[arch]
    nics = node.nics.count if node.nics else 0
    nic_line = node.nics.speed_gbit_s / 8 if node.nics else 0.0
    return NodeLinks(
        arch=arch,
        gpus=node.gpus,
        nvlink_domain_gpus=node.nvlink_domain_gpus,
        nvlink_gbyte_s=nvlink,
        pcie_gbyte_s=pcie,
        nvls_efficiency=NVLS_EFFICIENCY.get(arch, 0.0),
        nics=nics,
        nic_gbyte_s=min(nic_line * wire_efficiency(transport), pcie),
        transport=transport,
    )
