"""What a node's health findings do to it: the one rule both drivers apply.

A check run on a node ends in one finding per node: the worst of its checks. The rule, in
Slurm's terms (NHC's behaviour, where a node's note says who drained it):

- ``fatal`` (a GPU fell off the bus, XID 79; an uncorrectable ECC error): the node goes
  ``down`` at once, so the cycle requeues the jobs on it from their checkpoints (the same path
  as a node failure); a running job on a GPU that has lost its memory cannot finish well;
- ``fail`` (a figure under its failing fraction): the node is ``draining``: it takes no new
  work, its running jobs finish, and the reason names the check and its figure;
- ``pass`` or ``warn``: a node that health took out of service is resumed.

With ``fail_requeues`` (``railyard up --health-fail requeue``), a failure is treated like a
fatal error: a gang runs at the speed of its slowest node, so a long training job is better
restarted from its checkpoint elsewhere than left to finish on a slow node.

A node an admin drained or took down for another reason is left alone by ``fail``/``pass``
(its reason is not health's), as NHC leaves a node whose note is not its own; ``fatal``
still takes it down, since no one should run on it. Health's reasons start with ``health:``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from enum import StrEnum

from railyard.sched.decisions import CycleResult
from railyard.sched.model import Node, NodeState, RunningJob

HEALTH_PREFIX = "health:"
AWAITING_CHECK = "health: awaiting a check"  # joined or repaired: checked before work


class Finding(StrEnum):
    """A node's verdict from one run of its checks, mildest first."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    FATAL = "fatal"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Finding.PASS: 0, Finding.WARN: 1, Finding.FAIL: 2, Finding.FATAL: 3}


def worst(findings: list[Finding]) -> Finding | None:
    """The verdict of a run: its worst finding (None when nothing was judged)."""
    return max(findings, key=lambda f: f.rank) if findings else None


@dataclass(frozen=True)
class NodeChange:
    """A node's new state and reason."""

    node: str
    state: NodeState
    reason: str


def is_health_reason(reason: str) -> bool:
    return reason.startswith(HEALTH_PREFIX)


def on_finding(
    node: str,
    state: NodeState,
    reason: str,
    finding: Finding,
    why: str,
    *,
    fail_requeues: bool = False,
) -> NodeChange | None:
    """The change `finding` makes to a node now in `state` with `reason` (None: no change).

    `why` is the finding's one-line reason (``health: compute 34.9 GFLOP/s < 0.8 x expected
    97.2 GFLOP/s``); it becomes the node's reason when health takes the node out of service."""
    if not is_health_reason(why):
        why = f"{HEALTH_PREFIX} {why}"
    ours = state is NodeState.READY or is_health_reason(reason)
    if finding is Finding.FATAL or (finding is Finding.FAIL and fail_requeues and ours):
        if state is NodeState.DOWN and not is_health_reason(reason):
            return None  # already down for another cause; its repair comes first
        return _change(node, state, reason, NodeState.DOWN, why)
    if not ours:
        return None
    if finding is Finding.FAIL:
        if state is NodeState.DOWN:
            return _change(node, state, reason, NodeState.DOWN, why)  # still out until it passes
        target = NodeState.DRAINED if state is NodeState.DRAINED else NodeState.DRAINING
        return _change(node, state, reason, target, why)
    if state is NodeState.READY:
        return None
    return NodeChange(node, NodeState.READY, "")


def _change(
    node: str, state: NodeState, reason: str, target: NodeState, why: str
) -> NodeChange | None:
    if state is target and reason == why:
        return None
    return NodeChange(node, target, why)


def joining_state(gate: bool) -> tuple[NodeState, str]:
    """Where a node that has just joined starts: with `gate`, drained until its first checks
    pass (it takes no job before), else ready."""
    return (NodeState.DRAINED, AWAITING_CHECK) if gate else (NodeState.READY, "")


# -- when checks run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthPolicy:
    """When the scheduler runs a node's checks, and what a failure does.

    - `interval_s`: check a node again once this long has passed since its last check, when
      it is idle (None: never periodically; on demand and at join only). Azure's and Google's
      health services check idle nodes between jobs; six hours keeps an idle node's checks
      under 1% of its time with a check of a few minutes.
    - `gate_joins`: a node that joins is drained until its first check passes.
    - `check_s`: how long a check holds the node (the simulator's figure; live checks take
      what they take).
    - `fail_requeues`: a failure requeues the node's jobs (else they finish; see
      `on_finding`)."""

    interval_s: float | None = 6 * 3600.0
    gate_joins: bool = True
    check_s: float = 180.0
    fail_requeues: bool = False

    def __post_init__(self) -> None:
        if self.interval_s is not None and self.interval_s <= 0:
            raise ValueError("health interval_s must be > 0 (or None: no periodic checks)")
        if self.check_s < 0:
            raise ValueError("health check_s must be >= 0")


ACROSS_ONLY = HealthPolicy(interval_s=None, gate_joins=False)
"""A driver with no scheduled checks and a sweep alone: nothing periodic, no join gate."""


@dataclass(frozen=True)
class HealthInput:
    """What the drivers know of checks at a step: the policy, nodes whose check runs now,
    when each node's last check ended (a node never checked is absent) and each node's
    reason for its state (the scheduler's nodes carry none; absent: no reason)."""

    policy: HealthPolicy
    checking: frozenset[str] = frozenset()
    last_check_t_s: Mapping[str, float] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    group: tuple[str, ...] = ()
    """The group an across-node check (a sweep, `health.bisect`) tests next: it starts once
    every node of it is idle and checkable. The sweep's nodes are in `checking` until it ends,
    so they take no new job meanwhile (their running jobs finish)."""


