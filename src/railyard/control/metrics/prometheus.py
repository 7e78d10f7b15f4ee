"""``/metrics``: the control plane's state in Prometheus' text format, read at scrape time.

Every app has its own :class:`~prometheus_client.CollectorRegistry` (never the process-wide
default), holding :class:`StoreCollector` (a few aggregate queries over the store: jobs by
state and queue, pending jobs by reason, GPUs allocated, borrowed and nominal per queue and
flavor, fair-share usage and entitlement, nodes and their GPUs by state), the loop's own
histograms (:mod:`~railyard.control.metrics.loopstats`) and, on a GPU machine, the per-GPU
figures under dcgm-exporter's names (:mod:`~railyard.control.metrics.gpus`). Nothing is kept
between scrapes but the loop's histograms, so a scrape always agrees with the store.

Units are in the names (``_seconds``, ``_gpus``, ``_gpu_seconds``), per Prometheus' naming
guide (https://prometheus.io/docs/practices/naming/).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railyard import __version__
from railyard.control.metrics.gpus import GpuCollector
from railyard.control.metrics.loopstats import LoopMetrics
from railyard.control.store.convert import to_queue
from railyard.control.store.database import Store
from railyard.control.store.tables import (
    HOLDING_STATES,
    HealthRow,
    JobRow,
    JobState,
    NodeRow,
    QueueRow,
    UsageRow,
)
from railyard.control.usecases.loopstatus import LoopHealth, LoopStatus, loop_status
from railyard.control.usecases.overview import pending_counts
from railyard.control.usecases.queueviews import entitlements, overcommitted
from railyard.probe import GpuReading
from railyard.sched import NodeState, Reason
from railyard.sched.quota import QuotaTree


@dataclass(frozen=True)
class MetricsConfig:
    """How an app serves ``/metrics``. ``open_access``: no token needed (``railyard up
    --metrics-open``, for a trusted network); otherwise an admin's bearer token, since job
    names, users and queues are tenants' data. ``loop``/``loop_health``: the service loop's
    histograms and health, when the app has a loop. ``read_gpus`` (e.g.
    :func:`railyard.probe.read_gpus`) and ``node_name``: this machine's GPUs and its node in
    the store, for the per-GPU metrics; None serves none."""

    open_access: bool = False
    loop: LoopMetrics | None = None
    loop_health: LoopHealth | None = None
    read_gpus: Callable[[], Sequence[GpuReading]] | None = None
    node_name: str | None = None


def metrics_registry(
    store: Store, config: MetricsConfig, clock: Callable[[], float]
) -> CollectorRegistry:
    """A registry of this app's own: several apps in one process never clash."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store, config, clock))
    if config.read_gpus is not None and config.node_name is not None:
        registry.register(GpuCollector(store, config.node_name, config.read_gpus))
    return registry


class StoreCollector(Collector):
    """The store's state, aggregated in SQL at every scrape (a handful of GROUP BYs: cheap
    with ten thousand jobs, see benchmarks/bench_metrics.py)."""

    def __init__(self, store: Store, config: MetricsConfig, clock: Callable[[], float]) -> None:
        self.store, self.config, self.clock = store, config, clock

    def describe(self) -> list[Metric]:
        return []  # nothing to register up front; the names are checked by the tests

    def collect(self) -> Iterator[Metric]:
        yield InfoMetricFamily(
            "railyard_build", "The railyard version serving.", value={"version": __version__}
        )
        with self.store.session() as session:
            queues = list(session.scalars(select(QueueRow).order_by(QueueRow.name)))
            yield from _jobs(session, [q.name for q in queues])
            yield from _gpus(session, queues)
            yield from _fairshare(session, queues)
            yield from _nodes(session)
            yield from node_health_families(session)
            if self.config.loop_health is not None:
                status = loop_status(session, self.config.loop_health, self.clock())
                yield from _loop_health(self.config.loop_health, status)
        if self.config.loop is not None:
            yield from self.config.loop.collect()


