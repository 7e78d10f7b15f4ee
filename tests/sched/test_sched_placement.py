"""Gang all-or-nothing, fabric-aware placement, best fit, NVLink domains, node states."""

from __future__ import annotations

import pytest
from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched import Level, Node, NodeState, Reason, TopologyMode, TopologyRequirement

Q = flat_queues({"a": 1024})
LG = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.REQUIRED)
LG_PREF = TopologyRequirement(Level.LEAF_GROUP, TopologyMode.PREFERRED)
SU = TopologyRequirement(Level.SCALABLE_UNIT, TopologyMode.REQUIRED)


def busy(*names: str) -> list:
    """Running jobs that fill the named nodes."""
    return [running(job(f"busy-{n}", gpus=8), f"{n}:0-7") for n in names]


@pytest.mark.parametrize(
    ("count", "busy_nodes", "pending", "placed_on"),
    [
        # one leaf group can hold it: the tightest such group (lg2), not first-fit n1+n4
        (8, ["n0", "n2", "n3", "n6"], job("j", gpus=8, workers=2), {"n4", "n5"}),
        # no leaf group holds 3 nodes: fewest leaf groups inside one SU (su0: lg1 + lg0)
        (8, ["n0", "n6"], job("j", gpus=8, workers=3), {"n1", "n2", "n3"}),
        # no SU holds 5 nodes: fill the fuller SU first, then the rest
        (8, ["n0", "n1", "n2"], job("j", gpus=8, workers=5), {"n3", "n4", "n5", "n6", "n7"}),
        # required leaf group, satisfiable
        (8, ["n0", "n2"], job("j", gpus=8, workers=2, topology=LG), {"n4", "n5"}),
        # preferred leaf group falls back to two groups
        (4, ["n0", "n2"], job("j", gpus=8, workers=2, topology=LG_PREF), {"n1", "n3"}),
        # required SU with one free node per leaf group of su0
        (8, ["n0", "n2", "n4", "n5", "n6"], job("j", gpus=8, workers=2, topology=SU), {"n1", "n3"}),
    ],
)
def test_multi_node_gangs_use_fewest_groups(count, busy_nodes, pending, placed_on):
    result = schedule(state(nodes(count), Q, [pending], busy(*busy_nodes)))
    assert [s.job_id for s in result.starts] == ["j"]
    assert set(result.starts[0].placement) == placed_on
    assert all(len(g) == 8 for g in result.starts[0].placement.values())


def test_first_fit_ignores_leaf_groups():
    s = state(nodes(8), Q, [job("j", gpus=8, workers=2)], busy("n0", "n2", "n3", "n6"))
    result = schedule(s, placement="first-fit")
    assert set(result.starts[0].placement) == {"n1", "n4"}


@pytest.mark.parametrize(
    ("busy_nodes", "pending", "reason"),
    [
        (["n0", "n2"], job("j", gpus=8, workers=2, topology=LG), Reason.TOPOLOGY),
        (["n0", "n1", "n2"], job("j", gpus=8, workers=2), Reason.RESOURCES),
        ([], job("j", gpus=8, workers=5), Reason.UNSCHEDULABLE),
        ([], job("j", queue="nope", gpus=1), Reason.BAD_CONSTRAINTS),
    ],
)
def test_gang_is_all_or_nothing(busy_nodes, pending, reason):
    result = schedule(state(nodes(4), Q, [pending], busy(*busy_nodes)))
    assert result.starts == ()
    assert result.pending_reasons == {"j": reason}


def test_gang_never_takes_part_of_a_fragmented_cluster():
    half = [running(job(f"h{i}", gpus=4), f"n{i}:0-3") for i in range(4)]
    result = schedule(state(nodes(4), Q, [job("j", gpus=8)], half))
    assert result.starts == ()
    assert result.pending_reasons == {"j": Reason.FRAGMENTATION}


