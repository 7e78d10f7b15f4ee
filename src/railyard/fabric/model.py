"""The fabric graph: nodes with NICs, switches in tiers, and links as flat arrays.

Vertices are numbered NIC endpoints first (``node_nic_offset[n] + k`` is NIC ``k`` of node
``n``), then switches (``num_endpoints + switch.index``). Links are parallel numpy arrays, one
row per cable, so that later the flow solver can push bytes through them without Python loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from railyard.blueprint.errors import Problem
from railyard.blueprint.models import Design


class Tier(IntEnum):
    """Switch tiers counted from the hosts up; a link's tier is that of its lower end + 1."""

    HOST = 0
    LEAF = 1
    SPINE = 2
    SUPER_SPINE = 3

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


class FabricError(Exception):
    """A blueprint whose fabric cannot be built; carries the field path for the error line."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.message)


@dataclass(frozen=True)
class FabricNode:
    """A server on the fabric and where it sits in the topology tree."""

    index: int
    name: str
    group: str
    gpus: int
    nics: int
    su: int
    leaf_group: int


@dataclass(frozen=True)
class Switch:
    """One switch; ``su``/``rail``/``plane`` say which part of the fabric it serves."""

    index: int
    name: str
    tier: Tier
    model: str
    su: int | None = None
    rail: int | None = None
    plane: int | None = None


@dataclass(frozen=True)
class TierSummary:
    """What one tier of the built fabric holds and how oversubscribed it really is."""

    tier: Tier
    model: str
    switches: int
    ports: int
    ports_used: int
    downlinks: int
    uplinks: int
    oversubscription: float  # achieved down:up bandwidth; 1.0 is non-blocking, 0 at the top


IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]


@dataclass
class Fabric:
    """A built compute fabric. Read-only by convention once :func:`build_fabric` returns it."""

    blueprint: str
    design: Design
    nodes: list[FabricNode]
    switches: list[Switch]
    node_nic_offset: IntArray
    link_lo: IntArray  # lower vertex (NIC or switch) of each cable
    link_hi: IntArray  # upper vertex (switch)
    link_gbit_s: FloatArray
    link_tier: npt.NDArray[np.int8]  # Tier of the upper end
    link_optical: npt.NDArray[np.bool_]
    tiers: list[TierSummary]
    su_nodes: int
    notes: list[str] = field(default_factory=list)

    @property
    def num_endpoints(self) -> int:
        return int(self.node_nic_offset[-1]) if len(self.node_nic_offset) else 0

    @property
    def num_links(self) -> int:
        return int(self.link_lo.size)

    @property
    def num_sus(self) -> int:
        return 1 + max((n.su for n in self.nodes), default=0)

    def endpoint(self, node: int, nic: int) -> int:
        return int(self.node_nic_offset[node]) + nic

    @property
    def top_tier(self) -> Tier:
        return max((s.tier for s in self.switches), default=Tier.HOST)
