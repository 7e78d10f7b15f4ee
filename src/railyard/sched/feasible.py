"""Can a job ever run here? Checked against the real topology and quota, not just counts.

"Three nodes within one leaf group" on two-node leaf groups, five 5-GPU workers on four
8-GPU nodes, or a worker asking more cores or memory than any node declares, pass a GPU count
check and still never fit. Such a job waits with a reason that
says so and never holds back other jobs (a job that might fit later would block its flavor
under strict ordering or once it starves). The shape is placed on an empty copy of the
inventory with the cycle's own placement policy: what fails there fails forever.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from railyard.sched.decisions import Reason
from railyard.sched.limits import over_max_time
from railyard.sched.model import Job, Node, NodeState, TopologyMode
from railyard.sched.policies.registry import AdmissionPolicy, PlacementPolicy
from railyard.sched.quota import QuotaTree
from railyard.sched.snapshot import Shape, Snapshot, Topology, mem_mib


def shape_reason(topo: Topology, placement: PlacementPolicy, shape: Shape) -> Reason | None:
    """`Unschedulable` if the shape fits no empty inventory (placed there once per inventory,
    whatever nodes are down), `ReqNodeNotAvail` if the nodes up now are too few or too small
    for it (a count, cheap; for a gang that asks for cores or memory or names nodes, and for
    a gang over several nodes while some of its flavor are down, a placement on the idle
    nodes that are up: two nodes of one leaf group, one of them down, are not a leaf group
    of two); memoised on the topology index."""
    if shape in topo.feasible:
        return topo.feasible[shape]
    reason: Reason | None = None
    f = shape.flavor
    if f not in topo.total_gpus_all:
        reason = Reason.BAD_CONSTRAINTS
    else:
        never = topo.static.never_fits
        if shape not in never:
            never[shape] = placement.place(topo.all_ready().idle(), shape) is None
        if never[shape]:
            reason = Reason.UNSCHEDULABLE
        elif (
            shape.gpus_per_worker > topo.max_gpus.get(f, -1)
            or shape.gpus > topo.ready_gpus.get(f, 0)
            or (shape.distinct_nodes and shape.workers > len(topo.flavor_nodes.get(f, ())))
            or (  # cores or memory, the nodes it names, a required topology, or a
                # gang over several nodes while some are down: only nodes down may hold it
                (
                    shape.picks_nodes
                    or (shape.asks_load and f in topo.limited)
                    or (shape.workers > 1 and topo.ready_gpus.get(f, 0) < topo.total_gpus_all[f])
                )
                and placement.place(topo.idle(), shape) is None
            )
        ):
            reason = Reason.REQ_NODE_NOT_AVAIL
    topo.feasible[shape] = reason
    return reason


class Feasibility:
    """Per cycle: the reason a job can never start now whatever happens to other jobs."""

    def __init__(
        self,
        topo: Topology,
        quota: QuotaTree,
        admission: AdmissionPolicy,
        placement: PlacementPolicy,
    ) -> None:
        self.topo = topo
        self.quota = quota
        self.queues = quota.queues
        self.admission = admission
        self.placement = placement
        self._empty_quota: QuotaTree | None = None
        self._quota_flavors = quota.flavors
        self._cache: dict[Hashable, Reason | None] = {}

    def over_max_time(self, job: Job) -> bool:
        return over_max_time(job, self.queues.get(job.queue))

    def reason(self, job: Job) -> Reason | None:
        key = (
            job.queue,
            job.flavor,
            job.workers,
            job.gpus_per_worker,
            job.cpus_per_worker,
            job.mem_per_worker_gb,
            job.topology,
            job.distinct_nodes,
            job.only_nodes,
            job.never_nodes,
            job.walltime_s is not None and self.over_max_time(job),
        )
        try:
            return self._cache[key]
        except KeyError:
            reason = self._cache[key] = self._reason(job, Shape.of(job))
            return reason

    def _reason(self, job: Job, shape: Shape) -> Reason | None:
        queue = self.queues.get(job.queue)
        if queue is None or not self.quota.is_leaf(job.queue):
            return Reason.BAD_CONSTRAINTS  # no such queue, or not a leaf
        if over_max_time(job, queue):
            return Reason.PARTITION_TIME_LIMIT
        reason = shape_reason(self.topo, self.placement, shape)
        if reason is Reason.UNSCHEDULABLE or reason is Reason.BAD_CONSTRAINTS:
            return reason
        if not self.admission.fits(self._idle_quota(), job):
            return Reason.UNSCHEDULABLE  # more than its queue may ever use
        return reason

    def _idle_quota(self) -> QuotaTree:
        if self._empty_quota is None:
            self._empty_quota = QuotaTree(list(self.queues.values()), self._quota_flavors)
        return self._empty_quota


def never_placeable(nodes: Sequence[Node], job: Job, placement: PlacementPolicy) -> str | None:
    """Why `job`'s gang can never be placed on `nodes` even with all of them up and idle,
    in one line for a submit error; None if it can. (Quota and queue are checked apart.)"""
    shape = Shape.of(job)
    whole = Topology([replace(n, state=NodeState.READY) for n in nodes])
    if shape.flavor not in whole.total_gpus_all:
        return None  # an unknown flavor is reported by the caller, with the known ones
    if placement.place(Snapshot(whole), shape) is not None:
        return None
    mine = [i for i, n in enumerate(whole.nodes) if n.flavor == shape.flavor]
    too_big = over_every_node([whole.nodes[i] for i in mine], job)
    if too_big is not None:
        return too_big[1]
    what = f"{shape.workers} x {shape.gpus_per_worker} GPUs"
    if shape.distinct_nodes:
        what += " on distinct nodes"
    if shape.topology is not None and shape.topology.mode is TopologyMode.REQUIRED:
        level = shape.topology.level
        sizes: dict[tuple[str, ...], int] = {}
        for i in mine:
            key = whole.nodes[i].group(level)
            sizes[key] = sizes.get(key, 0) + whole.nodes[i].gpus // max(1, shape.gpus_per_worker)
        return (
            f"{what} within one {level.label} never fit: a {level.label} of {shape.flavor} "
            f"nodes holds at most {max(sizes.values(), default=0)} such workers"
        )
    snap = Snapshot(whole)
    per_node = [whole.nodes[i].gpus // max(1, shape.gpus_per_worker) for i in mine]
    per_node = [min(k, snap.chunks_fit(i, shape)) for k, i in zip(per_node, mine, strict=True)]
    if shape.distinct_nodes:
        per_node = [min(1, k) for k in per_node]
    if shape.asks_load:
        what += f" with {_cores_mem(job)} each"
    if shape.picks_nodes:
        return (
            f"{what} never fit on the nodes it names (--nodelist, --exclude): they hold at "
            f"most {sum(per_node)} such workers"
        )
    return (
        f"{what} never fit: the {len(mine)} {shape.flavor} nodes hold at most "
        f"{sum(per_node)} such workers"
    )


def _cores_mem(job: Job) -> str:
    parts = []
    if job.cpus_per_worker:
        parts.append(f"{job.cpus_per_worker} cores")
    if job.mem_per_worker_gb:
        parts.append(f"{job.mem_per_worker_gb:g} GB")
    return " and ".join(parts)


def over_every_node(nodes: Sequence[Node], job: Job) -> tuple[str, str] | None:
    """(option, one line) when one worker's cores or memory exceed the largest of `nodes`
    (those of its flavor; a node declaring 0 sets no limit), naming the option that asked,
    `--cpus-per-task` or `--mem`, and the largest node's figure; None otherwise."""
    if job.cpus_per_worker and nodes and all(n.cpu_cores for n in nodes):
        most = max(n.cpu_cores for n in nodes)
        if job.cpus_per_worker > most:
            return "--cpus-per-task", (
                f"a worker needs {job.cpus_per_worker} cores on one node (--cpus-per-task "
                f"times the tasks it runs there), the largest {job.flavor} node has {most}"
            )
    if job.mem_per_worker_gb and nodes and all(n.mem_gb for n in nodes):
        most_gb = max(n.mem_gb for n in nodes)
        if mem_mib(job.mem_per_worker_gb) > mem_mib(most_gb):
            return "--mem", (
                f"--mem asks {job.mem_per_worker_gb:g} GB per worker, the largest "
                f"{job.flavor} node has {most_gb:.4g} GB"
            )
    return None
