"""The blueprint: one validated description of a cluster that every railyard package reads.

Field names carry their unit (``speed_gbit_s``, ``mem_gbyte``, ``power_w``). Every model
forbids unknown keys, so a typo in a YAML file is an error with a suggestion, not a default.
Cross-references (a node group naming a node type, a tier naming a switch) are checked by
:func:`railyard.blueprint.checks.check_references`, which reports the exact field.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from railyard.blueprint.catalog import GPUS, SWITCHES, GpuSpec, SwitchSpec
from railyard.blueprint.partitions import Partition
from railyard.blueprint.units import GbitPerS, Gbyte, GbytePerS, KiloWatt, Tbyte, Watt


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Role(StrEnum):
    COMPUTE = "compute"
    EVAL = "eval"
    CPU = "cpu"
    LOGIN = "login"
    STORAGE = "storage"
    MANAGEMENT = "management"


class Design(StrEnum):
    SINGLE = "single"
    TOR_CLOS = "tor-clos"
    RAIL_ONLY = "rail-only"
    RAIL_OPTIMIZED = "rail-optimized"


class Transport(StrEnum):
    INFINIBAND = "infiniband"
    ROCE = "roce"


class Routing(StrEnum):
    ECMP = "ecmp"
    ADAPTIVE = "adaptive"


class CableKind(StrEnum):
    AUTO = "auto"
    COPPER = "copper"
    OPTICAL = "optical"


class NicSpec(_Strict):
    """NICs of one kind in a node; on the compute fabric each NIC is one rail."""

    count: int = Field(ge=0)
    speed_gbit_s: GbitPerS = Field(gt=0)


class NodeType(_Strict):
    """One server model: what it holds, draws and costs."""

    gpu: str | None = Field(default=None, description="GPU catalogue name; none for CPU nodes")
    gpus: int = Field(default=0, ge=0)
    nvlink_domain_gpus: int = Field(
        default=0, ge=0, description="GPUs sharing one NVLink/NVSwitch domain; 0: no NVLink"
    )
    nics: NicSpec | None = Field(default=None, description="compute-fabric NICs (rails)")
    frontend_nics: NicSpec | None = None
    cpu_cores: int = Field(default=0, ge=0)
    ram_gbyte: Gbyte = Field(default=0, ge=0)
    nvme_tbyte: Tbyte = Field(default=0, ge=0)
    power_w: Watt = Field(ge=0, description="maximum system power")
    price_usd: float = Field(default=0, ge=0)
    rack_units: int = Field(default=1, ge=1)
    source: str = ""


class NodeGroup(_Strict):
    """A count of identical nodes with one role, e.g. 12 DGX H100 for compute."""

    node_type: str
    count: int = Field(ge=1)
    role: Role = Role.COMPUTE
    on_fabric: bool | None = Field(
        default=None, description="attach to the compute fabric; default: role is compute"
    )
    hostname_prefix: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9-]*$")
    pool: str | None = Field(
        default=None,
        pattern=r"^[a-z][a-z0-9-]*$",
        description="a node pool (e.g. interactive): only queues limited to it run there",
    )

    features: list[str] = Field(
        default_factory=list,
        description="Slurm's node features (ib, nvme...): --constraint picks nodes by them",
    )

    def attached(self) -> bool:
        return self.role == Role.COMPUTE if self.on_fabric is None else self.on_fabric


class TierSpec(_Strict):
    """One switch tier, from the leaf up: its switch model and down:up oversubscription."""

    switch: str
    oversubscription: float = Field(default=1.0, ge=1.0, description="downlinks per uplink")
    cable: CableKind = CableKind.AUTO


class FabricSpec(_Strict):
    """The compute (east-west) fabric that joins GPU NICs."""

    design: Design
    transport: Transport = Transport.INFINIBAND
    routing: Routing = Routing.ADAPTIVE
    scalable_unit_gpus: int | None = Field(
        default=None, ge=1, description="GPUs per scalable unit (pod); default: largest that fits"
    )
    tiers: list[TierSpec] = Field(min_length=1, max_length=3)


class FrontendSpec(_Strict):
    """A separate front-end (management, storage, internet) network of top-of-rack switches."""

    switch: str
    speed_gbit_s: GbitPerS = Field(default=25, gt=0)


class StorageSystem(_Strict):
    """A shared file system or object store as the clients see it."""

    capacity_tbyte: Tbyte = Field(gt=0)
    read_gbyte_s: GbytePerS = Field(gt=0, description="aggregate read")
    write_gbyte_s: GbytePerS = Field(gt=0, description="aggregate write")
    per_client_gbyte_s: GbytePerS = Field(gt=0, description="one node's ceiling")
    power_w: Watt = Field(default=0, ge=0)
    rack_units: int = Field(default=0, ge=0)
    price_usd: float = Field(default=0, ge=0)
    source: str = ""


class Facility(_Strict):
    """Where the cluster lives: power efficiency, energy price and rack limits."""

    pue: float = Field(default=1.3, ge=1.0, le=3.0)
    usd_per_kwh: float = Field(default=0.12, ge=0)
    rack_units_per_rack: int = Field(default=42, ge=1)
    rack_power_kw: KiloWatt = Field(default=40, gt=0)
    source: str = ""


class Cabling(_Strict):
    """Per-item prices and power of cables and optics; estimates unless you have a quote."""

    copper_cable_usd: float = Field(default=150, ge=0)
    optical_cable_usd: float = Field(default=200, ge=0)
    transceiver_usd: float = Field(default=900, ge=0)
    transceiver_w: Watt = Field(default=9, ge=0)
    switch_price_usd: dict[str, float] = Field(default_factory=dict)
    source: str = ""


class Blueprint(_Strict):
    """A whole cluster: nodes, fabric, storage, facility. Loaded from YAML, never mutated."""

    name: str
    description: str = ""
    follows: str = Field(default="", description="which seed article or reference it follows")
    gpus: dict[str, GpuSpec] = Field(default_factory=dict)
    switches: dict[str, SwitchSpec] = Field(default_factory=dict)
    node_types: dict[str, NodeType] = Field(min_length=1)
    node_groups: dict[str, NodeGroup] = Field(min_length=1)
    fabric: FabricSpec | None = None
    frontend: FrontendSpec | None = None
    storage: dict[str, StorageSystem] = Field(default_factory=dict)
    facility: Facility = Field(default_factory=Facility)
    cabling: Cabling = Field(default_factory=Cabling)
    partitions: dict[str, Partition] = Field(
        default_factory=dict,
        description="Slurm partitions, each a queue below `default` (blueprint.partitions)",
    )

    def gpu_spec(self, name: str) -> GpuSpec:
        """The blueprint's own GPU entry, else the catalogue's."""
        return self.gpus.get(name) or GPUS[name]

    def switch_spec(self, name: str) -> SwitchSpec:
        """The blueprint's own switch entry, else the catalogue's."""
        return self.switches.get(name) or SWITCHES[name]

    def known_gpus(self) -> set[str]:
        return set(GPUS) | set(self.gpus)

    def known_switches(self) -> set[str]:
        return set(SWITCHES) | set(self.switches)

    def fabric_groups(self) -> list[tuple[str, NodeGroup, NodeType]]:
        """Node groups on the compute fabric, in declaration order."""
        return [
            (name, group, self.node_types[group.node_type])
            for name, group in self.node_groups.items()
            if group.attached()
        ]
