"""The cost terms of NCCL collectives: latencies, protocol factors, network stacks' fixed costs.

railyard.twin.collective picks an algorithm and routes its flows on the fabric; what one call
of a given (algorithm, protocol) costs once its rates are known lives here: NCCL's own latency
table and protocol factors (NVIDIA/nccl src/graph/tuning.cc), the NVLS pipeline fill, the fixed
costs of TCP-based GPUDirect stacks, a harness's per-call cost, and the textbook ring and tree
formulas (Thakur, Rabenseifner & Gropp 2005; Sanders, Speck & Traeff 2009).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from railyard.twin.flows import FloatArray

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce")
ALGOS = ("ring", "tree", "nvls", "nvls_tree", "pxn", "p2p")
DTYPE_BYTES = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4}
DTYPE_BYTES |= {"double": 8, "int64": 8, "uint64": 8, "uint32": 4, "float16": 2, "float32": 4}

# NCCL cost-model latencies in microseconds (NVIDIA/nccl src/graph/tuning.cc, baseLat and hwLat
# at commit b647562): a fixed launch cost per (algorithm, protocol) plus one hardware latency
# per pipeline step, which differs for NVLink, PCIe and the network.
BASE_US = {
    ("ring", "LL"): 6.6,
    ("ring", "LL128"): 14.0,
    ("ring", "Simple"): 8.4,
    ("tree", "LL"): 6.8,
    ("tree", "LL128"): 14.0,
    ("tree", "Simple"): 0.0,
}
STEP_US = {
    "nvlink": {("ring", "LL"): 0.6, ("ring", "LL128"): 1.9, ("ring", "Simple"): 3.4},
    "pci": {("ring", "LL"): 1.0, ("ring", "LL128"): 2.5, ("ring", "Simple"): 5.7},
    "net": {("ring", "LL"): 2.7, ("ring", "LL128"): 4.0, ("ring", "Simple"): 14.0},
}
STEP_US["nvlink"] |= {("tree", "LL"): 0.6, ("tree", "LL128"): 1.25, ("tree", "Simple"): 28.0}
STEP_US["pci"] |= {("tree", "LL"): 1.0, ("tree", "LL128"): 1.9, ("tree", "Simple"): 28.0}
STEP_US["net"] |= {("tree", "LL"): 5.0, ("tree", "LL128"): 8.5, ("tree", "Simple"): 28.0}
NVLS_US = {"nvlink": 25.0, "net_nvls_tree": 20.9}  # hwLat NVLS / NVLSTree, NCCL master 2026
# NVLS all_reduce hands each loop of nChannels x nHeads chunks through three warp groups
# (scatter to the switch, reduce + multicast, gather: src/device/all_reduce.h), so the first
# bytes out wait two loop steps: a fill of 2 x min(size, channels x heads x chunk) on top of the
# bytes. NCCL picks the chunk by size (src/enqueue.cc, calcCollChunking): 128 KiB
# (NCCL_NVLS_CHUNKSIZE), 64 KiB below 64 loops of it, 32 KiB below 8 loops, 16 KiB below 2, on
# NVLS_NCHANNELS_SM90 = 16 channels (32 on Blackwell, src/transport/nvls.cc). NCCL's latency
# table (a flat 25 us) leaves this fill out, which is why mid-size NVLS all_reduce was 30-80%
# optimistic. NVLS-tree adds two network stages per tree level to the pipeline.
NVLS_FILL_LOOPS = 2
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_CHANNELS = {"hopper": 16, "blackwell": 32}
# NCCL charges each network send it posts ~1 us of proxy overhead (getNetOverhead, x86 Intel).
NET_POST_US = 1.0
# A ring or tree collective also pays a kernel launch and the start-up handshake between peers,
# which NCCL's latency table (a tuning aid, not a clock) leaves out: published nccl-tests floors
# are 44.8 us at 1 KiB on 8 A100 (Azure ND A100 v4, ring/tree) against 15 us from the table.
# 10 us is taken, the low end, so mid sizes are not pushed pessimistic. NVLS's table latency
# (25 us) already matches its measured floor (25.6 us on 8 H100, Azure ND H100 v5).
CALL_US = 10.0


@dataclass(frozen=True)
class NetStack:
    """Fixed costs of a network data path that RDMA does not have, per collective call.

    GPUDirect-TCPX/TCPXO carry NCCL's traffic over TCP: a receive lands through the host's
    receive data-path manager (RxDM) and is unpacked into GPU memory once a buffer has
    arrived, so (1) no call takes less than the data path's round trip, ``floor_us``, and (2)
    each of the algorithm's ``fill_passes`` pipelines waits for one NCCL buffer
    (``buff_bytes``, or the message when smaller) to cross a NIC before its stages overlap.
    """

    name: str
    floor_us: float
    buff_bytes: float
    fill_passes: int


# GPUDirect-TCPXO (Google A3 Mega): 123 us for an 8-byte all_reduce on 2 nodes, the floor of
# the published sweep (github.com/lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result);
# NCCL_BUFFSIZE=8388608 and NCCL_ALGO=Ring,Tree in Google's TCPXO profile (/var/lib/tcpxo/lib64/
# nccl-env-profile.sh, as the GKE "Maximize GPU network bandwidth" guide installs it); a tree
# all_reduce fills two pipelines (reduce up, broadcast down), a ring one.
# GPUDirect-TCPX (A3 High): 1.65 ms for 1-2 MiB all_reduce on 2 nodes, where bandwidth adds
# under 50 us (GoogleCloudPlatform/ai-infra-cluster-provisioning pull request 376, TCPX NCCL
# benchmark README), with TCPX's 4 MiB buffers (NCCL_BUFFSIZE=4194304 in its profile).
# A harness adds host time around each collective that is not the collective's: nccl-tests
# times many back-to-back calls on the GPU (none); one torch.distributed call from Python costs
# about 30 us more per call (railyard issue 59's single-call timings on H100; a GPU measurement
# of the project's own is pending). Kept apart: `time_s` is the collective alone.
HARNESS_US = {"nccl-tests": 0.0, "torch.distributed": 30.0}
NET_STACKS = {
    "rdma": NetStack("rdma", 0.0, 0.0, 0),
    "tcpxo": NetStack("tcpxo", 123.0, 8 * 2**20, 2),
    "tcpx": NetStack("tcpx", 1650.0, 4 * 2**20, 2),
}

# Protocol bandwidth factors (same file): LL sends 4 bytes of data with a 4-byte flag per 8-byte
# store and NCCL rates ring LL at 1/4 (all_reduce or multi-node) or 1/3 of the link; LL128 keeps
# 120 of every 128 bytes (NCCL uses 0.92); trees run at 0.92 of the link, tree LL at 1/3.8,
# tree LL128 at 7/9 on one node and 120/128 across nodes.
LL_MAX_BUSBW = {1: 87.7, 2: 39.0, 3: 20.4}  # llMaxBws: Ampere/Hopper 1 node; Intel 2, 4+ nodes
TREE_EFFICIENCY = 0.92


@dataclass(frozen=True)
class SweepRow:
    """One line of an nccl-tests table, plus the algorithm and protocol the model chose."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw_gbyte_s: float
    busbw_gbyte_s: float
    algo: str
    protocol: str