def node_health_families(session: Session) -> list[Metric]:
    """Each node's last health run: its verdict (one series per verdict, 1 for the current
    one, as Prometheus' state sets), when it ran, and per check the status (0 pass, 1 warn,
    2 fail, 3 fatal) and the measured figure over the expected one."""
    verdict = GaugeMetricFamily(
        "railyard_node_health",
        "Verdict of the node's last health run (1 for the current verdict).",
        labels=["node", "verdict"],
    )
    when = GaugeMetricFamily(
        "railyard_node_health_last_run_timestamp_seconds",
        "When the node's last health run was reported (Unix time).",
        labels=["node"],
    )
    status = GaugeMetricFamily(
        "railyard_node_health_check_status",
        "Status of each check in the node's last run: 0 pass, 1 warn, 2 fail, 3 fatal.",
        labels=["node", "check"],
    )
    ratio = GaugeMetricFamily(
        "railyard_node_health_check_ratio",
        "Measured over expected figure of each check in the node's last run.",
        labels=["node", "check"],
    )
    verdicts = ("pass", "warn", "fail", "fatal", "skip")
    for name, health, health_t_s in session.execute(
        select(NodeRow.name, NodeRow.health, NodeRow.health_t_s)
        .where(NodeRow.health.is_not(None))
        .order_by(NodeRow.name)
    ):
        for v in verdicts:
            verdict.add_metric([name, v], 1.0 if v == health else 0.0)
        when.add_metric([name], health_t_s or 0.0)
    last = select(HealthRow).join(
        NodeRow, (NodeRow.name == HealthRow.node) & (NodeRow.health_t_s == HealthRow.t_s)
    )
    for row in session.scalars(last.order_by(HealthRow.node, HealthRow.check)):
        if row.fatal or row.status != "skip":
            code = 3 if row.fatal else ("pass", "warn", "fail").index(row.status)
            status.add_metric([row.node, row.check], code)
        if row.measured is not None and row.expected:
            ratio.add_metric([row.node, row.check], row.measured / row.expected)
    return [verdict, when, status, ratio]


def _jobs(session: Session, queue_names: list[str]) -> Iterator[Metric]:
    by_state = GaugeMetricFamily(
        "railyard_jobs", "Jobs in the store by queue and state.", labels=["queue", "state"]
    )
    counts = {(q, s.value): 0 for q in queue_names for s in JobState}
    rows = session.execute(
        select(JobRow.queue, JobRow.state, func.count()).group_by(JobRow.queue, JobRow.state)
    )
    for queue, state, count in rows:
        counts[queue, state] = int(count)
    for (queue, state), count in sorted(counts.items()):
        by_state.add_metric([queue, str(state)], count)
    yield by_state
    pending = GaugeMetricFamily(
        "railyard_jobs_pending",
        "Pending jobs by queue and why they wait (squeue's reason; None before the first cycle).",
        labels=["queue", "reason"],
    )
    # A zero for every queue and reason, so that an alert on a sum or a rate has a series
    # to read while nothing waits (an absent series is no data, not 0).
    reasons = {(q, r.value): 0 for q in queue_names for r in Reason}
    reasons.update(pending_counts(session))
    for (queue, reason), count in sorted(reasons.items()):
        pending.add_metric([queue, reason], count)
    yield pending


def _gpus(session: Session, queues: list[QueueRow]) -> Iterator[Metric]:
    labels = ["queue", "flavor"]
    allocated = GaugeMetricFamily(
        "railyard_queue_allocated_gpus",
        "GPUs held by the queue's own jobs (starting, running or stopping).",
        labels=labels,
    )
    borrowed = GaugeMetricFamily(
        "railyard_queue_borrowed_gpus",
        "GPUs the queue's subtree holds beyond its subtree's nominal quota (borrowed).",
        labels=labels,
    )
    nominal = GaugeMetricFamily(
        "railyard_queue_nominal_gpus", "The queue's own nominal quota.", labels=labels
    )
    held = session.execute(
        select(JobRow.queue, JobRow.flavor, func.sum(JobRow.workers * JobRow.gpus_per_worker))
        .where(JobRow.state.in_(HOLDING_STATES))
        .group_by(JobRow.queue, JobRow.flavor)
    ).all()
    used = {(q, f): int(g or 0) for q, f, g in held}
    flavors = {f for q in queues for f in q.nominal_gpus} | {f for _, f in used}
    tree = QuotaTree([to_queue(q) for q in queues], flavors)
    for (queue, flavor), gpus in used.items():
        if queue in tree.queues:
            tree.add(queue, flavor, gpus)
    for q in queues:
        for flavor in sorted(flavors):
            key = (q.name, flavor)
            allocated.add_metric([q.name, flavor], used.get(key, 0))
            over = tree.total.get(key, 0) - tree.subtree_nominal.get(key, 0)
            borrowed.add_metric([q.name, flavor], max(0, over))
            nominal.add_metric([q.name, flavor], int(q.nominal_gpus.get(flavor, 0)))
    excess = GaugeMetricFamily(
        "railyard_quota_overcommit_gpus",
        "GPUs by which the leaf queues' nominal quotas of a flavor exceed the cluster's (only "
        "flavors over-committed; the alerts page's RailyardQuotaOvercommitted).",
        labels=["flavor"],
    )
    for found in overcommitted(session):
        excess.add_metric([found.flavor], found.nominal_gpus - found.cluster_gpus)
    yield from (allocated, borrowed, nominal, excess)


