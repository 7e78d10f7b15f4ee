"""The package's promises: purity, every reason reachable, pluggable named policies."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

import railyard.sched
from railyard.sched import Job, Level, Node, Reason
from railyard.sched.policies import ORDERING, OrderContext
from railyard.sched.policies.registry import SortKey

PACKAGE = Path(railyard.sched.__file__).parent
FORBIDDEN = {"time", "datetime", "random", "threading", "asyncio", "os", "io", "socket",
             "subprocess", "pathlib", "railyard.fabric", "railyard.blueprint"}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.name)
def test_sched_is_pure_and_small(path):
    mods = imported_modules(path)
    assert not {m for m in mods if m in FORBIDDEN or m.split(".")[0] in FORBIDDEN}
    assert not {m for m in mods if m.startswith("railyard.") and not m.startswith("railyard.sched")}
    assert "open(" not in path.read_text()
    assert len(path.read_text().splitlines()) <= 500


def test_a_starving_job_without_estimates_holds_back_its_flavor():
    # no walltimes: no reservation is possible, so strict order protects the old job
    run = [running(job("r", gpus=4), "n0:0-3")]
    pending = [job("old", gpus=8, submit_t_s=0.0), job("new", gpus=4, submit_t_s=900.0)]
    s = state(nodes(1), flat_queues({"a": 64}), pending, run)
    young = schedule(s, now_t_s=1000.0, starvation_limit_s=5000.0)
    assert [x.job_id for x in young.starts] == ["new"]
    old = schedule(s, now_t_s=1000.0, starvation_limit_s=500.0)
    assert old.starts == ()
    assert old.pending_reasons == {"old": Reason.RESOURCES, "new": Reason.PRIORITY}


def test_level_names_round_trip():
    assert [Level.parse(x.label) for x in Level] == list(Level)
    assert max(Level.NODE, Level.SCALABLE_UNIT) is Level.SCALABLE_UNIT
    with pytest.raises(ValueError, match="leaf-group"):
        Level.parse("rack")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": 4, "nvlink_domains": ((0, 1), (1, 2, 3))}, "partition"),
        ({"gpus": -1}, "gpus"),
    ],
)
def test_nodes_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Node("n", "H100", **kwargs)


def test_jobs_are_validated():
    with pytest.raises(ValueError, match="workers"):
        Job(id="j", queue="a", flavor="H100", workers=0)


@dataclass(frozen=True)
class ShortestFirst:
    """A policy in a few lines: shortest walltime first (unknown last)."""

    name: str = "test-shortest-first"

    def sort_key(self, ctx: OrderContext) -> SortKey:
        return lambda j: (j.walltime_s if j.walltime_s is not None else math.inf, j.id)


ORDERING.add(ShortestFirst())


def test_a_new_policy_is_selected_by_name():
    pending = [job("long", gpus=8, walltime_s=900.0), job("short", gpus=8, walltime_s=60.0)]
    s = state(nodes(1), flat_queues({"a": 8}), pending)
    assert [x.job_id for x in schedule(s, ordering="fifo").starts] == ["long"]
    assert [x.job_id for x in schedule(s, ordering="test-shortest-first").starts] == ["short"]
    with pytest.raises(ValueError, match="twice"):
        ORDERING.add(ShortestFirst())


@pytest.mark.parametrize("ordering", ["fifo", "priority", "fairshare", "las"])
def test_jobs_of_one_instant_start_in_numeric_order(ordering):
    """Array tasks 4_2 before 4_10, job 9 before job 10 (not string order); job 4's tasks
    before job 9."""
    tasks = [job(f"4_{i}", array_parent="4", array_index=i) for i in (10, 2, 1)]
    plain = [job("10"), job("9")]
    result = schedule(
        state(nodes(1, gpus=4), flat_queues({"a": 8}), [*plain, *tasks]), ordering=ordering
    )
    assert [s.job_id for s in result.starts] == ["4_1", "4_2", "4_10", "9"]