def checkable(state: NodeState, reason: str) -> bool:
    """A ready node, or one health holds out of service (the check is how it comes back);
    never a node an admin took out."""
    return state is NodeState.READY or is_health_reason(reason)


def group_ready(
    group: Iterable[str], nodes: Iterable[tuple[str, NodeState, str]], busy: Set[str]
) -> bool:
    """Every node of an across-node check's group is idle and checkable now."""
    wanted = set(group)
    found = {name for name, state, reason in nodes if name in wanted and checkable(state, reason)}
    return bool(wanted) and found == wanted and not wanted & busy


def due_checks(
    nodes: Iterable[tuple[str, NodeState, str]],
    busy: Set[str],
    given: HealthInput,
    now_t_s: float,
) -> tuple[tuple[str, ...], float]:
    """Nodes whose check should start now, and when the next one falls due (inf: none).

    A check starts on a node that is checkable, idle (nothing running, starting, reserved or
    nominated there: `busy`), not being checked, and due: held awaiting a check (joined or
    repaired), never checked while `gate_joins`, or last checked `interval_s` ago. A busy
    node is checked once it is idle; the step that frees it looks again."""
    policy = given.policy
    out = []
    next_t_s = math.inf
    for name, state, reason in nodes:
        if name in busy or name in given.checking or not checkable(state, reason):
            continue
        last = given.last_check_t_s.get(name)
        if reason == AWAITING_CHECK or (last is None and policy.gate_joins):
            out.append(name)
        elif last is None:
            continue
        elif policy.interval_s is not None:
            at = last + policy.interval_s
            if at <= now_t_s:
                out.append(name)
            else:
                next_t_s = min(next_t_s, at)
    return tuple(sorted(out)), next_t_s


# -- across-node sweeps ----------------------------------------------------------------------
# A sweep tests a set of nodes group by group (`health.bisect`). Its gating is policy, the same
# for every driver: which nodes one may cover, when a periodic one runs, when a group's test
# starts (`group_ready`), when a test is overdue, and when the sweep must stop. The drivers
# launch the tests and read their figures.

SWEEP_MIN_NODES = 2  # an all_reduce across nodes needs two
ACROSS_TEST_LIMIT_S = 600.0  # a test still running then is stuck (a rank that never joined)


def sweep_nodes(
    nodes: Iterable[tuple[str, NodeState, str]], asked: Iterable[str] = ()
) -> tuple[str, ...]:
    """The nodes a sweep asked over `asked` (every node when empty) covers: the checkable
    ones, in the order asked; empty when fewer than `SWEEP_MIN_NODES` are."""
    found = {name: checkable(state, reason) for name, state, reason in nodes}
    names = list(dict.fromkeys(asked)) or sorted(found)
    covered = tuple(n for n in names if found.get(n, False))
    return covered if len(covered) >= SWEEP_MIN_NODES else ()


def periodic_sweep_nodes(
    nodes: Iterable[tuple[str, NodeState, str]], busy: Set[str]
) -> tuple[str, ...]:
    """The nodes a periodic sweep covers now: the ready ones with nothing on them (a busy node
    waits for the next sweep: a periodic sweep never holds a node that has work), sorted;
    empty when fewer than `SWEEP_MIN_NODES` are."""
    idle = sorted(n for n, state, _ in nodes if state is NodeState.READY and n not in busy)
    return tuple(idle) if len(idle) >= SWEEP_MIN_NODES else ()


def group_blocked(group: Iterable[str], nodes: Mapping[str, tuple[NodeState, str]]) -> str | None:
    """Why a sweep's next group can never be tested (a node of it went down, left, or an
    admin took it out), so the sweep stops rather than hold its other nodes forever; None
    while it can."""
    for name in group:
        found = nodes.get(name)
        if found is None:
            return f"{name} is gone: its group cannot be tested"
        state, reason = found
        if not checkable(state, reason):
            return f"{name} is {state.value} ({reason}): its group cannot be tested"
    return None


def with_sweep(given: HealthInput, held: Set[str], group: Sequence[str]) -> HealthInput:
    """The step's input while a sweep holds `held` (being checked: no new job) and wants
    `group` tested next; the group waits while a node's own check runs on one of its nodes."""
    if not held:
        return given
    if set(group) & given.checking:
        group = ()
    return replace(given, checking=given.checking | frozenset(held), group=tuple(group))


def across_test_overdue(started_t_s: float, now_t_s: float) -> bool:
    """A group's test has run past `ACROSS_TEST_LIMIT_S`: cancel it (it fails: no figure)."""
    return now_t_s - started_t_s > ACROSS_TEST_LIMIT_S


def checks_after(
    health: HealthInput,
    nodes: Sequence[Node],
    running: Sequence[RunningJob],
    result: CycleResult,
    now_t_s: float,
) -> tuple[tuple[str, ...], tuple[str, ...], float]:
    """Health checks due on nodes that stay idle after a step's decisions, and the
    across-node group to test now (empty: none, or its nodes are not all idle yet)."""
    busy = {name for r in running for name in r.placement}
    busy.update(name for s in result.starts for name in s.placement)
    busy.update(name for r in result.reservations.values() for name in r.placement)
    reasons = health.reasons
    states = [(n.name, n.state, reasons.get(n.name, "")) for n in nodes]
    due, next_t_s = due_checks(states, busy, health, now_t_s)
    group = health.group if health.group and group_ready(health.group, states, busy) else ()
    return due, group, next_t_s
