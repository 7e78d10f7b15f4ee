"""Health checks in the simulated world: slow nodes, the checks that find them, repairs.

A node can turn slow without failing (a throttled GPU, a flapping NIC): a `Degradation`. A
gang placed on it runs at that node's pace (the executor slows every attempt whose placement
includes it); nothing else tells the scheduler. The scheduler's health checks
(`sched.health.HealthPolicy`, the same rule and the same choice of when to check as the live
loop) run on idle nodes; a check of a slow node fails, and `sched.health.on_finding` drains it
or takes it down. Health hands it to repair for `repair_s`; the repaired node waits for a
passing check before it takes work again. A job already running when its node slows keeps its
speed in this model (the slowdown reaches the next attempt placed there).

Across-node sweeps (`SweepRequest`, run by `sim.across`) find a slow node by its all_reduce
figure: a group's test measures `across_busbw_gbps` x its slowest node's speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from railyard.sched.health import (
    ACROSS_TEST_LIMIT_S,
    AWAITING_CHECK,
    Finding,
    HealthInput,
    HealthPolicy,
    NodeChange,
    on_finding,
)
from railyard.sched.model import NodeState


@dataclass(frozen=True)
class Degradation:
    """From `t_s`, `node` computes at `speed` (0 < speed < 1) of its full rate."""

    t_s: float
    node: str
    speed: float

    def __post_init__(self) -> None:
        if not 0 < self.speed < 1:
            raise ValueError(f"degradation of {self.node}: speed must be in (0, 1)")


@dataclass(frozen=True)
class SweepRequest:
    """At `t_s` an admin asks for an across-node sweep over `nodes` (empty: every checkable
    node), as `POST /v1/health/across` does live."""

    t_s: float
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class HealthWorld:
    """The health side of a simulation: the scheduler's policy, the world's slow nodes, the
    sweeps asked and what a sweep's group test takes and measures."""

    policy: HealthPolicy = field(default_factory=HealthPolicy)
    degradations: tuple[Degradation, ...] = ()
    repair_s: float = 4 * 3600.0  # from health taking a node out to the node fixed
    sweeps: tuple[SweepRequest, ...] = ()
    across_test_s: float = 60.0  # one group's all_reduce test, from its start
    across_busbw_gbps: float = 100.0  # what healthy nodes measure; the test's expectation

    def __post_init__(self) -> None:
        if self.repair_s < 0:
            raise ValueError("health repair_s must be >= 0")
        if not 0 < self.across_test_s <= ACROSS_TEST_LIMIT_S:  # stuck tests are not modelled
            raise ValueError(f"across_test_s must be in (0, {ACROSS_TEST_LIMIT_S:g}] s")
        if self.across_busbw_gbps <= 0:
            raise ValueError("across_busbw_gbps must be > 0")


class HealthState:
    """What the run knows: checks under way, last checks, reasons, slow nodes, counters."""

    def __init__(self, world: HealthWorld) -> None:
        self.world = world
        self.checking: set[str] = set()
        self.last_check_t_s: dict[str, float] = {}
        self.reasons: dict[str, str] = {}
        self.speed: dict[str, float] = {}  # slow nodes now
        self.slow_since_t_s: dict[str, float] = {}
        self.checks = 0
        self.checks_by_node: dict[str, int] = {}
        self.detections: list[tuple[str, float]] = []  # (node, seconds from slow to found)

    def input(self) -> HealthInput:
        return HealthInput(
            self.world.policy,
            frozenset(self.checking),
            dict(self.last_check_t_s),
            dict(self.reasons),
        )

    def start(self, node: str) -> None:
        self.checking.add(node)
        self.checks += 1
        self.checks_by_node[node] = self.checks_by_node.get(node, 0) + 1

    def check_gpu_s(self, gpus: dict[str, int]) -> float:
        """GPU time the checks held their nodes."""
        check_s = self.world.policy.check_s
        return sum(gpus.get(n, 0) * k * check_s for n, k in self.checks_by_node.items())

    def finish(self, node: str, state: NodeState, now_t_s: float) -> NodeChange | None:
        """A check of `node` ends: its finding by the world's truth, and the rule's change."""
        self.checking.discard(node)
        self.last_check_t_s[node] = now_t_s
        speed = self.speed.get(node)
        if speed is None:
            finding, why = Finding.PASS, ""
        else:
            finding = Finding.FAIL
            why = f"health: compute {speed:.2f} x expected (a slow node)"
        return self.found(node, state, finding, why, now_t_s)

    def found(
        self, node: str, state: NodeState, finding: Finding, why: str, now_t_s: float
    ) -> NodeChange | None:
        """Apply the health rule to a finding about `node` (a check's or a sweep's)."""
        reason = self.reasons.get(node, "")
        change = on_finding(
            node, state, reason, finding, why, fail_requeues=self.world.policy.fail_requeues
        )
        if change is not None:
            self.reasons[node] = change.reason
        if finding is Finding.FAIL and node in self.slow_since_t_s:
            self.detections.append((node, now_t_s - self.slow_since_t_s.pop(node)))
        return change

    def degrade(self, node: str, speed: float, now_t_s: float) -> None:
        self.speed[node] = speed
        self.slow_since_t_s.setdefault(node, now_t_s)

    def repaired(self, node: str, state: NodeState) -> NodeChange | None:
        """The node is fixed; one health holds out of service awaits its check."""
        self.speed.pop(node, None)
        self.slow_since_t_s.pop(node, None)
        if state is NodeState.READY or not self.reasons.get(node, "").startswith("health:"):
            return None
        self.reasons[node] = AWAITING_CHECK
        return NodeChange(node, state, AWAITING_CHECK)

    def mean_detection_s(self) -> float | None:
        """Mean time from a node turning slow to a check finding it (None: none found)."""
        if not self.detections:
            return None
        return sum(d for _, d in self.detections) / len(self.detections)

    def summary(self, gpus: dict[str, int], slowed_gpu_s: float) -> dict[str, float | None]:
        """A run's health figures (`RunLog.health`); ``slowed_gpu_s``: the executor's."""
        return {
            "checks": float(self.checks),
            "check_gpu_s": float(self.check_gpu_s(gpus)),
            "slow_nodes_found": float(len(self.detections)),
            "mean_detection_s": self.mean_detection_s(),
            "slowed_gpu_s": slowed_gpu_s,
        }