def nvls_chunk_bytes(size_bytes: FloatArray, concurrent_ops: int) -> FloatArray:
    """NCCL's NVLS chunk for a message (src/enqueue.cc, calcCollChunking, NCCL_ALGO_NVLS)."""
    chunk: FloatArray = np.full(np.shape(size_bytes), float(NVLS_CHUNK_BYTES))
    for loops, smaller in ((64, 65536.0), (8, 32768.0), (2, 16384.0)):
        shrink = (size_bytes < loops * concurrent_ops * chunk) & (chunk > smaller)
        chunk = np.where(shrink, smaller, chunk)
    return chunk


@dataclass(frozen=True)
class Candidate:
    """time = latency + s_per_byte x (size + fill_steps x min(size, ops x chunk(size))), where
    ops (channels x heads) > 0 marks an NVLS pipeline (see nvls_chunk_bytes)."""

    algo: str
    protocol: str
    latency_s: float
    s_per_byte: float
    fill_steps: float = 0.0
    concurrent_ops: int = 0
    floor_s: float = 0.0  # the network stack's shortest call (NetStack)
    net_fill_bytes: float = 0.0  # bytes of each pipeline fill over a NIC (NetStack)
    net_fill_s_per_byte: float = 0.0

    def fill_bytes(self, size_bytes: FloatArray) -> FloatArray:
        if not self.concurrent_ops:
            return np.zeros(np.shape(size_bytes))
        loop = self.concurrent_ops * nvls_chunk_bytes(size_bytes, self.concurrent_ops)
        return self.fill_steps * np.minimum(size_bytes, loop)

    def time_s(self, size_bytes: float) -> float:
        """One size, in plain floats (the step model calls this thousands of times)."""
        fill = 0.0
        if self.concurrent_ops:
            chunk = float(NVLS_CHUNK_BYTES)
            for loops, smaller in ((64, 65536.0), (8, 32768.0), (2, 16384.0)):
                if size_bytes < loops * self.concurrent_ops * chunk and chunk > smaller:
                    chunk = smaller
            fill = self.fill_steps * min(size_bytes, self.concurrent_ops * chunk)
        net = self.net_fill_s_per_byte * min(size_bytes, self.net_fill_bytes)
        return max(self.floor_s, self.latency_s + self.s_per_byte * (size_bytes + fill) + net)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md); 1 for a single rank."""
    if n <= 1:
        return 1.0
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective '{op}'; expected one of {', '.join(OPS)}")


def ring_steps(op: str, n: int) -> int:
    """Pipeline steps of a ring (Thakur et al.): 2(n-1) for all_reduce, else n-1."""
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def ring_time_s(op: str, size_bytes: float, n: int, bw_gbyte_s: float, alpha_s: float) -> float:
    """Ring time: ``steps * alpha + bus_factor * S / B`` (Thakur, Rabenseifner & Gropp 2005)."""
    return ring_steps(op, n) * alpha_s + bus_factor(op, n) * size_bytes / (bw_gbyte_s * 1e9)


def tree_time_s(size_bytes: float, n: int, bw_gbyte_s: float, alpha_s: float) -> float:
    """Double-binary-tree all_reduce: ``2 log2(n) alpha + 2 S / B``: every inner rank takes in
    and sends out the whole buffer twice (once per tree half, up then down), so the bandwidth
    term does not grow with n while latency grows as log n (Sanders, Speck & Traeff 2009)."""
    return 2 * math.log2(max(n, 1)) * alpha_s + 2 * size_bytes / (bw_gbyte_s * 1e9)


__all__ = [
    "ALGOS",
    "BASE_US",
    "CALL_US",
    "DTYPE_BYTES",
    "HARNESS_US",
    "LL_MAX_BUSBW",
    "NET_POST_US",
    "NET_STACKS",
    "NVLS_CHANNELS",
    "NVLS_CHUNK_BYTES",
    "NVLS_FILL_LOOPS",
    "NVLS_US",
    "OPS",
    "STEP_US",
    "TREE_EFFICIENCY",
    "Candidate",
    "NetStack",
    "SweepRow",
    "bus_factor",
    "nvls_chunk_bytes",
    "ring_steps",
    "ring_time_s",
    "tree_time_s",
]
