"""What nccl-tests would report for a collective on a blueprint's cluster, and why.

Each (algorithm, protocol) NCCL could run is priced as ``time = latency + size * s_per_byte``;
like NCCL's own tuner, the cheapest wins unless ``algo`` pins one. ``s_per_byte`` is the slower
of two phases, which NCCL pipelines chunk by chunk:

- inside a node, the bytes each GPU must push over NVLink (or PCIe) at its per-direction rate;
- between nodes, the flows the algorithm really creates (which NIC sends to which, on which
  rail) routed on the fabric (ECMP or adaptive) and solved max-min fair; the slowest flow sets
  the pace. Collisions on ToR-CLOS uplinks, their absence on rail-optimized fabrics, and the
  NVLink hop PXN adds on rail-only fabrics all come out of this step, not out of constants.

Bandwidth terms are those of Thakur, Rabenseifner & Gropp, "Optimization of collective
communication operations in MPICH" (IJHPCA 2005): ring all_reduce moves 2(n-1)/n of the data
through every rank in 2(n-1) steps; a double binary tree (Sanders, Speck & Traeff, Parallel
Computing 2009) moves it up and down trees of depth log2 n. Latencies and protocol factors are
NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc); busbw is nccl-tests' definition
(nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from railyard.blueprint.models import Blueprint, NodeType, Routing
from railyard.fabric.build import build_fabric
from railyard.fabric.model import Fabric
from railyard.twin.collective_costs import (
    ALGOS,
    BASE_US,
    CALL_US,
    DTYPE_BYTES,
    HARNESS_US,
    LL_MAX_BUSBW,
    NET_POST_US,
    NET_STACKS,
    NVLS_CHANNELS,
    NVLS_FILL_LOOPS,
    NVLS_US,
    OPS,
    STEP_US,
    TREE_EFFICIENCY,
    Candidate,
    NetStack,
    SweepRow,
    bus_factor,
    ring_steps,
    ring_time_s,
    tree_time_s,
)
from railyard.twin.flows import NoPathError, Router, max_min_rates, pattern_flows
from railyard.twin.links import NodeLinks, node_links, switch_hop_us, wire_efficiency


class CollectiveModel:
    """Predict nccl-tests results for one blueprint; caches routes per (job, algorithm)."""

    def __init__(
        self,
        blueprint: Blueprint,
        fabric: Fabric | None = None,
        *,
        routing: str | None = None,
        seed: int = 0,
        stack: str = "rdma",
    ) -> None:
        if stack not in NET_STACKS:
            raise ValueError(f"unknown network stack {stack!r}; known: {', '.join(NET_STACKS)}")
        self.stack = NET_STACKS[stack]
        self.blueprint = blueprint
        self.fabric = fabric if fabric is not None else build_fabric(blueprint)
        spec = blueprint.fabric
        default = spec.routing if spec is not None else Routing.ADAPTIVE
        self.routing = Routing(routing) if routing is not None else default
        self.seed = seed
        self.design = self.fabric.design
        self.node_type = _gpu_node_type(blueprint)
        self.links: NodeLinks = node_links(blueprint, self.node_type)
        self.nic_gbyte_s = self.links.nic_gbyte_s
        self._router: Router | None = None
        self._plans: dict[tuple[object, ...], list[Candidate]] = {}
        self._inter: dict[tuple[object, ...], tuple[float, int]] = {}
        self._times: dict[tuple[object, ...], float] = {}
        eff = wire_efficiency(self.links.transport)
        self._link_gbyte_s = self.fabric.link_gbit_s / 8 * eff

    # public API -------------------------------------------------------------------------------

    def time_s(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str | Sequence[int] = "best",
        algo: str | None = None,
    ) -> float:
        """Predicted time of one collective of ``size_bytes`` (nccl-tests' size column)."""
        if not isinstance(placement, str):
            return self._best(op, size_bytes, nodes, gpus_per_node, placement, algo)[0]
        key = (op, size_bytes, nodes, gpus_per_node, placement, algo)
        found = self._times.get(key)
        if found is None:  # the step model asks the same few sizes over and over
            if len(self._times) > 65536:
                self._times.clear()
            found = self._best(op, size_bytes, nodes, gpus_per_node, placement, algo)[0]
            self._times[key] = found
        return found

    def call_time_s(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        harness: str = "torch.distributed",
    ) -> float:
        """One collective as a harness sees it: the collective plus the harness's own cost
        per call (HARNESS_US)."""
        if harness not in HARNESS_US:
            raise ValueError(f"unknown harness {harness!r}; known: {', '.join(HARNESS_US)}")
        return self.time_s(op, size_bytes, nodes, gpus_per_node) + HARNESS_US[harness] * 1e-6

    def busbw_gbyte_s(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str | Sequence[int] = "best",
        algo: str | None = None,
    ) -> float:
        """nccl-tests' bus bandwidth: ``size / time * bus_factor(op, ranks)``."""
        t = self.time_s(op, size_bytes, nodes, gpus_per_node, placement=placement, algo=algo)
        return size_bytes / t / 1e9 * bus_factor(op, nodes * gpus_per_node) if t > 0 else 0.0

    def sweep(
        self,
        op: str,
        min_bytes: int,
        max_bytes: int,
        factor: int,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str | Sequence[int] = "best",
        algo: str | None = None,
        dtype: str = "float",
    ) -> list[SweepRow]:
        """An nccl-tests run ``-b min -e max -f factor``: one row per size."""
        if factor < 2:
            raise ValueError("factor must be at least 2")
        type_bytes = DTYPE_BYTES[dtype]
        n = nodes * gpus_per_node
        per_rank = op in ("all_gather", "reduce_scatter", "alltoall")
        sizes: list[int] = []
        size = max(min_bytes, 1)
        while size <= max_bytes:
            unit = type_bytes * (n if per_rank else 1)
            sizes.append(max(size // unit, 1) * unit)
            size *= factor
        cands = self._plan(op, nodes, gpus_per_node, placement, algo)
        lat = np.array([c.latency_s for c in cands])
        coef = np.array([c.s_per_byte for c in cands])
        arr = np.asarray(sizes, dtype=np.float64)
        filled = arr[None, :] + np.stack([c.fill_bytes(arr) for c in cands])
        times = lat[:, None] + coef[:, None] * filled
        net_coef = np.array([c.net_fill_s_per_byte for c in cands])
        net_bytes = np.array([c.net_fill_bytes for c in cands])
        times += net_coef[:, None] * np.minimum(arr[None, :], net_bytes[:, None])
        times = np.maximum(times, np.array([c.floor_s for c in cands])[:, None])
        pick = times.argmin(axis=0)
        best = times[pick, np.arange(arr.size)]
        busf = bus_factor(op, n)
        rows: list[SweepRow] = []
        for i, s in enumerate(sizes):
            algbw = s / best[i] / 1e9
            chosen = cands[int(pick[i])]
            rows.append(
                SweepRow(
                    size_bytes=s,
                    count=s // type_bytes // (n if per_rank else 1),
                    type=dtype,
                    redop="sum" if op in ("all_reduce", "reduce_scatter", "reduce") else "none",
                    root=0 if op in ("broadcast", "reduce") else -1,
                    time_us=float(best[i]) * 1e6,
                    algbw_gbyte_s=algbw,
                    busbw_gbyte_s=algbw * busf,
                    algo=chosen.algo,
                    protocol=chosen.protocol,
                )
            )
        return rows

    def choice(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        gpus_per_node: int,
        *,
        placement: str | Sequence[int] = "best",
        algo: str | None = None,
    ) -> tuple[str, str]:
        """(algorithm, protocol) the model picks for this size."""
        _, cand = self._best(op, size_bytes, nodes, gpus_per_node, placement, algo)
        return cand.algo, cand.protocol

    def placement_nodes(self, nodes: int, placement: str | Sequence[int]) -> tuple[int, ...]:
        """Fabric node indices of a job: packed ("best"), spread ("worst") or given."""
        all_nodes = self.fabric.nodes
        if nodes < 1 or nodes > len(all_nodes):
            raise ValueError(f"{nodes} nodes requested, the fabric has {len(all_nodes)}")
        if not isinstance(placement, str):
            chosen = tuple(int(i) for i in placement)
            if len(chosen) != nodes or len(set(chosen)) != nodes:
                raise ValueError(f"placement must list {nodes} distinct node indices")
            if min(chosen) < 0 or max(chosen) >= len(all_nodes):
                raise ValueError("placement names a node that is not on the fabric")
            return chosen
        if placement == "best":  # nodes are numbered by scalable unit, then leaf group
            return tuple(range(nodes))
        if placement != "worst":
            raise ValueError("placement is 'best', 'worst' or a list of node indices")
        groups: dict[tuple[int, int], list[int]] = {}
        for node in all_nodes:
            groups.setdefault((node.leaf_group, node.su), []).append(node.index)
        keys = sorted(groups)  # round-robin: scalable units fastest, then leaf groups
        spread = [
            groups[k][i]
            for i in range(max(len(g) for g in groups.values()))
            for k in keys
            if i < len(groups[k])
        ]
        return tuple(spread[:nodes])

    # planning ---------------------------------------------------------------------------------

    def _best(
        self,
        op: str,
        size_bytes: float,
        nodes: int,
        g: int,
        placement: str | Sequence[int],
        algo: str | None,
    ) -> tuple[float, Candidate]:
        cands = self._plan(op, nodes, g, placement, algo)
        return min(((c.time_s(size_bytes), c) for c in cands), key=lambda tc: tc[0])

    def _plan(
        self, op: str, nodes: int, g: int, placement: str | Sequence[int], algo: str | None
    ) -> list[Candidate]:
        bus_factor(op, 2)  # validates op
        if algo is not None and algo not in ALGOS:
            raise ValueError(f"unknown algorithm '{algo}'; expected one of {', '.join(ALGOS)}")
        if g < 1 or g > self.links.gpus:
            raise ValueError(f"gpus_per_node must be 1..{self.links.gpus}")
        order = self.placement_nodes(nodes, placement)
        key = (op, order, g, algo)
        if key not in self._plans:
            cands = [c for c in self._candidates(op, order, g) if algo in (None, c.algo)]
            if not cands:
                raise ValueError(f"algorithm '{algo}' does not apply to {op} on this job")
            self._plans[key] = cands
        return self._plans[key]

    def _candidates(self, op: str, order: tuple[int, ...], g: int) -> list[Candidate]:
        n_nodes, n = len(order), len(order) * g
        if n == 1:
            return [Candidate("none", "none", 0.0, 0.0)]
        if op == "alltoall":
            return self._with_stack(self._alltoall(order, g), n_nodes)
        out = self._ring(op, order, g)
        if op == "all_reduce":
            out += self._tree(order, g)
            if self.links.has_nvls(g) and g > 1 and not self.stack.fill_passes:
                # (the TCPX/TCPXO profiles allow only ring and tree: NCCL_ALGO=Ring,Tree)
                out += self._nvls(order, g) if n_nodes == 1 else self._nvls_tree(order, g)
        return self._with_stack(out, n_nodes)

    def _with_stack(self, cands: list[Candidate], n_nodes: int) -> list[Candidate]:
        """The network stack's fixed costs on every candidate that crosses a node."""
        stack = self.stack
        if n_nodes == 1 or not stack.fill_passes:
            return cands
        per_byte = stack.fill_passes / (self.nic_gbyte_s * 1e9)
        return [
            dataclasses.replace(c, floor_s=stack.floor_us * 1e-6, net_fill_bytes=stack.buff_bytes,
                                net_fill_s_per_byte=per_byte)
            for c in cands
        ]  # fmt: skip

    # algorithms -------------------------------------------------------------------------------

    def _intra_s_per_byte(self, g: int, bytes_per_byte: float) -> float:
        return bytes_per_byte / (self.links.intra_gbyte_s(g) * 1e9) if g > 1 else 0.0

    def _intra_kind(self, g: int) -> str:
        return "nvlink" if self.links.intra_gbyte_s(g) == self.links.nvlink_gbyte_s else "pci"

    def _protocols(self, g: int) -> tuple[str, ...]:
        # NCCL enables LL128 only where GPUs talk over NVLink (tuning.cc, protoEnable)
        return ("LL", "LL128", "Simple") if self._intra_kind(g) == "nvlink" else ("LL", "Simple")

    def _ring(self, op: str, order: tuple[int, ...], g: int) -> list[Candidate]:
        n_nodes, n = len(order), len(order) * g
        busf = bus_factor(op, n)
        intra = self._intra_s_per_byte(g, busf)
        inter, turn = (0.0, 0)
        if n_nodes > 1:
            rate, turn = self._pattern_rate("ring", order, g)
            inter = busf / self._rails(g) / (rate * 1e9)
        steps = ring_steps(op, n)
        inter_steps = (2 * n_nodes if op == "all_reduce" else n_nodes - 1) if n_nodes > 1 else 0
        out = []
        for proto in self._protocols(g):
            eff = 0.92 if proto == "LL128" else 1.0
            if proto == "LL":
                eff = 0.25 if (n_nodes > 1 or op in ("all_reduce", "reduce")) else 1 / 3
            s_per_byte = max(intra, inter) / eff
            if proto == "LL":
                cap = LL_MAX_BUSBW[min(n_nodes, 3)]
                s_per_byte = max(s_per_byte, busf / (cap * 1e9))
            intra_us = STEP_US[self._intra_kind(g)][("ring", proto)]
            if n_nodes > 1:  # a step that crosses the network is at least a post overhead
                intra_us = max(intra_us, NET_POST_US * (3 if proto == "Simple" else 1))
            net_us = STEP_US["net"][("ring", proto)] + self._hops_us(turn)
            lat_us = (
                CALL_US
                + BASE_US[("ring", proto)]
                + (steps - inter_steps) * intra_us
                + inter_steps * net_us
            )
            out.append(Candidate("ring", proto, lat_us * 1e-6, s_per_byte))
        return out

    def _tree(self, order: tuple[int, ...], g: int) -> list[Candidate]:
        n_nodes = len(order)
        intra = self._intra_s_per_byte(g, 2.0)  # the intra-node chain: S up and S down
        inter, turn = (0.0, 0)
        if n_nodes > 1:
            rate, turn = self._pattern_rate("tree", order, g)
            inter = 1.0 / (2 * self._rails(g)) / (rate * 1e9)
        out = []
        for proto in self._protocols(g):
            eff = {"LL": 1 / 3.8, "LL128": 7 / 9 if n_nodes == 1 else 120 / 128}.get(proto, 1.0)
            s_per_byte = max(intra, inter) / (TREE_EFFICIENCY * eff)
            intra_us = STEP_US[self._intra_kind(g)][("tree", proto)]
            net_us = STEP_US["net"][("tree", proto)] + self._hops_us(turn)
            depth = math.log2(n_nodes) if n_nodes > 1 else 0.0
            lat_us = CALL_US + BASE_US[("tree", proto)] + 2 * ((g - 1) * intra_us + depth * net_us)
            out.append(Candidate("tree", proto, lat_us * 1e-6, s_per_byte))
        return out

    def _nvls_s_per_byte(self, g: int) -> float:
        """NVLS all_reduce: each GPU sends its buffer once to the switch, which reduces it, and
        receives 1/g back to multicast once; in and out it moves S(1 + 1/g), against 2S(g-1)/g
        for a ring, at the NVLink rate derated by NCCL's nvlsEfficiency."""
        rate = self.links.intra_gbyte_s(g) * self.links.nvls_efficiency
        return (1 + 1 / g) / (rate * 1e9)

    def _nvls_ops(self, g: int) -> int:
        """Chunks one NVLS loop moves: channels x heads (one head per GPU of the node)."""
        return NVLS_CHANNELS.get(self.links.arch, 16) * g

    def _nvls(self, order: tuple[int, ...], g: int) -> list[Candidate]:
        return [
            Candidate(
                "nvls",
                "Simple",
                NVLS_US["nvlink"] * 1e-6,
                self._nvls_s_per_byte(g),
                fill_steps=NVLS_FILL_LOOPS,
                concurrent_ops=self._nvls_ops(g),
            )
        ]

    def _nvls_tree(self, order: tuple[int, ...], g: int) -> list[Candidate]:
        """NVLS inside each node, then a double binary tree between nodes per rail.

        The in-switch reduction and multicast move S(1 + 1/g) per GPU as on one node, and NCCL
        prices NVLS-tree's bus bandwidth as the minimum of that same intra-node NVLS term and
        the network term (src/graph/tuning.cc: busBw = nChannels x min(intraBw, interBw, ...)
        with one intraBw formula for NVLS and NVLS_TREE). So a multi-node NVLS-tree never beats
        one node's NVLS bus bandwidth: its algorithm bandwidth is the single-node one scaled by
        busbw factor(g) / busbw factor(n), not the single-node algorithm bandwidth itself. Each
        NIC carries 1/rails of the buffer; the tree pattern's two flows per NIC (one per tree
        half) share it, so 1/(2 rails) of the buffer at each flow's rate.
        """
        rate, turn = self._pattern_rate("tree", order, g)
        n = len(order) * g
        inter = 1.0 / (2 * self._rails(g)) / (rate * 1e9)
        intra = self._nvls_s_per_byte(g) * bus_factor("all_reduce", n) / bus_factor("all_reduce", g)
        depth = math.log2(len(order))
        lat_us = NVLS_US["nvlink"] + 2 * depth * (NVLS_US["net_nvls_tree"] + self._hops_us(turn))
        return [
            Candidate(
                "nvls_tree",
                "Simple",
                lat_us * 1e-6,
                max(intra, inter),
                fill_steps=NVLS_FILL_LOOPS + 2 * math.ceil(depth),  # plus up and down the tree
                concurrent_ops=self._nvls_ops(g),
            )
        ]

    def _alltoall(self, order: tuple[int, ...], g: int) -> list[Candidate]:
        """Every rank sends S/n to every other. With PXN (NCCL's default since 2.12) a GPU hands
        data for rail k to its local peer on rail k over NVLink, so network flows stay on one
        rail; without it, NIC i talks to NIC j across rails through the spines."""
        n_nodes, n = len(order), len(order) * g
        rails = self._rails(g)
        local = (g - 1) / n
        remote = (n - g) / n
        out = []
        algos = ("p2p",) if n_nodes == 1 else ("pxn", "p2p")  # one node: straight over NVLink
        for algo in algos:
            inter, turn = (0.0, 0)
            forward = remote * (rails - 1) / rails if algo == "pxn" else 0.0
            if n_nodes > 1:
                try:
                    rate, turn = self._pattern_rate(f"a2a_{algo}", order, g)
                except NoPathError:
                    continue  # rail-only fabrics have no path between rails
                # bytes per flow: g GPUs to the g/rails GPUs of one rail (pxn), or g/rails
                # GPUs behind one NIC to g/rails behind another (p2p); S/n per GPU pair
                pair_gpus = g * g / rails if algo == "pxn" else (g / rails) ** 2
                inter = pair_gpus / n / (rate * 1e9)
            intra = self._intra_s_per_byte(g, local + forward)
            kind = "net" if n_nodes > 1 else self._intra_kind(g)
            lat_us = CALL_US + BASE_US[("ring", "Simple")] + STEP_US[kind][("ring", "Simple")]
            lat_us += self._hops_us(turn) + (n - 1) * (NET_POST_US if n_nodes > 1 else 0.0)
            if algo == "pxn" and n_nodes > 1 and rails > 1:
                lat_us += STEP_US["nvlink"][("ring", "Simple")]  # the extra NVLink hop
            out.append(Candidate(algo, "Simple", lat_us * 1e-6, max(intra, inter)))
        if not out:
            raise ValueError("alltoall has no route: rail-only fabrics need PXN")
        return out

    # network ----------------------------------------------------------------------------------

    def _rails(self, g: int) -> int:
        return len(self._nic_of_gpu(g)) if self.links.nics else 0

    def _nic_of_gpu(self, g: int) -> list[int]:
        """NICs used by GPUs 0..g-1: GPU j uses the NIC of its PCIe switch (DGX/HGX layout)."""
        nics, gpus = self.links.nics, self.links.gpus
        return sorted({j * nics // gpus for j in range(g)})

    def _hops_us(self, turn: int) -> float:
        """Switch traversals of a route turning at tier ``turn``: up and down, 2 * turn - 1."""
        return (2 * turn - 1) * switch_hop_us(self.links.transport) if turn > 0 else 0.0

    def _pattern_rate(self, pattern: str, order: tuple[int, ...], g: int) -> tuple[float, int]:
        """Slowest flow's max-min rate (GB/s) of an inter-node pattern, and its highest turn."""
        key = (pattern, order, g)
        if key not in self._inter:
            if self.links.nics == 0:
                raise ValueError("multi-node collectives need NICs on the compute fabric")
            if self._router is None:
                self._router = Router(self.fabric)
            src, dst, scale = pattern_flows(pattern, order, self._nic_of_gpu(g), self.seed)
            ep = self.fabric.node_nic_offset.astype(np.int64)
            src_ep = ep[src[0]] + src[1]
            dst_ep = ep[dst[0]] + dst[1]
            inc = self._router.route(src_ep, dst_ep, self.routing, seed=self.seed)
            inc = type(inc)(inc.flow, inc.resource, inc.coeff * scale, inc.n_flows)
            cap = self._router.capacity(self._link_gbyte_s)
            rates = max_min_rates(cap, inc)
            nic = np.minimum(rates, self.nic_gbyte_s)
            turn = self._router.turn_tier(
                self._router.leaf_of[src_ep], self._router.leaf_of[dst_ep]
            )
            self._inter[key] = (float(nic.min()), int(turn.max()))
        return self._inter[key]


def _gpu_node_type(bp: Blueprint) -> NodeType:
    """The GPU node type on the compute fabric (the first, if several)."""
    for _, _, node in bp.fabric_groups():
        if node.gpu is not None and node.gpus > 0:
            return node
    raise ValueError(f"blueprint '{bp.name}' has no GPU nodes on its fabric")


__all__ = [
    "ALGOS",
    "HARNESS_US",
    "NET_STACKS",
    "OPS",
    "CollectiveModel",
    "NetStack",
    "SweepRow",
    "bus_factor",
    "ring_time_s",
    "tree_time_s",
]
