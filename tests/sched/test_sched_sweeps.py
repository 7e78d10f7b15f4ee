"""The gating of across-node sweeps (`sched.health`), pure so a simulator can model sweeps
by the rules the live loop follows: which nodes a sweep covers, when a periodic one runs,
when its group cannot be tested, and when a test is overdue."""

from __future__ import annotations

from railyard.sched.health import (
    ACROSS_ONLY,
    ACROSS_TEST_LIMIT_S,
    HealthInput,
    across_test_overdue,
    group_blocked,
    periodic_sweep_nodes,
    sweep_nodes,
    with_sweep,
)
from railyard.sched.model import NodeState

READY, DRAINED, DOWN = NodeState.READY, NodeState.DRAINED, NodeState.DOWN
NODES = [
    ("n0", READY, ""),
    ("n1", READY, ""),
    ("n2", DRAINED, "health: allreduce slow"),  # health holds it: a sweep may bring it back
    ("n3", DRAINED, "maintenance"),  # an admin's: never checked
]


def test_a_sweep_covers_the_checkable_nodes_asked_in_order() -> None:
    assert sweep_nodes(NODES) == ("n0", "n1", "n2")
    assert sweep_nodes(NODES, ["n2", "n3", "n0", "n2"]) == ("n2", "n0")
    assert sweep_nodes(NODES, ["n0", "n3"]) == ()  # one node: no all_reduce across nodes


def test_a_periodic_sweep_takes_only_idle_ready_nodes() -> None:
    assert periodic_sweep_nodes(NODES, busy=set()) == ("n0", "n1")
    assert periodic_sweep_nodes(NODES, busy={"n1"}) == ()


def test_a_group_that_cannot_be_tested_stops_the_sweep() -> None:
    states = {name: (state, reason) for name, state, reason in NODES}
    assert group_blocked(["n0", "n2"], states) is None
    assert group_blocked(["n0", "n3"], states) == (
        "n3 is drained (maintenance): its group cannot be tested"
    )
    assert group_blocked(["n9"], states) == "n9 is gone: its group cannot be tested"
    down = {**states, "n1": (DOWN, "NodeDown")}
    assert group_blocked(["n0", "n1"], down) == "n1 is down (NodeDown): its group cannot be tested"


def test_a_test_is_overdue_past_its_limit() -> None:
    assert not across_test_overdue(100.0, 100.0 + ACROSS_TEST_LIMIT_S)
    assert across_test_overdue(100.0, 100.0 + ACROSS_TEST_LIMIT_S + 1)


def test_a_sweep_holds_its_nodes_and_its_group_waits_for_a_nodes_own_check() -> None:
    """The rule both drivers apply to the step's input (`with_sweep`)."""
    given = HealthInput(ACROSS_ONLY, checking=frozenset({"n2"}))
    assert with_sweep(given, frozenset(), ("n0", "n1")) is given  # no sweep: unchanged
    held = with_sweep(given, frozenset({"n0", "n1", "n2"}), ("n0", "n1"))
    assert held.checking == {"n0", "n1", "n2"}  # no new job on any of them
    assert held.group == ("n0", "n1")
    waiting = with_sweep(given, frozenset({"n0", "n1", "n2"}), ("n1", "n2"))
    assert waiting.group == ()  # n2's own check runs now: the group test waits
