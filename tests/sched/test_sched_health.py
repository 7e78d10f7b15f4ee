"""The health rule both drivers apply: what a node's verdict does to its state and reason."""

from __future__ import annotations

import pytest

from railyard.sched.health import (
    AWAITING_CHECK,
    Finding,
    NodeChange,
    joining_state,
    on_finding,
    worst,
)
from railyard.sched.model import NodeState

R, DRAINING, DRAINED, DOWN = (
    NodeState.READY, NodeState.DRAINING, NodeState.DRAINED, NodeState.DOWN,
)  # fmt: skip
SLOW = "health: compute 35 GFLOP/s < 0.8 x expected 97 GFLOP/s"
XID = "health: gpu-xid: XID 79 on GPU 3 (fallen off the bus)"


def test_a_runs_verdict_is_its_worst_finding() -> None:
    assert worst([Finding.PASS, Finding.FAIL, Finding.WARN]) is Finding.FAIL
    assert worst([Finding.WARN, Finding.FATAL]) is Finding.FATAL
    assert worst([]) is None


@pytest.mark.parametrize(
    ("state", "reason", "finding", "why", "expected"),
    [
        (R, "", Finding.FAIL, SLOW, NodeChange("n1", DRAINING, SLOW)),
        (R, "", Finding.FATAL, XID, NodeChange("n1", DOWN, XID)),
        (R, "", Finding.PASS, "", None),
        (R, "", Finding.WARN, "", None),
        # a node health took out comes back once nothing fails
        (DRAINED, SLOW, Finding.PASS, "", NodeChange("n1", R, "")),
        (DRAINING, SLOW, Finding.WARN, "", NodeChange("n1", R, "")),
        (DOWN, XID, Finding.PASS, "", NodeChange("n1", R, "")),
        (DRAINED, AWAITING_CHECK, Finding.PASS, "", NodeChange("n1", R, "")),
        # a new failure on a node health holds updates the reason, never the drained state
        (DRAINED, SLOW, Finding.FAIL, "health: memory 9 GB/s", NodeChange(
            "n1", DRAINED, "health: memory 9 GB/s")),
        (DRAINING, SLOW, Finding.FAIL, SLOW, None),
        (DOWN, XID, Finding.FAIL, SLOW, NodeChange("n1", DOWN, SLOW)),
        # an admin's drain is not health's to undo or rename ...
        (DRAINED, "new NIC firmware", Finding.PASS, "", None),
        (DRAINING, "new NIC firmware", Finding.FAIL, SLOW, None),
        (DOWN, "PSU replaced", Finding.PASS, "", None),
        (DOWN, "PSU replaced", Finding.FATAL, XID, None),
        # ... but a fatal error stops a drained node's jobs all the same
        (DRAINING, "new NIC firmware", Finding.FATAL, XID, NodeChange("n1", DOWN, XID)),
    ],
)  # fmt: skip
def test_the_rule(
    state: NodeState, reason: str, finding: Finding, why: str, expected: NodeChange | None
) -> None:
    assert on_finding("n1", state, reason, finding, why) == expected


def test_fail_requeues_treats_a_failure_as_fatal_on_health_s_nodes_only() -> None:
    assert on_finding("n1", R, "", Finding.FAIL, SLOW, fail_requeues=True) == NodeChange(
        "n1", DOWN, SLOW
    )
    assert on_finding("n1", DRAINED, "maintenance", Finding.FAIL, SLOW, fail_requeues=True) is None


def test_a_reason_without_the_prefix_gets_it() -> None:
    change = on_finding("n1", R, "", Finding.FAIL, "compute 35 GFLOP/s")
    assert change is not None
    assert change.reason == "health: compute 35 GFLOP/s"


def test_a_gated_node_joins_drained_until_its_first_checks_pass() -> None:
    assert joining_state(True) == (DRAINED, AWAITING_CHECK)
    assert joining_state(False) == (R, "")
    state, reason = joining_state(True)
    assert on_finding("n1", state, reason, Finding.PASS, "") == NodeChange("n1", R, "")