def _fairshare(session: Session, queues: list[QueueRow]) -> Iterator[Metric]:
    usage = GaugeMetricFamily(
        "railyard_queue_fairshare_usage_gpu_seconds",
        "The queue subtree's decayed GPU-seconds that fair share ranks by.",
        labels=["queue"],
    )
    user_usage = GaugeMetricFamily(
        "railyard_user_fairshare_usage_gpu_seconds",
        "A user's decayed GPU-seconds in a leaf queue.",
        labels=["queue", "user"],
    )
    by_queue: dict[str, float] = {}
    for row in session.scalars(select(UsageRow).order_by(UsageRow.key)):
        kind, _, key = row.key.partition(":")
        if kind == "queue":
            usage.add_metric([key], row.gpu_s)
            by_queue[key] = row.gpu_s
        elif kind == "user":
            queue, _, user = key.rpartition("/")
            user_usage.add_metric([queue, user], row.gpu_s)
    share = GaugeMetricFamily(
        "railyard_queue_fairshare_usage_ratio",
        "The queue subtree's usage over the whole cluster's (the top-level queues'): what "
        "fair share compares with the entitlement.",
        labels=["queue"],
    )
    total = sum(by_queue.get(q.name, 0.0) for q in queues if q.parent is None)
    for name, gpu_s in sorted(by_queue.items()):
        share.add_metric([name], gpu_s / total if total > 0 else 0.0)
    entitled = GaugeMetricFamily(
        "railyard_queue_fairshare_entitlement_ratio",
        "The queue's fair share of the whole cluster: its weight over its siblings' at each "
        "level, multiplied down from the root (Slurm's normalized shares).",
        labels=["queue"],
    )
    for name, ratio in entitlements(queues).items():
        entitled.add_metric([name], ratio)
    yield from (usage, user_usage, share, entitled)


def _nodes(session: Session) -> Iterator[Metric]:
    nodes = GaugeMetricFamily(
        "railyard_nodes", "Nodes by state and GPU flavor.", labels=["state", "flavor"]
    )
    gpus = GaugeMetricFamily(
        "railyard_node_gpus",
        "GPUs of the nodes in each state, by flavor.",
        labels=["state", "flavor"],
    )
    rows = session.execute(
        select(NodeRow.state, NodeRow.flavor, func.count(), func.sum(NodeRow.gpus)).group_by(
            NodeRow.state, NodeRow.flavor
        )
    ).all()
    counts = {(s.value, f): (0, 0) for s in NodeState for f in {r[1] for r in rows}}
    for state, flavor, count, total in rows:
        counts[state, flavor] = (int(count), int(total or 0))
    for (state, flavor), (count, total) in sorted(counts.items()):
        nodes.add_metric([state, flavor], count)
        gpus.add_metric([state, flavor], total)
    yield from (nodes, gpus)


def _loop_health(health: LoopHealth, status: LoopStatus) -> Iterator[Metric]:
    """The facts /healthz judges by (`control.health.loop_status`), as series."""
    for name, help_text, t_s in (
        (
            "railyard_loop_last_ok_step_timestamp_seconds",
            "Unix time the scheduler loop last finished a step without error.",
            health.last_ok_t_s,
        ),
        (
            "railyard_loop_last_step_timestamp_seconds",
            "Unix time the scheduler loop last finished a step, failed or not.",
            health.last_step_t_s,
        ),
        (
            "railyard_loop_last_failed_step_timestamp_seconds",
            "Unix time a step of the scheduler loop (or a write within one) last failed.",
            health.last_failed_t_s,
        ),
    ):
        family = GaugeMetricFamily(name, help_text)
        if t_s is not None:
            family.add_metric([], t_s)
        yield family
    yield GaugeMetricFamily(
        "railyard_loop_behind_seconds",
        "Seconds since the scheduler loop last finished a step (it runs every few seconds).",
        value=status.behind_s,
    )
    stuck = GaugeMetricFamily(
        "railyard_loop_stuck_jobs",
        "Jobs in a transient state (starting, cancelling, preempting) past its deadline.",
        labels=["state"],
    )
    for state, count in sorted(status.stuck.by_state.items()):
        stuck.add_metric([state], count)
    yield stuck
    consecutive = GaugeMetricFamily(
        "railyard_loop_consecutive_failed_steps",
        "Loop steps failed in a row (reset by a good step).",
        value=health.failing_steps,
    )
    yield consecutive
    yield CounterMetricFamily(
        "railyard_loop_step_failures",
        "Loop steps that failed since the server started.",
        value=health.failed_steps_total,
    )
    yield GaugeMetricFamily(
        "railyard_loop_held_jobs",
        "Pending jobs held for a SchedulerError: the loop could not handle them (see their "
        "reason) and went on for the others; an admin releases them.",
        value=status.held[0],
    )
    yield GaugeMetricFamily(
        "railyard_loop_healthy",
        "1 when /healthz would say the loop is fine, else 0 (failed, behind or stuck jobs).",
        value=1 if status.ok else 0,
    )
