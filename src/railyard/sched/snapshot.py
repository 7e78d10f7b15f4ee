"""The cluster as the scheduler sees it during one cycle: static topology + free-GPU aggregates.

GPUs of a node are one int bitmask, so taking or freeing a placement touches one int per node
and keeps the aggregates (nodes by free count per flavor, per leaf group, per scalable unit)
current. Placement then reads aggregates instead of looping over every GPU for every job.

CPU cores and memory are free counts per node beside the masks (a `Load` is what a
placement books of them). A node that declares 0 cores (or 0 GB) declares nothing: it counts
as unlimited in that resource, so inventories without those figures schedule on GPUs alone.
Jobs that ask for neither book nothing and pay nothing for the accounting.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cached_property
from typing import NamedTuple

from railyard.sched.decisions import Reason
from railyard.sched.model import Job, Node, NodeState, Placement, TopologyRequirement

Masks = dict[int, int]
"""Node index -> bitmask of GPUs on that node."""

Load = dict[int, tuple[int, int]]
"""Node index -> (CPU cores, MiB of memory) a placement books on that node."""

UNLIMITED = 1 << 60
"""Free cores or memory of a node that declares none (never the limit)."""

MIB_PER_GB = 1024


def mem_mib(mem_gb: float) -> int:
    """Memory as whole MiB, so booking and freeing it is exact (no float drift)."""
    return round(mem_gb * MIB_PER_GB)


class Shape(NamedTuple):
    """What placement needs to know about a job; hashable so failures can be cached."""

    flavor: str
    workers: int
    gpus_per_worker: int
    topology: TopologyRequirement | None = None
    distinct_nodes: bool = False
    cpus_per_worker: int = 0
    mem_per_worker_mib: int = 0
    image: str | None = None  # nodes holding it win ties (`Topology.image_nodes`)
    only_nodes: frozenset[str] | None = None  # --nodelist: among these names (None: any)
    never_nodes: frozenset[str] = frozenset()  # --exclude: none of these

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def picks_nodes(self) -> bool:
        """Whether it names nodes (--nodelist, --exclude): placement then reads per node."""
        return self.only_nodes is not None or bool(self.never_nodes)

    def workers_on(self, free: int) -> int:
        """Workers of this shape that `free` GPUs of one node hold: `Snapshot.may_fit`'s
        count, which the reservation search and the victim search keep without a snapshot."""
        gpw = self.gpus_per_worker
        if gpw == 0 or free < gpw:
            return 0
        return 1 if self.distinct_nodes else free // gpw

    @property
    def asks_load(self) -> bool:
        """Whether it asks for cores or memory (most GPU jobs do not)."""
        return bool(self.cpus_per_worker or self.mem_per_worker_mib)

    @classmethod
    def of(cls, job: Job) -> Shape:
        if job.only_nodes is not None or job.never_nodes:
            return cls(job.flavor, job.workers, job.gpus_per_worker, job.topology,
                       job.distinct_nodes, job.cpus_per_worker, mem_mib(job.mem_per_worker_gb),
                       job.image, job.only_nodes, job.never_nodes)  # fmt: skip
        if job.cpus_per_worker or job.mem_per_worker_gb:
            return cls(
                job.flavor,
                job.workers,
                job.gpus_per_worker,
                job.topology,
                job.distinct_nodes,
                job.cpus_per_worker,
                mem_mib(job.mem_per_worker_gb),
                job.image,
            )
        if job.image is not None:
            return cls(job.flavor, job.workers, job.gpus_per_worker, job.topology,
                       job.distinct_nodes, 0, 0, job.image)  # fmt: skip
        return cls(job.flavor, job.workers, job.gpus_per_worker, job.topology, job.distinct_nodes)

    def load(self, masks: Mapping[int, int]) -> Load | None:
        """Cores and memory this gang books where `masks` puts it; None if it asks for none.
        A node holds `GPUs there / gpus_per_worker` chunks; a gang without GPUs has its
        chunks spread evenly over its nodes (all on one, or one each with distinct nodes)."""
        cpw, mpw = self.cpus_per_worker, self.mem_per_worker_mib
        if not (cpw or mpw) or not masks:
            return None
        gpw = self.gpus_per_worker
        if gpw:
            return {i: ((k := m.bit_count() // gpw) * cpw, k * mpw) for i, m in masks.items()}
        k = max(1, self.workers // len(masks))
        return dict.fromkeys(masks, (k * cpw, k * mpw))


def _mask(indices: Iterable[int]) -> int:
    m = 0
    for g in indices:
        m |= 1 << g
    return m


def lowest_bits(mask: int, count: int) -> int:
    """The `count` lowest set bits of `mask` (deterministic GPU index choice)."""
    out = 0
    while count > 0 and mask:
        low = mask & -mask
        out |= low
        mask ^= low
        count -= 1
    return out


def bits(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


class Topology:
    """Static index of the inventory. Nodes sorted by (path, name).

    It also remembers each running job's masks (so booking a cycle does not re-parse every
    placement) and which gang shapes can ever be placed here; both are memos of pure
    functions, kept as long as the driver keeps the index (see :class:`CycleCache`).
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(sorted(nodes, key=lambda n: (n.path, n.name)))
        # every per-node column in one loop over the nodes (12,544 on a start at 100,352
        # GPUs), each in node order as its own pass made it
        self.index: dict[str, int] = {}
        self.full_mask: list[int] = []
        self.cpu_cap: list[int] = []
        self.mem_cap: list[int] = []
        self.limited: set[str] = set()
        """Flavors with a node that declares cores or memory: only there can they block."""
        self.domain_masks: list[tuple[int, ...]] = []
        self.ready: list[bool] = []
        self.flavor: list[str] = []
        self.lg_of: list[int] = []
        self.su_of: list[int] = []
        self.max_gpus: dict[str, int] = {}  # largest ready node per flavor
        self.ready_gpus: dict[str, int] = {}
        self.max_gpus_all: dict[str, int] = {}
        self.total_gpus_all: dict[str, int] = {}
        self.flavor_nodes: dict[str, list[int]] = {}  # ready nodes, in index order
        self.lg_nodes: dict[tuple[str, int], list[int]] = {}
        self.su_lgs: dict[str, dict[int, list[int]]] = {}  # flavor -> su -> leaf groups
        self.su_nodes: dict[tuple[str, int], list[int]] = {}
        self.ready_index: list[int] = []
        lg_ids: dict[tuple[str, ...], int] = {}
        su_ids: dict[tuple[str, ...], int] = {}
        domains: dict[tuple[tuple[int, ...], ...], tuple[int, ...]] = {}  # few kinds
        holders: dict[str, set[int]] = {}
        index, limited, lg_nodes = self.index, self.limited, self.lg_nodes
        flavor_nodes, su_nodes = self.flavor_nodes, self.su_nodes
        max_all, total_all, max_ready, ready_gpus = (
            self.max_gpus_all, self.total_gpus_all, self.max_gpus, self.ready_gpus
        )  # fmt: skip
        up = NodeState.READY
        add_full, add_cpu, add_mem = self.full_mask.append, self.cpu_cap.append, self.mem_cap.append
        add_domains, add_ready, add_flavor = (
            self.domain_masks.append, self.ready.append, self.flavor.append
        )  # fmt: skip
        add_lg, add_su, add_index = self.lg_of.append, self.su_of.append, self.ready_index.append
        for i, n in enumerate(self.nodes):
            index[n.name] = i
            f, gpus, cores = n.flavor, n.gpus, n.cpu_cores
            mib = round(n.mem_gb * MIB_PER_GB)  # `mem_mib`, inline
            add_full((1 << gpus) - 1)
            add_cpu(cores or UNLIMITED)
            add_mem(mib or UNLIMITED)
            if cores or mib:
                limited.add(f)
            masks = domains.get(n.nvlink_domains)
            if masks is None:
                masks = domains[n.nvlink_domains] = tuple(_mask(d) for d in n.nvlink_domains)
            add_domains(masks)
            ready = n.state is up
            add_ready(ready)
            add_flavor(f)
            path = n.path  # `Node.group` of the leaf group and the unit, inline
            lg = lg_ids.setdefault(path, len(lg_ids))
            su = su_ids.setdefault(path[:1], len(su_ids))
            add_lg(lg)
            add_su(su)
            if gpus > max_all.get(f, -1):  # `max`, as a test (and a flavor of 0 GPUs kept)
                max_all[f] = gpus
            total_all[f] = total_all.get(f, 0) + gpus
            for image in n.images:
                holders.setdefault(image, set()).add(i)
            if not ready:
                continue
            add_index(i)
            if gpus > max_ready.get(f, -1):
                max_ready[f] = gpus
            ready_gpus[f] = ready_gpus.get(f, 0) + gpus
            # each list appended to where it is, made where not (no empty list a node)
            if (at := flavor_nodes.get(f)) is None:
                flavor_nodes[f] = [i]
            else:
                at.append(i)
            if (at := lg_nodes.get(key := (f, lg))) is None:
                self.su_lgs.setdefault(f, {}).setdefault(su, []).append(lg)
                lg_nodes[key] = [i]
            else:
                at.append(i)
            if (at := su_nodes.get(key := (f, su))) is None:
                su_nodes[key] = [i]
            else:
                at.append(i)
        if len(index) != len(self.nodes):
            raise ValueError("duplicate node names in inventory")
        self.image_nodes = {image: frozenset(nodes) for image, nodes in holders.items()}
        """Image -> indices of the nodes that hold it."""
        self.feasible: dict[Shape, Reason | None] = {}  # why a shape cannot fit (feasible.py)
        self.static = StaticFacts(self)
        self._idle: Snapshot | None = None

    def idle(self) -> Snapshot:
        """A snapshot of these nodes with nothing running, made once: placement only reads
        one (a start's first cycle asked a fresh one of 12,544 nodes for each new shape)."""
        if self._idle is None:
            self._idle = Snapshot(self)
        return self._idle

    def all_ready(self) -> Topology:
        """The same inventory with every node up: what could run once repairs are done."""
        return self.static.whole()

    def masks(self, placement: Placement) -> Masks:
        """Placement by name -> masks by index; unknown nodes and GPUs are dropped."""
        out: Masks = {}
        for name, gpus in placement.items():
            i = self.index.get(name)
            if i is not None:
                out[i] = _mask(gpus) & self.full_mask[i]
        return out

    def placement(self, masks: Mapping[int, int]) -> dict[str, tuple[int, ...]]:
        return {self.nodes[i].name: bits(m) for i, m in sorted(masks.items())}

    def picks(self, i: int, shape: Shape) -> bool:
        """Whether node `i` is one the shape may use (--nodelist, --exclude)."""
        name = self.nodes[i].name
        only = shape.only_nodes
        return (only is None or name in only) and name not in shape.never_nodes


