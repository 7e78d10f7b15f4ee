"""sbatch's --nodelist and --exclude: a job's nodes are among those it names and none of
those it excludes, on both placement policies, for one node, many, and none of GPUs; it waits
with Slurm's reasons (Resources while its nodes are busy, ReqNodeNotAvail while only nodes
that are down could hold it), and the same shapes without names are placed as before."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import NodeState, Reason
from railyard.sched.feasible import never_placeable
from railyard.sched.policies import PLACEMENT

Q = flat_queues({"a": 64, "b": 64})
POLICIES = ["fabric-aware", "first-fit"]


def names(result) -> dict[str, set[str]]:  # type: ignore[no-untyped-def]
    return {s.job_id: set(s.placement) for s in result.starts}


@pytest.mark.parametrize("placement", POLICIES)
def test_one_node_jobs_go_where_they_are_told(placement: str) -> None:
    pinned = job("pinned", gpus=2, only_nodes=frozenset({"n2"}))
    away = job("away", gpus=2, never_nodes=frozenset({"n0", "n1"}))
    plain = job("plain", gpus=2)
    result = schedule(state(nodes(4), Q, [pinned, away, plain]), placement=placement)
    placed = names(result)
    assert placed["pinned"] == {"n2"}
    assert placed["away"] <= {"n2", "n3"}
    assert placed["plain"] <= {"n0", "n1", "n2", "n3"}


@pytest.mark.parametrize("placement", POLICIES)
def test_a_gang_on_named_nodes_across_leaf_groups(placement: str) -> None:
    gang = job("gang", gpus=8, workers=2, distinct_nodes=True, only_nodes=frozenset({"n1", "n3"}))
    result = schedule(state(nodes(4), Q, [gang]), placement=placement)
    assert names(result) == {"gang": {"n1", "n3"}}


def test_a_job_without_gpus_on_a_named_node() -> None:
    cpu = job("cpu", gpus=0, only_nodes=frozenset({"n3"}))
    assert names(schedule(state(nodes(4), Q, [cpu]))) == {"cpu": {"n3"}}


def test_busy_named_nodes_wait_with_resources_then_start() -> None:
    busy = running(job("busy", gpus=8), "n1:0-7")
    pinned = job("pinned", gpus=4, only_nodes=frozenset({"n1"}))
    result = schedule(state(nodes(2), Q, [pinned], [busy]))
    assert (list(result.starts), result.pending_reasons) == ([], {"pinned": Reason.RESOURCES})
    assert names(schedule(state(nodes(2), Q, [pinned]))) == {"pinned": {"n1"}}


def test_down_named_nodes_wait_with_req_node_not_avail() -> None:
    down = nodes(3, states={"n2": NodeState.DOWN})
    pinned = job("pinned", gpus=1, only_nodes=frozenset({"n2"}))
    others = job("others", gpus=1, never_nodes=frozenset({"n0", "n1"}))
    result = schedule(state(down, Q, [pinned, others]))
    assert result.pending_reasons == {
        "pinned": Reason.REQ_NODE_NOT_AVAIL,
        "others": Reason.REQ_NODE_NOT_AVAIL,
    }


def test_alike_jobs_naming_other_nodes_are_decided_apart() -> None:
    """The cycle's memos key on the node choice: one job that cannot start on its nodes does
    not make an alike job for other nodes wait."""
    busy = running(job("busy", gpus=8), "n0:0-7")
    first = job("first", gpus=8, only_nodes=frozenset({"n0"}), submit_t_s=0)
    second = job("second", gpus=8, only_nodes=frozenset({"n1"}), submit_t_s=1)
    result = schedule(state(nodes(2), Q, [first, second], [busy]))
    assert names(result) == {"second": {"n1"}}
    assert result.pending_reasons == {"first": Reason.RESOURCES}


def test_submit_refuses_a_gang_its_named_nodes_can_never_hold() -> None:
    gang = job("gang", gpus=8, workers=3, distinct_nodes=True, only_nodes=frozenset({"n0", "n1"}))
    policy = PLACEMENT.get("fabric-aware")
    assert never_placeable(nodes(4), gang, policy) == (
        "3 x 8 GPUs on distinct nodes never fit on the nodes it names (--nodelist, --exclude): "
        "they hold at most 2 such workers"
    )
    assert never_placeable(nodes(4), replace(gang, only_nodes=None), policy) is None


@settings(max_examples=60, deadline=None)
@given(
    busy=st.lists(st.integers(0, 5), max_size=4, unique=True),
    picks=st.lists(
        st.tuples(
            st.integers(1, 8),  # GPUs per worker
            st.integers(1, 3),  # workers
            st.booleans(),  # distinct nodes
            st.frozensets(st.integers(0, 5), max_size=6),  # named nodes
            st.booleans(),  # named as --nodelist (else --exclude)
        ),
        min_size=1,
        max_size=6,
    ),
    placement=st.sampled_from(POLICIES),
)
def test_every_start_keeps_to_its_nodes(busy, picks, placement) -> None:  # type: ignore[no-untyped-def]
    run = [running(job(f"busy{i}", gpus=8), f"n{i}:0-7") for i in busy]
    pending = []
    for k, (gpw, workers, distinct, chosen, only) in enumerate(picks):
        named = frozenset(f"n{i}" for i in chosen)
        pending.append(
            job(
                f"j{k}",
                gpus=gpw,
                workers=workers,
                distinct_nodes=distinct,
                submit_t_s=k,
                **({"only_nodes": named} if only else {"never_nodes": named}),
            )
        )
    by_id = {j.id: j for j in pending}
    result = schedule(state(nodes(6), Q, pending, run), placement=placement)
    for start in result.starts:
        j = by_id[start.job_id]
        placed = set(start.placement)
        assert j.only_nodes is None or placed <= j.only_nodes
        assert not placed & j.never_nodes