def test_small_jobs_best_fit_and_keep_whole_nodes_whole():
    run = [running(job("r0", gpus=6), "n0:0-5"), running(job("r1", gpus=4), "n1:0-3")]
    pending = [
        job("two", gpus=2, submit_t_s=1),
        job("three", gpus=3, submit_t_s=2),
        job("eight", gpus=8, submit_t_s=3),
    ]
    result = schedule(state(nodes(3), Q, pending, run))
    assert {s.job_id: s.placement for s in result.starts} == {
        "two": {"n0": (6, 7)},
        "three": {"n1": (4, 5, 6)},
        "eight": {"n2": tuple(range(8))},
    }


def test_several_workers_that_fit_one_node_share_it():
    result = schedule(state(nodes(2), Q, [job("j", gpus=4, workers=2)]))
    assert result.starts[0].placement == {"n0": tuple(range(8))}


SPLIT = ((0, 1, 2, 3), (4, 5, 6, 7))


@pytest.mark.parametrize(
    ("busy_gpus", "gpus", "expected"),
    [
        ("n0:0,1", 2, (2, 3)),  # tightest domain that fits
        ("n0:0,1", 3, (4, 5, 6)),  # domain A has only 2 free
        ("n0:0,1", 5, (4, 5, 6, 7, 2)),  # no domain fits: fullest domain first, then the rest
    ],
)
def test_gpu_indices_stay_in_one_nvlink_domain(busy_gpus, gpus, expected):
    s = state(nodes(1, domains=SPLIT), Q, [job("j", gpus=gpus)], [running(job("r"), busy_gpus)])
    assert sorted(schedule(s).starts[0].placement["n0"]) == sorted(expected)


def test_prefers_a_node_where_the_job_fits_one_domain():
    run = [running(job("r0", gpus=4), "n0:0,1,6,7"), running(job("r1", gpus=4), "n1:4-7")]
    result = schedule(state(nodes(2, domains=SPLIT), Q, [job("j", gpus=4)], run))
    assert result.starts[0].placement == {"n1": (0, 1, 2, 3)}


@pytest.mark.parametrize(
    ("states", "reason"),
    [
        ({"n0": NodeState.DRAINING, "n1": NodeState.DOWN}, Reason.REQ_NODE_NOT_AVAIL),
        ({"n0": NodeState.DRAINED, "n1": NodeState.DRAINING}, Reason.REQ_NODE_NOT_AVAIL),
        ({"n0": NodeState.DOWN}, None),
    ],
)
def test_never_places_on_unready_nodes(states, reason):
    inventory = nodes(2, states=states)
    result = schedule(state(inventory, Q, [job("j", gpus=8)]))
    if reason is None:
        assert set(result.starts[0].placement) == {"n1"}
    else:
        assert result.starts == ()
        assert result.pending_reasons == {"j": reason}


def test_small_jobs_skip_unready_nodes_even_when_they_fit_better():
    inventory = nodes(2, states={"n0": NodeState.DRAINING})
    result = schedule(
        state(inventory, Q, [job("j", gpus=1)], [running(job("r", gpus=7), "n0:0-6")])
    )
    assert set(result.starts[0].placement) == {"n1"}


@pytest.mark.parametrize("placement", ["fabric-aware", "first-fit"])
def test_distinct_nodes_never_share_a_node(placement):
    """`--nodes 2 --gpus-per-node 4` on 8-GPU nodes: two nodes, not one squeezed."""
    gang = job("j", gpus=4, workers=2, distinct_nodes=True)
    result = schedule(state(nodes(2), Q, [gang]), placement=placement)
    assert {n: len(g) for n, g in result.starts[0].placement.items()} == {"n0": 4, "n1": 4}
    one_node = schedule(state(nodes(1), Q, [gang]), placement=placement)
    assert one_node.pending_reasons == {"j": Reason.UNSCHEDULABLE}


def test_cpu_only_jobs_take_no_gpu():
    cpu = [Node("c0", "cpu", 0, cpu_cores=64, path=("su0", "su0-lg9"))]
    work = [job("c", gpus=0, flavor="cpu"), job("g", gpus=8)]
    result = schedule(state([*nodes(1), *cpu], Q, work, busy("n0")))
    assert [(s.job_id, s.placement) for s in result.starts] == [("c", {"c0": ()})]
    assert result.pending_reasons == {"g": Reason.RESOURCES}