class StaticFacts:
    """What depends only on the inventory, not on which nodes are up: shared by every index
    of the same nodes (a `CycleCache` hands one to each), so a node going down and coming back
    does not make the scheduler rediscover which gang shapes can ever fit."""

    def __init__(self, topo: Topology) -> None:
        self._topo = topo
        self._whole: Topology | None = topo if all(topo.ready) else None
        self.never_fits: dict[Shape, bool] = {}

    @cached_property
    def key(self) -> tuple[tuple[object, ...], ...]:
        """The inventory less the nodes' states: made when first compared (a cache's second
        index of the same nodes), not on a start (12,544 tuples at 100,352 GPUs)."""
        return tuple(
            (n.name, n.flavor, n.gpus, n.cpu_cores, n.mem_gb, n.path, n.nvlink_domains)
            for n in self._topo.nodes
        )

    def whole(self) -> Topology:
        if self._whole is None:
            nodes = [replace(n, state=NodeState.READY) for n in self._topo.nodes]
            self._whole = Topology(nodes)
            self._whole.static = self
        return self._whole


class Snapshot:
    """Mutable free-GPU state for one cycle. `take`/`release` keep every aggregate current;
    `take_load`/`release_load` do the same for free cores and memory per node (a count may go
    below zero when running jobs overbook a node that now declares less: nothing more fits)."""

    def __init__(
        self,
        topo: Topology,
        free_mask: Sequence[int] | None = None,
        free_cpu: Sequence[int] | None = None,
        free_mem: Sequence[int] | None = None,
    ) -> None:
        self.topo = topo
        self.free_mask = list(topo.full_mask if free_mask is None else free_mask)
        self.free_cpu = list(topo.cpu_cap if free_cpu is None else free_cpu)
        self.free_mem = list(topo.mem_cap if free_mem is None else free_mem)
        self.free = [m.bit_count() for m in self.free_mask]
        self.buckets: dict[str, list[list[int]]] = {
            f: [[] for _ in range(g + 1)] for f, g in topo.max_gpus.items()
        }
        # max_gpus holds exactly the flavors with a ready node
        self.lg_hist: dict[str, dict[int, list[int]]] = {f: {} for f in topo.max_gpus}
        self.su_hist: dict[str, dict[int, list[int]]] = {f: {} for f in topo.max_gpus}
        self.flavor_free: dict[str, int] = dict.fromkeys(topo.max_gpus, 0)
        free, flavor, lg_of, su_of = self.free, topo.flavor, topo.lg_of, topo.su_of
        for i in topo.ready_index:  # ascending, so every bucket list starts sorted
            n_free, f = free[i], flavor[i]
            self.buckets[f][n_free].append(i)
            for hists, group in ((self.lg_hist[f], lg_of[i]), (self.su_hist[f], su_of[i])):
                h = hists.get(group)
                if h is None:
                    h = hists[group] = [0] * (topo.max_gpus[f] + 1)
                h[n_free] += 1
            self.flavor_free[f] += n_free

    def may_fit(self, shape: Shape) -> bool:
        """Cheap necessary condition for any placement: enough workers' worth of free GPUs on
        single nodes, counted from the free-count buckets (topology not considered)."""
        buckets = self.buckets.get(shape.flavor)
        if buckets is None:
            return False
        gpw, workers = shape.gpus_per_worker, shape.workers
        if gpw == 0:
            return True
        capacity = 0
        for free in range(len(buckets) - 1, gpw - 1, -1):
            per_node = 1 if shape.distinct_nodes else free // gpw
            capacity += len(buckets[free]) * per_node
            if capacity >= workers:
                return True
        return False

    def copy(self) -> Snapshot:
        return Snapshot(self.topo, self.free_mask, self.free_cpu, self.free_mem)

    def moved(
        self,
        free_mask: Sequence[int],
        changed: Iterable[int],
        free_cpu: Sequence[int],
        free_mem: Sequence[int],
    ) -> Snapshot:
        """A copy whose free GPUs are `free_mask`, which differs from this one's only on the
        nodes in `changed`: the aggregates are copied and those nodes moved, which is much
        cheaper than rebuilding them from every node (a reservation search asks for one
        snapshot, usually a few nodes away from the pass's)."""
        out = Snapshot.__new__(Snapshot)
        out.topo = self.topo
        out.free_mask = list(self.free_mask)
        out.free = list(self.free)
        out.free_cpu = list(free_cpu)
        out.free_mem = list(free_mem)
        out.buckets = {f: [list(nodes) for nodes in b] for f, b in self.buckets.items()}
        out.lg_hist = {f: {g: list(h) for g, h in hs.items()} for f, hs in self.lg_hist.items()}
        out.su_hist = {f: {g: list(h) for g, h in hs.items()} for f, hs in self.su_hist.items()}
        out.flavor_free = dict(self.flavor_free)
        for i in dict.fromkeys(changed):
            out._set(i, free_mask[i])
        return out

    def take_load(self, load: Load) -> None:
        free_cpu, free_mem = self.free_cpu, self.free_mem
        for i, (cores, mib) in load.items():
            free_cpu[i] -= cores
            free_mem[i] -= mib

    def release_load(self, load: Load) -> None:
        free_cpu, free_mem = self.free_cpu, self.free_mem
        for i, (cores, mib) in load.items():
            free_cpu[i] += cores
            free_mem[i] += mib

    def chunks_fit(self, i: int, shape: Shape) -> int:
        """How many chunks of `shape` the free cores and memory of node `i` hold (GPUs apart);
        none on a node the shape does not pick (--nodelist, --exclude)."""
        if shape.picks_nodes and not self.topo.picks(i, shape):
            return 0
        k = UNLIMITED
        if shape.cpus_per_worker:
            k = self.free_cpu[i] // shape.cpus_per_worker
        if shape.mem_per_worker_mib:
            k = min(k, self.free_mem[i] // shape.mem_per_worker_mib)
        return max(0, k)

    def take(self, masks: Mapping[int, int]) -> None:
        self._move(masks, True)

    def release(self, masks: Mapping[int, int]) -> None:
        self._move(masks, False)

    def _move(self, masks: Mapping[int, int], take: bool) -> None:
        """`_set` of each node of `masks`, its GPUs taken or given back, in one loop with
        what it reads bound outside it: a gang's greedy victim search gives back and takes
        again thousands of nodes at once (6,000 at 100,352 GPUs, several times a pass)."""
        free_mask, free, topo = self.free_mask, self.free, self.topo
        ready, flavor, lg_of, su_of = topo.ready, topo.flavor, topo.lg_of, topo.su_of
        buckets, lg_hist, su_hist, flavor_free = (
            self.buckets, self.lg_hist, self.su_hist, self.flavor_free
        )  # fmt: skip
        for i, m in masks.items():
            fm = free_mask[i]
            if take:
                if fm & m != m:
                    raise ValueError(f"GPU double-booked on node {topo.nodes[i].name}")
                new_mask = fm & ~m
            else:
                if fm & m:
                    raise ValueError(f"releasing free GPUs on node {topo.nodes[i].name}")
                new_mask = fm | m
            old, new = free[i], new_mask.bit_count()  # `_set`, inline
            free_mask[i] = new_mask
            free[i] = new
            if old == new or not ready[i]:
                continue
            f = flavor[i]
            bucket = buckets[f]
            old_list = bucket[old]
            del old_list[bisect_left(old_list, i)]
            insort(bucket[new], i)
            h = lg_hist[f][lg_of[i]]
            h[old] -= 1
            h[new] += 1
            h = su_hist[f][su_of[i]]
            h[old] -= 1
            h[new] += 1
            flavor_free[f] += new - old

    @contextmanager
    def without(
        self, victims: Iterable[Mapping[int, int]], loads: Iterable[Load] = ()
    ) -> Iterator[None]:
        """What-if: free the victims' GPUs (and `loads`: their cores and memory) inside the
        block, give them back on exit."""
        released: list[Mapping[int, int]] = []
        freed: list[Load] = []
        try:
            for masks in victims:
                self.release(masks)
                released.append(masks)
            for load in loads:
                self.release_load(load)
                freed.append(load)
            yield
        finally:
            for load in freed:
                self.take_load(load)
            for masks in reversed(released):
                self.take(masks)

    def _set(self, i: int, new_mask: int) -> None:
        old, new = self.free[i], new_mask.bit_count()
        self.free_mask[i] = new_mask
        self.free[i] = new
        if old == new or not self.topo.ready[i]:
            return
        topo = self.topo
        f = topo.flavor[i]
        bucket = self.buckets[f]
        old_list = bucket[old]
        del old_list[bisect_left(old_list, i)]
        insort(bucket[new], i)
        h = self.lg_hist[f][topo.lg_of[i]]
        h[old] -= 1
        h[new] += 1
        h = self.su_hist[f][topo.su_of[i]]
        h[old] -= 1
        h[new] += 1
        self.flavor_free[f] += new - old
